# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's ruleset in canonical form: what the policy asks for, what a reading of
the host's nft holds, and the difference between two of them."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset

from builders import META, OIF_LO, RULES, budget_reading, reading, tcp

POLICY = ("# aisb sandbox policy, format 1: read by the image's entrypoint\n"
          "gate 100.64.0.1 41234\npin 198.18.0.0/24 443\npin 2001:db8::5 22\n")


def test_the_policy_asks_for_the_base_and_one_accept_per_gate_and_pin():
    assert _ruleset.expected(POLICY) == [
        "chain inet aisb output type filter hook output prio 0 policy drop",
        "rule inet aisb output: ip 100.64.0.1 tcp dport 41234",
        "rule inet aisb output: ip 198.18.0.0/24 tcp dport 443",
        "rule inet aisb output: ip6 2001:db8::5 tcp dport 22",
        "rule inet aisb output: oif lo",
        "table inet aisb",
    ]
    assert _ruleset.expected("gate none\n") == sorted([
        "table inet aisb", "chain inet aisb output type filter hook output prio 0 policy drop",
        "rule inet aisb output: oif lo"])


@pytest.mark.parametrize("text", ["", "pin 198.18.0.0/24 443\n", "gate none\ngate none\n", "gate 100.64.0.1\n",
                                  "gate none\npin 198.18.0.1/24 443\n", "gate none\npin 198.18.0.0/24 0\n",
                                  "gate none\nallow everything\n", "gate host.test 3128\n"])
def test_a_policy_the_entrypoint_would_refuse_is_refused_here_too(text):
    with pytest.raises(_ruleset.RulesetError):
        _ruleset.expected(text)


def test_the_installed_table_is_what_the_policy_asks_for():
    assert _ruleset.canonical(reading()) == _ruleset.expected(POLICY)
    change = _ruleset.difference(_ruleset.expected(POLICY), _ruleset.canonical(reading()))
    assert change == {"removed": [], "added": []}


def test_another_nft_version_reads_the_same():
    older = reading(meta={"metainfo": {"json_schema_version": 1}})
    assert _ruleset.canonical(older) == _ruleset.canonical(reading())


@pytest.mark.parametrize("states", [["established", "related"], {"set": ["related", "established"]}])
def test_an_accept_for_established_connections_is_a_named_difference(states):
    # The table has none: a connection opened while the table was changed must not
    # outlive the change. A flag set prints as a list, or nested as older nft prints it.
    ct = [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": states}}, {"accept": None}]
    change = _ruleset.difference(_ruleset.expected(POLICY), _ruleset.canonical(reading(rules=RULES + [ct])))
    assert change == {"removed": [], "added": ["rule inet aisb output: ct state established,related"]}


def test_handles_tell_a_table_added_again_from_the_one_read_first():
    first, again = reading(), reading(table_handle=7)
    assert _ruleset.canonical(first) == _ruleset.canonical(again)
    change = _ruleset.difference(_ruleset.canonical(first, handles=True), _ruleset.canonical(again, handles=True))
    assert change == {"removed": ["table inet aisb [handle 1]"], "added": ["table inet aisb [handle 7]"]}


def commented():
    with_comment = reading()
    with_comment["nftables"][-1]["rule"]["comment"] = "hi"
    return with_comment


WEAKENED = {
    "table deleted": {"nftables": [META]},
    "chain flushed": reading(rules=[]),
    "accept added": reading(rules=RULES + [[{"accept": None}]]),
    "policy accept": reading(policy="accept"),
    "table dormant": reading(table={"flags": "dormant"}),
    "rule with a counter": reading(rules=RULES[:1] + [[{"counter": {"packets": 0, "bytes": 0}}] + RULES[1]]),
    "rule with a comment": commented(),
    "another port": reading(rules=RULES[:1] + [tcp("ip", "100.64.0.1", 41235)] + RULES[2:]),
    "a wider network": reading(rules=RULES[:2] + [tcp("ip", {"prefix": {"addr": "198.18.0.0", "len": 16}}, 443)]
                               + RULES[3:]),
    "another table": reading(extra=[{"table": {"family": "ip", "name": "other", "handle": 2}}]),
    "another chain": reading(extra=[{"chain": {"family": "inet", "table": "aisb", "name": "early", "handle": 9,
                                               "type": "filter", "hook": "output", "prio": -10,
                                               "policy": "accept"}}]),
    "a set": reading(extra=[{"set": {"family": "inet", "name": "s", "table": "aisb", "type": "ipv4_addr",
                                     "handle": 4}}]),
    "a regular chain of that name": reading(chain={"type": None, "hook": None, "prio": None, "policy": None}),
}


@pytest.mark.parametrize("case", sorted(WEAKENED))
def test_every_weakening_is_a_difference(case):
    change = _ruleset.difference(_ruleset.expected(POLICY), _ruleset.canonical(WEAKENED[case]))
    assert change["removed"] or change["added"], case


def test_the_difference_names_what_was_removed_and_added():
    change = _ruleset.difference(_ruleset.expected(POLICY), _ruleset.canonical(reading(policy="accept")))
    assert change == {"removed": ["chain inet aisb output type filter hook output prio 0 policy drop"],
                      "added": ["chain inet aisb output type filter hook output prio 0 policy accept"]}
    deleted = _ruleset.difference(_ruleset.expected(POLICY), _ruleset.canonical({"nftables": [META]}))
    assert deleted == {"removed": _ruleset.expected(POLICY), "added": []}
    unexpected = _ruleset.canonical(reading(rules=RULES + [[{"accept": None}]]))
    assert 'rule inet aisb output: unexpected [{"accept": null}]' in unexpected


def test_a_rule_twice_counts_twice():
    twice = _ruleset.canonical(reading(rules=RULES + [OIF_LO]))
    change = _ruleset.difference(_ruleset.expected(POLICY), twice)
    assert change == {"removed": [], "added": ["rule inet aisb output: oif lo"]}


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"nftables": {}}', '{"nftables": [1]}',
                                  '{"nftables": [{"table": 1}]}'])
def test_output_that_is_no_reading_is_refused(text):
    with pytest.raises(_ruleset.RulesetError):
        _ruleset.parse(text)


def test_parse_gives_both_forms():
    with_handles, lines, used = _ruleset.parse(json.dumps(reading()))
    assert lines == _ruleset.expected(POLICY)
    assert "table inet aisb [handle 1]" in with_handles and len(with_handles) == len(lines)
    assert used == {}


BUDGETED = POLICY + "budget 100.64.0.1 41234 8388608\n"


def test_a_budget_sends_its_destination_through_a_metered_chain():
    lines = _ruleset.expected(BUDGETED)
    assert "rule inet aisb output: ip 100.64.0.1 tcp dport 41234 jump upload_41234 before oif lo" in lines
    assert "rule inet aisb output: ip 100.64.0.1 tcp dport 41234" not in lines
    assert "quota inet aisb upload_41234 over 8388608" in lines
    assert "rule inet aisb upload_41234 #4: tcp doff 8 ip length 52 accept" in lines
    # Last in its chain, in this order: the quota's reset, then the accept of the rest.
    assert "rule inet aisb upload_41234 #12: quota upload_41234 reject tcp reset" in lines
    assert "rule inet aisb upload_41234 #13: accept" in lines and len(lines) == len(_ruleset.expected(POLICY)) + 15
    assert _ruleset.budgets(BUDGETED) == {41234: 8388608} and _ruleset.budgets(POLICY) == {}


def test_a_budgeted_reading_is_what_the_policy_asks_for_whatever_its_quota_counted():
    assert _ruleset.canonical(budget_reading()) == _ruleset.expected(BUDGETED)
    # Every packet with payload changes the quota's use: never a difference.
    assert _ruleset.canonical(budget_reading(used=8388608), handles=True) == _ruleset.canonical(
        budget_reading(), handles=True)
    assert _ruleset.parse(json.dumps(budget_reading(used=4242)))[2] == {"upload_41234": 4242}


def _chain(*drop, swap=False):
    rules = budget_reading()["nftables"]
    chain = [item["rule"]["expr"] for item in rules if "rule" in item and item["rule"]["chain"] == "upload_41234"]
    if swap:
        chain[-1], chain[-2] = chain[-2], chain[-1]
    return [expr for i, expr in enumerate(chain) if i not in drop]


@pytest.mark.parametrize("weakened", [
    # The accept before the quota: nothing is counted.
    budget_reading(chain_rules=_chain(swap=True)),
    # No quota rule: nothing is refused.
    budget_reading(chain_rules=_chain(11)),
    # A payload length let through uncounted.
    budget_reading(chain_rules=_chain() + [[{"match": {"op": "==", "left": {"payload": {
        "protocol": "ip", "field": "length"}}, "right": 1500}}, {"accept": None}]]),
    # The quota in mode until (it matches below its bytes): the reject would hit every packet until then.
    budget_reading(inv=False),
    budget_reading(limit=2 ** 40),
    # The jump after oif lo: on the tcp-forward gate path (127.0.0.1) loopback's accept passes it unmetered.
    reading(rules=RULES[:1] + [RULES[1][:2] + [{"jump": {"target": "upload_41234"}}]] + RULES[2:],
            extra=budget_reading()["nftables"][-15:]),
])
def test_a_weakened_budget_is_a_difference(weakened):
    change = _ruleset.difference(_ruleset.expected(BUDGETED), _ruleset.canonical(weakened))
    assert change["removed"] or change["added"]


@pytest.mark.parametrize("line", [
    "budget 100.64.0.1 9999 100",         # no gate or pin there
    "budget 198.18.0.0/24 443 100",        # a network, not one address
    "budget 2001:db8::5 22 100",          # IPv6
    "budget 100.64.0.1 41234 0",           # nothing
    "budget 100.64.0.1 41234 -5",
])
def test_a_budget_line_that_meters_nothing_of_the_policy_is_refused(line):
    with pytest.raises(_ruleset.RulesetError):
        _ruleset.expected(POLICY + line + "\n")
    with pytest.raises(_ruleset.RulesetError):
        _ruleset.expected(BUDGETED + "budget 100.64.0.1 41234 100\n")
