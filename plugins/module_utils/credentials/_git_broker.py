# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The git broker: git's smart HTTP on the host's loopback, served by the session's own
process beside the credential injector, relaying the operator's listed remotes
(aisb_git_remotes) to their upstream over verified TLS with the remote's token, which
never enters the sandbox.

A remote is /r<index>/ here (the sandbox's git is pointed at it by url.insteadOf), and
only git's three smart-HTTP requests are served: GET info/refs?service=git-upload-pack
or git-receive-pack, POST git-upload-pack, POST git-receive-pack. Fetches pass as they
are. A push is read whole before anything of it reaches the upstream (_git_push): its
commands are decided against the remote's branch pattern and the upstream's refs, read
again for this push; an update is relayed only as a fast-forward its own pack proves
(_git_pack). A refused push, or one whose request is refused, is answered with git's
report-status where the protocol allows one, so the agent's git prints
'! [remote rejected] REF (aisb: ...)', and is never relayed; nor is a push whose
body is encoded (the upstream would read other bytes than those decided on). The
receive-pack advertisement is passed on with only the capabilities a push through the
broker may use, and no-thin. Each push is kept for the record.

The request's head and body are read by the injector's strict parser (read_head,
read_body); the upstream connection is the injector's VerifiedConnection.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import time
from http.server import BaseHTTPRequestHandler

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import (
    CHUNK, UPSTREAM_TIMEOUT, Incomplete, InjectorError, LoopbackService, VerifiedConnection, next_head, read_body,
    verified_context)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_pack import descends, pack_commits
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import (
    CLIENT_CAPABILITIES, HEX_LENGTHS, PushError, decide, parse_update_request, pkt_line, pkt_lines,
    refusal_report, report_status)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import refused_destination

SERVICES = ("git-upload-pack", "git-receive-pack")
# Of the upstream's receive-pack capabilities, those passed on (the client may ask only
# CLIENT_CAPABILITIES; delete-refs is kept so that a delete reaches the broker and is
# refused with its reason, not by the client).
ADVERTISED = CLIENT_CAPABILITIES | {"delete-refs"}
PASSED_VALUED = ("agent=", "object-format=")
# The request headers passed on to the upstream (the broker sets Authorization, Host,
# User-Agent and the body's length itself; a push's body is never encoded, _push).
RELAYED_HEADERS = frozenset(["content-type", "content-encoding", "accept", "git-protocol", "accept-language"])
RESPONSE_HEADERS = frozenset(["content-type", "cache-control", "expires", "pragma"])
MAX_PUSHES_NOTED = 1000


def advertisement(body, service):
    """({ref: id}, [capability], hex length) of an upstream's smart-HTTP info/refs BODY for
    SERVICE: '# service=' line, flush, then ref lines (capabilities after a NUL on the
    first), flush. PushError when it is not that."""
    lines = pkt_lines(body)
    first, _offset = next(lines)
    if first is None or first.rstrip(b"\n") != b"# service=" + service.encode():
        raise PushError("the upstream's advertisement does not name %s" % service)
    if next(lines)[0] is not None:
        raise PushError("the upstream's advertisement has no flush after its service line")
    refs, capabilities = {}, None
    for payload, offset in lines:
        if payload is None:
            if offset != len(body):
                raise PushError("the upstream's advertisement goes on after its end")
            break
        line, nul, caps = payload.rstrip(b"\n").decode("ascii", "replace").partition("\0")
        if capabilities is None:
            if not nul:
                raise PushError("the upstream's first ref line has no capabilities")
            capabilities = caps.split(" ")
        oid, _space, name = line.partition(" ")
        if name != "capabilities^{}":
            refs[name] = oid
    if capabilities is None:
        raise PushError("the upstream advertised no ref line")
    formats = [cap.split("=", 1)[1] for cap in capabilities if cap.startswith("object-format=")]
    hexsz = HEX_LENGTHS.get(formats[0] if formats else "sha1")
    if hexsz is None:
        raise PushError("the upstream's object format %s is not read" % formats[0])
    return refs, capabilities, hexsz


def client_capabilities(capabilities):
    """The upstream's receive-pack CAPABILITIES as advertised to the sandbox's git."""
    return [cap for cap in capabilities if cap in ADVERTISED or cap.startswith(PASSED_VALUED)] + ["no-thin"]


def render_advertisement(service, refs, capabilities, hexsz):
    """The info/refs body for SERVICE with REFS ({ref: id}) and CAPABILITIES."""
    lines = sorted(refs.items()) or [("capabilities^{}", "0" * hexsz)]
    body = pkt_line(("# service=%s\n" % service).encode()) + b"0000"
    for index, (name, oid) in enumerate(lines):
        caps = "\0" + " ".join(capabilities) if index == 0 else ""
        body += pkt_line(("%s %s%s\n" % (oid, name, caps)).encode())
    return body + b"0000"


class GitBroker(LoopbackService):
    """Serves REMOTES (resolved: url, host, port, path, branches, username, token) for the
    session SESSION_ID on 127.0.0.1, a free port; start() it, read .port, close() it.
    .pushes holds each push's decisions for the record (without the token). CONTEXT,
    REFUSED and PRIVATE as the credential injector's."""

    SECRET = "token"

    def __init__(self, remotes, session_id, context=None, refused=refused_destination, private=()):
        pinned = dict(((name, port), address) for name, port, address in private)
        self.routes = dict(("r%d" % index, dict(remote, pinned=pinned.get((remote["host"], remote["port"]))))
                           for index, remote in enumerate(remotes))
        self.session_id = session_id
        self.context = verified_context(context)
        self.refused = refused
        self.pushes = []
        self.pushes_unlisted = 0
        self._bind(_handler_for(self))

    def note(self, push):
        with self._lock:
            if len(self.pushes) >= MAX_PUSHES_NOTED:
                self.pushes_unlisted += 1
                return
            self.pushes.append(dict(push, time=round(time.time(), 3)))

    def report(self):
        """The record's git section: the remotes (no token) and each push."""
        with self._lock:
            return {"remotes": [dict((k, v) for k, v in remote.items() if k not in ("token", "pinned"))
                                for remote in self.routes.values()],
                    "pushes": list(self.pushes), "pushes_unlisted": self.pushes_unlisted}


def _handler_for(broker):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "aisb-git-broker"
        sys_version = ""

        def handle_one_request(self):
            self.command, self.request_version = None, "HTTP/1.1"
            try:
                head = next_head(self.rfile)
            except InjectorError as error:
                self._refuse(*error.args)
                return
            if head is None:
                self.close_connection = True
                return
            self.command, self.path, self.request_version, headers, length = head
            # One request a connection, and the answer says so (Connection: close): git
            # opens another; nothing is read past a refusal.
            self.close_connection = True
            try:
                self._serve(headers, length)
            except Incomplete:
                return
            except InjectorError as error:
                self._refuse(*error.args)
            except (PushError, OSError, http.client.HTTPException, ssl.SSLError, ValueError) as error:
                if not getattr(self, "_answered", False):
                    self._refuse(502, "the upstream could not be reached or answered out of protocol: %s" % error)
            self.wfile.flush()

        def log_message(self, *_args):
            pass

        def _serve(self, headers, length):
            self._answered = False
            name, _slash, rest = self.path[1:].partition("/")
            remote = broker.routes.get(name)
            if remote is None or remote["token"] is None:
                raise InjectorError(404, "no listed remote at /%s/: the sandbox's git reaches the "
                                         "aisb_git_remotes entries only" % name[:64])
            rest, _mark, query = rest.partition("?")
            if self.command == "GET" and rest == "info/refs" and query in ("service=" + s for s in SERVICES):
                service = query[len("service="):]
                return self._advertise(remote, service, headers)
            if self.command == "POST" and rest in SERVICES and not query:
                if (dict((n.lower(), v) for n, v in headers).get("expect") or "").lower() == "100-continue":
                    self.handle_expect_100()
                    self.wfile.flush()
                body = read_body(self.rfile, length) or b""
                if rest == "git-receive-pack":
                    return self._push(remote, headers, body)
                return self._relay(remote, "POST", rest, headers, body)
            raise InjectorError(403, "%s /%s is not git's smart HTTP (info/refs?service=git-upload-pack or "
                                     "git-receive-pack, POST git-upload-pack or git-receive-pack)"
                                % (self.command, self.path[1:][:128]))

        def _upstream(self, remote, method, rest, headers, body):
            connection = VerifiedConnection(remote["host"], remote["port"], UPSTREAM_TIMEOUT, broker.context,
                                            broker.refused, remote["pinned"])
            connection.putrequest(method, remote["path"] + "/" + rest, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", remote["host"] if remote["port"] == 443
                                 else "%s:%d" % (remote["host"], remote["port"]))
            # A forge tells git's smart HTTP by its user agent.
            connection.putheader("User-Agent", "git/aisb-git-broker")
            for name, value in headers:
                if name.lower() in RELAYED_HEADERS:
                    connection.putheader(name, value)
            encoded = ("%s:%s" % (remote["username"], remote["token"])).encode()
            connection.putheader("Authorization", "Basic " + base64.b64encode(encoded).decode())
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            return connection, connection.getresponse()

        def _advertise(self, remote, service, headers):
            if service == "git-upload-pack":
                return self._relay(remote, "GET", "info/refs?service=" + service, headers, None)
            connection, response = self._upstream(remote, "GET", "info/refs?service=" + service, [], None)
            try:
                body = response.read()
            finally:
                connection.close()
            if response.status != 200:
                return self._answer(response.status, "text/plain; charset=utf-8", body)
            refs, capabilities, hexsz = advertisement(body, service)
            return self._answer(200, "application/x-%s-advertisement" % service,
                                render_advertisement(service, refs, client_capabilities(capabilities), hexsz))

        def _push(self, remote, headers, body):
            named = dict((n.lower(), v) for n, v in headers)
            if named.get("content-encoding", "identity").lower() != "identity":
                raise InjectorError(415, "a push's body is sent unencoded: the broker decides on the bytes the "
                                         "upstream reads")
            # A push is protocol v0 as decided on here: no Git-Protocol asks the upstream
            # to read it another way.
            headers = [(name, value) for name, value in headers if name.lower() != "git-protocol"]
            if body == b"0000":
                # git's probe before a large push: no command, nothing to decide.
                return self._relay(remote, "POST", "git-receive-pack", headers, body)
            connection, response = self._upstream(remote, "GET", "info/refs?service=git-receive-pack", [], None)
            try:
                refs, capabilities, hexsz = advertisement(response.read(), "git-receive-pack")
            finally:
                connection.close()
            push = {"remote": remote["url"], "branches": remote["branches"]}
            try:
                request = parse_update_request(body, hexsz, client_capabilities(capabilities))
            except PushError as error:
                broker.note(dict(push, refs=[], relayed=False, refused=str(error)))
                return self._report(refusal_report(body, "aisb: %s" % error), "push refused: %s" % error)
            commits = []

            def proven(old, new):
                if not commits:
                    try:
                        commits.append(pack_commits(memoryview(body)[request.pack_offset:], hexsz))
                    except PushError:
                        commits.append({})
                return descends(commits[0], new, old)

            decisions = decide(request.commands, remote["branches"], broker.session_id, refs, "0" * hexsz, proven)
            relayed = not any(decision.refused for decision in decisions)
            push["refs"] = [{"name": d.command.name, "old": d.command.old, "new": d.command.new,
                             "refused": d.refused} for d in decisions]
            if not relayed:
                broker.note(dict(push, relayed=False))
                return self._report(report_status(decisions, "side-band-64k" in request.capabilities),
                                    "push refused: %s" % "; ".join(sorted(set(d.refused for d in decisions))))
            status = self._relay(remote, "POST", "git-receive-pack", headers, body)
            broker.note(dict(push, relayed=True, upstream_status=status))
            return status

        def _relay(self, remote, method, rest, headers, body):
            connection, response = self._upstream(remote, method, rest, headers, body)
            try:
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() in RESPONSE_HEADERS:
                        self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self._answered = True
                while True:
                    piece = response.read1(CHUNK)
                    if not piece:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            finally:
                connection.close()
            return response.status

        def _report(self, report, why):
            """REPORT (report-status) as the push's answer; where the protocol allows none
            (None), 403 with WHY."""
            if report is None:
                raise InjectorError(403, why)
            return self._answer(200, "application/x-git-receive-pack-result", report)

        def _answer(self, status, content_type, body):
            self.send_response_only(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self._answered = True
            self.wfile.write(body)
            return status

        def _refuse(self, status, why):
            self.close_connection = True
            self._answer(status, "text/plain; charset=utf-8", ("aisb git broker: %s\n" % why).encode("utf-8"))

    return Handler
