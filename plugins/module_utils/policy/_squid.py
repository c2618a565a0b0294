# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""squid configuration for the gate, in two parts.

The policy part depends only on the policy and is rendered once per policy hash;
the session part (port, session id, pid file, log) is rendered per session and
includes the policy part, so one rendered policy serves many sessions. Both are
pure text renderers over already validated input (see _policy.parse_policy).
Only directives that squid 5.7 and 6 both accept: squid 6 refuses obsolete ones
(dns_v4_first, max_mem_obj_size) and a redeclared built-in `manager` ACL. The session
part needs squid built with OpenSSL (Debian's squid-openssl): its port peeks at TLS.
parse_gate_log reads back the access log the session part asks for.
"""

import re
from urllib.parse import urlsplit

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import HTTP_PORT, REFUSED_DESTINATIONS

# Descriptors one gate may use. squid sizes its tables by this limit, not by use (about
# 150 bytes a descriptor), and rootless podman hands a container the user's hard limit
# (524288 under systemd: about 80 MB). 4096 relays about 2000 connections at once.
MAX_FILEDESCRIPTORS = 4096
# Inside the gate image (roles/gate/templates/Containerfile.j2 makes both): squid needs a
# certificate on an ssl-bump port even when it only peeks and splices; and the helper that
# reads the ClientHello and compares its one server name with the CONNECT name.
PEEK_CERTIFICATE = "/etc/squid/aisb-peek.pem"
SNI_HELPER = "/usr/local/lib/aisb/sni-is-connect-host"
# What the helper's OK tags the client connection with (clt_conn_tag, its argument): a
# tunnel to a CONNECT port opens only with it (see _connect).
HELLO_CHECKED = "aisb-hello-checked"
# Why the helper refused a ClientHello (its ERR log=, the record's gate.denied reason), by
# the reason it gives: the kinds are the helper's (tests/unit/test_sni_helper.py holds this
# table to it), the words docs/reference-refusals.md shows.
SNI_REFUSALS = {
    "sni-differs": "one good name, but another than the CONNECT host (even one the allowlist has, or another "
                   "name of the same .example.com entry: the SNI must equal the CONNECT host, which was "
                   "already checked against the allowlist)",
    "sni-absent": "no server_name extension (an IP-literal CONNECT is refused before this; a client that "
                  "reaches a name by its name sends it)",
    "sni-extension-twice": "two server_name extensions (squid's own parser keeps the last)",
    "sni-several-names": "two or more names in the extension, in either order (squid's parser keeps the first "
                         "host_name)",
    "sni-name-type": "a name of a type other than host_name, alone or beside one",
    "sni-not-a-dns-name": "a NUL (squid's %ssl::>sni stops there), a space, any byte but letters, digits, "
                          "hyphens and dots, an empty name or label, a label over 63, over 253 characters, "
                          "two trailing dots",
    "client-hello-malformed": "anything the helper does not read to its end: a length past its vector, bytes "
                              "after the extensions or after the ClientHello (another handshake message, "
                              "another record, TLS 1.3 early data), another record type or version, not "
                              "base64; and any error in the helper (it fails closed)",
}
# Seconds a client has after connecting (and after a CONNECT's 200) to send its first
# byte. Every HTTP and TLS client speaks first, at once.
FIRST_BYTE_TIMEOUT = 10

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CONTAINER_PATH = re.compile(r"^/[A-Za-z0-9_./-]+$")
# One access log line as the session part's logformat aisb writes it.
# hier: squid's hierarchy code (HIER_NONE where no server was contacted); tls: squid's
# SslBump decision, "-" where none applies (plain HTTP), "splice" for a tunnel relayed,
# anything else for a ClientHello refused; sni: URL-encoded, "-" where none was read;
# up: the bytes squid read from the sandbox for it (a tunnel's end: the whole tunnel's);
# reason: why the SNI helper refused a ClientHello, "-" where it did not.
GATE_LOG_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+) dst=(?P<dst>\S+) "
    r"hier=(?P<hier>\S+) tls=(?P<tls>\S+) sni=(?P<sni>\S+)(?: up=(?P<up>\d+|-))?(?: reason=(?P<reason>\S+))?$")


def render_policy_conf(policy):
    """The policy part: ACLs, then the refusals in the order the design fixes, applied to
    plain HTTP by http_access and to CONNECT by ssl_bump and miss_access (see _connect)."""
    from_policy = "# aisb gate policy part: generated, do not edit.\n"
    names = list(policy.domains) + sorted(set(name for name, _port, _address in policy.private))
    if not names:
        return from_policy + "\n".join(
            ["# The allowlist is empty: nothing is relayed.", "acl aisb_connect method CONNECT",
             "http_access allow aisb_connect", "http_access deny all"] + _connect(["all"], "")) + "\n"
    lines = [
        "acl aisb_domains dstdomain -n %s" % " ".join(_covered(sorted(names))),
        # IP literals in any spelling squid accepts: dotted, integer, hex, bracketed IPv6.
        r"acl aisb_ip_literal dstdom_regex -n -i ^[0-9.]+$ ^0x[0-9a-f.x]+$ ^\[?[0-9a-f:.]*:[0-9a-f:.]*\]?$",
        "acl aisb_connect method CONNECT",
        "acl aisb_connect_ports port %s" % " ".join(str(port) for port in policy.connect_ports),
        "acl aisb_http_ports port %s" % " ".join(str(port) for port in sorted({HTTP_PORT} | set(policy.connect_ports))),
        # The one list of refused destinations, shared with network no-gate.
        "acl aisb_denied_dst dst %s" % " ".join(REFUSED_DESTINATIONS),
        # A plain request for an https URL asks the gate itself to speak TLS to a server.
        "acl aisb_gate_tls proto HTTPS",
    ]
    extra = ""
    pairs = [("aisb_extra_%d" % index, host, port) for index, (host, port) in enumerate(policy.host_ports)]
    pairs += [("aisb_private_%d" % index, host, port) for index, (host, port, _address) in enumerate(policy.private)]
    for name, host, port in pairs:
        lines += ["acl %s_host dstdomain -n %s" % (name, host),
                  "acl %s_port port %d" % (name, port),
                  "acl %s all-of %s_host %s_port" % (name, name, name)]
    if pairs:
        lines.append("acl aisb_extra any-of %s" % " ".join(name for name, _host, _port in pairs))
        extra = " !aisb_extra"
    private = []
    if policy.private:
        lines += _private(policy.private)
        # A private entry's name is reached on its own port only, and never resolved.
        private = ["aisb_private_names !aisb_private"]
    refusals = [
        # First, before anything can resolve a name: unlisted names are refused unresolved.
        "!aisb_domains",
        "manager",
        # TLS goes through CONNECT, where the gate checks the ClientHello; never the gate's own.
        "aisb_gate_tls",
        "aisb_ip_literal",
    ] + private + [
        "aisb_connect !aisb_connect_ports" + extra,
        "!aisb_connect !aisb_http_ports" + extra,
        # Only now may the name be resolved: never relay to local or private addresses
        # (a private entry goes to its own address, and its name is never resolved).
        ("!aisb_private " if policy.private else "") + "aisb_denied_dst",
    ]
    narrowed = []
    for index, (host, methods) in enumerate(policy.methods):
        # A methods entry's name: its plain HTTP with those methods only (CONNECT is let
        # on above, to the rules below: a tunnel's method says nothing of what it carries).
        lines += ["acl aisb_methods_%d_host dstdomain -n %s" % (index, host),
                  "acl aisb_methods_%d method %s" % (index, " ".join(methods))]
        narrowed.append("http_access deny aisb_methods_%d_host !aisb_methods_%d" % (index, index))
    lines += ["http_access allow aisb_connect"]
    lines += ["http_access deny %s" % refusal for refusal in refusals]
    lines += narrowed + ["http_access allow aisb_domains", "http_access deny all"]
    return from_policy + "\n".join(lines + _connect(refusals, extra)) + "\n"


def _private(entries):
    """Squid's lines for the private entries ((name, port, address), their ACLs
    aisb_private_N made by the caller): each one's requests, plain HTTP and CONNECT, go to
    a peer that is its pinned address and port, and nowhere else (never_direct: squid
    never resolves the name, so no DNS answer can move it); no other request uses a peer."""
    lines = ["acl aisb_private_names dstdomain -n %s" % " ".join(sorted(set(name for name, _port, _address in entries))),
             "acl aisb_private any-of %s" % " ".join("aisb_private_%d" % index for index in range(len(entries)))]
    for index, (_name, port, address) in enumerate(entries):
        name = "aisb_private_%d" % index
        # originserver: squid sends it requests as to a server, and a CONNECT's tunnel
        # to its address (a proxy peer would get the CONNECT); no-query, no-digest: no ICP.
        lines += ["cache_peer %s parent %d 0 originserver no-query no-digest name=%s" % (address, port, name),
                  "cache_peer_access %s allow %s" % (name, name),
                  "cache_peer_access %s deny all" % name]
    return lines + ["never_direct allow aisb_private"]


def _connect(refusals, extra):
    """The CONNECT rules: the same REFUSALS, decided when squid asks how to treat the
    tunnel (ssl_bump's first step, which may resolve a name) and answered with a plain
    403 by miss_access; an allowed CONNECT to a CONNECT port is peeked at and spliced
    only when its ClientHello's SNI names the CONNECT host (the session part's helper);
    a host:port entry's own port (EXTRA: SSH to a git host) is relayed as it comes.

    Why not http_access: this port peeks, and on such a port squid bumps the client to
    serve any http_access error (client_side_request.cc, "Force bump action on error"):
    a refused CONNECT would be answered 200 and a TLS handshake with the gate's
    certificate instead of 403. So http_access lets every CONNECT on, ssl_bump's first
    step splices a refused one without peeking and marks it, and miss_access, which squid
    checks before it opens any tunnel, answers the mark with 403. A CONNECT no rule
    decides is terminated.
    """
    lines = ["acl aisb_refuse annotate_transaction aisb_verdict=refused",
             "acl aisb_refused note aisb_verdict refused"]
    lines += ["ssl_bump splice aisb_client_hello %s aisb_refuse" % refusal for refusal in refusals]
    guard = []
    if refusals != ["all"]:
        lines += ["ssl_bump peek aisb_client_hello aisb_connect_ports"]
        if extra:
            lines += ["ssl_bump splice aisb_client_hello aisb_extra"]
        # squid splices when a step-2 check ends without an answer (its helper broken,
        # timed out or overloaded: "else bumpAction = Ssl::bumpSplice"): a tunnel to a
        # CONNECT port, always peeked, opens only on a connection the helper's OK tagged.
        guard = ["miss_access deny aisb_connect aisb_connect_ports !aisb_hello_checked"]
    return lines + [
        "ssl_bump splice aisb_sni_is_connect_host",
        "ssl_bump terminate all",
        "miss_access deny aisb_refused",
    ] + guard + [
        "miss_access allow all",
    ]


def _covered(domains):
    """DOMAINS without the names a leading-dot entry already covers (squid warns on overlap)."""
    suffixes = [name for name in domains if name.startswith(".")]
    return [name for name in domains
            if not any(name != suffix and (name == suffix[1:] or name.endswith(suffix)) for suffix in suffixes)]


def render_session_conf(port, session_id, policy_path, access_log="stdio:/dev/stdout", before_policy=""):
    """The session part: where this gate listens, how it logs, and the policy it includes.

    PORT is the host-loopback port; SESSION_ID appears in every access log line;
    POLICY_PATH is where the policy part is mounted inside the gate container;
    ACCESS_LOG is a squid log destination (stdout goes to the container's log);
    BEFORE_POLICY, lines whose rules come before the policy's (_credential_plan's refusal
    of a placeholder).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        raise ValueError("gate port %r: must be an integer from 1024 to 65535" % (port,))
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id):
        raise ValueError("session id %r: letters, digits, '_', '.', '-', at most 64" % (session_id,))
    for what, path in (("policy path", policy_path), ("access log", access_log.split(":", 1)[-1])):
        if not isinstance(path, str) or not CONTAINER_PATH.match(path):
            raise ValueError("%s %r: an absolute path of plain characters" % (what, path))
    return "\n".join([
        "# aisb gate session %s: generated, do not edit." % session_id,
        # Loopback only: the sandbox reaches it through pasta's host-loopback mapping.
        "http_port 127.0.0.1:%d ssl-bump generate-host-certificates=off tls-cert=%s"
        % (port, PEEK_CERTIFICATE),
    ] + _peeking() + [
        # The gate runs as the unprivileged proxy user from the start: /tmp is writable.
        "pid_filename /tmp/aisb-gate-%s.pid" % session_id,
        # The sandbox's entrypoint knows its gate by this name in squid's error page.
        "visible_hostname aisb-gate-%s" % session_id,
        "cache deny all",
        "netdb_filename none",
        "cachemgr_passwd disable all",
        "forwarded_for delete",
        "httpd_suppress_version_string on",
        "shutdown_lifetime 1 seconds",
        # The ICMP pinger needs a raw socket, which the unprivileged gate cannot open.
        "pinger_enable off",
        "max_filedescriptors %d" % MAX_FILEDESCRIPTORS,
        # hier and sni let parse_gate_log keep one line per decision (see there).
        "logformat aisb %%ts.%%03tu session=%s client=%%>a %%Ss/%%03>Hs %%rm %%ru dst=%%<a"
        " hier=%%Sh tls=%%ssl::bump_mode sni=%%#ssl::>sni up=%%>st reason=%%#ea" % session_id,
        # Unbuffered (no buffer-size): the session reads this log while the gate still
        # runs and then kills it; a buffered decision would be missing from the record.
        "access_log %s logformat=aisb" % access_log,
        "cache_log /dev/stderr",
    ] + ([before_policy.rstrip("\n")] if before_policy else []) + [
        "include %s" % policy_path,
        "",
    ])


def _peeking():
    """TLS consistency without interception: the port reads an allowed CONNECT's
    ClientHello and splices the tunnel only when it holds one server name, a DNS name
    equal to the CONNECT host; anything else (another name, no SNI, two names or two
    server_name extensions, another name type, a name that is not a DNS name, bytes that
    are not TLS, a client that waits for the server to speak) is refused before any server
    is contacted. Never bumped: the certificate is never presented, and nobody trusts it.
    The policy part holds the ssl_bump rules.
    """
    return [
        # One helper answers every check (concurrency, not more processes). It is given
        # the raw ClientHello (%>handshake, base64), the bytes the server would get, not
        # squid's reading of it (the first host_name, cut at a NUL). No cache: every
        # ClientHello differs (its random), and a cache would only hold them. A perl
        # script: perl-base is in every Debian and Ubuntu image. queue-size: squid
        # gives up on a check beyond its queue; no more can wait than connections.
        "external_acl_type aisb_sni children-max=1 children-startup=1 concurrency=64 queue-size=%d cache=0"
        " %%DST %%>handshake /usr/bin/perl %s %s" % (MAX_FILEDESCRIPTORS, SNI_HELPER, HELLO_CHECKED),
        "acl aisb_sni_is_connect_host external aisb_sni",
        "acl aisb_hello_checked note clt_conn_tag %s" % HELLO_CHECKED,
        "acl aisb_client_hello at_step SslBump1",
        # squid's default, said here because it is the refusal: bytes that are not a TLS
        # ClientHello get an HTTP error, never a tunnel.
        "on_unsupported_protocol respond all",
        # How long the port waits for a first request byte and, after a CONNECT's 200,
        # for a ClientHello: a protocol whose server speaks first (SSH) sends nothing and
        # is refused after this, not after squid's default 5 minutes.
        "request_start_timeout %d seconds" % FIRST_BYTE_TIMEOUT,
        # The cache of TLS sessions squid would resume as a server: the gate is never one.
        # Measured: 2.1 MB less resident at start.
        "sslproxy_session_cache_size 0",
        # The system's trusted CAs, which squid loads to verify servers it speaks TLS to:
        # the gate never does (it splices; the policy refuses https URLs in plain
        # requests). Measured: 1.0 MB less resident at start.
        "tls_outgoing_options default-ca=off",
    ]


# Why the gate answered a request itself, by the code it answered with (no server contacted).
ANSWER_REASONS = {
    "400": "not a request the gate relays: no absolute URL (origin-form, sent to the gate's port as to a server) "
           "or malformed",
    "503": "the gate could not reach the destination: its name did not resolve or the connection failed",
}
ANSWER_REASON = "the gate answered it itself, contacting no server"


def parse_gate_log(text):
    """The gate's decisions from its access log: {"allowed": [...], "denied": [...],
    "answered": [...]}, each a log_entry with the address squid connected to (dst).
    Allowed: relayed to a destination (or, for a tunnel, its verdict: relay). Denied:
    refused by the policy. Answered: answered by the gate itself with no server contacted
    (a 400 for what is no proxy request, a 503 for a destination it could not reach),
    each with its reason.

    One per request of the sandbox: a CONNECT whose ClientHello was read counts once, as
    the verdict on it (logged before any server is contacted, sni set); the spliced
    tunnel's end (a server contacted, the same sni) is the same request again, and gives
    the verdict its dst: the oldest allowed verdict of that CONNECT and SNI still
    without one (tunnels to one name may end in another order than they began). A splice
    that miss_access refused instead (403, no server contacted: the check gave no
    answer) is the denial in place of that verdict.
    """
    decisions = {"allowed": [], "denied": [], "answered": []}
    # (url, sni) -> the allowed verdicts whose tunnel has not ended yet, oldest first.
    open_tunnels = {}
    for line in text.splitlines():
        match = GATE_LOG_LINE.match(line.strip())
        # The readiness probe connects and leaves before sending a request.
        if not match or match.group("url").startswith("error:"):
            continue
        tunnel = (match.group("url"), match.group("sni"))
        if match.group("sni") != "-" and match.group("hier") != "HIER_NONE":
            if open_tunnels.get(tunnel):
                verdict = open_tunnels[tunnel].pop(0)
                verdict.update(dst=match.group("dst"), **_bytes(match))
            continue
        if match.group("sni") != "-" and match.group("code") == "403" and open_tunnels.get(tunnel):
            # A splice miss_access refused (the check gave no answer): its verdict allowed nothing.
            decisions["allowed"].remove(open_tunnels[tunnel].pop(0))
        refused_hello = match.group("tls") not in ("-", "splice")
        denied = match.group("status").startswith("TCP_DENIED") or match.group("code") == "403" or refused_hello
        # Where squid connected ("-": nowhere yet, as for a ClientHello's verdict).
        entry = dict(log_entry(match), dst=match.group("dst"), **_bytes(match))
        if match.group("reason") not in (None, "-"):
            entry["reason"] = match.group("reason")
        # No server contacted and no tunnel's verdict (those name their SNI): the gate's own answer.
        answered = not denied and match.group("hier") == "HIER_NONE" and match.group("sni") == "-"
        if answered:
            entry["reason"] = ANSWER_REASONS.get(match.group("code"), ANSWER_REASON)
        decisions["denied" if denied else "answered" if answered else "allowed"].append(entry)
        if not denied and match.group("sni") != "-":
            open_tunnels.setdefault(tunnel, []).append(entry)
    return decisions


def _bytes(match):
    """{"up": bytes} of a GATE_LOG_LINE MATCH, {} where the line has none (an older gate's)."""
    return {"up": int(match.group("up"))} if (match.group("up") or "-").isdigit() else {}


def sent_by_host(decisions):
    """{host: bytes} the sandbox sent through the gate to each host it relayed to, from
    parse_gate_log's DECISIONS (a tunnel counts all it carried)."""
    sent = {}
    for entry in decisions["allowed"]:
        url = entry["url"]
        host = url.rpartition(":")[0] if entry["method"] == "CONNECT" else (urlsplit(url).hostname or url)
        sent[host] = sent.get(host, 0) + (entry.get("up") or 0)
    return sent


def log_entry(match):
    """What the record keeps of one access log line (a match of GATE_LOG_LINE, or of a
    line with the same time, status, code, method and url groups)."""
    return {"time": float(match.group("time")), "method": match.group("method"), "url": match.group("url"),
            "status": "%s/%s" % (match.group("status"), match.group("code"))}
