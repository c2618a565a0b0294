# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Notices that whatever controls a session went away, and says so once.

Two signs, either enough, neither needs to know the controller's process:
- OUTPUT, a descriptor the session writes to (the module's stdout: a pipe whose reader is
  ansible-playbook's worker, or sshd for a remote controller), has no reader left: on
  Linux poll() reports POLLERR for a pipe and POLLHUP for a socket once every reader is
  closed. A newline written to it every INTERVAL makes every relay in between (the ssh
  client, a ControlPersist master) write in turn, and so find out that its own reader
  is gone; Ansible drops blank lines before a module's JSON.
- PARENT: this process was reparented (the ansible-playbook process that forked this
  worker died, by any signal).
"""

from __future__ import annotations

import os
import select
import stat
import threading

INTERVAL = 0.5
HEARTBEAT = b"\n"
GONE = select.POLLERR | select.POLLHUP | select.POLLNVAL
OUTPUT_GONE = ("the session's output has no reader left (ansible-playbook's worker or the connection "
               "to the controller is gone)")


def can_lose_reader(fd):
    """True when FD is a pipe or a socket: the kinds whose readers poll() can report gone."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class ControllerWatch(object):
    """A thread that calls ON_LOST(reason) once, when OUTPUT has no reader left or this
    process's parent is no longer PARENT; stop() ends it without a call."""

    def __init__(self, on_lost, output=None, parent=None, interval=INTERVAL):
        self.on_lost = on_lost
        self.output = output if output is not None and can_lose_reader(output) else None
        self.parent = parent
        self.interval = interval
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        """End the watch; once this returns, nothing more is written to OUTPUT."""
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass
        if self._thread.is_alive():
            self._thread.join()
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

    def _check(self):
        """(stopped, reason): waits up to INTERVAL; REASON says why the controller is gone."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        if self.output is not None:
            poller.register(self.output, 0)  # POLLERR, POLLHUP and POLLNVAL come unasked
        events = dict(poller.poll(self.interval * 1000))
        if self._wake_read in events:
            return True, None
        if events.get(self.output, 0) & GONE:
            return False, OUTPUT_GONE
        if self.parent is not None and os.getppid() != self.parent:
            return False, "ansible-playbook (process %d) is gone" % self.parent
        if self.output is not None:
            try:
                os.write(self.output, HEARTBEAT)
            except OSError:  # EPIPE: the reader went between poll() and now
                return False, OUTPUT_GONE
        return False, None

    def _run(self):
        while True:
            stopped, reason = self._check()
            if stopped:
                return
            if reason is not None:
                self.on_lost(reason)
                return
