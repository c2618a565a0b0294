# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Watches the sandbox's nftables table from outside the sandbox for the whole session:
its one job.

Nothing inside the sandbox reports here. The session gives EnforcementWatch the path of
the pid file podman writes for the sandbox's first process (on the host, outside every
mount of the sandbox). One helper per session enters that process's user and network
namespaces with the host's nsenter (the sandbox's user namespace owns its network
namespace; the session's user owns that user namespace's parent, so no privilege is
needed) and runs the host's nft there in interactive mode: for every `list ruleset`
line the session writes to it, one line of JSON. A thread here asks for a reading every
INTERVAL seconds and
compares it (_ruleset's canonical form): the first reading with what the policy asks
for and with the table the entrypoint reported (handles included: a table deleted and
added again meanwhile has new ones), every later one with the first, handles included.
Between readings it listens to a second helper, the host's `nft monitor` in the same
namespaces: the session changes nothing there once the table is reported, so any line
it prints (an event, a new generation) is a change, seen as it is made, however soon
it is undone (a policy set to accept and back, a rule replaced under its handle and put
back: the same text at the next reading). One event is the kernel's own: a budget's quota
(_ruleset, upload_PORT) announces once that it is spent, as `add quota` with its use at
its bytes; that is kept as the budget's end, not a change. Every packet changes a
quota's use: the comparison leaves it out (_ruleset), and a use that goes down (a reset
quota) is lost like a change. A difference, an event, or no good reading
for STALE_AFTER seconds, calls on_lost once with what changed and when, and ends the
watch. With each reading it reads that process's /proc/PID/status too: a sandbox that is
not under its seccomp profile (filter mode, one filter more than the session's own
process) is lost the same way, and so are routes or addresses or a pasta other than at
the first reading (_netns_state), and a gate whose configuration is not what the session
wrote, or that another process replaced (_gate_state). nft reads its standard input: it ends when the session
closes that pipe, and with the session's death (end of file, and a parent-death signal).
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _canaries, _gate_state, _netns_state
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import kill_unreaped

# Seconds between two readings; a change is seen at most this long after it was made.
INTERVAL = 2.0
# No good reading for this long: the table cannot be read.
STALE_AFTER = 2 * INTERVAL
# The JSON document of a reading (nft may print something before it on the line, such
# as a prompt, depending on how it was built).
_JSON_START = '{"nftables"'
# A reading larger than this is no table the entrypoint installed.
MAX_READING = 4 * 1024 * 1024
# What nft monitor prints at its start where it may not enlarge its socket's buffer
# (that needs CAP_NET_ADMIN on the host): a note, not an event.
_MONITOR_NOTE = "# Cannot set up netlink"
# nft monitor ends a transaction's events with this line; the watch waits this long
# at most for it, so the record names the whole change.
_GENERATION = "# new generation"
# What the helper's own tools print when they cannot run it (the sandbox gone before its
# nsenter entered, say): the helper's end, never an event.
_HELPER_WORDS = ("nsenter: ", "setpriv: ")
TRANSACTION_WAIT = 0.2
# The kernel's event when a budget's quota is spent (nft names the packet's family, and
# may warn first that it finds no such table in that family: a note). nft writes a
# number of bytes in the largest of UNITS that divides it.
_QUOTA_SPENT = re.compile(r"^add quota (?:inet|ip|ip6) aisb (%s\d{1,5}) \{ over (\d+) ([kmg]?bytes) used (\d+) "
                          r"([kmg]?bytes) \}$" % _ruleset.BUDGET_PREFIX)
UNITS = {"bytes": 1, "kbytes": 1 << 10, "mbytes": 1 << 20, "gbytes": 1 << 30}
_CACHE_NOTE = "W: Unable to cache object"
# The host tools the helper runs, found in the system directories only (_host_tools:
# never through the caller's PATH, which may name the project's directories).
TOOLS = ("nsenter", "setpriv", "nft", "python3")
# The helper's environment: set here, nothing from the session's.
HELPER_ENV = {"PATH": _host_tools.SYSTEM_PATH, "LC_ALL": "C"}


def sandbox_pid(pidfile):
    """The host PID of the sandbox's first process as podman wrote it to PIDFILE, or None
    while there is none (the container has not started)."""
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 1 else None


def unprovisioned(podman):
    """One sentence when this host lacks what provision.yml installs for a session
    (PODMAN and the watch's TOOLS, in the system's directories), else None: cheap, so it
    runs before any image work."""
    missing = [tool for tool in (podman,) + TOOLS if _host_tools.resolve(tool)[1]]
    if not missing:
        return None
    return ("this host was never provisioned for sandboxed sessions (%s not installed in %s): run "
            "`ansible-playbook aisb.sandbox.provision` on it first" % (", ".join(missing), _host_tools.SYSTEM_PATH))


def find_tools():
    """({tool: absolute path or None}, problem or None): the host's nsenter, setpriv, nft
    and python3 (the canaries'), in the system's directories (_host_tools)."""
    found = dict((tool, _host_tools.resolve(tool)) for tool in TOOLS)
    problems = [problem for _path, problem in found.values() if problem]
    if problems:
        problems.append("the session reads the sandbox's table from outside with the host's nft and nsenter, and "
                        "probes its network with the host's python3; run provision.yml (the host role installs "
                        "nftables and util-linux)")
    return dict((tool, path) for tool, (path, _problem) in found.items()), "; ".join(problems) or None


def process_status(pid):
    """(/proc/PID/status's text, None) or (None, why it cannot be read)."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            return handle.read(), None
    except OSError as error:
        return None, "/proc/%d/status cannot be read (%s)" % (pid, error.strerror)


def _alive(pid):
    """Whether process PID exists and has not begun its end (the sandbox's first process
    runs as another user: kill -0 is refused while it exists). A zombie (killed, not yet
    reaped) has ended; so has a process without its network namespace: the kernel lets go
    of a process's namespaces in its exit only, and its exit can last seconds after that
    (unmounting an overlay syncs the host's filesystem; the PID namespace's first process
    waits for the rest of it to die). Its pasta and helpers are going with it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open("/proc/%d/stat" % pid) as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    try:
        os.stat("/proc/%d/ns/net" % pid)
    except FileNotFoundError:
        return False
    except OSError:
        pass  # not readable is not ended: the watch's own reading says it is lost
    return state not in ("Z", "X")


class EnforcementWatch(object):
    """One session's watch; start() once the entrypoint has reported its table."""

    def __init__(self, pidfile, policy_text, tools, on_lost, interval=INTERVAL, stale_after=STALE_AFTER,
                 seccomp=None, reported=None, canaries=False, gate=None, sni_canary=None):
        """SECCOMP: the seccomp fields the sandbox's /proc/PID/status must show
        (_seccomp.wanted_status), or None where it runs under podman's default profile.
        REPORTED: the entrypoint's report of its table (nft's JSON), or None. CANARIES:
        whether the host's python3 (TOOLS) runs the canaries (_canaries) in the
        sandbox's namespaces. GATE: what the session started its gate with
        (_gate_state.GateStarted), or None without one. SNI_CANARY: (allowed name,
        port) the canaries CONNECT to with another name in their ClientHello, or None."""
        self.pidfile = pidfile
        self.gate = gate
        self.sni_canary = sni_canary
        self.gate_first = None     # the gate's first reading's lines (_gate_state)
        self.wanted = _ruleset.expected(policy_text)
        self.budgets = dict((_ruleset.BUDGET_PREFIX + str(port), limit)
                            for port, limit in _ruleset.budgets(policy_text).items())
        # Each quota's use at the last good reading, and when the kernel said it was spent.
        self.used = {}
        self.spent = {}
        self.policy_text = policy_text
        self.with_canaries = canaries
        self.canaries = None
        self.reported = _reported_lines(reported)
        self.seccomp = seccomp
        self.tools = tools
        self.on_lost = on_lost
        self.interval = interval
        self.stale_after = stale_after
        self.argv = None
        self.monitor_argv = None
        self.readings = 0
        self.monitor_notes = []
        # What the monitor's own tools said when they could not run it (_HELPER_WORDS).
        self.monitor_failures = []
        self.first = None          # the first reading's lines, handles included
        self.network = None        # the first reading's routes and addresses (_netns_state)
        self.pasta = None          # pasta's process at the first reading, if found
        self.first_at = None
        self.last_good_at = None
        self.last_error = None
        self.lost = None
        self.cpu = {"helper_s": None, "monitor_s": None, "canaries_s": None, "thread_s": None}
        self._lost_lock = threading.Lock()
        self._stopping = threading.Event()
        # stop() writes here: it wakes the wait for the monitor's next line at once.
        self._wake_read, self._wake_write = os.pipe()
        self._thread = None
        self._process = None
        self._monitor = None
        self._buffer = b""
        self._monitor_buffer = b""
        # The helper's output has ended: it is exiting or has exited.
        self._eof = False

    # -- the session's side
    def start(self):
        self._thread = threading.Thread(target=self._run, name="aisb-enforcement-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout=10.0):
        """End the watch and its helper (the sandbox has exited); wait for both."""
        self._stopping.set()
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout)

    def report(self):
        """What the record keeps."""
        return {
            "interval_s": self.interval, "stale_after_s": self.stale_after, "command": self.argv,
            "monitor_command": self.monitor_argv, "monitor_notes": self.monitor_notes,
            "readings": self.readings, "first_reading_at": self.first_at, "last_good_reading_at": self.last_good_at,
            "table": [line.rsplit(" [handle ", 1)[0] for line in self.first or []],
            "last_error": self.last_error, "lost": self.lost, "seccomp": self.seccomp,
            "network": self.network, "pasta": self.pasta, "gate": self.gate_first,
            "canaries": self.canaries.report() if self.canaries is not None else None,
            "cpu_s": self.cpu, "quota_used": self.used, "quota_spent": self.spent,
        }

    # -- the thread
    def _run(self):
        started_cpu = time.thread_time()
        try:
            self._watch()
        except Exception as error:  # pylint: disable=broad-except
            # A watcher that cannot go on must not leave the sandbox unwatched.
            self._lose("the watcher failed: %s: %s" % (type(error).__name__, error), time.time())
        finally:
            if self.canaries is not None:
                self.canaries.stop()
                self.cpu["canaries_s"] = _end(self.canaries.process, close_input=False)
            self.cpu["helper_s"] = _end(self._process, close_input=True)
            self.cpu["monitor_s"] = _end(self._monitor, close_input=False)
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
            self.cpu["thread_s"] = round(time.thread_time() - started_cpu, 4)

    def _watch(self):
        deadline = time.monotonic() + self.stale_after
        pid = self._sandbox_pid(deadline)
        if pid is None:
            if not self._stopping.is_set():
                self._lose("the table cannot be read: podman wrote no pid for the sandbox to %s" % self.pidfile,
                           time.time())
            return
        self.argv = _podman.netns_reader(self.tools["nsenter"], pid, self.tools["setpriv"], self.tools["nft"])
        self.monitor_argv = _podman.netns_monitor(self.tools["nsenter"], pid, self.tools["setpriv"],
                                                  self.tools["nft"])
        # Helpers that live as long as the sandbox, one answering each reading on its pipes,
        # one printing events: run_command runs a command to its end. The listener first,
        # so the first reading covers the moment before it listens.
        self._monitor = subprocess.Popen(  # pylint: disable=ansible-bad-function
            self.monitor_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=HELPER_ENV, close_fds=True)
        self._process = subprocess.Popen(  # pylint: disable=ansible-bad-function
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=HELPER_ENV,
            close_fds=True)
        if self.with_canaries:
            probes = _podman.netns_helper(self.tools["nsenter"], pid, self.tools["setpriv"],
                                          _canaries.probe_argv(self.tools["python3"], _ruleset.gate(self.policy_text),
                                                               self.sni_canary))
            self.canaries = _canaries.Canaries(
                subprocess.Popen(  # pylint: disable=ansible-bad-function
                    probes, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=HELPER_ENV,
                    close_fds=True),
                _canaries.judged(self.policy_text), self._canary_lost,
                sandbox_gone=lambda: self._sandbox_gone(pid), budget_spent=self._gate_budget_spent)
            self.canaries.start()
        failure = None  # the first failed reading since the last good one: the cause
        while not self._stopping.is_set():
            asked = time.monotonic()
            text, error = self._reading(deadline)
            now = time.time()
            if self._stopping.is_set():
                return  # the session ended meanwhile: its sandbox is gone
            if error is None:
                try:
                    with_handles, lines, used = _ruleset.parse(text)
                except _ruleset.RulesetError as bad:
                    error = "nft printed no ruleset: %s" % bad
            if error is None and self.seccomp is not None:
                status, error = process_status(pid)
                if error is None and self._seccomp_differs(status, now):
                    return
            if error is None:
                network, error = _netns_state.network_lines(pid)
            if error is not None:
                self.last_error = "%s: %s" % (format_time(now), error)
                failure = failure or error
                if time.monotonic() >= deadline:
                    if not _alive(pid):
                        # Its PID namespace died with it: nothing of the sandbox runs.
                        self.last_error += " (the sandbox's first process has exited)"
                    else:
                        self._lose("the table cannot be read: no good reading for %.1f s: %s"
                                   % (self.stale_after, failure), now)
                    return
            elif (self._differs(with_handles, lines, now) or self._used_differs(used, now)
                  or self._network_differs(network, pid, now) or self._gate_differs(pid, now)):
                return
            else:
                deadline, failure = time.monotonic() + self.stale_after, None
            if self._events_until(asked + self.interval, pid):
                return

    def _events_until(self, until, pid):
        """Listen to the monitor until UNTIL (monotonic) or the stop. Any line it prints
        is a change: call _lose with the transaction's lines and return True. Its end
        while the sandbox runs is lost too (nothing listens any more)."""
        fd = self._monitor.stdout.fileno()
        while not self._stopping.is_set():
            remaining = until - time.monotonic()
            if remaining <= 0:
                return False
            ready, _w, _x = select.select([fd, self._wake_read], [], [], remaining)
            if fd not in ready:
                continue
            now = time.time()
            chunk = os.read(fd, 65536)
            if not chunk:
                if self._sandbox_gone(pid):
                    return True  # the sandbox has gone: nothing is left to watch
                said = self.monitor_failures + [self._monitor_buffer.decode("utf-8", "replace")]
                self._lose("the ruleset's monitor exited: %s" % " / ".join(filter(None, said))[-500:], now)
                return True
            self._monitor_buffer += chunk
            events = self._monitor_lines()
            if events:
                self._lose("the ruleset changed (nft monitor)", now, {"added": self._transaction(fd, events)})
                return True
        return False

    def _monitor_lines(self):
        """The monitor's complete lines so far that are events (its notes are kept)."""
        *lines, self._monitor_buffer = self._monitor_buffer.split(b"\n")
        events = []
        for line in (raw.decode("utf-8", "replace").strip() for raw in lines):
            spent = _QUOTA_SPENT.match(line)
            over, used = ((int(spent.group(2)) * UNITS[spent.group(3)], int(spent.group(4)) * UNITS[spent.group(5)])
                          if spent else (None, None))
            if line.startswith((_MONITOR_NOTE, _CACHE_NOTE)):
                self.monitor_notes.append(line[:300])
            elif line.startswith(_HELPER_WORDS):
                self.monitor_failures.append(line[:300])
            elif (spent and self.budgets.get(spent.group(1)) == over and used >= over
                  and spent.group(1) not in self.spent):
                # The kernel's own word, once a quota: its budget is spent. Never a change.
                now = time.time()
                self.spent[spent.group(1)] = {"at": now, "at_text": format_time(now)}
            elif line:
                events.append(line[:1000])
        return events

    def _transaction(self, fd, events):
        """EVENTS and the rest of their transaction: up to its new generation line, for
        TRANSACTION_WAIT seconds at most (the record names the whole change)."""
        deadline = time.monotonic() + TRANSACTION_WAIT
        while not any(line.startswith(_GENERATION) for line in events) and len(events) < 100:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._monitor_buffer += chunk
            events += self._monitor_lines()
        return events

    def _differs(self, with_handles, lines, now):
        """Compare one good reading; on a difference call _lose and return True."""
        if self.first is None:
            change = _ruleset.difference(self.wanted, lines)
            what = "the first reading differs from the table the policy asks for"
            if not (change["removed"] or change["added"]) and self.reported is not None:
                change = _ruleset.difference(self.reported, with_handles)
                what = "the first reading differs from the table the entrypoint reported"
        else:
            change = _ruleset.difference(self.first, with_handles)
            what = "the table changed"
        if change["removed"] or change["added"]:
            self._lose(what, now, change)
            return True
        if self.first is None:
            self.first, self.first_at = with_handles, now
        self.readings += 1
        self.last_good_at = now
        return False

    def _gate_budget_spent(self):
        """Whether the gate's upload budget is spent (the kernel's event was heard)."""
        gate = _ruleset.gate(self.policy_text)
        return gate is not None and (_ruleset.BUDGET_PREFIX + str(gate[1])) in self.spent

    def _used_differs(self, used, now):
        """Keep the quotas' USED; a use lower than the last reading's (a quota reset, to
        spend its bytes again) calls _lose and returns True."""
        lower = sorted("quota %s used %s, was %s" % (name, used.get(name), was) for name, was in self.used.items()
                       if not isinstance(used.get(name), int) or used[name] < was)
        if lower:
            self._lose("a budget's quota was reset", now, {"removed": lower})
            return True
        self.used = used
        return False

    def _network_differs(self, network, pid, now):
        """Compare the sandbox's routes and addresses (NETWORK) and its pasta with the
        first reading's (keep them at the first); on a difference call _lose and return
        True."""
        if self.network is None:
            self.network, self.pasta = network, _netns_state.find_pasta(pid)
            return False
        # pasta first: without it the sandbox's interface goes, and with it its routes.
        if self.pasta is not None:
            pasta = _netns_state.process_identity(self.pasta["pid"])
            if pasta != self.pasta and _alive(pid):
                self._lose("the sandbox's pasta has exited" if pasta is None
                           else "the sandbox's pasta changed", now,
                           {"removed": [_pasta_line(self.pasta)], "added": [_pasta_line(pasta)] if pasta else []})
                return True
        change = _ruleset.difference(self.network, network)
        if (change["removed"] or change["added"]) and _alive(pid):
            self._lose("the sandbox's routes or addresses changed", now, change)
            return True
        return False

    def _gate_differs(self, pid, now):
        """Compare the gate (_gate_state) with what the session wrote for it (its first
        reading) and then with its first reading; on a difference, or another process
        listening on its port once its squid has gone, call _lose and return True."""
        if self.gate is None:
            return False
        if self.gate_first is None:
            squid = sandbox_pid(self.gate.pidfile)
            # Not started yet: the entrypoint waits for it (and ends the session when it never answers).
            lines, error = _gate_state.read(squid) if squid is not None else (None, None)
            if error is not None and _alive(pid):
                self._lose("the gate cannot be read: %s" % error, now)
                return True
            if lines is not None:
                change = _ruleset.difference(_gate_state.started_lines(self.gate),
                                             [line for line in lines if line.startswith("gate file")])
                if change["removed"] and _alive(pid):
                    self._lose("the gate's configuration is not what the session wrote", now, change)
                    return True
                self.gate_first = lines
            return False
        what, change = self._gate_change()
        if what is not None and _alive(pid):
            self._lose(what, now, change)
            return True
        return False

    def _gate_change(self):
        """(what, change) of the gate since its first reading, or (None, None); it only
        compares (the canaries' thread asks it too)."""
        squid = next(line for line in self.gate_first if line.startswith("squid "))
        lines, error = _gate_state.read(int(squid.split()[2]))
        if error is not None:
            return "the gate cannot be read", {"removed": [], "added": [error]}
        if lines is None:
            # Its squid has gone: the gate died (the session stops the sandbox for that), or was replaced.
            found = _gate_state.listeners(self.gate.port)
            return ("the gate's squid was replaced", {"removed": [squid], "added": found}) if found else (None, None)
        change = _ruleset.difference(self.gate_first, lines)
        if change["removed"] or change["added"]:
            return "the gate's configuration changed", change
        return None, None

    def _canary_lost(self, what, now, change):
        """A canary failed: when the gate has changed, that is the cause the record names."""
        if self.gate_first is not None:
            gate_what, gate_change = self._gate_change()
            if gate_what is not None:
                what, change = gate_what, dict(gate_change, added=gate_change["added"] + change.get("added", []))
        self._lose(what, now, change)

    def _seccomp_differs(self, status, now):
        """Compare the sandbox's seccomp fields (STATUS, its /proc/PID/status) with what
        its profile gives; on a difference call _lose and return True."""
        change = _seccomp.status_difference(self.seccomp, status)
        if change["removed"]:
            self._lose("the sandbox is not under its seccomp profile", now, change)
            return True
        return False

    def _lose(self, what, now, change=None):
        with self._lost_lock:  # the canaries' thread calls it too
            if self.lost is not None:
                return
            self.lost = {"what": what, "at": now, "at_text": format_time(now), "last_good_at": self.last_good_at,
                         "removed": (change or {}).get("removed", []), "added": (change or {}).get("added", [])}
        self.on_lost(self.lost)

    def _sandbox_gone(self, pid):
        """Whether the session is ending or its sandbox (first process PID) has ended: a
        helper in its namespaces ending then is that end, not a loss."""
        return self._stopping.is_set() or not _alive(pid)

    def _sandbox_pid(self, deadline):
        """The sandbox's first process as podman wrote it, waiting for the file until DEADLINE."""
        while not self._stopping.is_set():
            pid = sandbox_pid(self.pidfile)
            if pid is not None:
                return pid
            if time.monotonic() >= deadline:
                return None
            self._stopping.wait(0.05)
        return None

    def _reading(self, deadline):
        """(text of one `list ruleset`, None) or (None, why there is none): nft answers
        with one line of JSON, or with error lines and no JSON (then the reading ends at
        DEADLINE, and what nft said is the reason)."""
        try:
            self._process.stdin.write(_podman.NETNS_READING_REQUEST.encode("ascii"))
            self._process.stdin.flush()
        except (OSError, ValueError) as error:
            return None, "the reader is gone (%s)" % (getattr(error, "strerror", None) or error)
        said = []
        while True:
            line = self._line(deadline)
            if line is None:
                text = " / ".join(said)[-500:]
                if self._helper_exited(within=1.0 if self._eof else 0.0):
                    return None, "the reader exited%s" % (": " + text if text else "")
                return None, "no reading came within %.1f s%s" % (self.stale_after, (": nft said " + text) if text else "")
            if _JSON_START in line:
                return line[line.index(_JSON_START):], None
            if line.strip():
                said.append(line.strip())

    def _line(self, deadline):
        """One line of the helper's output, or None at end of file or DEADLINE."""
        fd = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_READING:
                raise RuntimeError("a reading larger than %d bytes" % MAX_READING)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._stopping.is_set():
                return None
            if fd not in select.select([fd, self._wake_read], [], [], remaining)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self._eof = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def _helper_exited(self, within=0.0):
        """Whether the helper has exited, within WITHIN seconds (its output's end comes a
        moment before its exit status), without reaping it (_end does, for its rusage)."""
        deadline = time.monotonic() + within
        while True:
            try:
                if os.waitid(os.P_PID, self._process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except ChildProcessError:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _pasta_line(identity):
    return "pasta pid %d started %d: %s" % (identity["pid"], identity["started"], " ".join(identity["argv"]))


def _reported_lines(text):
    """The canonical lines, handles included, of the entrypoint's report TEXT, or None
    (none, or one the session keeps as unparsed: the first reading is compared with
    what the policy asks for all the same)."""
    if not text or _JSON_START not in text:
        return None
    try:
        return _ruleset.parse(text[text.index(_JSON_START):].split("\n", 1)[0])[0]
    except _ruleset.RulesetError:
        return None


def _end(process, close_input):
    """End a helper: close its input (nft --interactive ends at end of file) or kill it
    (nft monitor reads nothing), kill it if it lingers, and return its CPU time in
    seconds (wait4's rusage), or None."""
    if process is None:
        return None
    if close_input:
        try:
            process.stdin.close()
        except OSError:
            pass
    else:
        kill_unreaped(process)
    deadline = time.monotonic() + 1.0
    try:
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.01)
        else:
            kill_unreaped(process)
            pid, status, usage = os.wait4(process.pid, 0)
    except ChildProcessError:
        return None  # reaped elsewhere: gone, its CPU time unknown
    finally:
        process.stdout.close()
    process.returncode = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return round(usage.ru_utime + usage.ru_stime, 4)
