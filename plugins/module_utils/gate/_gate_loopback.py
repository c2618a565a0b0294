# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's port on the host's loopback: one free to bind, and the wait until it answers.

GATE_READY_TIMEOUT is also the entrypoint's GATE_WAIT (roles/image/files/entrypoint.sh):
tests/unit/test_enforcement_copies.py fails when the two drift.
"""

from __future__ import annotations

import socket
import time

GATE_READY_TIMEOUT = 15.0


def free_loopback_port():
    """A port nothing listens on right now (the gate's bind is the real test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gate_answers(port, still_running=lambda: True, timeout=GATE_READY_TIMEOUT):
    """True once something accepts on 127.0.0.1:PORT; False after TIMEOUT seconds, or
    as soon as STILL_RUNNING() says the gate exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            if not still_running():
                return False
            time.sleep(0.05)
    return False
