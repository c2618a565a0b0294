# SPDX-License-Identifier: GPL-3.0-or-later
"""What several unit test files build alike (host facts, session inputs, refused and passing
addresses, nft ruleset readings, a session's own process, a file in a tree), in one place
so that no test file imports another. pytest collects test_*.py only: nothing here runs
as a test."""

import json
import multiprocessing
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.review._project_review import ReviewError
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_inputs import SessionInputs
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError

# Host facts: a host where the model holds, and the time the tests call now.
FACTS = {"verdict": {"model_holds": True, "gate_path": "map-host-loopback", "limits_enforceable": False,
                     "bind_mount_label": ""}}
NOW = _host_facts.parse_time("2026-11-30T10:00:00Z")

# The programs the enforcement watch runs, as find_tools resolves them.
TOOLS = {"nsenter": "/usr/bin/nsenter", "setpriv": "/usr/bin/setpriv", "nft": "/usr/sbin/nft"}

# podman's default seccomp profile in containers-common's shape, small: refusals by default,
# an allow list, a rule with arguments, rules by capability.
SECCOMP_DEFAULT = json.dumps({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
    "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86"]}],
    "syscalls": [
        {"names": ["bdflush", "userfaultfd", "kexec_load"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["read", "write", "clone", "clone3", "unshare", "setns", "keyctl", "fsopen", "mount"],
         "action": "SCMP_ACT_ALLOW"},
        {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 8, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]},
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_BPF"]}},
        {"names": ["init_module"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_MODULE"]}},
    ]})
# The sandbox's profile rendered from it.
SECCOMP_PROFILE = _seccomp.render_profile(SECCOMP_DEFAULT)


def inputs(**overrides):
    """Validated session inputs for an allow-mode session; OVERRIDES replace fields."""
    base = {"project": "/home/dev/src/app", "project_label": "", "image": "localhost/aisb-sandbox:abc",
            "gate_image": "localhost/aisb-gate:def", "policy_dir": "/state/policies/p",
            "policy": parse_policy(["example.com", "198.18.0.7"], [443]), "network": "allow",
            "environment": {"TOKEN": "secret"}, "command": ["pi", "--version"], "interactive": False,
            "allow_unenforced": False, "limits": {}, "require_limits": False, "watch_tools": TOOLS,
            "seccomp_profile": SECCOMP_PROFILE}
    base.update(overrides)
    return SessionInputs(**base)


# (address, the refused network it falls in). The gate (test_squid) and network no-gate
# (refused_destination, pin_resolved) must both refuse every one.
REFUSED = [
    ("0.0.0.0", "0.0.0.0/8"), ("10.1.2.3", "10.0.0.0/8"), ("100.64.0.1", "100.64.0.0/10"),
    ("127.0.0.1", "127.0.0.0/8"), ("169.254.169.254", "169.254.0.0/16"), ("172.31.0.1", "172.16.0.0/12"),
    ("192.0.0.8", "192.0.0.0/24"), ("192.168.1.1", "192.168.0.0/16"), ("224.0.0.1", "224.0.0.0/4"),
    ("255.255.255.255", "240.0.0.0/4"),
    ("::", "::/96"), ("::1", "::/96"), ("fd00:ec2::254", "fc00::/7"), ("fe80::1", "fe80::/10"),
    ("ff02::1", "ff00::/8"),
    # IPv6 forms that carry an IPv4 address: refused whatever the IPv4 address is.
    ("::127.0.0.1", "::/96"), ("::1.1.1.1", "::/96"),
    ("64:ff9b::7f00:1", "64:ff9b::/96"), ("64:ff9b::a9fe:a9fe", "64:ff9b::/96"),
    ("64:ff9b::101:101", "64:ff9b::/96"),
    # RFC 6052's /48 encoding of 127.0.0.1, and a /96 inside the local-use prefix.
    ("64:ff9b:1:7f00:0:100::", "64:ff9b:1::/48"), ("64:ff9b:1::a9fe:a9fe", "64:ff9b:1::/48"),
    ("2002:7f00:1::1", "2002::/16"), ("2002:101:101::1", "2002::/16"),
    # Teredo: server 169.254.169.254, client 127.0.0.1 (inverted).
    ("2001:0:a9fe:a9fe:0:ffff:80ff:fffe", "2001::/32"),
    # IPv4-translated (SIIT): refused whatever the IPv4 address is.
    ("::ffff:0:a9fe:a9fe", "::ffff:0:0:0/96"), ("::ffff:0:101:101", "::ffff:0:0:0/96"),
    # IPv4-mapped: judged by the IPv4 address inside.
    ("::ffff:127.0.0.1", "127.0.0.0/8"), ("::ffff:169.254.169.254", "169.254.0.0/16"),
    ("::ffff:10.0.0.1", "10.0.0.0/8"),
]
# Public addresses, the test internet's prefixes (2001:db8::/32 sits beside Teredo's
# 2001::/32), and a mapped public IPv4 address: never refused.
PASSING = ["1.1.1.1", "198.18.0.5", "2606:4700::1111", "2001:db8::5", "2001:1::1", "::ffff:1.1.1.1",
           "64:ff9b:2::101:101"]


META = {"metainfo": {"version": "1.1.3", "release_name": "Commodore Bullmoose #4", "json_schema_version": 1}}
OIF_LO = [{"match": {"op": "==", "left": {"meta": {"key": "oif"}}, "right": "lo"}}, {"accept": None}]


def tcp(family, address, port):
    """An nft rule's expression accepting tcp to ADDRESS:PORT."""
    return [{"match": {"op": "==", "left": {"payload": {"protocol": family, "field": "daddr"}}, "right": address}},
            {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": port}},
            {"accept": None}]


# The rules the entrypoint installs for gate 100.64.0.1 41234, pin 198.18.0.0/24 443, pin 2001:db8::5 22.
RULES = [OIF_LO, tcp("ip", "100.64.0.1", 41234), tcp("ip", {"prefix": {"addr": "198.18.0.0", "len": 24}}, 443),
         tcp("ip6", "2001:db8::5", 22)]


def reading(rules=None, policy="drop", table=None, chain=None, extra=(), meta=None, table_handle=1):
    """`nft -j list ruleset` as nftables 1.1.3 prints the entrypoint's table."""
    rules = RULES if rules is None else rules
    meta = META if meta is None else meta
    items = [meta, {"table": dict({"family": "inet", "name": "aisb", "handle": table_handle}, **(table or {}))},
             {"chain": dict({"family": "inet", "table": "aisb", "name": "output", "handle": 1, "type": "filter",
                             "hook": "output", "prio": 0, "policy": policy}, **(chain or {}))}]
    items += [{"rule": {"family": "inet", "table": "aisb", "chain": "output", "handle": 2 + i, "expr": expr}}
              for i, expr in enumerate(rules)]
    return {"nftables": items + list(extra)}


def in_a_session(function, *args):
    """FUNCTION(*ARGS) in a process of its own, as each session (and each project_review
    task) is: its result, or the message of the SessionError or ReviewError it raised."""
    results = multiprocessing.get_context("fork").Queue()

    def session():
        try:
            results.put(function(*args))
        except (SessionError, ReviewError) as error:
            results.put(str(error))
    process = multiprocessing.get_context("fork").Process(target=session)
    process.start()
    process.join()
    return results.get(timeout=5)


def write(path, text="x\n", mode=None):
    """A file at PATH holding TEXT, its folders made; MODE: its permissions, else the umask's."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)


def match(protocol, field, right):
    return {"match": {"op": "==", "left": {"payload": {"protocol": protocol, "field": field}}, "right": right}}


def budget_reading(port=41234, limit=8388608, used=0, chain_rules=None, inv=True):
    """`nft -j list ruleset` (as nftables 1.0.6 printed it) of the entrypoint's table for
    POLICY's gate and pins with a budget of LIMIT bytes on the gate's PORT, its quota
    having counted USED; CHAIN_RULES: the budget chain's rules instead of the entrypoint's."""
    name = "upload_%d" % port
    # The jump first, before oif lo (inserted).
    rules = [tcp("ip", "100.64.0.1", port)[:2] + [{"jump": {"target": name}}]]
    rules += [rule for rule in RULES if rule != tcp("ip", "100.64.0.1", port)]
    if chain_rules is None:
        chain_rules = [[match("tcp", "doff", words), match("ip", "length", 20 + 4 * words), {"accept": None}]
                       for words in range(5, 16)]
        chain_rules += [[{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}},
                         {"quota": name}, {"reject": {"type": "tcp reset"}}], [{"accept": None}]]
    quota = {"quota": {"family": "inet", "name": name, "table": "aisb", "handle": 90, "bytes": limit, "used": used}}
    if inv:
        quota["quota"]["inv"] = True
    extra = [quota, {"chain": {"family": "inet", "table": "aisb", "name": name, "handle": 91}}]
    extra += [{"rule": {"family": "inet", "table": "aisb", "chain": name, "handle": 100 + i, "expr": expr}}
              for i, expr in enumerate(chain_rules)]
    return reading(rules=rules, extra=extra)
