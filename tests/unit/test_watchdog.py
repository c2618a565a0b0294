# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's watchdog: it runs its removal command and writes the record, completed with
status controller-lost, unless the session said it was done, whichever way the session's end
of the pipe closed. And the podman processes that create containers die with the session."""

import io
import json
import os
import signal
import subprocess
import sys
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _watchdog
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_runner import die_with_session

PREPARED = {"schema_version": _session_record.SCHEMA_VERSION, "session_id": "20261130T090000-abcdef01", "started_at": "2026-11-30T09:00:00Z",
            "command": ["pi", "-p", "fix it"], "record": "/s/20261130T090000-abcdef01/record.json"}


def start(tmp_path, prepared=True, key=True):
    """A watchdog (the real program, as the session runs it) whose 'removal' creates a file
    and that writes its record in TMP_PATH; PREPARED: the prepared record is already sent;
    KEY: the record key exists (tmp_path's parent's, so that the directory holds only what
    the watchdog wrote). Returns (process, write end, that file, the record's path)."""
    marker = tmp_path / "removed"
    record = tmp_path / "record.json"
    key_path = str(tmp_path.parent / ("%s.key" % tmp_path.name))
    if key:
        _record_seal.workstation_key(key_path)
    read_end, write_end = os.pipe()
    process = subprocess.Popen(_watchdog.argv(sys.executable, str(record), key_path, ["touch", str(marker)]),
                               stdin=read_end)
    os.close(read_end)
    if prepared:
        os.write(write_end, json.dumps(PREPARED).encode() + b"\n")
    return process, write_end, marker, record


def test_done_means_nothing_to_remove_and_no_record(tmp_path):
    process, write_end, marker, record = start(tmp_path)
    os.write(write_end, _watchdog.DONE)
    os.close(write_end)
    assert process.wait(timeout=10) == 0
    assert not marker.exists() and not record.exists()


def test_a_holder_killed_by_sigkill_leaves_the_removal_and_the_record_to_the_watchdog(tmp_path):
    process, write_end, marker, record = start(tmp_path)
    # The write end now lives only in a process that dies by SIGKILL, as a session might.
    holder = subprocess.Popen(["sleep", "60"], pass_fds=(write_end,))
    os.close(write_end)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert process.wait(timeout=10) == 0
    assert marker.exists()
    written = json.loads(record.read_text())
    assert written["status"] == "controller-lost"
    assert written["session_id"] == PREPARED["session_id"] and written["command"] == PREPARED["command"]
    assert written["commands"] == [["touch", str(marker)]]
    assert written["exit_code"] is None and written["gate"] is None and written["ended_at"]
    assert "watchdog removed" in written["reason"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json", "removed"]
    key = _record_seal.read_key(str(tmp_path.parent / ("%s.key" % tmp_path.name)))
    assert _session_record.check(str(tmp_path), key)[1:] == ("signed", [], "")


def test_a_watchdog_without_the_key_writes_a_record_that_fails_its_check(tmp_path):
    process, write_end, _marker, record = start(tmp_path, key=False)
    os.close(write_end)
    process.wait(timeout=10)
    assert "is gone" in json.loads(record.read_text())["seal_error"]
    result = _session_record.check(str(tmp_path), b"k" * 32)
    assert result.state == "failed" and result.problems[0].startswith("no MAC, which every record of schema_version 2 has")


def test_anything_but_done_removes(tmp_path):
    process, write_end, marker, record = start(tmp_path)
    os.write(write_end, b"don")
    os.close(write_end)
    process.wait(timeout=10)
    assert marker.exists() and json.loads(record.read_text())["status"] == "controller-lost"


def test_a_session_that_died_before_its_record_arrived_still_gets_one(tmp_path):
    process, write_end, marker, record = start(tmp_path, prepared=False)
    os.write(write_end, b'{"session_id": "x", "comm')
    os.close(write_end)
    process.wait(timeout=10)
    assert marker.exists()
    written = json.loads(record.read_text())
    assert written["status"] == "controller-lost"
    assert written["session_id"] == tmp_path.name and written["record"] == str(record)


def test_the_pipe_says_done_only_after_the_prepared_record():
    assert _watchdog.read_pipe(b'{"a": 1}\ndone') == (b'{"a": 1}', True)
    assert _watchdog.read_pipe(b'{"a": 1}\n') == (b'{"a": 1}', False)
    assert _watchdog.read_pipe(b"done") == (b"done", False)  # no record came first: not the session's word
    assert _watchdog.read_pipe(b"") == (b"", False)


def test_complete_keeps_the_prepared_record_and_adds_the_end():
    record = _watchdog.complete(json.dumps(dict(PREPARED, commands=[["podman", "run"]])).encode(),
                                "/s/x/record.json", ["podman", "rm"], 1, 1796000000)
    assert record["started_at"] == PREPARED["started_at"]
    assert record["ended_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1796000000))
    assert record["commands"] == [["podman", "run"], ["podman", "rm"]]
    assert record["reason"].endswith("(its removal command exited 1)")


def test_main_removes_then_writes(tmp_path):
    ran = []
    path = str(tmp_path / "record.json")
    rc = _watchdog.main([path, str(tmp_path / "k"), "--", "podman", "rm", "x"], io.BytesIO(json.dumps(PREPARED).encode() + b"\n"),
                        run=lambda argv, **_kw: ran.append(argv) or 0, now=lambda: 0)
    assert rc == 0 and ran == [["podman", "rm", "x"]]
    assert json.loads(open(path).read())["ended_at"] == "1970-01-01T00:00:00Z"


def test_main_does_nothing_when_done(tmp_path):
    path = str(tmp_path / "record.json")
    _watchdog.main([path, str(tmp_path / "k"), "--", "false"], io.BytesIO(b"{}\ndone"), run=lambda *_a, **_k: 1 / 0)
    assert not os.path.exists(path)


def test_the_watchdog_runs_isolated_and_names_itself():
    argv = _watchdog.argv("/usr/bin/python3", "/s/record.json", "/s/record.key", ["podman", "rm", "a"])
    assert argv[:3] == ["/usr/bin/python3", "-I", "-c"]
    assert argv[4:] == [_watchdog.NAME, "/s/record.json", "/s/record.key", "--", "podman", "rm", "a"]
    assert "def seal(" in argv[3] and "def main(" in argv[3]


def test_a_source_the_loader_gives_as_bytes_is_text():
    """Ansible's collection loader (the in-process session's) returns a module's source as
    bytes: the program is text all the same."""
    class Loader:
        @staticmethod
        def get_source(_name):
            return "x = 1\n".encode("utf-8")

    class Module:
        __loader__ = Loader()
        __name__ = "m"

    assert _watchdog.module_text(Module()) == "x = 1\n"


def test_a_command_started_to_die_with_the_session_dies_with_it():
    # A stand-in session starts a long command as the session starts podman run, then dies by SIGKILL.
    session = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(sys.argv[1:])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n")] + die_with_session("setpriv") + ["sleep", "60"], stdout=subprocess.PIPE, text=True)
    child = int(session.stdout.readline())
    # setpriv sets the signal, then runs the command: once the command runs, it is set.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and command_name(child) != "sleep":
        time.sleep(0.01)
    session.send_signal(signal.SIGKILL)
    session.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists("/proc/%d" % child) and not zombie(child):
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % child) or zombie(child)


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def command_name(pid):
    try:
        with open("/proc/%d/comm" % pid) as comm:
            return comm.read().strip()
    except OSError:
        return None
