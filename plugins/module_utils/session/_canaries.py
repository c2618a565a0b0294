# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Canaries on the sandbox's data path for the whole session: its one job.

The enforcement watch reads what the kernel holds; the canaries try what the agent
would. A helper in the sandbox's user and network namespaces (_podman.netns_helper:
entered from the host, in no process the agent can see or signal) runs PROBE_CODE with
the session's own Python: for each line the session writes to it, one round of probes
and one line of JSON with what each saw. verdict() judges a round (pure):

- direct TCP to a documentation address, IPv4 and IPv6 (198.51.100.1, 2001:db8::1, port
  TCP_PORT): the table drops it (a timeout, EPERM, no route); connected or refused
  means the SYN left the sandbox and pasta answered (a policy that pins that address
  and port lets it through: that probe is not judged);
- UDP to port 53 of those addresses: the kernel refuses to send it (EPERM); sent means
  it passed the table;
- through the gate (when the session has one), a CONNECT to a name no policy can list
  (CANARY_NAME, a reserved .invalid name): the gate answers 403; anything else (200, a
  503 from a gate that tried to resolve it) means it did not refuse it. No answer from
  the gate in GATE_SILENT_ROUNDS rounds in a row, once it has answered (until then the
  entrypoint waits for it, and ends the session when it never does), is lost too:
  nothing proves it refuses; and so is no round answered at all in as many. Once the
  gate's upload budget is spent (the sandbox's quota, _ruleset) the table resets the
  CONNECT itself: that reset is the path closed, an answer. Each round's CONNECT counts
  against that budget (some 100 bytes).

Nothing a probe sends can reach anything real: the addresses are documentation ranges
no network routes, the name cannot resolve. A failed probe calls on_lost once, naming
the probe and what it saw. The gate logs each CONNECT (CANARY_NAME, refused).
"""

from __future__ import annotations

import json
import os
import select
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset

# Seconds between two rounds.
INTERVAL = 5.0
# Rounds in a row without an answer from the gate before it counts as lost.
GATE_SILENT_ROUNDS = 3
# A round's answer that has not come this long after it was asked is a silent round.
ROUND_TIMEOUT = 10.0
CANARY_NAME = "aisb-canary.invalid"
V4, V6 = "198.51.100.1", "2001:db8::1"
TCP_PORT = 9
# What the gate probe sees when the table resets its CONNECT (a spent upload budget).
RESET = ("no answer: ECONNRESET", "no answer: EPIPE")
# What a direct probe sees when what it sent left the sandbox (any error else, a
# timeout, EPERM, no route, no IPv6, is the table or the network refusing it).
LEAKED = ("connected", "ECONNREFUSED", "ECONNRESET", "sent")
# The probes, run by the host's Python in the sandbox's namespaces (isolated mode: no
# site, no environment). argv: the gate's address and port, or "-" "-".
PROBE_CODE = r"""
import errno, json, socket, sys
V4, V6, NAME, PORT = %r, %r, %r, %d
def why(error):
    return "timeout" if isinstance(error, socket.timeout) else errno.errorcode.get(error.errno, str(error.errno))
def tcp(family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect((address, PORT))
        return "connected"
    except OSError as error:
        return why(error)
def udp(family, address):
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(b"\0" * 12, (address, 53))
        return "sent"
    except OSError as error:
        return why(error)
def gate(address, port):
    try:
        s = socket.create_connection((address, port), timeout=5.0)
    except OSError as error:
        return "no answer: " + why(error)
    try:
        s.sendall(("CONNECT %%s:443 HTTP/1.1\r\nHost: %%s:443\r\n\r\n" %% (NAME, NAME)).encode())
        data = b""
        while b"\r\n" not in data and len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as error:
        return "no answer: " + why(error)
    finally:
        s.close()
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    return line.split()[1] if line.startswith("HTTP/") and len(line.split()) > 1 else "no answer: " + repr(line[:80])
for _request in sys.stdin:
    seen = {"tcp4": tcp(socket.AF_INET, V4), "tcp6": tcp(socket.AF_INET6, V6),
            "udp4": udp(socket.AF_INET, V4), "udp6": udp(socket.AF_INET6, V6)}
    if sys.argv[1] != "-":
        seen["gate"] = gate(sys.argv[1], int(sys.argv[2]))
    print(json.dumps(seen), flush=True)
""" % (V4, V6, CANARY_NAME, TCP_PORT)
# What each probe is, for the record.
PROBES = {
    "tcp4": "a direct TCP connection to %s port %d" % (V4, TCP_PORT),
    "tcp6": "a direct TCP connection to %s port %d" % (V6, TCP_PORT),
    "udp4": "a UDP datagram to %s port 53" % V4,
    "udp6": "a UDP datagram to %s port 53" % V6,
    "gate": "a CONNECT to %s (on no list) through the gate" % CANARY_NAME,
}


def probe_argv(python, gate):
    """The probes' command (run in the sandbox's namespaces): PYTHON (the session's own)
    on PROBE_CODE; GATE: (address, port) or None."""
    return [python, "-I", "-S", "-c", PROBE_CODE] + ([gate[0], str(int(gate[1]))] if gate else ["-", "-"])


def judged(policy_text):
    """The probes a session with POLICY_TEXT judges: not a TCP probe its policy pins."""
    pinned = dict((probe, _ruleset.lets_through(policy_text, address, TCP_PORT))
                  for probe, address in (("tcp4", V4), ("tcp6", V6)))
    return tuple(probe for probe in ("tcp4", "tcp6", "udp4", "udp6") if not pinned.get(probe))


def verdict(seen, judged_probes, silent, spent=False):
    """(failed probe, what it saw) of one round SEEN ({probe: outcome}, or None when no
    round came), or None when each probe saw what it should. JUDGED_PROBES: the direct
    probes judged (judged()). SILENT: rounds in a row, this one included, in which the
    gate (or the helper) did not answer. SPENT: the gate's upload budget is spent, so a
    reset (RESET) is the table's refusal."""
    if seen is None:
        return ("canaries", "no round answered in %d rounds" % silent) if silent >= GATE_SILENT_ROUNDS else None
    for probe in judged_probes:
        if seen.get(probe) in LEAKED:
            return probe, seen.get(probe)
    answer = seen.get("gate")
    if answer is None or answer == "403" or (spent and answer in RESET):
        return None
    if answer.startswith("no answer"):
        return ("gate", answer) if silent >= GATE_SILENT_ROUNDS else None
    return "gate", answer


class Canaries(object):
    """One session's canaries over a started helper PROCESS (stdin and stdout pipes; the
    enforcement watch starts it, and ends it after stop())."""

    def __init__(self, process, judged_probes, on_lost, interval=INTERVAL, round_timeout=ROUND_TIMEOUT,
                 sandbox_gone=lambda: False, budget_spent=lambda: False):
        self.process = process
        self.judged = judged_probes
        self.on_lost = on_lost
        # The helper lives in the sandbox's namespaces and ends with them: its end once the
        # sandbox has gone (a harness that exits at once) is the session's end, not a loss.
        self.sandbox_gone = sandbox_gone
        # Whether the gate's upload budget is spent (the watch heard the kernel say so).
        self.budget_spent = budget_spent
        self.interval = interval
        self.round_timeout = round_timeout
        self.rounds = 0
        self.silent = 0
        self.gate_answered = False
        self.last = None
        self.failed = None
        self.cpu_s = None  # its thread's
        self._stopping = threading.Event()
        self._thread = None
        self._buffer = b""

    def start(self):
        self._thread = threading.Thread(target=self._run, name="aisb-canaries", daemon=True)
        self._thread.start()

    def stop(self, timeout=10.0):
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def report(self):
        return {"interval_s": self.interval, "probes": dict((p, PROBES[p]) for p in self.judged + ("gate",)),
                "rounds": self.rounds, "gate_answered": self.gate_answered, "last": self.last,
                "failed": self.failed, "cpu_s": self.cpu_s}

    def _run(self):
        started_cpu = time.thread_time()
        try:
            while not self._stopping.is_set() and self.failed is None:
                asked = time.monotonic()
                self.process.stdin.write(b"round\n")
                self.process.stdin.flush()
                line = self._answer(asked + self.round_timeout)
                if self._stopping.is_set():
                    return
                self._judge(json.loads(line) if line is not None else None)
                self._stopping.wait(max(0.0, asked + self.interval - time.monotonic()))
        except (OSError, ValueError) as error:
            if not self._stopping.is_set() and not self.sandbox_gone():
                self._fail("canaries", "the probes failed: %s" % (getattr(error, "strerror", None) or error))
        finally:
            self.cpu_s = round(time.thread_time() - started_cpu, 4)

    def _judge(self, seen):
        if seen is not None:
            self.rounds += 1
            self.last = seen
        spent = self.budget_spent()
        no_answer = seen is None or (str(seen.get("gate", "")).startswith("no answer")
                                     and not (spent and seen.get("gate") in RESET))
        self.gate_answered = self.gate_answered or not no_answer
        # Before the gate's first answer, only a round that never came counts as silent.
        self.silent = self.silent + 1 if no_answer and (self.gate_answered or seen is None) else 0
        failed = verdict(seen, self.judged, self.silent, spent)
        if failed is not None:
            self._fail(*failed)

    def _fail(self, probe, saw):
        now = time.time()
        self.failed = {"probe": probe, "saw": saw, "at": now, "at_text": format_time(now)}
        what = ("a canary failed: %s saw %s" % (PROBES[probe], saw)) if probe in PROBES else (
            "the canaries failed: %s" % saw)
        self.on_lost(what, now, {"added": ["canary %s: %s" % (probe, saw)]})

    def _answer(self, deadline):
        """One line of the helper's output, or None at DEADLINE (OSError at its end)."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._stopping.is_set():
                return None
            if not select.select([fd], [], [], min(remaining, 0.5))[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise OSError("the probes' helper exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")
