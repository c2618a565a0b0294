# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's nftables ruleset in canonical form: its one job.

The entrypoint verifies `table inet aisb` inside the sandbox (roles/image/files/
entrypoint.sh, CANONICAL and OUTPUT_CHAIN); the session reads the sandbox's whole
ruleset again from outside, with the host's nft, which may be another version (its
JSON metainfo differs, and so may the shape of a match). These pure functions reduce
either reading to the same lines, one per object, sorted:

    table inet aisb
    chain inet aisb output type filter hook output prio 0 policy drop
    rule inet aisb output: oif lo
    rule inet aisb output: ip 100.64.0.1 tcp dport 41234

A destination with an upload budget (a `budget ADDRESS PORT BYTES` policy line) is
reached through a chain of its own instead of an accept rule: pure ACKs and other
packets without payload pass, every other packet adds its length to the named quota
`upload_PORT` (mode over), and once over it is rejected with a TCP reset:

    quota inet aisb upload_41234 over 8388608
    chain inet aisb upload_41234
    rule inet aisb output: ip 100.64.0.1 tcp dport 41234 jump upload_41234 before oif lo
    rule inet aisb upload_41234 #12: quota upload_41234 reject tcp reset
    rule inet aisb upload_41234 #13: accept

Order matters in that chain, so its rules carry their position, and the jump must come
before `oif lo` (on the tcp-forward gate path the gate is at 127.0.0.1, which that rule
would accept unmetered); the quota's line leaves out its counter (used), which every
packet changes (quota_used reads it).
Anything else (another table, chain, set, flag, a rule of another shape) becomes a line
of its own that starts with what it is and carries its JSON, so it is a difference.
With handles=True each line also carries the kernel's handle: a table deleted and
added again between two readings comes back with a new handle.
"""

from __future__ import annotations

import collections
import ipaddress
import json
import re

TABLE = ("inet", "aisb")
CHAIN = "output"
_BASE_CHAIN = "chain inet aisb output type filter hook output prio 0 policy drop"
_POLICY_LINE = re.compile(r"^(gate|pin) (\S+)(?: (\d{1,5}))?$")
_BUDGET_LINE = re.compile(r"^budget (\S+) (\d{1,5}) ([1-9][0-9]{0,17})$")
# The quota and the chain of a budgeted destination are named after its port.
BUDGET_PREFIX = "upload_"
# A TCP header is 5 to 15 32-bit words; an IPv4 packet without options whose length is
# its headers' (20 bytes and the TCP header) carries no payload: it passes uncounted.
TCP_WORDS = range(5, 16)
IPV4_HEADER = 20
_REJECT = {"reject": {"type": "tcp reset"}}
# The matches nft adds (and may print) before a tcp or ip field in an inet table: in a
# budget chain every packet is already IPv4 TCP (its jump rule matched both).
_DEPENDENCIES = ({"meta": {"key": "l4proto"}}, {"meta": {"key": "nfproto"}})
_COMMENT = re.compile(r"^\s*(#.*)?$")
_ACCEPT = {"accept": None}


class RulesetError(ValueError):
    """A policy text or an nft reading that cannot be understood; the message says why."""


def _address(text):
    """ADDRESS or NETWORK/LEN as nft prints it: a full-length prefix is an address."""
    network = ipaddress.ip_network(text, strict=True)
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def _family(address):
    return "ip6" if ":" in address else "ip"


def _accept_rule(address, port, jump=None):
    address = _address(address)
    suffix = " jump %s before oif lo" % jump if jump else ""
    return "rule inet aisb output: %s %s tcp dport %d%s" % (_family(address), address, port, suffix)


def budget_lines(port, limit):
    """The canonical lines of the quota and chain that meter PORT's destination at LIMIT
    bytes (the output chain's jump rule aside)."""
    name = BUDGET_PREFIX + str(port)
    rules = ["tcp doff %d ip length %d accept" % (words, IPV4_HEADER + 4 * words) for words in TCP_WORDS]
    rules += ["quota %s reject tcp reset" % name, "accept"]
    return (["quota inet aisb %s over %d" % (name, limit), "chain inet aisb " + name]
            + ["rule inet aisb %s #%d: %s" % (name, number, rule) for number, rule in enumerate(rules, 1)])


def budgets(policy_text):
    """{port: bytes} of a valid POLICY_TEXT's budget lines."""
    return dict((int(match.group(2)), int(match.group(3)))
                for match in map(_BUDGET_LINE.match, policy_text.splitlines()) if match)


def expected(policy_text):
    """The canonical lines of the table POLICY_TEXT asks for (the sandbox policy file,
    format 1: `gate ADDRESS PORT` or `gate none`, then `pin ADDRESS[/LEN] PORT` lines,
    then `budget ADDRESS PORT BYTES` lines, each naming the gate's or a pin's single IPv4
    address and port, one a port)."""
    lines = ["table inet aisb", _BASE_CHAIN, "rule inet aisb output: oif lo"]
    gates = 0
    metered = {}
    for number, line in enumerate(policy_text.splitlines(), 1):
        match = _BUDGET_LINE.match(line)
        if match:
            port = int(match.group(2))
            try:
                address = str(ipaddress.IPv4Address(match.group(1)))
            except ValueError:
                address = None
            if address != match.group(1) or port in metered or not 1 <= port <= 65535:
                raise RulesetError("policy line %d is not understood: %r (one budget a port, on an IPv4 address)"
                                   % (number, line))
            metered[port] = (address, int(match.group(3)), number, line)
    for number, line in enumerate(policy_text.splitlines(), 1):
        if _COMMENT.match(line) or _BUDGET_LINE.match(line):
            continue
        match = _POLICY_LINE.match(line)
        try:
            if match and match.group(1) == "gate" and match.group(2) == "none" and match.group(3) is None:
                gates += 1
                continue
            if match and match.group(3) is not None and 1 <= int(match.group(3)) <= 65535:
                if match.group(1) == "gate":
                    gates += 1
                    ipaddress.ip_address(match.group(2))
                port = int(match.group(3))
                budget = metered.get(port)
                if budget and budget[0] == match.group(2):
                    lines.append(_accept_rule(match.group(2), port, BUDGET_PREFIX + str(port)))
                    lines.extend(budget_lines(port, budget[1]))
                    metered.pop(port)
                else:
                    lines.append(_accept_rule(match.group(2), port))
                continue
        except ValueError:
            pass
        raise RulesetError("policy line %d is not understood: %r" % (number, line))
    if gates != 1:
        raise RulesetError("the policy has %d 'gate' lines, not one" % gates)
    for _address_text, _limit, number, line in metered.values():
        raise RulesetError("policy line %d meters no gate or pin of its address and port: %r" % (number, line))
    return sorted(lines)


def lets_through(policy_text, address, port):
    """Whether a valid POLICY_TEXT's table lets TCP to ADDRESS port PORT through."""
    address = ipaddress.ip_address(address)
    for line in policy_text.splitlines():
        match = _POLICY_LINE.match(line)
        if match and match.group(3) is not None and int(match.group(3)) == port:
            network = ipaddress.ip_network(match.group(2), strict=True)
            if network.version == address.version and address in network:
                return True
    return False


def gate(policy_text):
    """(address, port) of a valid POLICY_TEXT's gate, or None (`gate none`)."""
    for line in policy_text.splitlines():
        match = _POLICY_LINE.match(line)
        if match and match.group(1) == "gate" and match.group(3) is not None:
            return match.group(2), int(match.group(3))
    return None


def _rest(obj, known):
    """OBJ's keys beyond KNOWN (and the handle), for an object's line; "" when none."""
    extra = dict((k, v) for k, v in obj.items() if k not in known and k != "handle")
    return (" " + json.dumps(extra, sort_keys=True)) if extra else ""


def _budget_expr(expr):
    """A budget chain's rule in the entrypoint's words, or None for any other shape."""
    expr = [e for e in expr if not (isinstance(e, dict) and set(e) == {"match"} and isinstance(e["match"], dict)
                                    and e["match"].get("left") in _DEPENDENCIES and e["match"].get("op") == "==")]
    if expr == [_ACCEPT]:
        return "accept"
    if len(expr) == 2 and expr[1] == _REJECT and isinstance(expr[0], dict) and list(expr[0]) == ["quota"] \
            and isinstance(expr[0]["quota"], str):
        return "quota %s reject tcp reset" % expr[0]["quota"]
    if len(expr) == 3 and expr[2] == _ACCEPT:
        fields = [((e.get("match") or {}).get("left") or {}).get("payload") if isinstance(e, dict) else None
                  for e in expr[:2]]
        rights = [(e.get("match") or {}).get("right") if isinstance(e, dict) else None for e in expr[:2]]
        if (fields == [{"protocol": "tcp", "field": "doff"}, {"protocol": "ip", "field": "length"}]
                and all(e == {"match": {"op": "==", "left": e["match"]["left"], "right": e["match"]["right"]}}
                        for e in expr[:2])
                and all(isinstance(one, int) and not isinstance(one, bool) for one in rights)):
            return "tcp doff %d ip length %d accept" % tuple(rights)
    return None


def _rule_expr(expr):
    """A rule's expressions in the entrypoint's words, or None for any other shape."""
    if isinstance(expr, list) and len(expr) == 3 and isinstance(expr[-1], dict) and list(expr[-1]) == ["jump"] \
            and isinstance(expr[-1]["jump"], dict) and list(expr[-1]["jump"]) == ["target"]:
        words = _rule_expr(expr[:2] + [_ACCEPT])
        target = expr[-1]["jump"]["target"]
        if words and " tcp dport " in words and isinstance(target, str):
            return "%s jump %s" % (words, target)
        return None
    if not isinstance(expr, list) or len(expr) < 2 or expr[-1] != _ACCEPT:
        return None
    matches = [e.get("match") if isinstance(e, dict) and len(e) == 1 else None for e in expr[:-1]]
    if any(not isinstance(m, dict) or set(m) != {"op", "left", "right"} for m in matches):
        return None
    if len(matches) == 1:
        left, right, op = matches[0]["left"], matches[0]["right"], matches[0]["op"]
        if left == {"meta": {"key": "oif"}} and op == "==" and right == "lo":
            return "oif lo"
        if left == {"ct": {"key": "state"}} and op in ("in", "=="):
            # nft prints a flag set as a list; older versions may nest it in {"set": ...}.
            states = right.get("set") if isinstance(right, dict) else right
            if isinstance(states, list) and sorted(states) == ["established", "related"]:
                return "ct state established,related"
        return None
    if len(matches) == 2:
        daddr, dport = matches
        family = (daddr["left"].get("payload") or {}).get("protocol") if isinstance(daddr["left"], dict) else None
        if (family in ("ip", "ip6") and daddr["op"] == "==" and dport["op"] == "=="
                and daddr["left"] == {"payload": {"protocol": family, "field": "daddr"}}
                and dport["left"] == {"payload": {"protocol": "tcp", "field": "dport"}}
                and isinstance(dport["right"], int) and not isinstance(dport["right"], bool)):
            right = daddr["right"]
            if isinstance(right, dict) and list(right) == ["prefix"] and isinstance(right["prefix"], dict):
                text = "%s/%s" % (right["prefix"].get("addr"), right["prefix"].get("len"))
            elif isinstance(right, str):
                text = right
            else:
                return None
            try:
                address = _address(text)
            except ValueError:
                return None
            if _family(address) == family:
                return "%s %s tcp dport %d" % (family, address, dport["right"])
    return None


def canonical(reading, handles=False):
    """The sorted canonical lines of READING (`nft -j list ruleset` output, parsed);
    RulesetError when it is not such output."""
    if not isinstance(reading, dict) or not isinstance(reading.get("nftables"), list):
        raise RulesetError("not nft JSON output (no 'nftables' list)")
    lines = []
    positions = collections.Counter()
    # Whether the output chain's oif lo came yet (nft lists a chain's rules in order).
    lo_seen = False
    for item in reading["nftables"]:
        if not isinstance(item, dict) or len(item) != 1:
            raise RulesetError("not an nft JSON object: %s" % json.dumps(item, sort_keys=True)[:200])
        kind, obj = next(iter(item.items()))
        if kind == "metainfo":
            continue
        if not isinstance(obj, dict):
            raise RulesetError("not an nft JSON object: %s" % json.dumps(item, sort_keys=True)[:200])
        where = " ".join(str(obj.get(k)) for k in ("family", "table") if k in obj)
        if kind == "table":
            line = "table %s %s%s" % (obj.get("family"), obj.get("name"), _rest(obj, ("family", "name")))
        elif kind == "chain":
            line = "chain %s %s" % (where, obj.get("name"))
            if "hook" in obj or "type" in obj:
                line += " type %s hook %s prio %s policy %s" % (
                    obj.get("type"), obj.get("hook"), obj.get("prio"), obj.get("policy"))
            line += _rest(obj, ("family", "table", "name", "type", "hook", "prio", "policy"))
        elif kind == "rule" and obj.get("chain") != CHAIN and (obj.get("family"), obj.get("table")) == TABLE:
            # nft lists a chain's rules in their order.
            positions[obj.get("chain")] += 1
            line = "rule %s %s #%d: " % (where, obj.get("chain"), positions[obj.get("chain")])
            words = _budget_expr(obj.get("expr")) if isinstance(obj.get("expr"), list) else None
            line += (words + _rest(obj, ("family", "table", "chain", "expr"))) if words else (
                "unexpected " + json.dumps(obj.get("expr"), sort_keys=True)
                + _rest(obj, ("family", "table", "chain", "expr")))
        elif kind == "quota" and (obj.get("family"), obj.get("table")) == TABLE and obj.get("inv") is True:
            line = "quota %s %s over %s%s" % (where, obj.get("name"), obj.get("bytes"),
                                              _rest(obj, ("family", "table", "name", "bytes", "used", "inv")))
        elif kind == "rule":
            line = "rule %s %s: " % (where, obj.get("chain"))
            words = _rule_expr(obj.get("expr")) if (obj.get("family"), obj.get("table")) == TABLE else None
            line += (words + _rest(obj, ("family", "table", "chain", "expr"))) if words else (
                "unexpected " + json.dumps(obj.get("expr"), sort_keys=True)
                + _rest(obj, ("family", "table", "chain", "expr")))
            if obj.get("chain") == CHAIN and words == "oif lo":
                lo_seen = True
            elif obj.get("chain") == CHAIN and words and " jump " in words:
                line += " before oif lo" if not lo_seen else " after oif lo"
        else:
            line = "%s %s %s: unexpected%s" % (kind, where, obj.get("name", ""), _rest(obj, ("family", "table")))
        if handles:
            line += " [handle %s]" % obj.get("handle")
        lines.append(line)
    return sorted(lines)


def quota_used(reading):
    """{quota name: bytes used} of READING's quotas in table inet aisb (nft stops a
    quota's used at its bytes)."""
    return dict((item["quota"].get("name"), item["quota"].get("used")) for item in reading.get("nftables", [])
                if isinstance(item, dict) and isinstance(item.get("quota"), dict)
                and (item["quota"].get("family"), item["quota"].get("table")) == TABLE)


def parse(text):
    """The canonical lines (with handles), the lines (without) and the quotas' use
    (quota_used) of one reading's TEXT."""
    try:
        reading = json.loads(text)
    except ValueError as error:
        raise RulesetError("not JSON: %s" % error)
    return canonical(reading, handles=True), canonical(reading), quota_used(reading)


def difference(wanted, actual):
    """{"removed": lines of WANTED missing from ACTUAL, "added": lines of ACTUAL not in
    WANTED}, each sorted and counted as a multiset; both empty when they are equal."""
    wanted, actual = collections.Counter(wanted), collections.Counter(actual)
    return {"removed": sorted((wanted - actual).elements()), "added": sorted((actual - wanted).elements())}
