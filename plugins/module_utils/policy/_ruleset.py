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


def _accept_rule(address, port):
    address = _address(address)
    return "rule inet aisb output: %s %s tcp dport %d" % (_family(address), address, port)


def expected(policy_text):
    """The canonical lines of the table POLICY_TEXT asks for (the sandbox policy file,
    format 1: `gate ADDRESS PORT` or `gate none`, then `pin ADDRESS[/LEN] PORT` lines)."""
    lines = ["table inet aisb", _BASE_CHAIN, "rule inet aisb output: oif lo"]
    gates = 0
    for number, line in enumerate(policy_text.splitlines(), 1):
        if _COMMENT.match(line):
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
                lines.append(_accept_rule(match.group(2), int(match.group(3))))
                continue
        except ValueError:
            pass
        raise RulesetError("policy line %d is not understood: %r" % (number, line))
    if gates != 1:
        raise RulesetError("the policy has %d 'gate' lines, not one" % gates)
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


def _rule_expr(expr):
    """A rule's expressions in the entrypoint's words, or None for any other shape."""
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
        elif kind == "rule":
            line = "rule %s %s: " % (where, obj.get("chain"))
            words = _rule_expr(obj.get("expr")) if (obj.get("family"), obj.get("table")) == TABLE else None
            line += (words + _rest(obj, ("family", "table", "chain", "expr"))) if words else (
                "unexpected " + json.dumps(obj.get("expr"), sort_keys=True)
                + _rest(obj, ("family", "table", "chain", "expr")))
        else:
            line = "%s %s %s: unexpected%s" % (kind, where, obj.get("name", ""), _rest(obj, ("family", "table")))
        if handles:
            line += " [handle %s]" % obj.get("handle")
        lines.append(line)
    return sorted(lines)


def parse(text):
    """The canonical lines (with handles) and the lines (without) of one reading's TEXT."""
    try:
        reading = json.loads(text)
    except ValueError as error:
        raise RulesetError("not JSON: %s" % error)
    return canonical(reading, handles=True), canonical(reading)


def difference(wanted, actual):
    """{"removed": lines of WANTED missing from ACTUAL, "added": lines of ACTUAL not in
    WANTED}, each sorted and counted as a multiset; both empty when they are equal."""
    wanted, actual = collections.Counter(wanted), collections.Counter(actual)
    return {"removed": sorted((wanted - actual).elements()), "added": sorted((actual - wanted).elements())}
