# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The terminal and signals of an interactive or interrupted session.

ansible-playbook's terminal found from a task worker, its resizes relayed to podman,
and the signals that end a session early turned into an exception, so that cleanup runs.
"""

from __future__ import annotations

import fcntl
import os
import signal
import termios
import time


def playbook_terminal(parent_pid):
    """A descriptor on the terminal of process PARENT_PID (ansible-playbook, the task
    worker's parent), or None when it has none. Opened without becoming this process's
    controlling terminal."""
    for stream in (0, 1, 2):
        try:
            path = os.readlink("/proc/%d/fd/%d" % (parent_pid, stream))
        except OSError:
            continue
        if not path.startswith("/dev/"):
            continue
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            continue
        if os.isatty(fd):
            return fd
        os.close(fd)
    return None


def follow_window_size(terminal, process, interval=0.2):
    """Relay terminal resizes to podman as SIGWINCH.

    The terminal belongs to ansible-playbook's process group, so the kernel's SIGWINCH
    goes there, not to podman; podman resizes the sandbox's TTY when it gets one."""
    last = None
    while process.poll() is None:
        try:
            size = fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\0" * 8)
        except OSError:
            return
        if last is not None and size != last:
            try:
                process.send_signal(signal.SIGWINCH)
            except OSError:
                return
        last = size
        time.sleep(interval)


class Interrupted(Exception):
    """A signal ended the session early."""


class signals_raise(object):
    """Within the block, SIGTERM, SIGINT and SIGHUP raise Interrupted (so cleanup runs)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __enter__(self):
        self._previous = dict((s, signal.getsignal(s)) for s in self.SIGNALS)

        def handler(signum, _frame):
            raise Interrupted(signal.Signals(signum).name)

        for s in self.SIGNALS:
            signal.signal(s, handler)
        return self

    def __exit__(self, *_exc):
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        return False
