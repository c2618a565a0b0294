# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The egress policy: strict validation of the operator's allow entries.

Pure functions, no AnsibleModule: gate_policy parses the operator's entries here, and
a session parses them again from the rendered directory (_policy_dir). Nothing reaches a
squid or nft file unless it came through here, because a newline or a quote in an entry
would otherwise become a directive of its own.
"""

import collections
import ipaddress
import re

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError

ALLOWED_FORMS = (
    "allowed forms: 'example.com' (that name), '.example.com' (it and its subdomains), "
    "'host:port' (that host, also on that port), an IP address or CIDR such as "
    "'198.18.0.5' or '198.18.0.0/24' (pinned in the sandbox's ruleset, TCP to the "
    "CONNECT ports), 'ip:port', 'cidr:port' or '[ipv6]:port' (that port only), "
    "'host:port=address' (that host on that port only, relayed by the gate to that private "
    "IPv4 address: a self-hosted model server), 'host methods=GET,HEAD' (that host, its plain "
    "HTTP with those methods only: CONNECT tunnels cannot be narrowed)"
)
# What a methods entry may name (methods=...): HTTP's methods that carry a request to a
# server. CONNECT is a tunnel the gate cannot read, so it is never one of them.
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
_METHODS_SUFFIX = " methods="

# Longer than any legal entry (a 253-character name, a colon, a port, and '=' and an IPv4
# address or ' methods=' and every method once): reject early, before any regex runs over
# attacker-sized input.
MAX_ENTRY_LENGTH = 320
# Inside a sandbox, pasta maps this address to the host's loopback (CGNAT space, never a
# host's own; passt refuses a loopback address here). A pin covering it would open every
# service on the host's loopback to the sandbox.
MAPPED_LOOPBACK = "100.64.0.1"
# Plain (non-CONNECT) HTTP goes to port 80, or to a port CONNECT may use.
HTTP_PORT = 80
# Where no session is ever let through, whatever an allowed name resolves to: the gate
# renders them into squid's destination ACL, network no-gate refuses to pin them
# (refused_destination). IPv4: "this network", private, CGNAT, loopback, link-local
# (cloud metadata lives at 169.254.169.254), IETF protocol assignments, multicast and
# reserved. IPv6: IPv4-compatible ::/96 (which holds the unspecified and loopback
# addresses too), ULA (fd00:ec2::254 is a metadata address), link-local, multicast, and
# the prefixes whose addresses carry an IPv4 address that a translator or relay would
# deliver to: IPv4-translated ::ffff:0:0:0/96 (SIIT), NAT64's well-known 64:ff9b::/96 and local-use 64:ff9b:1::/48, 6to4
# 2002::/16 and Teredo 2001::/32 (refused outright: the IPv4 inside is not checked).
# Not IPv4-mapped ::ffff:0:0/96: squid keeps every IPv4 address in that form, so the
# entry would refuse all of IPv4; a mapped address is judged by its IPv4 address. No
# entry overlaps another (squid 6.13 warns about one another covers, and ignores one).
IPV4_EMBEDDING = ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32")
REFUSED_DESTINATIONS = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
    "fc00::/7", "fe80::/10", "ff00::/8",
) + IPV4_EMBEDDING
_REFUSED_NETWORKS = tuple(ipaddress.ip_network(network) for network in REFUSED_DESTINATIONS)
_IPV4_EMBEDDING_NETWORKS = tuple(ipaddress.ip_network(network) for network in IPV4_EMBEDDING)
# The only addresses a private entry ('host:port=address') may name: the local network's
# IPv4 ranges. Never the host's own loopback, link-local (metadata) or any other refused
# destination, and never MAPPED_LOOPBACK. Each is in REFUSED_DESTINATIONS: nothing else
# reaches them.
PRIVATE_RANGES = ("10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16")
_PRIVATE_NETWORKS = tuple(ipaddress.ip_network(network) for network in PRIVATE_RANGES)
# IPv4 prefixes shorter than /8 and IPv6 prefixes shorter than /16 pin a large part of
# the internet: that is an allowlist turned off, not an entry.
MIN_PREFIX = {4: 8, 6: 16}

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_PORT = re.compile(r"^[1-9][0-9]{0,4}$")
_ENTRY_CHARS = re.compile(r"^[a-z0-9.:/\[\]=-]+$")

Policy = collections.namedtuple("Policy", ["domains", "host_ports", "pins", "connect_ports", "private", "methods"])
Policy.__new__.__defaults__ = ((),)
Policy.__doc__ = """A validated policy.

domains: sorted names; a leading dot means the name and its subdomains.
host_ports: sorted (name, port) pairs: that name may also be reached on that port.
pins: sorted (network, port) pairs for the sandbox's ruleset; a single address is
    written without a prefix length (as nft prints it).
connect_ports: sorted ports CONNECT may reach on every allowed name.
private: sorted (name, port, address) triples: that name on that port only, relayed by
    the gate to that private address, never to what the name resolves to.
methods: sorted (name, methods) pairs: that name's plain HTTP with those methods only
    (sorted, upper case); its CONNECT tunnels are not narrowed.
"""


class PolicyError(RefusedError):
    """An entry or port that is not allowed; the message names it."""


def _fail(entry, reason):
    raise PolicyError("allow entry %r: %s; %s" % (entry, reason, ALLOWED_FORMS))


def _port(entry, text):
    if not _PORT.match(text) or int(text) > 65535:
        _fail(entry, "port %r is not a number from 1 to 65535 (no leading zeros)" % text)
    return int(text)


def _name(entry, text):
    """A DNS name, optionally with one leading dot; returns it unchanged."""
    bare = text[1:] if text.startswith(".") else text
    if len(bare) > 253:
        _fail(entry, "the name is longer than 253 characters")
    labels = bare.split(".")
    if "" in labels:
        _fail(entry, "empty label (a doubled, leading or trailing dot)")
    if len(labels) < 2:
        _fail(entry, "a bare top-level name would allow far too much")
    for label in labels:
        if len(label) > 63:
            _fail(entry, "label %r is longer than 63 characters" % label[:20])
        if not _LABEL.match(label):
            _fail(entry, "label %r must be letters, digits and inner hyphens" % label)
    if labels[-1].isdigit() or labels[-1].startswith("0x"):
        _fail(entry, "looks like an IP address written as a name")
    return text


def _network(entry, text):
    """An IP address or CIDR, or None when TEXT is not one."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as error:
        if ":" in text or re.match(r"^[0-9][0-9.]*(/.*)?$", text):
            # It was meant as an address: say why it is not one.
            _fail(entry, "not a valid IP address or CIDR (%s)" % error)
        return None
    address = network.network_address
    if network.prefixlen < MIN_PREFIX[network.version]:
        _fail(entry, "/%d is too broad to pin (at least /%d)" % (network.prefixlen, MIN_PREFIX[network.version]))
    if address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local:
        _fail(entry, "unspecified, loopback, multicast and link-local addresses cannot be pinned")
    if network.version == 4 and network.overlaps(ipaddress.ip_network(MAPPED_LOOPBACK)):
        _fail(entry, "it covers %s, where the sandbox reaches the host's loopback" % MAPPED_LOOPBACK)
    if network.version == 6 and address.ipv4_mapped is not None:
        _fail(entry, "write an IPv4-mapped address as plain IPv4")
    # The IPv4 address inside would escape the checks above (64:ff9b::a9fe:a9fe is the
    # metadata service behind a NAT64 translator).
    if any(network.overlaps(embedding) for embedding in _IPV4_EMBEDDING_NETWORKS):
        _fail(entry, "it is or covers an IPv6 form that carries an IPv4 address (%s): pin the IPv4 "
                     "address itself" % ", ".join(IPV4_EMBEDDING))
    if network.prefixlen == network.max_prefixlen:
        return str(address)
    return str(network)


def _split_port(entry, text):
    """(host, port or None) of TEXT; [v6] must carry a port, bare v6 must not."""
    if text.startswith("["):
        match = re.match(r"^\[([^\]]+)\]:([^:]*)$", text)
        if not match:
            _fail(entry, "a bracketed IPv6 address must be followed by ':port'")
        return match.group(1), _port(entry, match.group(2))
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, _port(entry, port)
    return text, None


def _private(entry, text):
    """(name, port, address) of a private entry's TEXT, 'host:port=address'."""
    target, _equals, address = text.partition("=")
    host, port = _split_port(entry, target)
    if port is None or host.startswith(("[", ".")) or _network(entry, host) is not None:
        _fail(entry, "a private entry is one name and its port, then '=' and the address: "
                     "'models.lan:8000=10.0.0.5'")
    parsed = _private_address(entry, address)
    if not any(parsed in network for network in _PRIVATE_NETWORKS) or str(parsed) == MAPPED_LOOPBACK:
        _fail(entry, "a private entry names an address of the local network (%s, not %s); any other "
                     "address is reached by a plain entry" % (", ".join(PRIVATE_RANGES), MAPPED_LOOPBACK))
    return _name(entry, host), port, str(parsed)


def _private_address(entry, text):
    """The IPv4 address TEXT of a private entry; an IPv6 one is refused, saying why."""
    try:
        parsed = ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
    except ValueError:
        _fail(entry, "%r is not an IPv4 address (one address, no prefix length)" % text)
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        _fail(entry, "write the IPv4-mapped address %s as plain IPv4: '=%s'" % (text, parsed.ipv4_mapped))
    if parsed.version == 6:
        # ULA holds a cloud's metadata service (fd00:ec2::254), link-local needs an
        # interface squid's cache_peer cannot name, ::1 is the host: none was measured as
        # a peer, and each would need its own exceptions.
        _fail(entry, "%s is IPv6: a private entry names one IPv4 address (%s); IPv6 addresses (ULA fc00::/7, "
                     "link-local fe80::/10, ::1) are not accepted" % (parsed, ", ".join(PRIVATE_RANGES)))
    return parsed


def _methods(entry, text):
    """(name, methods) of a methods entry's TEXT, 'host methods=GET,HEAD'."""
    host, _sep, listed = text.partition(_METHODS_SUFFIX)
    methods = listed.upper().split(",")
    unknown = sorted(set(method for method in methods if method not in METHODS))
    if unknown or len(set(methods)) != len(methods):
        _fail(entry, "methods= names each of %s at most once, comma-separated (%s %s)"
                     % (", ".join(METHODS), "not" if unknown else "twice:", ", ".join(unknown or methods)))
    if ":" in host or "=" in host or "/" in host or _network(entry, host) is not None:
        _fail(entry, "a methods entry is one name, without a port: 'host methods=GET,HEAD' narrows its plain HTTP "
                     "(a CONNECT tunnel, or a port relayed as it comes, cannot be narrowed without interception)")
    return _name(entry, host), tuple(sorted(methods))


def _entry(entry):
    """('name', name, port), ('pin', network, port), ('private', (name, address), port)
    or ('methods', (name, methods), None) for one allow entry."""
    if not isinstance(entry, str):
        raise PolicyError("allow entry %r: must be a string, not %s; %s"
                          % (entry, type(entry).__name__, ALLOWED_FORMS))
    if not entry:
        _fail(entry, "empty")
    if len(entry) > MAX_ENTRY_LENGTH:
        _fail(entry[:40] + "...", "longer than %d characters" % MAX_ENTRY_LENGTH)
    text = entry.lower()
    if _METHODS_SUFFIX in text:
        return "methods", _methods(entry, text), None
    bad = sorted(set(char for char in text if not _ENTRY_CHARS.match(char)))
    if bad:
        hint = " (only a single leading dot is a wildcard)" if "*" in bad else ""
        _fail(entry, "contains %s%s" % (", ".join(repr(char) for char in bad), hint))
    if "=" in text:
        name, port, address = _private(entry, text)
        return "private", (name, address), port
    host, port = _split_port(entry, text)
    network = _network(entry, host)
    if text.startswith("[") and (network is None or ":" not in network):
        _fail(entry, "only IPv6 addresses go in brackets")
    if network is not None:
        return "pin", network, port
    if "/" in host:
        _fail(entry, "a name cannot carry a prefix length")
    return "name", _name(entry, host), port


def _connect_ports(ports):
    if not isinstance(ports, (list, tuple)) or not ports:
        raise PolicyError("connect_ports %r: must be a non-empty list of ports (usually [443])" % (ports,))
    seen = set()
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise PolicyError("connect_ports entry %r: must be an integer from 1 to 65535" % (port,))
        if port in seen:
            raise PolicyError("connect_ports entry %r: listed twice" % (port,))
        seen.add(port)
    return tuple(sorted(seen))


def parse_policy(allow_entries, connect_ports=(443,)):
    """Validate ALLOW_ENTRIES and CONNECT_PORTS; return a Policy or raise PolicyError."""
    if not isinstance(allow_entries, (list, tuple)):
        raise PolicyError("allow entries must be a list, not %s" % type(allow_entries).__name__)
    ports = _connect_ports(connect_ports)
    domains, host_ports, pins, private, private_names, methods = set(), set(), set(), set(), {}, {}
    seen = {}
    for entry in allow_entries:
        kind, value, port = _entry(entry)
        key = (kind, value[0], port) if kind in ("private", "methods") else (kind, value, port)
        if key in seen:
            _fail(entry, "same as %r earlier in the list" % seen[key])
        seen[key] = entry
        if kind == "methods":
            domains.add(value[0])
            methods[value[0]] = value[1]
        elif kind == "private":
            private.add((value[0], port, value[1]))
            private_names[value[0]] = entry
        elif kind == "pin":
            pins.update((value, one) for one in ([port] if port else ports))
        else:
            domains.add(value)
            if port is not None:
                host_ports.add((value, port))
    for name in sorted(domains & set(private_names)):
        _fail(private_names[name], "%r is also a plain entry: a private entry's name is reached on its "
                                   "own port only, and only at its address" % name)
    return Policy(domains=tuple(sorted(domains)), host_ports=tuple(sorted(host_ports)),
                  pins=tuple(sorted(pins)), connect_ports=ports, private=tuple(sorted(private)),
                  methods=tuple(sorted(methods.items())))


def no_gate_names(policy):
    """The names network no-gate resolves and pins, or PolicyError for an entry it cannot pin.

    A wildcard ('.example.com') covers names nobody listed, and an address can only be
    pinned for a name known at session start. A private entry is relayed by the gate,
    which logs it: without one there is nothing to relay it.
    """
    for name, port, address in policy.private:
        raise PolicyError("allow entry '%s:%d=%s': a private entry needs the gate; network no-gate "
                          "never opens the local network" % (name, port, address))
    for name, methods in policy.methods:
        raise PolicyError("allow entry '%s methods=%s': only the gate reads a request's method; network no-gate "
                          "pins addresses and sees no request" % (name, ",".join(methods)))
    for name in policy.domains:
        if name.startswith("."):
            raise PolicyError(
                "allow entry %r: network no-gate cannot pin a wildcard: only the addresses of the "
                "names listed are resolved at session start and pinned; list each host instead "
                "(e.g. %r)" % (name, name[1:]))
    return policy.domains


def name_allowed(policy, name):
    """Whether POLICY's domains allow NAME (letter case and one trailing dot aside)."""
    name = name.lower().rstrip(".")
    return any(name == domain or (domain.startswith(".") and (name == domain[1:] or name.endswith(domain)))
               for domain in policy.domains)


def connect_hint(policy, target):
    """For a CONNECT to TARGET ('host:port') the gate refused: the sentence naming the
    allow entry that would relay it when only its port was refused (the name is allowed,
    and not a private entry's, whose other ports stay closed), else None. Node's proxy agents (undici's, pi's) send even http:// URLs as CONNECT."""
    host, _colon, port = target.rpartition(":")
    private = set(name for name, _port, _address in policy.private)
    if not port.isdigit() or int(port) in policy.connect_ports or (host, int(port)) in policy.host_ports \
            or host in private or not name_allowed(policy, host):
        return None
    return ("the gate refused CONNECT %s: CONNECT goes to ports %s only, and Node harnesses (pi) tunnel "
            "http:// URLs with CONNECT; use https://, or add '%s:%s' to aisb_allow to relay CONNECT to that "
            "host and port unread (docs/security.md, plain-HTTP endpoints)"
            % (target, ", ".join(str(one) for one in policy.connect_ports), host, port))


def refused_destination(address):
    """The network of REFUSED_DESTINATIONS that ADDRESS (text) is in, or None.

    An IPv4-mapped address is judged by its IPv4 address, as squid judges it.
    """
    address = ipaddress.ip_address(address)
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return next((network for network in _REFUSED_NETWORKS if address in network), None)


def pin_resolved(policy, resolved):
    """POLICY with every address of RESOLVED ({name: [address, ...]}) pinned too.

    An address is pinned on the ports the gate lets its name use: plain HTTP's port 80,
    the CONNECT ports, and the ports of the name's own 'host:port' entries. An address
    the gate would never relay to (refused_destination) is refused, as there.
    """
    pins = set(policy.pins)
    for name, addresses in sorted(resolved.items()):
        ports = {HTTP_PORT} | set(policy.connect_ports) | set(port for host, port in policy.host_ports if host == name)
        for text in addresses:
            address = ipaddress.ip_address(text)
            refused = refused_destination(text)
            if refused is not None:
                raise PolicyError("allow entry %r: resolves to %s, in %s (local, private, or an IPv6 form that "
                                  "carries an IPv4 address), where the gate never relays; network no-gate does "
                                  "not pin it either" % (name, address, refused))
            pins.update((str(address), port) for port in ports)
    return policy._replace(pins=tuple(sorted(pins)))


def render_sandbox_policy(policy, gate=None, budgets=()):
    """Text of the sandbox's /etc/aisb/policy file.

    GATE is (address, port) of the gate as the sandbox reaches it, or None for a
    sandbox without a gate (only pinned entries go out). BUDGETS: (port, bytes) pairs,
    each a quota on what the sandbox sends to that port at the gate's address (the gate's
    own, or a pinned one: the injector's).
    """
    lines = ["# aisb sandbox policy, format 1: read by the image's entrypoint"]
    if gate is None:
        lines.append("gate none")
    else:
        address, port = gate
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError as error:
            raise PolicyError("gate address %r: %s" % (address, error))
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise PolicyError("gate port %r: must be an integer from 1 to 65535" % (port,))
        lines.append("gate %s %d" % (address, port))
    lines.extend("pin %s %d" % pin for pin in policy.pins)
    if budgets and gate is None:
        raise PolicyError("an upload budget meters the sandbox's path to its gate: there is none")
    lines.extend("budget %s %d %d" % (address, port, limit) for port, limit in sorted(budgets))
    return "\n".join(lines) + "\n"
