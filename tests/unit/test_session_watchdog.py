# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's watchdog: it runs its removal command unless the session said it was done,
whichever way the session's end of the pipe closed."""

import os
import signal
import subprocess

from ansible_collections.aisb.sandbox.plugins.module_utils._session import WATCHDOG_DONE, watchdog_argv


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
