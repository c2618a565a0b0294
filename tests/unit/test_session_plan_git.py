# SPDX-License-Identifier: GPL-3.0-or-later
"""What git remotes make of a session's plan: the broker's port pinned at the gate's
address beside the injector's, git's read-only system configuration leading the listed
remotes there, no token anywhere in the plan; nothing at all without remotes."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import git_config
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._ruleset import expected
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan

from builders import FACTS, inputs

TOKEN = "ghp_plan-token"
REMOTES = [{"url": "https://github.com/org/repo.git", "host": "github.com", "port": 443, "path": "/org/repo.git",
            "branches": "aisb/{session}/*", "username": "x-access-token", "token": TOKEN}]


def planned(facts=None, **more):
    return _session_plan.plan_session("sid", "/s", inputs(git_remotes=REMOTES, **more), facts or FACTS, 40001,
                                      broker=40003)


def test_the_broker_is_pinned_and_git_led_to_it_read_only():
    plan = planned()
    assert "pin 100.64.0.1 40003" in plan.policy_text.splitlines()
    assert "rule inet aisb output: ip 100.64.0.1 tcp dport 40003" in expected(plan.policy_text)
    assert plan.environment["NO_PROXY"] == "localhost,127.0.0.1,::1,100.64.0.1"
    assert dict(plan.session_files)["gitconfig"] == git_config(REMOTES, "http://100.64.0.1:40003")
    assert ("/s/gitconfig", "/etc/gitconfig") in plan.sandbox_options.read_only_files
    argv = _podman.sandbox_run("podman", plan.sandbox_options)
    assert "/s/gitconfig:/etc/gitconfig:ro" in " ".join(argv)
    # /etc is not made a writable tmpfs for it, as a harness file's directory is.
    assert plan.sandbox_options.writable_dirs == []
    assert TOKEN not in json.dumps(plan)


def test_the_config_names_the_remote_with_and_without_dot_git():
    assert git_config(REMOTES, "http://g:1") == (
        "# Written by the session: the listed remotes go through its git broker (aisb_git_remotes).\n"
        '[url "http://g:1/r0"]\n\tinsteadOf = https://github.com/org/repo.git\n\tinsteadOf = https://github.com/org/repo\n')
    assert "insteadOf = https://h.org/r.git\n" in git_config([dict(REMOTES[0], url="https://h.org/r")], "http://g:1")


def test_tcp_forward_forwards_the_broker_port_too():
    plan = planned({"verdict": dict(FACTS["verdict"], gate_path="tcp-forward")})
    assert plan.sandbox_options.network == "pasta:-4,-T,40001,-T,40003,--no-map-gw"
    assert "http://127.0.0.1:40003/r0" in dict(plan.session_files)["gitconfig"]


def test_without_remotes_nothing_changes():
    plan = _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40001)
    assert plan.session_files == [] and "/etc/gitconfig" not in json.dumps(plan)


def test_remotes_need_the_gate():
    with pytest.raises(_session_plan.SessionError, match="need network allow"):
        _session_plan.plan_session("sid", "/s", inputs(network="none", git_remotes=REMOTES), FACTS, None,
                                   broker=40003)
