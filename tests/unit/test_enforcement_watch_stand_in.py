# SPDX-License-Identifier: GPL-3.0-or-later
"""The enforcement watch with a stand-in for the sandbox: real helper processes, the
real loop and comparison; nsenter replaced by a script that only runs its command and
nft by one that, like nft --interactive, answers each line on its input (with what
`respond` prints: a file the test changes) and, like nft monitor, prints what the test
adds to its events file. The real thing runs in
tests/integration/test_enforcement_watch.py."""

import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _gate_state, _netns_state
from ansible_collections.aisb.sandbox.plugins.module_utils.session._enforcement_watch import EnforcementWatch, find_tools

from builders import RULES, budget_reading, reading

POLICY = "gate 100.64.0.1 41234\npin 198.18.0.0/24 443\npin 2001:db8::5 22\n"
INTERVAL = 0.1
# Generous: a loaded machine must not make a slow reading look like a lost table here.
STALE_AFTER = 1.5


class Stand:
    """A stand-in sandbox: its pid file, the ruleset 'nft' prints, and the watch's tools."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.pidfile = tmp_path / "sandbox.pid"
        self.pidfile.write_text("%d\n" % os.getpid())
        self.table = tmp_path / "ruleset.json"
        self.set(reading())
        nsenter = tmp_path / "nsenter"
        nsenter.write_text('#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n')
        nft = tmp_path / "nft"
        self.events = tmp_path / "events"
        self.events.write_text("")
        self.monitor = tmp_path / "monitor"
        self.monitor.write_text(f"exec tail -n +1 -f {self.events}\n")
        nft.write_text(f'#!/bin/sh\n[ "$1" = monitor ] && exec sh {self.monitor}\n'
                       f'while read -r _; do sh {tmp_path}/respond; done\n')
        self.respond = tmp_path / "respond"
        self.nft_says(f'cat {self.table}')
        for tool in (nsenter, nft):
            tool.chmod(0o755)
        self.tools = {"nsenter": str(nsenter), "setpriv": shutil.which("setpriv"), "nft": str(nft)}
        self.lost = []
        self.called = threading.Event()

    def set(self, ruleset):
        self.table.write_text(json.dumps(ruleset) + "\n")

    def nft_says(self, script):
        """What nft answers to each request from now on."""
        self.respond.write_text(script + "\n")

    def event(self, *lines):
        """What nft monitor prints next."""
        with open(self.events, "a") as handle:
            handle.write("".join(line + "\n" for line in lines))

    def on_lost(self, lost):
        self.lost.append(lost)
        self.called.set()

    def watch(self, policy=POLICY, seccomp=None, reported=None, interval=INTERVAL, gate=None, canaries=False):
        watch = EnforcementWatch(str(self.pidfile), policy, self.tools, self.on_lost, interval=interval,
                                 stale_after=max(STALE_AFTER, 2 * interval), seccomp=seccomp, reported=reported,
                                 gate=gate, canaries=canaries)
        watch.start()
        return watch


@pytest.fixture
def stand(tmp_path):
    return Stand(tmp_path)


def wait_for(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.01)
    return condition()


def helper_running(watch):
    process = watch._process  # pylint: disable=protected-access
    return process is not None and process.returncode is None


def test_a_steady_table_is_read_again_and_again_and_never_lost(stand):
    watch = stand.watch()
    assert wait_for(lambda: watch.readings >= 5)
    process, monitor = watch._process, watch._monitor  # pylint: disable=protected-access
    watch.stop()
    report = watch.report()
    assert stand.lost == [] and report["lost"] is None
    assert report["readings"] >= 5 and report["table"] == sorted(report["table"]) and len(report["table"]) == 6
    assert report["command"][0] == stand.tools["nsenter"] and report["command"][-3] == stand.tools["nft"]
    # The helper is gone and was reaped; its CPU time (and its readings') is kept.
    assert process.returncode is not None and not os.path.exists("/proc/%d" % process.pid)
    assert monitor.returncode is not None and not os.path.exists("/proc/%d" % monitor.pid)
    assert report["monitor_command"][-2:] == [stand.tools["nft"], "monitor"]
    assert report["cpu_s"]["helper_s"] >= 0 and report["cpu_s"]["monitor_s"] >= 0 and report["cpu_s"]["thread_s"] >= 0


# What nft 1.1 monitor prints for a policy set to accept (and back), from another process.
POLICY_EVENTS = ["add chain inet aisb output { type filter hook output priority filter; policy accept; }",
                 "# new generation 7 by process 4242 (nft)"]


def test_an_event_between_two_readings_is_lost_at_once_with_its_transaction(stand):
    # Readings 60 s apart: only the monitor can see this change before the session ends.
    watch = stand.watch(interval=60)
    assert wait_for(lambda: watch.readings == 1)
    changed_at = time.time()
    stand.event(*POLICY_EVENTS)
    assert stand.called.wait(10)
    watch.stop()
    lost = watch.report()["lost"]
    assert stand.lost == [lost] and lost["what"] == "the ruleset changed (nft monitor)"
    assert lost["added"] == POLICY_EVENTS and lost["removed"] == []
    assert changed_at <= lost["at"] and watch.readings == 1


def test_an_event_with_no_generation_line_is_lost_all_the_same(stand):
    watch = stand.watch(interval=60)
    assert wait_for(lambda: watch.readings == 1)
    stand.event("delete table inet aisb")
    assert stand.called.wait(10)
    watch.stop()
    assert stand.lost[0]["added"] == ["delete table inet aisb"]


def test_the_monitors_note_at_its_start_is_no_event(stand):
    note = "# Cannot set up netlink receive socket buffer size to 16777216 bytes, falling back to 212992 bytes"
    stand.event(note)
    watch = stand.watch()
    assert wait_for(lambda: watch.readings >= 5 and watch.monitor_notes)
    watch.stop()
    assert stand.lost == [] and watch.report()["monitor_notes"] == [note]


BUDGETED = POLICY + "budget 100.64.0.1 41234 8388608\n"
# What the host's nft monitor printed when a budget's quota was spent (the packet's family,
# its warning that no such table is in that family, and its units: 1.1.3 on Debian 13).
SPENT = ["W: Unable to cache object: table not found.",
         "add quota ip aisb upload_41234 { over 8 mbytes used 8 mbytes }"]


def test_a_budget_spent_is_kept_never_lost_and_its_use_is_read(stand):
    stand.set(budget_reading(used=100))
    watch = stand.watch(policy=BUDGETED)
    assert wait_for(lambda: watch.readings >= 2)
    stand.set(budget_reading(used=8388608))
    stand.event(*SPENT)
    assert wait_for(lambda: watch.spent and watch.used == {"upload_41234": 8388608} and watch.readings >= 5)
    watch.stop()
    report = watch.report()
    assert stand.lost == [] and report["lost"] is None and report["monitor_notes"] == SPENT[:1]
    assert list(report["quota_spent"]) == ["upload_41234"] and report["quota_used"] == {"upload_41234": 8388608}


def test_nft_s_units_are_read_as_bytes(stand):
    stand.set(budget_reading(limit=3000))
    watch = stand.watch(policy=POLICY + "budget 100.64.0.1 41234 3000\n")
    assert wait_for(lambda: watch.readings >= 1)
    stand.event("add quota ip aisb upload_41234 { over 3000 bytes used 3000 bytes }")
    assert wait_for(lambda: watch.spent)
    watch.stop()
    assert stand.lost == []


@pytest.mark.parametrize("event", [
    # Spent twice: it was reset in between.
    SPENT[1:] * 2,
    ["add quota ip aisb upload_41234 { over 8 mbytes used 7 mbytes }"],
    # Another quota, or this one with other bytes or not spent.
    ["add quota ip aisb upload_9 { over 8388608 bytes used 8388608 bytes }"],
    ["add quota ip aisb upload_41234 { over 9999999 bytes used 9999999 bytes }"],
    ["add quota inet aisb upload_41234 { over 8388608 bytes used 0 bytes }"],
])
def test_any_other_quota_event_is_lost(stand, event):
    stand.set(budget_reading())
    watch = stand.watch(policy=BUDGETED, interval=60)
    assert wait_for(lambda: watch.readings == 1)
    stand.event(*event)
    assert stand.called.wait(10)
    watch.stop()
    assert stand.lost[0]["what"] == "the ruleset changed (nft monitor)"


def test_a_quota_whose_use_goes_down_was_reset_and_is_lost(stand):
    stand.set(budget_reading(used=5000))
    watch = stand.watch(policy=BUDGETED)
    assert wait_for(lambda: watch.readings >= 2)
    stand.set(budget_reading(used=0))
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "a budget's quota was reset" and lost["removed"] == ["quota upload_41234 used 0, was 5000"]


def test_a_monitor_that_exits_while_the_sandbox_runs_is_lost(stand):
    stand.monitor.write_text("printf 'netlink: Error: cannot open socket'; exit 1\n")
    watch = stand.watch()
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"].startswith("the ruleset's monitor exited") and "cannot open socket" in lost["what"], lost


def test_a_first_reading_with_other_handles_than_the_report_is_lost(stand):
    # The table was deleted and added again between the entrypoint's report and the first reading.
    watch = stand.watch(reported=json.dumps(reading(table_handle=2)) + "\n")
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the first reading differs from the table the entrypoint reported"
    assert lost["removed"] == ["table inet aisb [handle 2]"] and lost["added"] == ["table inet aisb [handle 1]"]


def test_a_first_reading_as_reported_is_not_lost(stand):
    watch = stand.watch(reported=json.dumps(reading()) + "\n")
    assert wait_for(lambda: watch.readings >= 3)
    watch.stop()
    assert stand.lost == []


@pytest.mark.parametrize("change, removed, added", [
    ({"nftables": [reading()["nftables"][0]]}, "table inet aisb [handle 1]", None),
    (reading(rules=[]), "rule inet aisb output: oif lo [handle 2]", None),
    (reading(policy="accept"), "chain inet aisb output type filter hook output prio 0 policy drop [handle 1]",
     "chain inet aisb output type filter hook output prio 0 policy accept [handle 1]"),
    (reading(rules=RULES + [[{"accept": None}]]), None, 'rule inet aisb output: unexpected [{"accept": null}] [handle 6]'),
    (reading(table_handle=2), "table inet aisb [handle 1]", "table inet aisb [handle 2]"),
], ids=["deleted", "flushed", "policy-accept", "accept-added", "added-again"])
def test_a_change_after_the_first_reading_is_lost_with_what_and_when(stand, change, removed, added):
    watch = stand.watch()
    assert wait_for(lambda: watch.readings >= 2)
    changed_at = time.time()
    stand.set(change)
    assert stand.called.wait(10)
    watch.stop()
    lost = watch.report()["lost"]
    assert stand.lost == [lost] and lost["what"] == "the table changed"
    assert (removed is None or removed in lost["removed"]) and (added is None or added in lost["added"])
    # The reading that saw the change came after it; the last good one before that.
    assert lost["last_good_at"] < lost["at"] and changed_at <= lost["at"]


def test_a_first_reading_other_than_the_policy_is_lost(stand):
    stand.set(reading(rules=RULES[:1]))
    watch = stand.watch()
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the first reading differs from the table the policy asks for"
    assert lost["removed"] == ["rule inet aisb output: ip 100.64.0.1 tcp dport 41234",
                               "rule inet aisb output: ip 198.18.0.0/24 tcp dport 443",
                               "rule inet aisb output: ip6 2001:db8::5 tcp dport 22"]
    assert lost["last_good_at"] is None and watch.readings == 0


@pytest.mark.parametrize("nft, error", [
    ('echo "Error: Operation not permitted" >&2; exit 1', "nft said Error: Operation not permitted"),
    ('echo \'{"nftables": garbage\'', "nft printed no ruleset"),
    ("exec sleep 30", "no reading came within"),
    ("kill -9 $PPID", "the reader exited"),
], ids=["nft-fails", "garbage", "hangs", "nft-dies"])
def test_a_table_that_cannot_be_read_is_lost(stand, nft, error):
    watch = stand.watch()
    assert wait_for(lambda: watch.readings >= 1)
    stand.nft_says(nft)
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"].startswith("the table cannot be read: ") and error in lost["what"], lost
    assert lost["removed"] == [] and lost["added"] == []
    assert not wait_for(lambda: helper_running(watch), timeout=0)


def test_no_pid_file_is_lost(stand):
    stand.pidfile.unlink()
    watch = stand.watch()
    assert stand.called.wait(10)
    watch.stop()
    assert "podman wrote no pid" in stand.lost[0]["what"]


def test_a_sandbox_that_has_exited_is_not_lost(stand):
    # Its first process is gone (a command that ends at once): readings fail, nothing is lost.
    gone = subprocess.Popen(["true"])
    gone.wait()
    stand.pidfile.write_text("%d\n" % gone.pid)
    stand.nft_says("exit 1")
    watch = stand.watch()
    assert wait_for(lambda: not watch._thread.is_alive())  # pylint: disable=protected-access
    assert stand.lost == [] and "the sandbox's first process has exited" in watch.report()["last_error"]


NSENTER_CANNOT = "echo \"nsenter: cannot open /proc/$$/ns/user: No such file or directory\"; exit 1\n"


def test_helpers_that_cannot_enter_an_exited_sandbox_are_not_lost(stand, tmp_path):
    """Was a false loss (CI, a command that ends at once): the sandbox had gone before the
    monitor's nsenter ran, and nsenter's complaint on the monitor's output was taken for an
    event: enforcement-lost (77)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    stand.pidfile.write_text("%d\n" % gone.pid)
    (tmp_path / "nsenter").write_text("#!/bin/sh\n" + NSENTER_CANNOT)
    watch = stand.watch()
    assert wait_for(lambda: not watch._thread.is_alive())  # pylint: disable=protected-access
    assert stand.lost == [], stand.lost


def test_a_monitor_that_cannot_enter_a_running_sandbox_is_lost(stand):
    stand.monitor.write_text(NSENTER_CANNOT)
    watch = stand.watch()
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"].startswith("the ruleset's monitor") and "nsenter: cannot open" in lost["what"], lost


def test_stop_before_the_first_reading_ends_everything(stand):
    stand.nft_says("exec sleep 30")
    watch = stand.watch()
    assert wait_for(lambda: watch._process is not None)  # pylint: disable=protected-access
    watch.stop()
    assert stand.lost == []
    assert not watch._thread.is_alive()  # pylint: disable=protected-access
    assert watch._process.returncode is not None  # pylint: disable=protected-access


def exited(process):
    """Whether PROCESS has exited (reaped already: the watch has ended it)."""
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def test_helpers_in_a_round_or_already_ended_are_ended_and_reaped_with_their_cpu_time(stand, tmp_path):
    """The session's end: the canaries' helper in the middle of a round (a probe waiting on
    a dropped SYN: it reads no more input) is killed, not waited for; a monitor that had
    exited already is reaped with its CPU time (Popen.kill reaped it first: none kept)."""
    asked = tmp_path / "asked"
    probes = tmp_path / "python3"
    probes.write_text("#!/bin/sh\nread -r _ && : >%s && exec sleep 300\n" % asked)
    probes.chmod(0o755)
    stand.tools["python3"] = str(probes)
    stand.monitor.write_text("exit 0\n")
    watch = stand.watch(canaries=True)
    assert wait_for(lambda: asked.exists() and watch.readings >= 1)
    helper, monitor = watch.canaries.process, watch._monitor  # pylint: disable=protected-access
    assert wait_for(lambda: exited(monitor))
    watch.stop()
    cpu = watch.report()["cpu_s"]
    assert helper.returncode == -9 and not os.path.exists("/proc/%d" % helper.pid)
    assert monitor.returncode == 0 and cpu["canaries_s"] >= 0 and cpu["monitor_s"] >= 0, cpu


def test_a_watch_that_lost_the_table_records_no_canary_failure_at_its_end(stand, tmp_path):
    """The canaries' helper is ended with the watch: its end is not a probe that failed.
    Killed before the canaries stopped their rounds, it was (the record's canaries said
    "the probes failed: the probes' helper exited" after a table change)."""
    asked = tmp_path / "asked"
    probes = tmp_path / "python3"
    probes.write_text("#!/bin/sh\nread -r _ && : >%s && exec sleep 300\n" % asked)
    probes.chmod(0o755)
    stand.tools["python3"] = str(probes)
    watch = stand.watch(canaries=True, interval=60)
    assert wait_for(lambda: asked.exists() and watch.readings == 1)
    stand.event(*POLICY_EVENTS)
    assert stand.called.wait(10)
    assert wait_for(lambda: not watch._thread.is_alive())  # pylint: disable=protected-access
    watch.stop()
    report = watch.report()
    assert report["lost"]["what"] == "the ruleset changed (nft monitor)" and len(stand.lost) == 1
    assert report["canaries"]["failed"] is None, report["canaries"]


def test_the_helper_reads_in_the_sandboxs_namespaces_with_the_hosts_nft():
    argv = _podman.netns_reader("/usr/bin/nsenter", 4242, "/usr/bin/setpriv", "/usr/sbin/nft")
    assert argv[:6] == ["/usr/bin/nsenter", "--target", "4242", "--user", "--net", "--"]
    # The parent-death signal is set after nsenter changed the credentials (which clears it).
    assert argv[6:10] == ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"]
    assert argv[10:] == ["/usr/sbin/nft", "--json", "--interactive"]
    assert _podman.netns_monitor("/usr/bin/nsenter", 4242, "/usr/bin/setpriv", "/usr/sbin/nft") == argv[:10] + [
        "/usr/sbin/nft", "monitor"]
    assert _podman.NETNS_READING_REQUEST == "list ruleset\n"
    with pytest.raises(ValueError):
        _podman.netns_reader("nsenter", "1; rm -rf /", "setpriv", "nft")


def test_the_tools_are_found_in_the_system_directories_and_missing_ones_named(tmp_path, monkeypatch):
    monkeypatch.setattr(_host_tools, "SYSTEM_DIRS", (str(tmp_path),))
    monkeypatch.setattr(_host_tools, "not_root_alone", lambda path: None)
    for tool in ("nsenter", "setpriv"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    found, problem = find_tools()
    assert found["nsenter"] == str(tmp_path / "nsenter") and found["nft"] is None
    assert problem.startswith("nft is not installed in the system's directories")
    assert "run provision.yml (the host role installs nftables" in problem


def own_seccomp():
    """This process's seccomp fields: the stand-in sandbox is this process."""
    with open("/proc/self/status") as handle:
        return _seccomp.status_fields(handle.read())


def test_a_sandbox_in_the_seccomp_state_its_profile_gives_is_not_lost(stand):
    watch = stand.watch(seccomp=own_seccomp())
    assert wait_for(lambda: watch.readings >= 3)
    watch.stop()
    assert stand.lost == [] and watch.report()["seccomp"] == own_seccomp()


def test_a_sandbox_without_its_filter_is_lost_at_the_first_reading(stand):
    # What the session wants of a sandbox started from here: one filter more than this process.
    with open("/proc/self/status") as handle:
        wanted = _seccomp.wanted_status(handle.read())
    watch = stand.watch(seccomp=wanted)
    assert stand.called.wait(10)
    watch.stop()
    lost = watch.report()["lost"]
    assert stand.lost == [lost] and lost["what"] == "the sandbox is not under its seccomp profile"
    assert "Seccomp_filters: %s" % wanted["Seccomp_filters"] in lost["removed"]
    assert "Seccomp_filters: %s" % own_seccomp()["Seccomp_filters"] in lost["added"]
    assert watch.report()["readings"] == 0


def test_the_sandboxs_pasta_is_found_at_the_first_reading_and_its_exit_is_lost(stand, tmp_path):
    pasta = tmp_path / "pasta"
    pasta.write_text("#!/bin/sh\nfor a; do last=$a; done\nexec 7<\"$last\"\nsleep 600\n")
    pasta.chmod(0o755)
    process = subprocess.Popen([str(pasta), "--netns", "/proc/%d/ns/net" % os.getpid()], start_new_session=True)
    try:
        assert wait_for(lambda: open("/proc/%d/comm" % process.pid).read().strip() == "pasta")
        watch = stand.watch()
        assert wait_for(lambda: watch.readings >= 2)
        assert watch.report()["pasta"]["pid"] == process.pid
        assert any(line.startswith("netns ") for line in watch.report()["network"])
        os.killpg(process.pid, 9)
        assert stand.called.wait(10)
        watch.stop()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
        process.wait()
    lost = stand.lost[0]
    assert lost["what"] == "the sandbox's pasta has exited" and lost["added"] == []
    assert lost["removed"][0].startswith("pasta pid %d started " % process.pid) and "--netns" in lost["removed"][0]


def test_without_a_pasta_nothing_is_lost_and_the_record_says_none_was_found(stand):
    watch = stand.watch()
    assert wait_for(lambda: watch.readings >= 3)
    watch.stop()
    assert stand.lost == [] and watch.report()["pasta"] is None and watch.report()["network"]


class Gate:
    """A stand-in gate: a process named squid, its two files (read through its /proc
    root, as the gate's are: this process's root is the host's), and what the session
    wrote for them."""

    def __init__(self, tmp_path, monkeypatch):
        self.files = [tmp_path / "gate-session.conf", tmp_path / "squid-policy.conf"]
        for path in self.files:
            path.write_text("# %s\n" % path.name)
        monkeypatch.setattr(_gate_state, "GATE_FILES", tuple(str(path) for path in self.files))
        self.squid = subprocess.Popen(["bash", "-c", "exec -a squid sleep 600"])
        # Until bash has executed sleep under that name.
        assert wait_for(lambda: (_netns_state.process_identity(self.squid.pid) or {}).get("argv", [])[:1] == ["squid"])
        self.pidfile = tmp_path / "gate.pid"
        self.pidfile.write_text("%d\n" % self.squid.pid)
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]

    def started(self, **written):
        return _gate_state.GateStarted(str(self.pidfile), self.port, dict(
            (str(path), _gate_state.digest(written.get(path.name, path.read_text()))) for path in self.files))

    def end(self):
        self.squid.kill()
        self.squid.wait()


@pytest.fixture
def gate(tmp_path, monkeypatch):
    made = Gate(tmp_path, monkeypatch)
    yield made
    made.end()


def test_a_steady_gate_is_read_with_each_reading_and_never_lost(stand, gate):
    watch = stand.watch(gate=gate.started())
    assert wait_for(lambda: watch.readings >= 4)
    watch.stop()
    report = watch.report()
    assert stand.lost == [] and report["gate"][-1].startswith("squid pid %d started " % gate.squid.pid)
    assert [line.split()[2] for line in report["gate"][:-1]] == sorted(str(path) for path in gate.files)


def test_a_gate_file_changed_after_the_first_reading_is_lost_naming_it(stand, gate):
    watch = stand.watch(gate=gate.started())
    assert wait_for(lambda: watch.readings >= 2)
    # In place, as squid's mount shows it.
    with open(gate.files[1], "a") as handle:
        handle.write("miss_access allow all\n")
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the gate's configuration changed"
    assert [line.split()[2] for line in lost["removed"] + lost["added"]] == [str(gate.files[1])] * 2


def test_a_gate_whose_first_reading_is_not_what_the_session_wrote_is_lost(stand, gate):
    watch = stand.watch(gate=gate.started(**{"gate-session.conf": "# what the session wrote\n"}))
    assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the gate's configuration is not what the session wrote"
    assert lost["removed"] == [_gate_state.file_line(str(gate.files[0]), _gate_state.digest(
        "# what the session wrote\n"))]


def test_a_gate_that_died_is_not_lost_and_another_listener_on_its_port_is(stand, gate):
    watch = stand.watch(gate=gate.started())
    assert wait_for(lambda: watch.readings >= 2)
    gate.end()
    # The gate died: the session stops the sandbox for that (gate-died), not the watch.
    readings = watch.readings
    assert wait_for(lambda: watch.readings >= readings + 4)
    assert stand.lost == []
    with socket.create_server(("127.0.0.1", gate.port)):
        assert stand.called.wait(10)
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the gate's squid was replaced"
    assert lost["removed"][0].startswith("squid pid %d " % gate.squid.pid)
    assert lost["added"][0].startswith("listener tcp 0100007F:%04X " % gate.port)


def test_a_canary_that_failed_names_the_gate_when_the_gate_changed(stand, gate):
    # Readings 60 s apart: the canary's failure comes before the next one.
    watch = stand.watch(gate=gate.started(), interval=60)
    assert wait_for(lambda: watch.gate_first is not None)
    with open(gate.files[0], "a") as handle:
        handle.write("miss_access allow all\n")
    watch._canary_lost("a canary failed: x saw 200", time.time(),  # pylint: disable=protected-access
                       {"added": ["canary gate: 200"]})
    watch.stop()
    lost = stand.lost[0]
    assert lost["what"] == "the gate's configuration changed" and lost["added"][-1] == "canary gate: 200"
    assert str(gate.files[0]) in lost["removed"][0]
