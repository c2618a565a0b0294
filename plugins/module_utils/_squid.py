# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""squid configuration for the gate, in two parts.

The policy part depends only on the policy and is rendered once per policy hash;
the session part (port, session id, pid file, log) is rendered per session and
includes the policy part, so one rendered policy serves many sessions. Both are
pure text renderers over already validated input (see _policy.parse_policy).
Only directives that squid 5.7 and 6 both accept: squid 6 refuses obsolete ones
(dns_v4_first, max_mem_obj_size) and a redeclared built-in `manager` ACL. The session
part needs squid built with OpenSSL (Debian's squid-openssl) for its peeking port.
parse_gate_log reads back the access log the session part asks for.
"""

import re

from ansible_collections.aisb.sandbox.plugins.module_utils._policy import HTTP_PORT, REFUSED_DESTINATIONS

# Descriptors one gate may use. squid sizes its tables by this limit, not by use (about
# 150 bytes a descriptor), and rootless podman hands a container the user's hard limit
# (524288 under systemd: about 80 MB). 4096 relays about 2000 plain HTTP connections at
# once, or 1000 CONNECT tunnels (each crosses the peeking port: four descriptors).
MAX_FILEDESCRIPTORS = 4096
# The peeking port listens on this loopback address, on the session port's number. It is
# not the sandbox's: pasta maps the gate address to 127.0.0.1 only, and the sandbox's
# table lets nothing else out. The sandbox-facing port relays every allowed CONNECT to it.
PEEK_ADDRESS = "127.0.0.2"
# Inside the gate image (roles/gate/templates/Containerfile.j2 makes both): squid needs a
# certificate on an ssl-bump port even when it only peeks and splices; and the helper that
# compares the ClientHello's SNI with the CONNECT name.
PEEK_CERTIFICATE = "/etc/squid/aisb-peek.pem"
SNI_HELPER = "/usr/local/lib/aisb/sni-is-connect-host"
# Seconds a client has after connecting (and after a CONNECT's 200) to send its first
# byte. Every HTTP and TLS client speaks first, at once.
FIRST_BYTE_TIMEOUT = 10

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CONTAINER_PATH = re.compile(r"^/[A-Za-z0-9_./-]+$")
# The policy part's file name in a rendered policy directory.
SQUID_POLICY_CONF = "squid-policy.conf"
# One access log line as the session part's logformat aisb writes it.
# hier: squid's hierarchy code (a *_PARENT one for a tunnel relayed to the peeking port);
# gate: the local address that took the request (PEEK_ADDRESS for the peeking port); tls:
# squid's SslBump decision, "-" where none applies, "splice" for a ClientHello that
# passed, anything else for one refused at the peeking port; sni: URL-encoded.
GATE_LOG_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+) dst=(?P<dst>\S+) "
    r"hier=(?P<hier>\S+) gate=(?P<gate>\S+) tls=(?P<tls>\S+) sni=(?P<sni>\S+)$")


def render_policy_conf(policy):
    """The policy part: ACLs and http_access rules, in the order the design fixes."""
    from_policy = "# aisb gate policy part: generated, do not edit.\n"
    if not policy.domains:
        return from_policy + "# The allowlist is empty: nothing is relayed.\nhttp_access deny all\n"
    lines = [
        "acl aisb_domains dstdomain -n %s" % " ".join(_covered(policy.domains)),
        # IP literals in any spelling squid accepts: dotted, integer, hex, bracketed IPv6.
        r"acl aisb_ip_literal dstdom_regex -n -i ^[0-9.]+$ ^0x[0-9a-f.x]+$ ^\[?[0-9a-f:.]*:[0-9a-f:.]*\]?$",
        "acl aisb_connect method CONNECT",
        "acl aisb_connect_ports port %s" % " ".join(str(port) for port in policy.connect_ports),
        "acl aisb_http_ports port %s" % " ".join(str(port) for port in sorted({HTTP_PORT} | set(policy.connect_ports))),
        # The one list of refused destinations, shared with network no-gate.
        "acl aisb_denied_dst dst %s" % " ".join(REFUSED_DESTINATIONS),
    ]
    extra = ""
    if policy.host_ports:
        names = []
        for index, (host, port) in enumerate(policy.host_ports):
            name = "aisb_extra_%d" % index
            lines += ["acl %s_host dstdomain -n %s" % (name, host),
                      "acl %s_port port %d" % (name, port),
                      "acl %s all-of %s_host %s_port" % (name, name, name)]
            names.append(name)
        lines.append("acl aisb_extra any-of %s" % " ".join(names))
        extra = " !aisb_extra"
    lines += [
        # First, before anything can resolve a name: unlisted names are denied unresolved.
        "http_access deny !aisb_domains",
        "http_access deny manager",
        "http_access deny aisb_ip_literal",
        "http_access deny aisb_connect !aisb_connect_ports" + extra,
        "http_access deny !aisb_connect !aisb_http_ports" + extra,
        # Only now may the name be resolved: never relay to local or private addresses.
        "http_access deny aisb_denied_dst",
        "http_access allow aisb_domains",
        "http_access deny all",
        # A CONNECT to a CONNECT port goes on to the session part's peeking port, never
        # straight to a server. A host:port entry's own port is the operator's choice of
        # one host and protocol (SSH to a git host): relayed as it comes.
        "cache_peer_access aisb_peek allow aisb_connect aisb_connect_ports !aisb_at_peek_port",
        "never_direct allow aisb_connect aisb_connect_ports !aisb_at_peek_port",
        # The hop to the peeking port is squid to itself: without its own Via on that
        # CONNECT it sees no forwarding loop.
        "request_header_access Via deny aisb_connect !aisb_at_peek_port",
    ]
    return from_policy + "\n".join(lines) + "\n"


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
        "http_port 127.0.0.1:%d" % port,
    ] + _peeking(port) + [
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
        # hier and gate let parse_gate_log keep one line per decision (see there).
        "logformat aisb %%ts.%%03tu session=%s client=%%>a %%Ss/%%03>Hs %%rm %%ru dst=%%<a"
        " hier=%%Sh gate=%%>la tls=%%ssl::bump_mode sni=%%#ssl::>sni" % session_id,
        # Unbuffered (no buffer-size): the session reads this log while the gate still
        # runs and then kills it; a buffered decision would be missing from the record.
        "access_log %s logformat=aisb" % access_log,
        "cache_log /dev/stderr",
    ] + ([before_policy.rstrip("\n")] if before_policy else []) + [
        "include %s" % policy_path,
        "",
    ])


def _peeking(port):
    """TLS consistency without interception: every allowed CONNECT to a CONNECT port goes
    on to the peeking port, which reads the ClientHello and splices the tunnel only when
    its SNI names the CONNECT host; anything else (another name, no SNI, bytes that are
    not TLS, a client that waits for the server to speak) is refused before any server is
    contacted. Never bumped: the certificate is never presented, and nobody trusts it.

    Why a second port: on an ssl-bump port squid bumps the client to serve any error
    (client_side_request.cc, "Force bump action on error"), so a CONNECT the policy
    refuses would be answered 200 and a TLS handshake with the gate's certificate instead
    of 403. The sandbox-facing port has no ssl-bump: its refusals stay plain 403s.
    """
    return [
        "http_port %s:%d ssl-bump generate-host-certificates=off tls-cert=%s name=aisb_peek_port"
        % (PEEK_ADDRESS, port, PEEK_CERTIFICATE),
        "acl aisb_at_peek_port myportname aisb_peek_port",
        # The policy part says which CONNECTs it takes (none, for an empty allowlist).
        "cache_peer %s parent %d 0 no-query no-digest no-netdb-exchange name=aisb_peek" % (PEEK_ADDRESS, port),
        # squid probes the peer once when it reads its configuration, before its ports
        # listen: refused, that probe would mark the peer dead until a request revives it.
        # Two tries, 50 ms apart, find it listening.
        "connect_retries 2",
        # One helper answers every check (concurrency, not more processes); the answer
        # for a name and SNI pair is kept for the default hour.
        "external_acl_type aisb_sni children-max=1 children-startup=1 concurrency=64 %%DST %%ssl::>sni %s"
        % SNI_HELPER,
        "acl aisb_sni_is_connect_host external aisb_sni",
        "acl aisb_client_hello at_step SslBump1",
        "ssl_bump peek aisb_client_hello",
        "ssl_bump splice aisb_sni_is_connect_host",
        "ssl_bump terminate all",
        # squid's default, said here because it is the refusal: bytes that are not a TLS
        # ClientHello get an HTTP error, never a tunnel.
        "on_unsupported_protocol respond all",
        # How long the peeking port waits for a ClientHello (and either port for a first
        # request byte): a protocol whose server speaks first (SSH) sends nothing and is
        # refused after this, not after squid's default 5 minutes.
        "request_start_timeout %d seconds" % FIRST_BYTE_TIMEOUT,
        # The cache of TLS sessions squid would resume as a server: the gate is never one.
        # Measured: 2.1 MB less resident at start.
        "sslproxy_session_cache_size 0",
    ]


def parse_gate_log(text):
    """The gate's decisions from its access log: {"allowed": [...], "denied": [...]}.

    One per request of the sandbox: a CONNECT the sandbox-facing port relayed to the
    peeking port counts once, as the peeking port's verdict on its ClientHello (logged
    before any server is contacted); the relaying port's line and the spliced tunnel's
    own end are the same request again.
    """
    decisions = {"allowed": [], "denied": []}
    for line in text.splitlines():
        match = GATE_LOG_LINE.match(line.strip())
        # The readiness probe connects and leaves before sending a request.
        if not match or match.group("url").startswith("error:"):
            continue
        if match.group("gate") == PEEK_ADDRESS:
            same_request_again = match.group("hier") != "HIER_NONE"
        else:
            same_request_again = match.group("hier").endswith("_PARENT")
        if same_request_again:
            continue
        entry = {"time": float(match.group("time")), "method": match.group("method"),
                 "url": match.group("url"), "status": "%s/%s" % (match.group("status"), match.group("code"))}
        refused_at_peek = match.group("tls") not in ("-", "splice")
        denied = match.group("status").startswith("TCP_DENIED") or match.group("code") == "403" or refused_at_peek
        decisions["denied" if denied else "allowed"].append(entry)
    return decisions
