# SPDX-License-Identifier: GPL-3.0-or-later
"""Interactive sessions on a real terminal: tmux inside the workstation, read the way the
person at it would see it."""

import time

from scenario import operator_vars
from sessions import PROJECT

WIDTH, HEIGHT = 100, 30


def interactive_bash(ws):
    """The shell command line of run_agent.yml with an interactive bash as the harness."""
    return (f"ansible-playbook aisb.sandbox.run_agent -e {operator_vars(ws)} -e project={PROJECT} "
            "-e '{\"command\": [\"bash\", \"--norc\", \"-i\"], \"interactive\": true}'")


def open_terminal(ws, name, shell_command):
    """A detached tmux session NAME of WIDTH x HEIGHT running SHELL_COMMAND."""
    ws.run(["tmux", "new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), shell_command],
           env={"ANSIBLE_NOCOLOR": "1"})


def screen(ws, name):
    """What the terminal of tmux session NAME shows now."""
    return ws.run(["tmux", "capture-pane", "-p", "-t", name]).stdout


def wait_for_screen(ws, name, text, timeout=60):
    """The screen of NAME once it shows TEXT."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(ws, name)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared on the terminal:\n{screen(ws, name)}")


def type_keys(ws, name, *keys):
    """Send KEYS to the terminal of tmux session NAME, as typed."""
    ws.run(["tmux", "send-keys", "-t", name, *keys])


def interrupt_a_foreground_command(ws, name):
    """Ctrl-C on a `sleep 100` at the harness's shell in NAME; returns once the shell
    answers again (the interrupt reached its foreground command, not the session)."""
    type_keys(ws, name, "sleep 100", "Enter")
    time.sleep(1)
    type_keys(ws, name, "C-c")
    type_keys(ws, name, "echo still-$((1+1))-here", "Enter")
    wait_for_screen(ws, name, "still-2-here")
