# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""An image build's progress while it runs: its current step, read from the build log
(podman build --logfile), and the seconds since it started, on ansible-playbook's stderr.

content_image's action plugin hands follow() to the build (_images.ensure's PROGRESS),
so only a build that runs shows anything: a warm run costs nothing. On a terminal one
line is rewritten in place every second; otherwise a plain line each time the step
changes. The log holds what the Containerfile and the build's commands print: every
character that could drive the terminal is shown as '?' (_terminal_text).

Pure: the step a log's lines reach, the shown text, the line. Side effects: Follower.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import termios
import threading
import time

from ansible_collections.aisb.sandbox.plugins.plugin_utils._terminal_text import printable

# podman's (buildah's) step lines: "STEP 4/9: RUN npm install ...", in a multi-stage
# build "[1/2] STEP 4/9: ...".
STEP = re.compile(r"\A(?:\[[0-9]+/[0-9]+\] )?STEP [0-9]+/[0-9]+: ")
# A terminal line is rewritten from its start, cleared to its end.
REWRITE = "\r\x1b[K"
INTERVAL = 1.0
# A step line's longest shown form off a terminal (a RUN step can be a whole script).
PLAIN_WIDTH = 160


def last_step(lines):
    """The last build step among LINES (text, without line ends), None when none is."""
    for line in reversed(lines):
        if STEP.match(line):
            return line
    return None


def progress_line(step, seconds, width=PLAIN_WIDTH):
    """The line shown for STEP (None: the build has not reached its first) after SECONDS,
    printable and at most WIDTH characters (its end cut off, marked '...')."""
    suffix = " (%d s)" % seconds
    text = "  " + printable(" ".join((step or "starting").split()))
    room = max(width - len(suffix), 8)
    if len(text) > room:
        text = text[:room - 3] + "..."
    return text + suffix


def stderr_terminal(parent_pid):
    """A descriptor on ansible-playbook's stderr (process PARENT_PID, the task worker's
    parent) when it is a terminal, else None. Opened without becoming this process's
    controlling terminal."""
    try:
        path = os.readlink("/proc/%d/fd/2" % parent_pid)
    except OSError:
        return None
    if not path.startswith("/dev/"):
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return None
    if os.isatty(fd):
        return fd
    os.close(fd)
    return None


def terminal_width(fd):
    """The columns of the terminal FD, 80 when it cannot be read."""
    try:
        columns = struct.unpack("hhhh", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))[1]
    except OSError:
        return 80
    return columns or 80


class Follower(object):
    """A context manager: while a build writes LOG, show its step through DISPLAY (an
    ansible Display: from a task worker it reaches ansible-playbook's stderr in order
    with the task's other output). TERMINAL: a descriptor on that stderr's terminal (the
    line is rewritten in place), or None (a line per step)."""

    def __init__(self, log, display, terminal, interval=INTERVAL, clock=time.monotonic):
        self.log, self.display, self.terminal, self.interval, self.clock = log, display, terminal, interval, clock
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.offset, self.partial, self.step, self.shown_step = 0, b"", None, None

    def _read(self):
        """The log's new complete lines since the last read."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]

    def _show(self, started):
        self.step = last_step(self._read()) or self.step
        seconds = self.clock() - started
        if self.terminal is not None:
            line = progress_line(self.step, seconds, terminal_width(self.terminal) - 1)
            self.display.display(REWRITE + line, stderr=True, newline=False)
        elif self.step is not None and self.step != self.shown_step:
            self.display.display(progress_line(self.step, seconds), stderr=True)
        self.shown_step = self.step

    def _run(self):
        started = self.clock()
        while True:
            self._show(started)
            if self.stopped.wait(self.interval):
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stopped.set()
        self.thread.join()
        if self.terminal is not None:
            # The next output starts on a clean line.
            self.display.display(REWRITE, stderr=True, newline=False)
            os.close(self.terminal)
        return False


def follower(display, parent_pid):
    """follow(LOG): the context manager _images.ensure enters around a build writing LOG."""
    def follow(log):
        return Follower(log, display, stderr_terminal(parent_pid))
    return follow
