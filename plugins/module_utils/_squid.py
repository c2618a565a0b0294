# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""squid configuration for the gate, in two parts.

The policy part depends only on the policy and is rendered once per policy hash;
the session part (port, session id, pid file, log) is rendered per session and
includes the policy part, so one rendered policy serves many sessions. Both are
pure text renderers over already validated input (see _policy.parse_policy).
Only directives that squid 5.7 and 6 both accept: squid 6 refuses obsolete ones
(dns_v4_first, max_mem_obj_size) and a redeclared built-in `manager` ACL.
parse_gate_log reads back the access log the session part asks for.
"""

import re

from ansible_collections.aisb.sandbox.plugins.module_utils._policy import HTTP_PORT, REFUSED_DESTINATIONS

# Descriptors one gate may use. squid sizes its tables by this limit, not by use (about
# 150 bytes a descriptor), and rootless podman hands a container the user's hard limit
# (524288 under systemd: about 80 MB). 4096 relays about 2000 connections at once.
MAX_FILEDESCRIPTORS = 4096

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CONTAINER_PATH = re.compile(r"^/[A-Za-z0-9_./-]+$")
# The policy part's file name in a rendered policy directory.
SQUID_POLICY_CONF = "squid-policy.conf"
# One access log line as the session part's logformat aisb writes it.
GATE_LOG_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+) dst=(?P<dst>\S+)$")


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
        "logformat aisb %%ts.%%03tu session=%s client=%%>a %%Ss/%%03>Hs %%rm %%ru dst=%%<a" % session_id,
        # Unbuffered (no buffer-size): the session reads this log while the gate still
        # runs and then kills it; a buffered decision would be missing from the record.
        "access_log %s logformat=aisb" % access_log,
        "cache_log /dev/stderr",
    ] + ([before_policy.rstrip("\n")] if before_policy else []) + [
        "include %s" % policy_path,
        "",
    ])


def parse_gate_log(text):
    """The gate's decisions from its access log: {"allowed": [...], "denied": [...]}."""
    decisions = {"allowed": [], "denied": []}
    for line in text.splitlines():
        match = GATE_LOG_LINE.match(line.strip())
        # The readiness probe connects and leaves before sending a request.
        if not match or match.group("url").startswith("error:"):
            continue
        denied = match.group("status").startswith("TCP_DENIED") or match.group("code") == "403"
        decisions["denied" if denied else "allowed"].append(log_entry(match))
    return decisions


def log_entry(match):
    """What the record keeps of one access log line (a match of GATE_LOG_LINE, or of a
    line with the same time, status, code, method and url groups)."""
    return {"time": float(match.group("time")), "method": match.group("method"), "url": match.group("url"),
            "status": "%s/%s" % (match.group("status"), match.group("code"))}
