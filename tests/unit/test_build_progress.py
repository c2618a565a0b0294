# SPDX-License-Identifier: GPL-3.0-or-later
"""An image build's progress line: the step a build log reaches, shown printable and cut
to the terminal; a line per step off a terminal, one line rewritten on it."""

import os
import pty

from ansible_collections.aisb.sandbox.plugins.plugin_utils import _build_progress as progress

LOG = """STEP 1/9: FROM sha256:0f1e
STEP 2/9: RUN apt-get update -q
Get:1 http://deb.debian.org trixie InRelease
[2/2] STEP 4/9: RUN npm install -g @mariozechner/pi-coding-agent
added 250 packages in 40s
STEP 10 is not a step line
"""


def test_the_last_step_line_is_the_builds_step():
    assert progress.last_step(LOG.splitlines()) == "[2/2] STEP 4/9: RUN npm install -g @mariozechner/pi-coding-agent"
    assert progress.last_step(LOG.splitlines()[:2]) == "STEP 2/9: RUN apt-get update -q"
    assert progress.last_step(["Get:1 http://x", "  STEP 1/2: indented is no step"]) is None


def test_the_line_says_the_step_and_the_seconds_cut_to_the_width():
    assert progress.progress_line("STEP 4/9: RUN  npm\tinstall", 73.6) == "  STEP 4/9: RUN npm install (73 s)"
    assert progress.progress_line(None, 2) == "  starting (2 s)"
    cut = progress.progress_line("STEP 4/9: RUN " + "x" * 200, 5, width=40)
    assert len(cut) == 40 and cut.endswith("... (5 s)") and cut.startswith("  STEP 4/9: RUN xx")


def test_nothing_in_a_log_drives_the_terminal():
    # An escape sequence (a title change, a cursor move), C1 controls, a bidi override.
    hostile = "STEP 3/9: RUN echo \x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\r"
    line = progress.progress_line(hostile, 1)
    assert line == "  STEP 3/9: RUN echo ?]0;owned??[2J?31m?evil (1 s)"
    assert all(char.isprintable() for char in line)


class Shown(object):
    def __init__(self):
        self.calls = []

    def display(self, msg, stderr=False, newline=True):
        self.calls.append((msg, stderr, newline))


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_off_a_terminal_each_step_is_one_plain_line(tmp_path):
    log = tmp_path / "build.log"
    shown, clock = Shown(), Clock()
    follower = progress.Follower(str(log), shown, None, clock=clock)
    started = clock()
    follower._show(started)  # no log yet: nothing
    log.write_text("STEP 1/3: FROM sha256:0f1e\nSTEP 2/3: RUN ap")  # a line being written
    clock.now += 2
    follower._show(started)
    with open(log, "a") as handle:
        handle.write("t-get update\nGet:1 http://x\n")
    clock.now += 3
    follower._show(started)
    follower._show(started)  # the same step again: no line
    assert shown.calls == [("  STEP 1/3: FROM sha256:0f1e (2 s)", True, True),
                           ("  STEP 2/3: RUN apt-get update (5 s)", True, True)]


def test_on_a_terminal_one_line_is_rewritten_and_cleared_at_the_end(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("STEP 1/3: FROM sha256:0f1e\n")
    shown = Shown()
    controller, terminal = pty.openpty()
    try:
        with progress.Follower(str(log), shown, terminal, interval=0.01):
            pass
        assert shown.calls[0] == (progress.REWRITE + "  STEP 1/3: FROM sha256:0f1e (0 s)", True, False)
        assert shown.calls[-1] == (progress.REWRITE, True, False)
        # The follower closed its descriptor on the terminal.
        try:
            os.fstat(terminal)
            closed = False
        except OSError:
            closed = True
        assert closed
    finally:
        os.close(controller)


def test_only_a_terminal_on_the_parents_stderr_counts():
    assert progress.stderr_terminal(999999999) is None
    # Under pytest stderr is captured (a file or a pipe): no terminal.
    if not os.isatty(2):
        assert progress.stderr_terminal(os.getpid()) is None
