# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's execution on this host: SessionRunner runs a plan (_session_plan).

It starts the gate and the sandbox, hands the sandbox its two descriptors (the
entrypoint's report, the harness's environment), watches the table from outside
(_enforcement_watch), and removes every container it started on every exit path,
with a watchdog (_watchdog) for the paths where this process cannot.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _gate_state, _watchdog
from ansible_collections.aisb.sandbox.plugins.module_utils.session._enforcement_watch import (
    EnforcementWatch, process_status, sandbox_pid)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError
from ansible_collections.aisb.sandbox.plugins.module_utils.gate._gate_unit import POLICY_LABEL
from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy_dir import policy_hash
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SQUID_POLICY_CONF
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import subprocess_execute
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_outcome import Seen, decide
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_plan import (
    ENV_FD, POLICY_FILE, REPORT_FD, SESSION_LABEL, environment_bytes)
from ansible_collections.aisb.sandbox.plugins.module_utils.session._terminal import follow_window_size

# The enforcement watch starts when the entrypoint's report arrives (before the entrypoint
# waits for the gate, and so before the harness). When none has come this long after the
# sandbox's container started (podman wrote its pid file: creating it took over 30 s on a
# loaded host), the sandbox is stopped: it never runs unwatched because a report went
# missing, and a slow podman is no lost enforcement.
REPORT_WAIT = 30.0
# How often the wait for the container's start looks for the pid file.
START_POLL = 0.1


def die_with_session(setpriv):
    """What runs each podman that creates a container (SETPRIV: its absolute path): it
    dies with the session (parent-death signal), so after a SIGKILL no container can
    still be on its way while the watchdog removes them."""
    return [setpriv, "--pdeathsig", "KILL", "--"]


class SessionRunner(object):
    """Runs a plan on this host. Every container it starts is removed on every exit path."""

    def __init__(self, plan, session_dir, tools, environ=None):
        """PLAN: a _session_plan.SessionPlan for SESSION_DIR. TOOLS: {podman, bash, setpriv:
        absolute path} (_host_tools.resolve)."""
        self.plan = plan
        self.session_dir = session_dir
        self.podman = tools["podman"]
        self._die_with_session = die_with_session(tools["setpriv"])
        self._bash = tools["bash"]
        # Every process this runner starts gets this, never the session's own environment.
        self.environ = host_environment(environ if environ is not None else os.environ)
        self._execute = subprocess_execute(self.environ)
        self.commands = []
        self.gate_log = ""
        self.gate_died = False
        self.gate_error = None
        # Set once the gate's podman run has returned: removal must not race its start.
        self._gate_started = threading.Event()
        # Set when the sandbox must not run (its gate failed or died): a stop that came
        # before the sandbox's container existed is repeated while the sandbox runs.
        self._stop_wanted = threading.Event()
        self.ruleset = None
        # Why the session's controller went away (controller_lost), or None.
        self.lost = None
        self.enforcement_watch = None
        self.enforcement_lost = None
        # What the gate was started with (_gate_state.GateStarted), for the watch.
        self.gate_started = None
        # Set when the entrypoint's report arrived; else why the sandbox was stopped without one.
        self._reported = threading.Event()
        self.unreported = None
        self._watch_lock = threading.Lock()
        # Seconds podman stop waits before SIGKILL; 0 once nobody may wait for the harness.
        self._stop_grace = 2
        self._pidfile = plan.sandbox_options.pidfile
        self._started = []
        self._finished = False
        self._process = None
        self._watchdog = None

    # -- side effects, each through one of these two
    def _run(self, argv, check=True, die_with_session=False):
        self.commands.append(argv)
        rc, out, err = self._execute((self._die_with_session if die_with_session else []) + argv)
        if check and rc != 0:
            raise SessionError("%s failed (exit %s): %s" % (" ".join(argv[:3]), rc, err.strip()[-500:]))
        return out, err

    def write(self, name, text, mode=0o600):
        """Write TEXT to NAME in the session's directory (NAME may name subdirectories).
        SessionError naming the file when it cannot be (a full disk): the session ends
        with that sentence, and its cleanup still runs."""
        path = os.path.join(self.session_dir, name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as handle:
                handle.write(text)
        except OSError as error:
            raise SessionError("the session's file could not be written to %s: %s" % (path, error.strerror))
        return path

    # -- removal that outlives this process
    def start_watchdog(self, record, key_path):
        """Start a process (_watchdog) that removes this session's containers and writes
        RECORD, the record as prepared at start, sealed with the key in KEY_PATH, if this
        one dies without saying it has (release_watchdog). Its own session: a signal to this process group or terminal
        does not reach it."""
        names = [self.plan.names.sandbox] + ([self.plan.names.gate] if self.plan.gate else [])
        argv = _watchdog.argv(sys.executable, record["record"], key_path, _podman.remove(self.podman, names))
        read_end, write_end = os.pipe()
        try:
            # It must outlive this process, in a session of its own: run_command waits for it.
            process = subprocess.Popen(argv, stdin=read_end,  # pylint: disable=ansible-bad-function
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       env=self.environ, start_new_session=True)
        except OSError:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._watchdog = (process, write_end)
        try:
            # The watchdog reads while this writes: a record bigger than the pipe cannot block.
            with os.fdopen(os.dup(write_end), "wb") as pipe:
                pipe.write(json.dumps(record, sort_keys=True).encode("utf-8") + b"\n")
        except OSError as error:
            raise SessionError("the watchdog did not start: %s" % error)

    def release_watchdog(self):
        """Tell the watchdog the containers are gone and wait for it to exit."""
        if self._watchdog is None:
            return
        process, write_end = self._watchdog
        self._watchdog = None
        try:
            os.write(write_end, _watchdog.DONE)
        except OSError:
            pass  # The watchdog died: it can remove nothing, and cleanup() already has.
        finally:
            os.close(write_end)
            process.wait()

    # -- the gate
    def start_gate(self, gate_image, policy_dir):
        """Start the gate without waiting for it: the sandbox starts meanwhile, and its
        entrypoint waits (bounded) until the gate answers before the harness runs.

        In the background: if the gate cannot start, or exits while the session runs, the
        sandbox is stopped (without its gate it has no egress) and gate_error or
        gate_died says why."""
        conf = self.write("gate-session.conf", self.plan.gate.conf_text, 0o644)
        try:
            with open(os.path.join(policy_dir, SQUID_POLICY_CONF), "rb") as handle:
                policy_conf = handle.read()
        except OSError as error:
            raise SessionError("the gate's policy cannot be read: %s: %s" % (error.filename, error.strerror))
        self.gate_started = _gate_state.GateStarted(self.plan.gate.pidfile, self.plan.gate.port, {
            _podman.GATE_SESSION_CONF: _gate_state.digest(self.plan.gate.conf_text),
            _podman.GATE_POLICY_CONF: _gate_state.digest(policy_conf)})
        name = self.plan.names.gate
        self._started.append(name)
        argv = _podman.gate_run(self.podman, gate_image, name, policy_dir, conf,
                                extra=["--detach", "--pidfile", self.plan.gate.pidfile,
                                       "--label", "%s=%s" % (SESSION_LABEL, self.plan.session_id),
                                       # retention keeps a policy a container is labelled with
                                       "--label", "%s=%s" % (POLICY_LABEL, policy_hash(policy_dir))])

        def start_and_watch():
            try:
                self._run(argv, die_with_session=True)
            except (SessionError, OSError) as error:
                self.gate_error = "the gate did not start: %s" % error
                self.stop_sandbox()
                return
            finally:
                self._gate_started.set()
            rc, _out, _err = self._execute(_podman.wait(self.podman, name))
            if rc == 0 and not self._finished:
                self.gate_died = True
                self.stop_sandbox()

        threading.Thread(target=start_and_watch, daemon=True).start()

    def collect_gate_log(self):
        if self.plan.gate is None:
            return
        out, err = self._run(_podman.logs(self.podman, self.plan.names.gate), check=False)
        self.gate_log = out + err

    # -- the sandbox
    def run_sandbox(self, stdout, stdin=None):
        """Run the sandbox attached; return its exit code.

        STDOUT receives its output; STDIN, when given, is a terminal shared with stdout
        (an interactive session: podman gets a TTY and follows its size)."""
        # The files the plan's sandbox options mount from the session's directory.
        self.write(POLICY_FILE, self.plan.policy_text, 0o644)
        for name, text in self.plan.session_files:
            self.write(name, text, 0o644)
        if self.plan.seccomp_profile is not None:
            self.write(_seccomp.PROFILE_FILE, self.plan.seccomp_profile, 0o644)
        argv = _podman.sandbox_run(self.podman, self.plan.sandbox_options)
        self.commands.append(argv)
        self._started.append(self.plan.names.sandbox)
        report_read, report_write = os.pipe()
        env_read, env_write = os.pipe()
        reader = threading.Thread(target=self._read_report, args=(report_read,), daemon=True)
        reader.start()
        threading.Thread(target=write_environment, args=(env_write, self.plan.environment), daemon=True).start()
        # podman --preserve-fds hands descriptors 3 and 4 to the container: a shell puts
        # the two pipes there from descriptors above them (bash: dash reads only
        # single-digit descriptors in redirections).
        inherited = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (report_write, env_read)]
        for fd in (report_write, env_read):
            os.close(fd)
        relay = [self._bash, "-c", 'exec %d>&%d %d<&%d %d>&- %d<&-; exec "$@"' % (
            REPORT_FD, inherited[0], ENV_FD, inherited[1], inherited[0], inherited[1]), "bash"]
        try:
            # Attached to a terminal, handed two descriptors, stopped and resized while it runs:
            # run_command only captures a command's output to its end.
            self._process = subprocess.Popen(  # pylint: disable=ansible-bad-function
                self._die_with_session + relay + argv, stdout=stdout,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stderr=stdout if stdin is not None else subprocess.STDOUT, env=self.environ, pass_fds=inherited)
        finally:
            for fd in inherited:
                os.close(fd)
        if stdin is not None:
            threading.Thread(target=follow_window_size, args=(stdin, self._process), daemon=True).start()
        threading.Thread(target=self._stop_when_wanted, args=(self._process,), daemon=True).start()
        if self.plan.enforcement_watch is not None:  # allow_unenforced: no table, no report
            threading.Thread(target=self._stop_unless_reported, args=(self._process,), daemon=True).start()
        try:
            return self._process.wait()
        finally:
            self._finished = True
            self._stop_wanted.set()  # ends _stop_when_wanted's wait; the sandbox has exited
            reader.join(timeout=2)
            self._end_enforcement_watch()

    def _stop_when_wanted(self, process):
        # A stop that runs before the sandbox's container exists does nothing: repeat it.
        self._stop_wanted.wait()
        while process.poll() is None:
            self._run(_podman.stop(self.podman, [self.plan.names.sandbox], grace=self._stop_grace), check=False)
            time.sleep(0.2)

    def _stop_unless_reported(self, process):
        """Stop the sandbox when the entrypoint has not reported its table REPORT_WAIT
        seconds after its container started (the pid file), however long podman took to
        create it; until then it has not started, which is nothing lost."""
        while not self._reported.is_set() and process.poll() is None and sandbox_pid(self._pidfile) is None:
            self._reported.wait(START_POLL)
        if self._reported.wait(REPORT_WAIT) or process.poll() is not None:
            return
        self.unreported = ("the entrypoint never reported its table within %d s of the sandbox's start; the sandbox "
                           "was stopped" % REPORT_WAIT)
        self.stop_sandbox(at_once=True)

    def _read_report(self, fd):
        with os.fdopen(fd, "r") as report:
            # nft -j prints one line. podman holds the pipe open until the sandbox exits:
            # the line, not the end of the file, says the entrypoint has installed its table.
            text = report.readline()
            if text.strip():
                self._reported.set()
                self._start_enforcement_watch(text)
            text += report.read()
        try:
            self.ruleset = json.loads(text) if text.strip() else None
        except ValueError:
            self.ruleset = {"unparsed": text[:4000]}

    def controller_lost(self, reason):
        """Whatever controlled the session went away (_controller.ControllerWatch): stop the
        sandbox at once (nobody is left to wait for the harness: no grace period); the
        session then ends as on any other stop, with status controller-lost."""
        self.lost = reason
        self.stop_sandbox(at_once=True)

    def stop_sandbox(self, at_once=False):
        """Stop the sandbox, now or as soon as it starts, for as long as it runs: one place,
        _stop_when_wanted, does the stopping. AT_ONCE: SIGKILL, no grace period."""
        if at_once:
            self._stop_grace = 0
        self._stop_wanted.set()

    # -- the enforcement watch (_enforcement_watch.py)
    def _start_enforcement_watch(self, reported):
        """REPORTED: the entrypoint's report of its table (its first line)."""
        with self._watch_lock:
            if self.plan.enforcement_watch is None or self._finished or self.enforcement_watch is not None:
                return
            seccomp = None
            if self.plan.seccomp_profile is not None:
                # One filter more than this process is under (podman and its runtime descend from it).
                seccomp = _seccomp.wanted_status(process_status(os.getpid())[0] or "")
            self.enforcement_watch = EnforcementWatch(self._pidfile, self.plan.policy_text,
                                                      self.plan.enforcement_watch, self._enforcement_lost,
                                                      seccomp=seccomp, reported=reported, canaries=True,
                                                      gate=self.gate_started,
                                                      sni_canary=self.plan.gate.sni_canary if self.plan.gate else None)
            self.enforcement_watch.start()

    def _enforcement_lost(self, lost):
        if not self._finished:
            self.enforcement_lost = lost
            self.stop_sandbox(at_once=True)
            # podman stop takes a few tenths of a second to kill it, during which traffic the
            # change let through still gets out: its first process (the init of its PID
            # namespace, so all of it goes) is the session user's to kill now.
            pid = sandbox_pid(self._pidfile)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass  # gone already, or not this user's: podman stop still runs

    def _end_enforcement_watch(self):
        with self._watch_lock:
            watch = self.enforcement_watch
        if watch is not None:
            watch.stop()

    def outcome(self, ended):
        """The session's _session_outcome.Outcome: ENDED (how the sandbox's run returned)
        with what this runner saw around it."""
        return decide(ended, Seen(enforcement_lost=self.enforcement_lost, unreported=self.unreported,
                                  gate_error=self.gate_error, gate_died=self.gate_died, controller_lost=self.lost))

    def enforcement_report(self):
        """What the record keeps about the watch."""
        if self.plan.enforcement_watch is None:
            return {"watched": False, "why": "allow_unenforced"}
        if self.enforcement_watch is None:
            return {"watched": False, "why": "the sandbox ended before the entrypoint reported its table"}
        return dict(self.enforcement_watch.report(), watched=True)

    def cleanup(self):
        """Remove every container this session started; safe to call more than once."""
        self._finished = True
        if self.plan.names.gate in self._started:
            self._gate_started.wait()
        if self.plan.gate is not None and not self.gate_log:
            self.collect_gate_log()
        if self._started:
            self._run(_podman.remove(self.podman, self._started), check=False)
            self._started = []
        self.release_watchdog()


def write_environment(fd, environment):
    """Write the harness's environment into the pipe FD and close it. The sandbox may
    end before reading it (a refusal before the drop): then there is nobody to tell."""
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(environment_bytes(environment))
    except OSError:
        pass
