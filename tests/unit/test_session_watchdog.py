# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's watchdog: it runs its removal command unless the session said it was done,
whichever way the session's end of the pipe closed. And the podman processes that create
containers die with the session."""

import os
import signal
import subprocess
import sys
import time

from ansible_collections.aisb.sandbox.plugins.module_utils._session import (
    DIE_WITH_SESSION, WATCHDOG_DONE, watchdog_argv)


def start(tmp_path):
    """A watchdog whose 'removal' creates a file; returns (process, write end, that file)."""
    marker = tmp_path / "removed"
    read_end, write_end = os.pipe()
    process = subprocess.Popen(watchdog_argv(["touch", str(marker)]), stdin=read_end)
    os.close(read_end)
    return process, write_end, marker


def test_done_means_nothing_to_remove(tmp_path):
    process, write_end, marker = start(tmp_path)
    os.write(write_end, WATCHDOG_DONE.encode())
    os.close(write_end)
    assert process.wait(timeout=10) == 0
    assert not marker.exists()


def test_a_holder_killed_by_sigkill_leaves_the_removal_to_the_watchdog(tmp_path):
    process, write_end, marker = start(tmp_path)
    # The write end now lives only in a process that dies by SIGKILL, as a session might.
    holder = subprocess.Popen(["sleep", "60"], pass_fds=(write_end,))
    os.close(write_end)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert process.wait(timeout=10) == 0
    assert marker.exists()


def test_anything_but_done_removes(tmp_path):
    process, write_end, marker = start(tmp_path)
    os.write(write_end, b"don")
    os.close(write_end)
    process.wait(timeout=10)
    assert marker.exists()


def test_a_command_started_to_die_with_the_session_dies_with_it():
    # A stand-in session starts a long command as the session starts podman run, then dies by SIGKILL.
    session = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(sys.argv[1:])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n")] + DIE_WITH_SESSION + ["sleep", "60"], stdout=subprocess.PIPE, text=True)
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
