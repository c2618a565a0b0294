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
  CONNECT itself: that reset is the path closed, an answer. Each round's CONNECTs count
  against that budget (some 100 bytes each);
- through the gate, when the policy allows a name (GatePlan.sni_canary: an allowed name
  on a CONNECT port), a CONNECT to that name whose ClientHello (the host Python's own,
  made without a socket) names CANARY_NAME instead: the gate answers the CONNECT (200, or
  403 where the name resolves to a refused address) and then closes the tunnel without a
  byte from any server (its ClientHello check refuses a server name other than the
  CONNECT name before any server is contacted); bytes back mean a server answered, so
  the ClientHello was relayed. A tunnel that neither ends nor answers in
  GATE_SILENT_ROUNDS rounds in a row is lost too; a CONNECT the gate has not answered
  yet (it may be resolving the name) sent no ClientHello, and is not judged.

Nothing a probe sends can reach anything real while the gate enforces: the addresses
are documentation ranges no network routes, the name cannot resolve, and the mismatched
ClientHello never leaves the gate (a gate that relayed it sent it to the allowed name's
server, which the agent may reach anyway, and the round fails). A failed probe calls
on_lost once, naming the probe and what it saw. The gate logs each CONNECT (CANARY_NAME,
and the allowed name's, refused).
"""

from __future__ import annotations

import json
import os
import select
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import kill_unreaped

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
import errno, json, socket, ssl, sys
V4, V6, NAME, PORT = %r, %r, %r, %d
def hello():
    # A ClientHello naming NAME, as the Python's TLS makes it, without a socket; one key
    # share (OpenSSL 3.5 adds a post-quantum one, 1561 bytes in all against 517, every
    # round spent from the session's upload budget): the gate reads its server name only.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_ecdh_curve("prime256v1")
    outgoing = ssl.MemoryBIO()
    try:
        context.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname=NAME).do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()
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
def read_until(s, end):
    data = b""
    while end not in data and len(data) < 4096:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data
def gate(address, port, target="%%s:443" %% NAME, client_hello=None):
    # With a ClientHello, no status yet is the gate's slowness (an allowed name resolved),
    # not a relay: nothing has been sent through it.
    unanswered = "no status: " if client_hello else "no answer: "
    try:
        s = socket.create_connection((address, port), timeout=5.0)
    except OSError as error:
        return unanswered + why(error)
    try:
        s.sendall(("CONNECT %%s HTTP/1.1\r\nHost: %%s\r\n\r\n" %% (target, target)).encode())
        data = read_until(s, b"\r\n\r\n" if client_hello else b"\r\n")
    except OSError as error:
        s.close()
        return unanswered + why(error)
    try:
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        code = line.split()[1] if line.startswith("HTTP/") and len(line.split()) > 1 else None
        if code is None:
            return unanswered + repr(line[:80])
        if code != "200" or client_hello is None:
            return code
        s.sendall(client_hello)
        # The tunnel's end with nothing through it is the refusal; a server's bytes are not.
        try:
            back = s.recv(4096)
        except ConnectionResetError:
            back = b""
        return "refused" if not back else "answered: %%d bytes" %% len(back)
    except OSError as error:
        return "no answer: " + why(error)
    finally:
        s.close()
CLIENT_HELLO = hello() if len(sys.argv) > 3 else None
for _request in sys.stdin:
    seen = {"tcp4": tcp(socket.AF_INET, V4), "tcp6": tcp(socket.AF_INET6, V6),
            "udp4": udp(socket.AF_INET, V4), "udp6": udp(socket.AF_INET6, V6)}
    if sys.argv[1] != "-":
        seen["gate"] = gate(sys.argv[1], int(sys.argv[2]))
    if CLIENT_HELLO is not None:
        seen["sni"] = gate(sys.argv[1], int(sys.argv[2]), sys.argv[3], CLIENT_HELLO)
    print(json.dumps(seen), flush=True)
""" % (V4, V6, CANARY_NAME, TCP_PORT)
# What each probe is, for the record.
PROBES = {
    "tcp4": "a direct TCP connection to %s port %d" % (V4, TCP_PORT),
    "tcp6": "a direct TCP connection to %s port %d" % (V6, TCP_PORT),
    "udp4": "a UDP datagram to %s port 53" % V4,
    "udp6": "a UDP datagram to %s port 53" % V6,
    "gate": "a CONNECT to %s (on no list) through the gate" % CANARY_NAME,
    "sni": "a CONNECT to an allowed name through the gate whose ClientHello names %s" % CANARY_NAME,
}
# What the mismatched ClientHello's probe may see: the tunnel closed with nothing through
# it, or the CONNECT refused. "no status: ..." (no answer to its CONNECT, so no ClientHello
# sent) is not judged: the gate may take long to resolve an allowed name, and the gate's
# own probe judges its silence.
SNI_REFUSED = ("refused", "403")
SNI_UNSENT = "no status: "


def probe_argv(python, gate, sni=None):
    """The probes' command (run in the sandbox's namespaces): PYTHON (the host's) on
    PROBE_CODE; GATE: (address, port) or None; SNI: (allowed name, port) the mismatched
    ClientHello's CONNECT goes to, or None (no gate, or no name allowed)."""
    argv = [python, "-I", "-S", "-c", PROBE_CODE] + ([gate[0], str(int(gate[1]))] if gate else ["-", "-"])
    return argv + (["%s:%d" % (sni[0], int(sni[1]))] if gate and sni else [])


def judged(policy_text):
    """The probes a session with POLICY_TEXT judges: not a TCP probe its policy pins."""
    pinned = dict((probe, _ruleset.lets_through(policy_text, address, TCP_PORT))
                  for probe, address in (("tcp4", V4), ("tcp6", V6)))
    return tuple(probe for probe in ("tcp4", "tcp6", "udp4", "udp6") if not pinned.get(probe))


def verdict(seen, judged_probes, silent, sni_silent=0, spent=False):
    """(failed probe, what it saw) of one round SEEN ({probe: outcome}, or None when no
    round came), or None when each probe saw what it should. JUDGED_PROBES: the direct
    probes judged (judged()). SILENT: rounds in a row, this one included, in which the
    gate (or the helper) did not answer; SNI_SILENT: in which the mismatched ClientHello's
    tunnel did not end. SPENT: the gate's upload budget is spent, so a reset (RESET) is
    the table's refusal."""
    if seen is None:
        return ("canaries", "no round answered in %d rounds" % silent) if silent >= GATE_SILENT_ROUNDS else None
    for probe in judged_probes:
        if seen.get(probe) in LEAKED:
            return probe, seen.get(probe)
    for probe, refused, rounds in (("gate", ("403",), silent), ("sni", SNI_REFUSED, sni_silent)):
        answer = seen.get(probe)
        if answer is None or answer in refused or answer.startswith(SNI_UNSENT) or (spent and answer in RESET):
            continue
        if not answer.startswith("no answer") or rounds >= GATE_SILENT_ROUNDS:
            return probe, answer
    return None


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
        self.sni_silent = 0
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
        """End the rounds. The helper is killed (the session is over: a round it is in may
        wait seconds on a dropped probe), which ends the thread's wait for its answer; the
        watch reaps it (_enforcement_watch._end), for its CPU time."""
        self._stopping.set()
        kill_unreaped(self.process)
        if self._thread is not None:
            self._thread.join(timeout)

    def report(self):
        return {"interval_s": self.interval,
                "probes": dict((p, PROBES[p]) for p in self.judged + ("gate",) + (("sni",) if self._sni() else ())),
                "rounds": self.rounds, "gate_answered": self.gate_answered, "last": self.last,
                "failed": self.failed, "cpu_s": self.cpu_s}

    def _run(self):
        started_cpu = time.thread_time()
        try:
            pending = False
            while not self._stopping.is_set() and self.failed is None:
                asked = time.monotonic()
                # One round asked at a time: a late answer is the pending round's, never
                # taken for a later one's, and a slow helper gets no backlog of rounds.
                if not pending:
                    self.process.stdin.write(b"round\n")
                    self.process.stdin.flush()
                line = self._answer(asked + self.round_timeout)
                pending = line is None
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
        # The mismatched ClientHello's probe: counted once the gate has answered, as the gate's.
        sni = str(seen.get("sni", "")) if seen is not None else ""
        sni_silent = sni.startswith("no answer") and not (spent and sni in RESET) and self.gate_answered
        self.sni_silent = self.sni_silent + 1 if sni_silent else 0
        failed = verdict(seen, self.judged, self.silent, self.sni_silent, spent)
        # Silence once the sandbox has gone (its pasta, and the way to the gate, with it) is its end.
        if failed is None or ((seen is None or failed[1].startswith("no answer")) and self.sandbox_gone()):
            return
        self._fail(*failed)

    def _sni(self):
        """Whether the probes include the mismatched ClientHello's (the last round's say)."""
        return self.last is not None and "sni" in self.last

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
