# SPDX-License-Identifier: GPL-3.0-or-later
"""gate_policy's rendering: what goes into policies/<hash>/, independent of entry order."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy_dir import render


def test_files_and_record():
    _policy, record, files, _digest = render(["198.18.0.0/24", "Example.com", "git.example.org:2222"], [443])
    assert sorted(files) == ["policy.json", "squid-policy.conf"]
    assert json.loads(files["policy.json"]) == record
    assert record["pins"] == [["198.18.0.0/24", 443]]
    assert record["host_ports"] == [["git.example.org", 2222]]
    assert b"example.com" in files["squid-policy.conf"] and b"198.18" not in files["squid-policy.conf"]


def test_entry_order_does_not_change_the_files():
    assert render(["a.example.com", ".b.example.org"], [443])[2] == render([".b.example.org", "a.example.com"], [443])[2]


def test_hostile_entry_renders_nothing():
    with pytest.raises(PolicyError, match="'a.example.com\\\\nhttp_access allow all'"):
        render(["a.example.com\nhttp_access allow all"], [443])
