# SPDX-License-Identifier: GPL-3.0-or-later
"""The canaries (_canaries): the verdict on a round (pure), the probes a policy judges,
and the loop over a stand-in helper (a real process answering each round with what the
test writes). The probes themselves run in a real sandbox's namespaces in
tests/integration/test_enforcement_watch.py."""

import io
import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.session import _canaries, _enforcement_watch

ALL = ("tcp4", "tcp6", "udp4", "udp6")
QUIET = {"tcp4": "timeout", "tcp6": "ENETUNREACH", "udp4": "EPERM", "udp6": "EPERM", "gate": "403"}


@pytest.mark.parametrize("seen, silent, failed", [
    (QUIET, 0, None),
    (dict(QUIET, gate="no answer: timeout"), 2, None),
    (dict(QUIET, gate="no answer: timeout"), 3, ("gate", "no answer: timeout")),
    (dict(QUIET, tcp4="connected"), 0, ("tcp4", "connected")),
    (dict(QUIET, tcp6="ECONNREFUSED"), 0, ("tcp6", "ECONNREFUSED")),
    (dict(QUIET, udp4="sent"), 0, ("udp4", "sent")),
    (dict(QUIET, gate="200"), 0, ("gate", "200")),
    (dict(QUIET, gate="503"), 0, ("gate", "503")),
    ({k: v for k, v in QUIET.items() if k != "gate"}, 0, None),
    (None, 2, None),
    (None, 3, ("canaries", "no round answered in 3 rounds")),
], ids=["quiet", "gate-silent-twice", "gate-silent-thrice", "tcp4-connected", "tcp6-refused-by-pasta",
        "udp4-sent", "gate-relayed", "gate-tried-to-resolve", "no-gate", "no-round-twice", "no-round-thrice"])
def test_a_round_fails_on_a_probe_that_got_out_or_a_gate_that_did_not_refuse(seen, silent, failed):
    assert _canaries.verdict(seen, ALL, silent) == failed


def test_a_tcp_probe_the_policy_pins_is_not_judged():
    gate = "gate 100.64.0.1 41234\n"
    assert _canaries.judged(gate) == ALL
    assert _canaries.judged(gate + "pin 198.51.100.0/24 %d\n" % _canaries.TCP_PORT) == ("tcp6", "udp4", "udp6")
    assert _canaries.judged(gate + "pin 2001:db8::/32 %d\npin 198.51.100.1 443\n" % _canaries.TCP_PORT) == (
        "tcp4", "udp4", "udp6")
    assert _canaries.verdict(dict(QUIET, tcp4="connected"), ("tcp6", "udp4", "udp6"), 0) is None


def test_the_probes_are_python_run_isolated_with_the_gate_as_arguments():
    compile(_canaries.PROBE_CODE, "probes", "exec")
    assert _canaries.probe_argv("/usr/bin/python3", ("100.64.0.1", 41234)) == [
        "/usr/bin/python3", "-I", "-S", "-c", _canaries.PROBE_CODE, "100.64.0.1", "41234"]
    assert _canaries.probe_argv("/usr/bin/python3", None)[-2:] == ["-", "-"]


class Helper:
    """A stand-in helper: answers each line with the next of ANSWERS (a file's lines; the
    last one again when they run out), or with nothing when it is 'silent'."""

    def __init__(self, tmp_path, *answers):
        self.answers = tmp_path / "answers"
        self.set(*answers)
        self.ready = tmp_path / "ready"
        script = ("import sys, time\n"
                  "open(%r, 'w').close()\n"
                  "for _ in sys.stdin:\n"
                  "    lines = open(%r).read().splitlines()\n"
                  "    if lines[0] == 'exit': sys.exit(1)\n"
                  "    if lines[0] != 'silent': print(lines[0], flush=True)\n" % (str(self.ready), str(self.answers)))
        self.process = subprocess.Popen(["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lost = []
        self.called = threading.Event()

    def set(self, *answers):
        # Renamed over the old one: the helper never reads a file half written (and dies of it).
        new = self.answers.with_suffix(".new")
        new.write_text("".join((a if isinstance(a, str) else json.dumps(a)) + "\n" for a in answers))
        new.rename(self.answers)

    def on_lost(self, what, now, change):
        self.lost.append((what, now, change))
        self.called.set()

    def canaries(self, judged=ALL, round_timeout=5.0, sandbox_gone=lambda: False):
        # Generous: a loaded machine must not make a late answer look like a silent round.
        canaries = _canaries.Canaries(self.process, judged, self.on_lost, interval=0.05, round_timeout=round_timeout,
                                      sandbox_gone=sandbox_gone)
        canaries.start()
        return canaries

    def end(self):
        self.process.stdin.close()
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()


@pytest.fixture
def helper(tmp_path):
    made = []

    def make(*answers):
        made.append(Helper(tmp_path, *answers))
        return made[-1]
    yield make
    for one in made:
        one.end()


def wait_for(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.01)
    return condition()


def test_quiet_rounds_are_kept_and_nothing_is_lost(helper):
    stand = helper(QUIET)
    canaries = stand.canaries()
    assert wait_for(lambda: canaries.rounds >= 5)
    canaries.stop()
    report = canaries.report()
    assert stand.lost == [] and report["failed"] is None and report["last"] == QUIET and report["gate_answered"]
    assert set(report["probes"]) == set(ALL) | {"gate"} and report["cpu_s"] >= 0


def test_a_probe_that_got_out_is_lost_naming_it_and_what_it_saw(helper):
    stand = helper(QUIET)
    canaries = stand.canaries()
    assert wait_for(lambda: canaries.rounds >= 2)
    stand.set(dict(QUIET, udp6="sent"))
    assert stand.called.wait(10)
    canaries.stop()
    what, _now, change = stand.lost[0]
    assert what == "a canary failed: a UDP datagram to 2001:db8::1 port 53 saw sent"
    assert change == {"added": ["canary udp6: sent"]} and canaries.report()["failed"]["probe"] == "udp6"
    assert len(stand.lost) == 1


def test_a_gate_silent_before_its_first_answer_is_not_lost_and_after_it_is(helper):
    silent = dict(QUIET, gate="no answer: ECONNREFUSED")
    stand = helper(silent)
    canaries = stand.canaries()
    # The entrypoint waits for the gate meanwhile: silence before its first answer is no loss.
    assert wait_for(lambda: canaries.rounds >= 10)
    assert stand.lost == []
    stand.set(QUIET)
    assert wait_for(lambda: canaries.gate_answered)
    stand.set(silent)
    assert stand.called.wait(10)
    canaries.stop()
    assert stand.lost[0][0] == ("a canary failed: a CONNECT to aisb-canary.invalid (on no list) through the gate "
                                "saw no answer: ECONNREFUSED")


def test_rounds_that_never_come_are_lost_after_as_many_as_a_silent_gate(helper):
    stand = helper("silent")
    canaries = stand.canaries(round_timeout=0.2)
    assert stand.called.wait(10)
    canaries.stop()
    assert stand.lost[0][0] == "the canaries failed: no round answered in %d rounds" % (
        _canaries.GATE_SILENT_ROUNDS)


def test_a_helper_that_exits_is_lost_and_a_stop_is_not(helper):
    stand = helper("exit")
    canaries = stand.canaries()
    assert stand.called.wait(10)
    canaries.stop()
    assert stand.lost[0][0] == "the canaries failed: the probes failed: the probes' helper exited"
    steady = helper(QUIET)
    canaries = steady.canaries()
    assert wait_for(lambda: canaries.rounds >= 1)
    canaries.stop()
    assert steady.lost == []


def test_a_helper_that_ends_with_its_sandbox_is_not_lost(helper):
    """Was a false loss: a session whose harness exits at once (command true) ended
    enforcement-lost, the helper gone with the sandbox's namespaces before its first round
    (Broken pipe). Its end once the sandbox has gone is the session's end."""
    stand = helper("exit")
    canaries = stand.canaries(sandbox_gone=lambda: True)
    assert wait_for(lambda: canaries.cpu_s is not None)
    canaries.stop()
    assert stand.lost == []


def test_a_process_killed_and_not_yet_reaped_is_not_alive():
    """Was a false loss: a sandbox killed from outside (podman kill) left a zombie for a
    moment, taken for alive, while its pasta and helpers ended: the session said
    enforcement-lost (77) instead of the sandbox's own 137."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert _enforcement_watch._alive(child.pid)
        child.kill()
        assert wait_for(lambda: not _enforcement_watch._alive(child.pid))
        assert os.path.exists("/proc/%d" % child.pid)  # a zombie until waited for
    finally:
        child.wait()
    assert not _enforcement_watch._alive(child.pid)


def test_silence_once_the_sandbox_has_gone_is_not_lost_and_a_leak_is(helper):
    """Was a false loss in waiting: a sandbox ending slowly (podman's cleanup on a loaded
    machine) takes its pasta, and the way to the gate, with it: rounds of silence then
    are its end. What got out is lost whenever it is seen."""
    stand = helper(QUIET)
    gone = threading.Event()
    # Started: a short round timeout must not count its start as silence.
    assert wait_for(stand.ready.exists)
    canaries = stand.canaries(round_timeout=0.3, sandbox_gone=gone.is_set)
    assert wait_for(lambda: canaries.gate_answered)
    gone.set()
    stand.set("silent")
    assert wait_for(lambda: canaries.silent >= _canaries.GATE_SILENT_ROUNDS + 2, timeout=30)
    canaries.stop()
    assert stand.lost == []
    leaky = helper(dict(QUIET, tcp4="connected"))
    canaries = leaky.canaries(sandbox_gone=lambda: True)
    assert leaky.called.wait(10)
    canaries.stop()
    assert [what for what, _now, _change in leaky.lost] == [
        "a canary failed: a direct TCP connection to 198.51.100.1 port 9 saw connected"]


def test_a_slow_helper_is_asked_one_round_at_a_time(tmp_path, monkeypatch):
    """Was a backlog under load: a round answered after its timeout left the next request
    queued behind it, and each answer judged was an older round's. One round is asked at
    a time: a late answer is the pending round's."""
    asked, release = tmp_path / "asked", tmp_path / "release"
    # It counts every request as it comes, and answers them in turn once released.
    script = ("import json, os, sys, threading, time\n"
              "count = [0]\n"
              "def read():\n"
              "    for _ in sys.stdin:\n"
              "        count[0] += 1\n"
              "        open(%r, 'w').write(str(count[0]))\n"
              "threading.Thread(target=read, daemon=True).start()\n"
              "answered = 0\n"
              "while True:\n"
              "    if os.path.exists(%r) and answered < count[0]:\n"
              "        answered += 1\n"
              "        print(json.dumps(dict(%r, round=answered)), flush=True)\n"
              "    time.sleep(0.01)\n" % (str(asked), str(release), QUIET))
    process = subprocess.Popen(["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # Silence is not what this test is about.
    monkeypatch.setattr(_canaries, "GATE_SILENT_ROUNDS", 1000)
    lost = []
    try:
        canaries = _canaries.Canaries(process, ALL, lambda *args: lost.append(args), interval=0.02,
                                      round_timeout=0.05)
        canaries.start()
        assert wait_for(lambda: asked.exists() and canaries.silent >= 5)
        assert asked.read_text() == "1"
        release.write_text("")
        assert wait_for(lambda: canaries.rounds >= 3)
        canaries.stop()
        assert canaries.last["round"] == canaries.rounds and lost == []
    finally:
        process.stdin.close()
        process.kill()
        process.wait()
        process.stdout.close()


@pytest.mark.parametrize("seen, sni_silent, failed", [
    (dict(QUIET, sni="refused"), 0, None),
    (dict(QUIET, sni="403"), 0, None),
    (dict(QUIET, sni="answered: 1852 bytes"), 0, ("sni", "answered: 1852 bytes")),
    (dict(QUIET, sni="200"), 0, ("sni", "200")),
    (dict(QUIET, sni="no answer: timeout"), 2, None),
    (dict(QUIET, sni="no answer: timeout"), 3, ("sni", "no answer: timeout")),
    (dict(QUIET, sni="no status: timeout"), 3, None),
], ids=["refused", "connect-refused", "relayed", "no-tunnel", "silent-twice", "silent-thrice", "connect-unanswered"])
def test_the_mismatched_client_hello_fails_when_a_server_answered_through_the_tunnel(seen, sni_silent, failed):
    assert _canaries.verdict(seen, ALL, 0, sni_silent) == failed


def fake_gate(answer):
    """A gate on this machine's loopback that answers one CONNECT with ANSWER (a status
    line), then, for 200, reads the ClientHello and closes (refuses) or sends bytes back
    (relays, as a server would): (port, what it read, its thread)."""
    server = socket.create_server(("127.0.0.1", 0))
    read = []

    def serve():
        client = server.accept()[0]
        with client, server:
            request = b""
            while b"\r\n\r\n" not in request:
                request += client.recv(4096)
            read.append(request)
            if not answer[0]:  # no status: the connection closed
                return
            client.sendall(("HTTP/1.1 %s\r\n\r\n" % answer[0]).encode())
            if answer[0].startswith("200"):
                read.append(client.recv(65536))
                if answer[1]:
                    client.sendall(b"\x16\x03\x03\x00\x02ok")
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], read, thread


@pytest.mark.parametrize("answer, saw", [
    (("200 Connection established", False), "refused"),
    (("200 Connection established", True), "answered: 7 bytes"),
    (("403 Forbidden", False), "403"),
    (("", False), "no status: ''"),
], ids=["refused", "relayed", "connect-refused", "connect-unanswered"])
def test_the_probe_connects_to_the_allowed_name_with_a_client_hello_naming_the_canary(monkeypatch, answer, saw):
    """The probe's own code (its functions, not its loop: no round asked) against a
    stand-in gate: what it says for each answer, and what it sent."""
    monkeypatch.setattr("sys.argv", ["probes", "127.0.0.1", "1", "allowed.test:443"])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    probes = {}
    exec(compile(_canaries.PROBE_CODE, "probes", "exec"), probes)  # pylint: disable=exec-used
    port, read, thread = fake_gate(answer)
    assert probes["gate"]("127.0.0.1", port, "allowed.test:443", probes["CLIENT_HELLO"]) == saw
    thread.join(10)
    assert read[0].startswith(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n")
    if answer[0].startswith("200"):
        # A TLS handshake record holding a ClientHello, its server name the canary's.
        assert read[1][:1] == b"\x16" and read[1][5:6] == b"\x01"
        assert _canaries.CANARY_NAME.encode() in read[1] and b"allowed.test" not in read[1]


def test_the_probes_get_the_allowed_name_only_with_a_gate():
    assert _canaries.probe_argv("/usr/bin/python3", ("100.64.0.1", 41234), ("api.example.com", 443))[-3:] == [
        "100.64.0.1", "41234", "api.example.com:443"]
    assert _canaries.probe_argv("/usr/bin/python3", None, ("api.example.com", 443))[-2:] == ["-", "-"]


def test_a_reset_from_the_gate_is_the_table_s_refusal_once_its_upload_budget_is_spent():
    reset = dict(QUIET, gate="no answer: ECONNRESET")
    assert _canaries.verdict(reset, ALL, 1, spent=True) is None
    assert _canaries.verdict(reset, ALL, 3, spent=True) is None
    # Not spent: silence, lost after GATE_SILENT_ROUNDS rounds.
    assert _canaries.verdict(reset, ALL, 3) == ("gate", "no answer: ECONNRESET")
    # Spent or not, a gate that relays the canary's CONNECT is lost at once.
    assert _canaries.verdict(dict(QUIET, gate="200"), ALL, 0, spent=True) == ("gate", "200")


def test_a_first_process_whose_namespaces_are_gone_is_not_alive():
    """Was a false loss (CI, review mode): the sandbox's first process, exiting, had let go
    of its namespaces and sat in its exit for seconds (unmounting the project's overlay
    synced the host's filesystem) without being a zombie yet; the watch, finding no
    network to read for 4 s, said enforcement-lost. Here a PID namespace's first process
    is held in its exit the same way (a member of its namespace whose parent, outside,
    is stopped and does not reap it)."""
    held = [_held_in_its_exit() for _attempt in range(3)]
    # The hold is the test's scaffolding (once in some 25 runs of this file the first process
    # ended at once): one of three attempts must hold it; each that did is judged.
    assert any(alive is not None for alive in held), "no attempt held a first process in its exit"
    assert [alive for alive in held if alive is not None] == [False] * sum(alive is not None for alive in held)


def _held_in_its_exit():
    """_alive of a PID namespace's first process held in its exit (alive before), or None
    when it could not be held there."""
    holder = subprocess.Popen(["unshare", "--user", "--pid", "--fork", "sleep", "30"], stderr=subprocess.DEVNULL)
    assert wait_for(lambda: _children(holder.pid))
    first = _children(holder.pid)[0]
    member = subprocess.Popen(["nsenter", "--target", str(first), "--user", "--pid", "--preserve-credentials",
                               "sleep", "30"])
    try:
        assert wait_for(lambda: _children(member.pid))
        os.kill(member.pid, signal.SIGSTOP)  # its child, killed with the namespace, stays unreaped
        assert _enforcement_watch._alive(first)
        os.kill(first, signal.SIGKILL)
        assert wait_for(lambda: not os.path.exists("/proc/%d/ns/net" % first))
        if not os.path.exists("/proc/%d/stat" % first):
            return None
        return _enforcement_watch._alive(first)
    finally:
        os.kill(member.pid, signal.SIGCONT)
        member.wait()
        holder.wait()


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []
