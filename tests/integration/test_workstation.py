# SPDX-License-Identifier: GPL-3.0-or-later
"""The workstation harness itself: nothing started inside outlives the test process, and
the cache that runs side by side share removes nothing another run still uses."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cache import empty_trash, hold, locked, remove_unused
from workstation import Workstation

HARNESS = Path(__file__).resolve().parents[1] / "workstation"

# Starts a workstation, starts a long sleep inside it, prints the sleep's PID as seen from
# the build machine, then waits to be killed.
OWNER = f"""
import sys, time
sys.path.insert(0, {str(HARNESS)!r})
from workstation import Workstation
ws = Workstation("trixie")
ws.start()
ws.sh("setsid sleep 1000 >/dev/null 2>&1 &")
print(ws.init_pid, ws.run_dir, flush=True)
time.sleep(1000)
"""


def pids_in_namespace_of(init_pid):
    """Every build-machine PID whose PID namespace is the one init_pid leads."""
    namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == namespace:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_killing_the_owner_ends_every_process_inside():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    init_pid, run_dir = owner.stdout.readline().split()
    inside = pids_in_namespace_of(int(init_pid))
    assert len(inside) >= 2, inside  # PID 1 and the sleep, at least

    os.kill(owner.pid, signal.SIGKILL)  # no cleanup code of the owner runs
    owner.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in inside):
        time.sleep(0.1)
    assert not [pid for pid in inside if Path(f"/proc/{pid}").exists()]

    # A SIGKILLed owner cannot delete its copy: the next workstation to start does.
    assert Path(run_dir).exists()
    with Workstation("trixie"):
        assert not Path(run_dir).exists()


def test_the_cache_removes_only_what_nobody_holds(tmp_path):
    """An entry that a run copies from (a shared hold) or owns stays; once let go, it goes."""
    copied, owned, unused = (tmp_path / name for name in ("copied", "owned", "unused"))
    for entry in (copied, owned, unused):
        entry.mkdir()
    holds = [hold(copied, shared=True), hold(owned)]
    with locked(tmp_path):
        assert [remove_unused(entry) for entry in (copied, owned, unused)] == [False, False, True]
    empty_trash(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "copied", "owned"]
    for descriptor in holds:
        os.close(descriptor)
    with locked(tmp_path):
        assert remove_unused(copied) and remove_unused(owned)
    empty_trash(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]


def test_trash_whose_deleter_holds_it_is_left_to_it(tmp_path):
    """A workstation's tree is deleted in the background by a process holding its flock:
    a later empty_trash() (the next workstation's start) does not delete it a second time,
    in the foreground; trash nobody holds it deletes."""
    held, abandoned = tmp_path / ".trash-held", tmp_path / ".trash-abandoned"
    for entry in (held, abandoned):
        (entry / "inside").mkdir(parents=True)
    descriptor = hold(held)
    try:
        empty_trash(tmp_path)
        assert held.exists() and not abandoned.exists()
    finally:
        os.close(descriptor)
    empty_trash(tmp_path)
    assert not held.exists()
