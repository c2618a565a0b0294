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
for, every later one with the first, handles included. A difference, or no good reading
for STALE_AFTER seconds, calls on_lost once with what changed and when, and ends the
watch. With each reading it reads that process's /proc/PID/status too: a sandbox that is
not under its seccomp profile (filter mode, one filter more than the session's own
process) is lost the same way. nft reads its standard input: it ends when the session
closes that pipe, and with the session's death (end of file, and a parent-death signal).
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time

# Seconds between two readings; a change is seen at most this long after it was made.
INTERVAL = 2.0
# No good reading for this long: the table cannot be read.
STALE_AFTER = 2 * INTERVAL
# The JSON document of a reading (nft may print something before it on the line, such
# as a prompt, depending on how it was built).
_JSON_START = '{"nftables"'
# A reading larger than this is no table the entrypoint installed.
MAX_READING = 4 * 1024 * 1024
# The host tools the helper runs, found in the system directories only (_host_tools:
# never through the caller's PATH, which may name the project's directories).
TOOLS = ("nsenter", "setpriv", "nft")
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
    """({tool: absolute path or None}, problem or None): the host's nsenter, setpriv and
    nft, in the system's directories (_host_tools)."""
    found = dict((tool, _host_tools.resolve(tool)) for tool in TOOLS)
    problems = [problem for _path, problem in found.values() if problem]
    if problems:
        problems.append("the session reads the sandbox's table from outside with the host's nft and nsenter; run "
                        "provision.yml (the host role installs nftables and util-linux)")
    return dict((tool, path) for tool, (path, _problem) in found.items()), "; ".join(problems) or None


def process_status(pid):
    """(/proc/PID/status's text, None) or (None, why it cannot be read)."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            return handle.read(), None
    except OSError as error:
        return None, "/proc/%d/status cannot be read (%s)" % (pid, error.strerror)


def _alive(pid):
    """Whether process PID exists (the sandbox's first process runs as another user:
    kill -0 is refused while it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EnforcementWatch(object):
    """One session's watch; start() once the entrypoint has reported its table."""

    def __init__(self, pidfile, policy_text, tools, on_lost, interval=INTERVAL, stale_after=STALE_AFTER,
                 seccomp=None):
        """SECCOMP: the seccomp fields the sandbox's /proc/PID/status must show
        (_seccomp.wanted_status), or None where it runs under podman's default profile."""
        self.pidfile = pidfile
        self.wanted = _ruleset.expected(policy_text)
        self.seccomp = seccomp
        self.tools = tools
        self.on_lost = on_lost
        self.interval = interval
        self.stale_after = stale_after
        self.argv = None
        self.readings = 0
        self.first = None          # the first reading's lines, handles included
        self.first_at = None
        self.last_good_at = None
        self.last_error = None
        self.lost = None
        self.cpu = {"helper_s": None, "thread_s": None}
        self._stopping = threading.Event()
        self._thread = None
        self._process = None
        self._buffer = b""
        # The helper's output has ended: it is exiting or has exited.
        self._eof = False

    # -- the session's side
    def start(self):
        self._thread = threading.Thread(target=self._run, name="aisb-enforcement-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout=10.0):
        """End the watch and its helper (the sandbox has exited); wait for both."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def report(self):
        """What the record keeps."""
        return {
            "interval_s": self.interval, "stale_after_s": self.stale_after, "command": self.argv,
            "readings": self.readings, "first_reading_at": self.first_at, "last_good_reading_at": self.last_good_at,
            "table": [line.rsplit(" [handle ", 1)[0] for line in self.first or []],
            "last_error": self.last_error, "lost": self.lost, "seccomp": self.seccomp,
            "cpu_s": self.cpu,
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
            self._end_helper()
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
        # A helper that lives as long as the sandbox and answers each reading on its pipes:
        # run_command runs a command to its end.
        self._process = subprocess.Popen(  # pylint: disable=ansible-bad-function
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=HELPER_ENV,
            close_fds=True)
        failure = None  # the first failed reading since the last good one: the cause
        while not self._stopping.is_set():
            asked = time.monotonic()
            text, error = self._reading(deadline)
            now = time.time()
            if self._stopping.is_set():
                return  # the session ended meanwhile: its sandbox is gone
            if error is None:
                try:
                    with_handles, lines = _ruleset.parse(text)
                except _ruleset.RulesetError as bad:
                    error = "nft printed no ruleset: %s" % bad
            if error is None and self.seccomp is not None:
                status, error = process_status(pid)
                if error is None and self._seccomp_differs(status, now):
                    return
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
            elif self._differs(with_handles, lines, now):
                return
            else:
                deadline, failure = time.monotonic() + self.stale_after, None
            self._stopping.wait(max(0.0, asked + self.interval - time.monotonic()))

    def _differs(self, with_handles, lines, now):
        """Compare one good reading; on a difference call _lose and return True."""
        if self.first is None:
            change = _ruleset.difference(self.wanted, lines)
            what = "the first reading differs from the table the policy asks for"
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

    def _seccomp_differs(self, status, now):
        """Compare the sandbox's seccomp fields (STATUS, its /proc/PID/status) with what
        its profile gives; on a difference call _lose and return True."""
        change = _seccomp.status_difference(self.seccomp, status)
        if change["removed"]:
            self._lose("the sandbox is not under its seccomp profile", now, change)
            return True
        return False

    def _lose(self, what, now, change=None):
        if self.lost is not None:
            return
        self.lost = {"what": what, "at": now, "at_text": format_time(now), "last_good_at": self.last_good_at,
                     "removed": (change or {}).get("removed", []), "added": (change or {}).get("added", [])}
        self.on_lost(self.lost)

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
            ready, _w, _x = select.select([fd], [], [], min(remaining, 0.5))
            if not ready:
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
        moment before its exit status), without reaping it (_end_helper does, for its
        rusage)."""
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

    def _end_helper(self):
        """Close the helper's input (nft ends at end of file), kill it if it lingers,
        and keep its CPU time (wait4's rusage)."""
        process = self._process
        if process is None:
            return
        try:
            process.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + 1.0
        try:
            while time.monotonic() < deadline:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.01)
            else:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
        except ChildProcessError:
            return  # reaped elsewhere: gone, its CPU time unknown
        finally:
            process.stdout.close()
        process.returncode = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        self.cpu["helper_s"] = round(usage.ru_utime + usage.ru_stime, 4)
