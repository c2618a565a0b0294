# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The credential injector: a plain-HTTP endpoint on the host's loopback, served by the
session's own process, that relays a request for /HOST[:PORT]/PATH to https://HOST/PATH
with the operator's key in the entry's header.

Why here and not in squid: the keys then live in this process's memory only (no file,
no container, no command line), the gate's configuration stays key-free, and the
injector ends with the session on every exit path, SIGKILL included, because it is
the session. Measured against squid as a TLS-originating reverse proxy in
docs/security.md.

A request is relayed only when the entry's header, sent once, is the session's placeholder
(alone or after the entry's prefix: so no other local process can borrow the key, it does
not know the placeholder, and a key planted in the project cannot ride along); the header
is then replaced by prefix + key. The request's head and body are read by this module's
own strict parser (read_head, read_body), not http.server's: anything outside a narrow
HTTP/1.1 grammar is answered 400 (413 for an over-size body) and the connection closed,
so no byte the agent sends is read two ways; hop-by-hop and forwarding headers are
dropped (relayed_headers). Upstream TLS is verified against the host's
trust store for the entry's name, and the name must not resolve to an address the gate
would refuse (_policy.refused_destination), unless the entry's host and port are a
private entry's ('host:port=address'): then the key goes to that address only, and the
name is never resolved. Responses are passed on as they arrive
(server-sent events included). Each decision is kept for the record, without the key.

Each response's token usage is read as it is relayed (_provider_usage) and added to
its provider's figures; with a token budget, a request that arrives once the session's
input and output tokens together reach it is refused (429) before anything is read or
sent; a request already relayed completes. So that what the provider reports can be
read, the provider is asked for an uncompressed answer, an OpenAI chat stream for its
usage (_provider_usage.counted_request), and a stream the harness leaves is read to
its end.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_plan import KEY_HEADERS, route
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import HEADER_NAME, HOP_HEADERS
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import refused_destination
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._provider_usage import (
    UsageMeter, counted_request, free_request)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import (
    allowed_request, key_parameters, outbound_request, request_path)

# Bounds on what one client may make this process hold or wait for.
MAX_BODY = 64 * 1024 * 1024
UPSTREAM_TIMEOUT = 600.0
CHUNK = 65536
# A request line, header line or chunk line, without its CRLF; and header lines in a head
# (or trailer lines after a chunked body). Far above what a harness sends.
MAX_LINE = 8192
MAX_HEADERS = 100
# Refusals kept for the record; beyond them only counted (refused_unlisted), so a
# client cannot grow this process by being refused. Each noted text is cut to NOTED_TEXT.
MAX_REFUSALS_NOTED = 1000
NOTED_TEXT = 256

REQUEST_TARGET = re.compile(r"\A/[\x21-\x7e]*\Z")
VERSIONS = ("HTTP/1.1", "HTTP/1.0")
# A field value: visible characters (obs-text included), spaces and tabs between them,
# nothing around them; so no NUL, CR, LF or other control character.
FIELD_VALUE = re.compile(r"\A(?:[\x21-\x7e\x80-\xff](?:[\x20-\x7e\t\x80-\xff]*[\x21-\x7e\x80-\xff])?)?\Z")
DIGITS = re.compile(r"\A[0-9]+\Z")
HEX_DIGITS = re.compile(r"\A[0-9A-Fa-f]+\Z")
# Dropped from the sandbox's request besides HOP_HEADERS and the headers its Connection
# names: what would tell the provider of another client, route or method than this
# request's own (every X-Forwarded-* too).
FORWARDING_HEADERS = frozenset(["forwarded", "via", "proxy-connection", "x-real-ip", "true-client-ip",
                                "x-client-ip", "x-original-url", "x-rewrite-url", "x-http-method-override",
                                "x-http-method", "x-method-override"])
FORWARDING_PREFIX = "x-forwarded-"


class InjectorError(Exception):
    """A request the injector will not relay: (HTTP status, why)."""


class Incomplete(Exception):
    """The client's stream ended inside a request: nothing to answer, nothing relayed."""


def read_line(rfile, what):
    """The next line of RFILE without its CRLF (text, one character a byte), or None when
    the stream has ended before it. WHAT names the line in errors."""
    line = rfile.readline(MAX_LINE + 2)
    if not line:
        return None
    if not line.endswith(b"\n"):
        if len(line) < MAX_LINE + 2:
            raise Incomplete()
        raise InjectorError(400, "%s over %d bytes" % (what, MAX_LINE))
    if not line.endswith(b"\r\n"):
        raise InjectorError(400, "%s ends with a bare LF, not CRLF" % what)
    return line[:-2].decode("latin-1")


def parse_field(line):
    """(name, value) of a header or trailer LINE: an RFC 9110 token, a colon, one optional
    space and a value of visible characters with none but spaces and tabs inside."""
    if line[:1] in (" ", "\t"):
        raise InjectorError(400, "obsolete line folding (a header line starting with a space or tab)")
    name, colon, value = line.partition(":")
    if not colon or not HEADER_NAME.match(name):
        raise InjectorError(400, "a header line without an RFC 9110 token and a colon at its start")
    value = value[1:] if value.startswith(" ") else value
    if not FIELD_VALUE.match(value):
        raise InjectorError(400, "header %s: a value is visible characters with spaces or tabs inside, no "
                                 "control character (NUL, a bare CR) and nothing around it" % name[:64])
    return name, value


def _size(digits, base, what, before=0):
    """DIGITS (of BASE) as a number, refused when BEFORE bytes and it pass MAX_BODY; never
    int() of an unbounded string."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > 16 or before + int(significant, base) > MAX_BODY:
        raise InjectorError(413, "request body over %d bytes (%s)" % (MAX_BODY, what))
    return int(significant, base)


def body_length(headers):
    """The body's framing given the head's HEADERS: its length, or None when chunked.
    One Content-Length of digits at most MAX_BODY, or one Transfer-Encoding: chunked,
    never both."""
    lengths = [value for name, value in headers if name.lower() == "content-length"]
    codings = [value for name, value in headers if name.lower() == "transfer-encoding"]
    if lengths and codings:
        raise InjectorError(400, "Content-Length with Transfer-Encoding: the body's length would be read two ways")
    if len(lengths) > 1 or len(codings) > 1:
        raise InjectorError(400, "more than one Content-Length or Transfer-Encoding")
    if codings:
        if codings[0].lower() != "chunked":
            raise InjectorError(400, "Transfer-Encoding must be exactly chunked")
        return None
    if not lengths:
        return 0
    if not DIGITS.match(lengths[0]):
        raise InjectorError(400, "Content-Length must be digits only")
    return _size(lengths[0], 10, "Content-Length")


def read_head(rfile):
    """The next request's head from RFILE, checked: (method, target, version, headers,
    body length or None for chunked), headers a list of (name, value); None when the
    stream ends between requests. InjectorError for a head outside the grammar (request
    line METHOD SP /TARGET SP HTTP/1.x, parse_field's header lines, all CRLF-ended, at
    most MAX_LINE bytes each and MAX_HEADERS of them; body_length's framing); Incomplete
    when the stream ends inside it."""
    line = read_line(rfile, "the request line")
    if line is None:
        return None
    parts = line.split(" ")
    if len(parts) != 3 or not HEADER_NAME.match(parts[0]) or not REQUEST_TARGET.match(parts[1]) \
            or parts[2] not in VERSIONS:
        raise InjectorError(400, "the request line is not METHOD /PATH HTTP/1.1: single spaces, a token, "
                                 "visible characters")
    headers = []
    while True:
        line = read_line(rfile, "a header line")
        if line is None:
            raise Incomplete()
        if not line:
            return parts[0], parts[1], parts[2], headers, body_length(headers)
        if len(headers) == MAX_HEADERS:
            raise InjectorError(400, "more than %d header lines" % MAX_HEADERS)
        headers.append(parse_field(line))


def next_head(rfile):
    """read_head's next head from RFILE, or None when the stream ends, between requests or
    inside one (nothing to answer then)."""
    try:
        return read_head(rfile)
    except Incomplete:
        return None


def read_body(rfile, length):
    """The body from RFILE: LENGTH bytes, or (LENGTH None) chunks of hex sizes (extensions
    after ';' ignored), each followed by CRLF, MAX_BODY in all, then trailers (checked,
    dropped); None when there is none. InjectorError for bad framing, Incomplete when the
    stream ends first."""
    if length is not None:
        body = rfile.read(length) if length else None
        if length and len(body) != length:
            raise Incomplete()
        return body
    parts, total = [], 0
    while True:
        line = read_line(rfile, "a chunk size line")
        if line is None:
            raise Incomplete()
        digits = line.split(";", 1)[0]
        if not HEX_DIGITS.match(digits) or not FIELD_VALUE.match(line):
            raise InjectorError(400, "a chunk size line is hex digits, then extensions of visible characters")
        size = _size(digits, 16, "chunks", total)
        if size == 0:
            break
        total += size
        parts.append(rfile.read(size))
        if len(parts[-1]) != size:
            raise Incomplete()
        if rfile.read(2) != b"\r\n":
            raise InjectorError(400, "chunk data not followed by CRLF")
    for _trailer in range(MAX_HEADERS + 1):
        line = read_line(rfile, "a trailer line")
        if line is None:
            raise Incomplete()
        if not line:
            return b"".join(parts)
        parse_field(line)
    raise InjectorError(400, "more than %d trailer lines" % MAX_HEADERS)


# Where a provider may read a key besides an entry's own header: never relayed.
OTHER_KEY_HEADERS = frozenset(name.lower() for name in KEY_HEADERS)


def relayed_headers(headers, key_header):
    """HEADERS ((name, value) pairs) as passed on to the provider: without KEY_HEADER (the
    injector sets it), the other key headers (a placeholder there means nothing to the
    provider), HOP_HEADERS, FORWARDING_HEADERS, X-Forwarded-* or any header the request's
    Connection names."""
    dropped = set(HOP_HEADERS | FORWARDING_HEADERS | OTHER_KEY_HEADERS)
    dropped.add(key_header.lower())
    dropped.update(token.strip().lower() for name, value in headers if name.lower() == "connection"
                   for token in value.split(","))
    return [(name, value) for name, value in headers
            if name.lower() not in dropped and not name.lower().startswith(FORWARDING_PREFIX)]


class VerifiedConnection(http.client.HTTPSConnection):
    """HTTPS to a name whose addresses are checked against the refused destinations
    before connecting (REFUSED: the address -> the refused network or None), or to
    PINNED, a private entry's address, without resolving the name; the certificate is
    verified for the name. .peer is the address connected to."""

    def __init__(self, host, port, timeout, context, refused, pinned=None):
        super().__init__(host, port, timeout=timeout, context=context)
        self._refused = refused
        self._pinned = pinned
        self.peer = None

    def connect(self):
        if self._pinned is not None:
            allowed = [(socket.AF_INET, socket.SOCK_STREAM, 0, "", (self._pinned, self.port))]
        else:
            infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            allowed = [info for info in infos if self._refused(info[4][0]) is None]
            if not allowed:
                raise InjectorError(502, "%s resolves only to refused destinations (%s)"
                                    % (self.host, ", ".join(sorted(set(i[4][0] for i in infos)))))
        family, kind, proto, _name, address = allowed[0]
        self.peer = address[0]
        sock = socket.socket(family, kind, proto)
        sock.settimeout(self.timeout)
        try:
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise

    def _send_output(self, message_body=None, encode_chunked=False):
        # The head and a whole body leave in one write (one TLS record), not two: a
        # provider request is small, and its second write cost the relay a round of its own.
        if isinstance(message_body, bytes) and not encode_chunked:
            self._buffer.extend((b"", message_body))
            request = b"\r\n".join(self._buffer)
            del self._buffer[:]
            self.send(request)
            return
        super()._send_output(message_body, encode_chunked)


class QuietServer(ThreadingHTTPServer):
    """A thread per connection; a connection's failure (the harness hung up mid-stream)
    is that connection's end, not a traceback on the session's output."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def verified_context(context=None):
    """CONTEXT (default: the host's trust store) with strict X.509 checks on every Python,
    as 3.13's default has them: the same certificates pass or fail whatever the
    workstation's Python."""
    context = context or ssl.create_default_context()
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


class LoopbackService(object):
    """A server of the session's own process on 127.0.0.1, a free port (.port), bound by
    _bind(HANDLER), serving in a thread of its own from start() to close(), which also
    forgets the SECRET of each of .routes' entries (this process's copy is its only one)."""

    SECRET = "key"
    server = port = _thread = routes = None

    def _bind(self, handler):
        self._lock = threading.Lock()
        self.server = QuietServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]

    def start(self):
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True)
        self._thread.start()
        return self

    def close(self):
        if self._thread is not None:
            self.server.shutdown()
            self._thread = None
        self.server.server_close()
        for entry in self.routes.values():
            entry[self.SECRET] = None


class CredentialInjector(LoopbackService):
    """Serves ENTRIES (resolved: host, port, header, prefix, variable, key) with
    PLACEHOLDERS ({variable: placeholder}) on 127.0.0.1, a free port; start() it, read
    .port, close() it. .decisions holds {"injected": [...], "refused": [...],
    "refused_unlisted": the refusals past MAX_REFUSALS_NOTED}.
    CONTEXT verifies the providers (default: the host's trust store); REFUSED judges
    their addresses (default: the gate's list); PRIVATE, the policy's private entries
    ((name, port, address)), pins an entry of that name and port to that address.
    BUDGET, the session's token budget (input and output tokens together), or None;
    .tokens holds each provider's figures ({route: {input, output, requests, unmetered}}).
    """

    def __init__(self, entries, placeholders, context=None, refused=refused_destination, private=(), budget=None):
        pinned = dict(((name, port), address) for name, port, address in private)
        self.routes = dict((route(entry), dict(entry, placeholder=placeholders[entry["variable"]],
                                               pinned=pinned.get((entry["host"], entry["port"]))))
                           for entry in entries)
        self.context = verified_context(context)
        self.refused = refused
        self.decisions = {"injected": [], "refused": [], "refused_unlisted": 0}
        self.budget = budget
        self.tokens = dict((name, {"input": 0, "output": 0, "requests": 0, "unmetered": 0}) for name in self.routes)
        self._bind(_handler_for(self))

    def note(self, kind, **what):
        with self._lock:
            if kind == "refused" and len(self.decisions["refused"]) >= MAX_REFUSALS_NOTED:
                self.decisions["refused_unlisted"] += 1
                return
            what = dict((name, value[:NOTED_TEXT] if isinstance(value, str) else value) for name, value in what.items())
            self.decisions[kind].append(dict(what, time=round(time.time(), 3)))

    def spent(self):
        """The session's tokens so far, input and output, every provider's."""
        with self._lock:
            return sum(figures["input"] + figures["output"] for figures in self.tokens.values())

    def count(self, name, tokens=(0, 0), requests=0, unmetered=0):
        """Provider NAME's figures: (input, output) TOKENS, REQUESTS and UNMETERED added."""
        with self._lock:
            figures = self.tokens[name]
            figures["input"] += tokens[0]
            figures["output"] += tokens[1]
            figures["requests"] += requests
            figures["unmetered"] += unmetered

    def budget_refusal(self):
        """Why a request is refused now (the budget is spent), or None."""
        if self.budget is None:
            return None
        spent = self.spent()
        if spent < self.budget:
            return None
        return ("the session's token budget is spent: aisb_token_budget %d, used %d (input and output tokens the "
                "providers reported); a new session gets a new budget" % (self.budget, spent))

    def usage_report(self):
        """The record's tokens: each provider's figures, the budget and whether it was spent."""
        exceeded = self.budget is not None and self.spent() >= self.budget
        with self._lock:
            return dict((name, dict(figures, budget=self.budget, exceeded=exceeded))
                        for name, figures in self.tokens.items())


def _check_request(entry, method, target, headers):
    """Refuse (403) a request ENTRY's paths do not name (its key may do only what the
    harness needs; a path some server would read as another is refused undecoded), and
    one carrying a key of its own beside the placeholder, in another key header
    (_credential_plan.KEY_HEADERS) or in the query: the provider might take that key."""
    path = request_path(target)
    if path is None:
        raise InjectorError(403, "the target %r has a fragment, or its path holds '..', '//', a backslash, NUL or a "
                                 "%%-escape: refused, not decoded" % target.split("?", 1)[0])
    if entry.get("paths") is not None and allowed_request(entry["paths"], method, path) is None:
        raise InjectorError(403, "%s %s is not a request aisb_credentials entry %s relays (its paths: %s)"
                            % (method, path, route(entry), ", ".join(entry["paths"])))
    own = (entry["placeholder"], entry["prefix"] + entry["placeholder"], "Bearer " + entry["placeholder"])
    for name, value in headers:
        if name.lower() in OTHER_KEY_HEADERS and name.lower() != entry["header"].lower() and value not in own:
            raise InjectorError(403, "header %s carries a key that is not this session's placeholder: the injector "
                                     "adds the key, in %s" % (name, entry["header"]))
    named = key_parameters(target)
    if named:
        raise InjectorError(403, "the query names %s, where a provider reads a key: the injector adds the key, in %s"
                            % (", ".join(named), entry["header"]))


def _handler_for(injector):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        # An answer's head and a short body leave in one write (one segment), not two;
        # a stream's pieces are flushed as they come.
        wbufsize = CHUNK
        server_version = "aisb-credential-injector"
        sys_version = ""

        def handle_one_request(self):
            # http.server's own reading of the head is not used: read_head's is strict.
            self._upstream = getattr(self, "_upstream", {})
            self._answered = False
            self.command, self.request_version = None, "HTTP/1.1"
            try:
                head = next_head(self.rfile)
            except InjectorError as error:
                self._refused("", "", *error.args)
                return
            if head is None:
                self.close_connection = True
                return
            self.command, self.path, self.request_version, headers, self._body_length = head
            self.headers = http.client.HTTPMessage()
            for name, value in headers:
                self.headers[name] = value
            self.close_connection = self.request_version != "HTTP/1.1" or "close" in [
                token.strip().lower() for token in ",".join(self.headers.get_all("Connection") or []).split(",")]
            handler = getattr(self, "do_" + self.command, None)
            if handler is None:
                self._refused("", self.path.split("?", 1)[0], 501, "method %s is not relayed" % self.command)
                return
            handler()
            self.wfile.flush()

        def finish(self):
            for connection in getattr(self, "_upstream", {}).values():
                connection.close()
            super().finish()

        def log_message(self, *_args):
            pass

        def relay(self):
            host_path = self.path.split("?", 1)[0]
            segment, _slash, rest = self.path[1:].partition("/") if self.path.startswith("/") else ("", "", "")
            entry = injector.routes.get(segment.lower())
            try:
                if entry is None or entry["key"] is None:
                    raise InjectorError(404, "no credential for %r: the path starts with /HOST[:PORT]/ of an "
                                             "aisb_credentials entry" % segment)
                sent = self.headers.get_all(entry["header"]) or []
                if len(sent) != 1 or sent[0] not in (entry["placeholder"], entry["prefix"] + entry["placeholder"]):
                    raise InjectorError(403, "header %s is not this session's placeholder (once, alone or after "
                                             "%r)" % (entry["header"], entry["prefix"]))
                _check_request(entry, self.command, "/" + rest, self.headers.items())
                spent = injector.budget_refusal()
                if spent:
                    raise InjectorError(429, spent)
                if (self.headers.get("Expect") or "").lower() == "100-continue" and self.request_version == "HTTP/1.1":
                    self.handle_expect_100()
                    self.wfile.flush()
                body = read_body(self.rfile, self._body_length)
                outbound = outbound_request(body)
                if outbound:
                    # The provider would reach that server itself, past the gate.
                    raise InjectorError(403, "the request asks the provider to reach another server: %s" % outbound)
                self._forward(entry, "/" + rest, counted_request(rest, body), host_path)
            except Incomplete:
                self.close_connection = True
                return
            except InjectorError as error:
                self._refused(segment, host_path, *error.args)
                return
            except (OSError, http.client.HTTPException, ssl.SSLError, ValueError) as error:
                if self._answered:
                    # The provider's answer had begun (the harness left, or the provider
                    # did): the request was noted as injected; this connection ends.
                    self.close_connection = True
                    return
                self._refused(segment, host_path, 502, "the provider could not be reached: %s" % error)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = relay

        def _forward(self, entry, path, body, logged_path):
            key = (entry["host"], entry["port"])
            connection = self._upstream.get(key)
            if connection is None:
                connection = self._upstream[key] = VerifiedConnection(
                    entry["host"], entry["port"], UPSTREAM_TIMEOUT, injector.context, injector.refused,
                    entry["pinned"])
            headers = relayed_headers(self.headers.items(), entry["header"])
            headers.append((entry["header"], entry["prefix"] + entry["key"]))
            # A compressed answer's usage could not be read (_provider_usage): none asked for.
            headers = [(name, value) for name, value in headers if name.lower() != "accept-encoding"]
            headers.append(("Accept-Encoding", "identity"))
            connection.putrequest(self.command, path, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", route(entry))
            for name, value in headers:
                connection.putheader(name, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            # Noted before the body is relayed: a stream may last as long as the session.
            injector.note("injected", host=route(entry), address=connection.peer, method=self.command,
                          path=logged_path, status=response.status)
            injector.count(route(entry), requests=1)
            meter = UsageMeter()
            try:
                self._relay_response(response, meter, route(entry))
            finally:
                # A 2xx answer to a POST is a generation whose usage should have been
                # there (however it ended): without it, counted by its size.
                encoded = response.getheader("Content-Encoding", "identity").lower() != "identity"
                if (self.command == "POST" and 200 <= response.status < 300 and not free_request(path)
                        and (encoded or not meter.reported)):
                    injector.count(route(entry), (len(body or b""), meter.size), unmetered=1)
            if response.will_close:
                connection.close()

        def _relay_response(self, response, meter, provider):
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_HEADERS:
                    self.send_header(name, value)
            bodiless = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
            chunked = not bodiless and response.length is None
            if self.command == "HEAD" and response.getheader("Content-Length"):
                self.send_header("Content-Length", response.getheader("Content-Length"))
            elif chunked:
                # Length unknown (a stream): pass each piece on as it comes.
                self.send_header("Transfer-Encoding", "chunked")
            elif not bodiless:
                self.send_header("Content-Length", str(response.length))
            self.end_headers()
            self._answered = True
            if bodiless:
                return
            harness_left = None
            while True:
                # read() ends a response of known length (the connection is then free for
                # the next request); read1() passes on whatever of a stream has come.
                piece = response.read(CHUNK) if response.length is not None else response.read1(CHUNK)
                if not piece:
                    break
                # Counted as read, before it is passed on: the next request finds it counted.
                meter.feed(piece)
                if meter.reported:
                    injector.count(provider, meter.take())
                if harness_left is not None:
                    continue
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    if chunked:
                        self.wfile.flush()
                except OSError as error:
                    # The harness left mid-answer: the provider goes on and is paid for,
                    # so the rest is read for its usage (leaving would hide a stream's
                    # output tokens, which come at its end).
                    harness_left = error
            if harness_left is not None:
                raise harness_left
            if chunked:
                self.wfile.write(b"0\r\n\r\n")

        def _refused(self, segment, path, status, why):
            injector.note("refused", host=segment, method=self.command or "", path=path, status=status, why=why)
            self._refuse(status, why, final=status == 429)

        def _refuse(self, status, why, final=False):
            # Whatever of the request is unread stays unread: this connection ends here.
            self.close_connection = True
            body = ("aisb credential injector: %s\n" % why).encode("utf-8")
            self.send_response_only(status)
            if final:
                # The provider SDKs' word for "retrying will not help" (a spent budget stays spent).
                self.send_header("x-should-retry", "false")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler
