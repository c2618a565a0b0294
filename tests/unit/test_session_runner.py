# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's files in its directory: a write that fails (a full disk) ends the
session with a sentence naming the file and why, never a traceback; and what the gate is
started with, kept for the enforcement watch."""

import os
from types import SimpleNamespace

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SQUID_POLICY_CONF
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _gate_state, _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_runner import SessionRunner

TOOLS = {"podman": "/usr/bin/podman", "setpriv": "/usr/bin/setpriv", "bash": "/bin/bash"}
# write() reads nothing of the plan; the runner keeps the sandbox's pid file from it.
PLAN = SimpleNamespace(sandbox_options=SimpleNamespace(pidfile="/nonexistent/pid"))


def test_a_session_file_is_written_with_its_mode(tmp_path):
    runner = SessionRunner(PLAN, str(tmp_path), TOOLS, environ={})
    path = runner.write("sub/policy.json", "{}", 0o644)
    assert open(path).read() == "{}" and os.stat(path).st_mode & 0o777 == 0o644


def test_a_full_disk_while_writing_a_session_file_is_a_session_error_naming_it(tmp_path):
    # /dev/full answers every write with ENOSPC, as a full file system does.
    os.symlink("/dev/full", str(tmp_path / "seccomp.json"))
    runner = SessionRunner(PLAN, str(tmp_path), TOOLS, environ={})
    with pytest.raises(SessionError, match=r"could not be written to .*seccomp\.json: No space left on device"):
        runner.write("seccomp.json", "x" * 100000, 0o644)


def gate_plan(tmp_path):
    return SimpleNamespace(sandbox_options=SimpleNamespace(pidfile="/nonexistent/pid"), session_id="s1",
                           names=SimpleNamespace(sandbox="aisb-sandbox-s1", gate="aisb-gate-s1"),
                           gate=_session_plan.GatePlan(41234, "http_port 127.0.0.1:41234\n",
                                                       str(tmp_path / "gate.pid"), ("api.example.com", 443)))


def test_the_gate_is_started_with_its_pid_file_and_what_it_was_started_with_kept_for_the_watch(tmp_path):
    policy_dir = tmp_path / "policy"
    policy_dir.mkdir()
    (policy_dir / SQUID_POLICY_CONF).write_text("acl aisb_connect method CONNECT\n")
    # podman stands in as true: the run and its wait succeed (and the gate "dies" at once).
    runner = SessionRunner(gate_plan(tmp_path), str(tmp_path), dict(TOOLS, podman="/bin/true"), environ={})
    runner.start_gate("localhost/aisb-gate:1", str(policy_dir))
    assert runner.gate_started == _gate_state.GateStarted(str(tmp_path / "gate.pid"), 41234, {
        _podman.GATE_SESSION_CONF: _gate_state.digest("http_port 127.0.0.1:41234\n"),
        _podman.GATE_POLICY_CONF: _gate_state.digest("acl aisb_connect method CONNECT\n")})
    runner._gate_started.wait(10)  # pylint: disable=protected-access
    run = runner.commands[0]
    assert run[run.index("--pidfile") + 1] == str(tmp_path / "gate.pid")


def test_a_gate_whose_policy_cannot_be_read_is_a_session_error_naming_it(tmp_path):
    runner = SessionRunner(gate_plan(tmp_path), str(tmp_path), dict(TOOLS, podman="/bin/true"), environ={})
    with pytest.raises(SessionError, match=r"the gate's policy cannot be read: .*/missing/%s: No such file"
                       % SQUID_POLICY_CONF):
        runner.start_gate("localhost/aisb-gate:1", str(tmp_path / "missing"))
    assert runner.commands == []
