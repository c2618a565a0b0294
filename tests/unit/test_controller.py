# SPDX-License-Identifier: GPL-3.0-or-later
"""How a session notices that its controller went away: its output loses its reader (a pipe
or a socket, as the module's stdout is), or its process is reparented. Real processes,
pipes and sockets; nothing else."""

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.session._controller import HEARTBEAT, OUTPUT_GONE, ControllerWatch

BOUND = 10  # seconds: a correctness bound for a loaded machine


class Calls(object):
    def __init__(self):
        self.reasons = []
        self.called = threading.Event()

    def __call__(self, reason):
        self.reasons.append(reason)
        self.called.set()


def reader_in_a_child(read_end):
    """A process holding READ_END (the only reader left once the caller closes its copy)."""
    child = subprocess.Popen(["sleep", "60"], pass_fds=(read_end,))
    os.close(read_end)
    return child


def test_a_pipe_whose_last_reader_dies_by_sigkill_is_noticed():
    read_end, write_end = os.pipe()
    reader = reader_in_a_child(read_end)
    calls = Calls()
    watch = ControllerWatch(calls, output=write_end, interval=0.05).start()
    time.sleep(0.3)
    assert not calls.called.is_set()  # heartbeats go to a live reader
    reader.send_signal(signal.SIGKILL)
    reader.wait()
    assert calls.called.wait(BOUND)
    assert calls.reasons == [OUTPUT_GONE]
    assert "no reader left" in OUTPUT_GONE
    watch.stop()
    os.close(write_end)


def test_a_socket_whose_peer_closes_is_noticed():
    ours, theirs = socket.socketpair()
    calls = Calls()
    watch = ControllerWatch(calls, output=ours.fileno(), interval=0.05).start()
    theirs.close()
    assert calls.called.wait(BOUND)
    assert calls.reasons == [OUTPUT_GONE]
    watch.stop()
    ours.close()


def test_heartbeats_are_blank_lines_and_stop_ends_them():
    read_end, write_end = os.pipe()
    calls = Calls()
    watch = ControllerWatch(calls, output=write_end, interval=0.02).start()
    assert select.select([read_end], [], [], BOUND)[0]  # a heartbeat came
    watch.stop()
    os.set_blocking(read_end, False)
    seen = os.read(read_end, 4096)
    assert seen and set(seen) == set(HEARTBEAT) == {ord("\n")}
    time.sleep(0.1)
    with pytest.raises(BlockingIOError):
        os.read(read_end, 4096)  # nothing after stop() returned
    assert calls.reasons == []
    os.close(read_end)
    os.close(write_end)


def test_a_file_or_dev_null_is_never_taken_for_a_lost_controller(tmp_path):
    with open(os.devnull, "wb") as null, open(tmp_path / "out", "wb") as regular:
        for handle in (null, regular):
            calls = Calls()
            watch = ControllerWatch(calls, output=handle.fileno(), interval=0.02).start()
            assert watch.output is None
            time.sleep(0.1)
            watch.stop()
            assert calls.reasons == []
    assert (tmp_path / "out").read_bytes() == b""  # no heartbeat into a file


def test_a_reparented_process_notices_its_parent_died():
    # A parent forks a child that watches it; the parent dies by SIGKILL; the child reports.
    code = (
        "import os, sys, time\n"
        "from ansible_collections.aisb.sandbox.plugins.module_utils.session._controller import ControllerWatch\n"
        "if os.fork() == 0:\n"
        "    ControllerWatch(lambda reason: (print(reason, flush=True), os._exit(0)), parent=os.getppid(), interval=0.05).start()\n"
        "    print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    child = int(process.stdout.readline())  # the child is watching
    process.send_signal(signal.SIGKILL)
    process.wait()
    line = process.stdout.readline()  # the child still holds the pipe and writes to it
    assert line == "ansible-playbook (process %d) is gone\n" % process.pid, line
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline and os.path.exists("/proc/%d" % child):
        time.sleep(0.05)
    process.stdout.close()


def test_stop_without_a_loss_calls_nothing():
    calls = Calls()
    watch = ControllerWatch(calls, parent=os.getppid(), interval=0.02).start()
    time.sleep(0.1)
    watch.stop()
    assert calls.reasons == []
