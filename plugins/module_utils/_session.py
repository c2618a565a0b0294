# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""One sandboxed session: the plan (pure) and its execution on the host.

plan_session() turns validated inputs into everything that will run: the gate's and
the sandbox's podman command lines, the policy file the entrypoint reads, the gate's
session configuration and the sandbox's environment. SessionRunner executes a plan
and removes every container it started on every exit path.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import termios
import threading
import time
import uuid

from ansible_collections.aisb.sandbox.plugins.module_utils import _podman, _watchdog
from ansible_collections.aisb.sandbox.plugins.module_utils._enforcement_watch import EnforcementWatch
from ansible_collections.aisb.sandbox.plugins.module_utils._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils._policy import MAPPED_LOOPBACK, render_sandbox_policy
from ansible_collections.aisb.sandbox.plugins.module_utils._squid import render_session_conf

GATE_PATHS = ("map-host-loopback", "tcp-forward")
SESSION_LABEL = "aisb.session"
# The entrypoint writes the ruleset it installed, as nft JSON, to this descriptor and
# closes it before the harness runs: the record gets it, the agent never holds it.
REPORT_FD = 3
# The harness's environment arrives on this descriptor (NAME=VALUE pairs, each ended by
# a NUL byte), read only after every privilege is dropped (the image's harness-exec).
ENV_FD = 4
GATE_READY_TIMEOUT = 15.0
# The enforcement watch starts when the entrypoint's report arrives (it comes before the
# entrypoint waits for the gate); when none has come this long after podman run started,
# the watch starts anyway: a sandbox never runs unwatched because a report went missing.
REPORT_WAIT = 30.0
# Runs each podman that creates a container: it dies with the session (parent-death
# signal), so after a SIGKILL no container can still be on its way while the watchdog
# removes them.
DIE_WITH_SESSION = ["setpriv", "--pdeathsig", "KILL", "--"]
# squid's access log line (logformat aisb in _squid.render_session_conf).
GATE_LOG_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+) dst=(?P<dst>\S+)$")


class SessionError(RuntimeError):
    """The session could not start or did not end cleanly; the message says why."""


def new_session_id():
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def proxy_environment(proxy_url):
    """Proxy settings for the usual tools: curl, pip, git (lower and upper case), npm,
    and node's own fetch (NODE_USE_ENV_PROXY)."""
    if proxy_url is None:
        return {}
    local = "localhost,127.0.0.1,::1"
    return {
        "HTTP_PROXY": proxy_url, "HTTPS_PROXY": proxy_url, "http_proxy": proxy_url,
        "https_proxy": proxy_url, "NO_PROXY": local, "no_proxy": local,
        "npm_config_proxy": proxy_url, "npm_config_https_proxy": proxy_url,
        "NODE_USE_ENV_PROXY": "1",
    }


def network_plan(mode, gate_path, port):
    """(podman --network value, gate as the sandbox reaches it or None, proxy URL or None)."""
    if mode == "none":
        return "none", None, None
    if mode == "no-gate":
        return _podman.NO_GATE_NETWORK, None, None
    if gate_path == "map-host-loopback":
        # --no-map-gw: the gateway address would otherwise lead to the host's loopback
        # too, on every port; the ruleset blocks it, this removes it.
        return ("pasta:--map-host-loopback,%s,--no-map-gw" % MAPPED_LOOPBACK,
                (MAPPED_LOOPBACK, port), "http://%s:%d" % (MAPPED_LOOPBACK, port))
    if gate_path == "tcp-forward":
        # -T PORT: the sandbox's own 127.0.0.1:PORT is forwarded to the host's.
        return ("pasta:-T,%d,--no-map-gw" % port, ("127.0.0.1", port), "http://127.0.0.1:%d" % port)
    raise SessionError("gate path %r is not one of %s: the facts name no way to reach a gate"
                       % (gate_path, ", ".join(GATE_PATHS)))


def limit_options(limits, enforceable, required):
    """podman options for LIMITS ({memory, pids, cpus}); a refusal when the operator
    requires limits this host cannot enforce, and nothing when it cannot and they are
    not required (the record says so)."""
    limits = dict((k, v) for k, v in (limits or {}).items() if v not in (None, ""))
    if not limits:
        return []
    if not enforceable:
        if required:
            raise SessionError(
                "limits %s are required but aisb_host.verdict.limits_enforceable is false on this "
                "host (rootless podman on cgroup v1 cannot enforce them); move the host to cgroup v2 "
                "or drop require_limits" % json.dumps(limits, sort_keys=True))
        return []
    options = []
    if "memory" in limits:
        options.append("--memory=%s" % limits["memory"])
    if "pids" in limits:
        options.append("--pids-limit=%d" % int(limits["pids"]))
    if "cpus" in limits:
        options.append("--cpus=%s" % limits["cpus"])
    return options


def plan_session(session_id, inputs, facts, port):
    """Everything a session will run, from validated INPUTS and the host FACTS.

    INPUTS: project (resolved), project_label ("" or "z"), image, gate_image, policy
    (_policy.Policy), policy_dir, network, environment, command, interactive,
    allow_unenforced, limits, require_limits, and for network no-gate hosts ({name:
    [address, ...]} as resolved on the host, already pinned in the policy), watch_tools
    (_enforcement_watch.find_tools: the host's nsenter, setpriv and nft).
    """
    verdict = facts.get("verdict") or {}
    network, gate, proxy_url = network_plan(inputs["network"], verdict.get("gate_path"), port)
    environment = dict(inputs["environment"])
    environment.update(proxy_environment(proxy_url))
    environment["AISB_SESSION"] = session_id
    names = {"gate": "aisb-gate-" + session_id, "sandbox": "aisb-sandbox-" + session_id}
    labels = {SESSION_LABEL: session_id}
    plan = {
        "session_id": session_id,
        "names": names,
        # The harness's, applied after the privilege drop; never podman's own.
        "environment": environment,
        "policy_text": render_sandbox_policy(inputs["policy"], gate),
        "gate": None,
        # The table is watched from outside for the whole session, unless the operator
        # asked to run unenforced (debugging only).
        "enforcement_watch": None if inputs.get("allow_unenforced") else {"tools": inputs["watch_tools"]},
        "limits": limit_options(inputs.get("limits"), verdict.get("limits_enforceable") is True,
                                inputs.get("require_limits", False)),
    }
    if gate is not None:
        plan["gate"] = {
            "port": port,
            "conf_text": render_session_conf(port, session_id, _podman.GATE_POLICY_CONF),
        }
    plan["sandbox_options"] = {
        "name": names["sandbox"], "image": inputs["image"], "project": inputs["project"],
        "project_label": inputs.get("project_label", ""), "network": network,
        # The entrypoint's whole environment beyond podman's defaults: the session's
        # own values, nothing an operator or the project wrote.
        "env": {"AISB_SESSION": session_id, "AISB_REPORT_FD": str(REPORT_FD), "AISB_ENV_FD": str(ENV_FD)},
        "labels": labels, "limits": plan["limits"],
        "interactive": inputs.get("interactive", False), "preserve_fds": ENV_FD - 2,
        "command": (["--allow-unenforced"] if inputs.get("allow_unenforced") else []) + list(inputs["command"]),
        "hosts": [(name, address) for name, addresses in sorted(inputs.get("hosts", {}).items())
                  for address in addresses],
        # project git guard (WIRING.md): read-only mounts inside /project.
        "project_mounts": (inputs.get("project_git") or {}).get("mounts", []),
    }
    return plan


def parse_gate_log(text):
    """The gate's decisions from its access log: {"allowed": [...], "denied": [...]}."""
    decisions = {"allowed": [], "denied": []}
    for line in text.splitlines():
        match = GATE_LOG_LINE.match(line.strip())
        # The readiness probe connects and leaves before sending a request.
        if not match or match.group("url").startswith("error:"):
            continue
        entry = {"time": float(match.group("time")), "method": match.group("method"),
                 "url": match.group("url"), "status": "%s/%s" % (match.group("status"), match.group("code"))}
        denied = match.group("status").startswith("TCP_DENIED") or match.group("code") == "403"
        decisions["denied" if denied else "allowed"].append(entry)
    return decisions


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


class Interrupted(Exception):
    """A signal ended the session early."""


class SessionRunner(object):
    """Runs a plan on this host. Every container it starts is removed on every exit path."""

    def __init__(self, plan, session_dir, podman="podman", environ=None):
        self.plan = plan
        self.session_dir = session_dir
        self.podman = podman
        # Every process this runner starts gets this, never the session's own environment.
        self.environ = host_environment(environ if environ is not None else os.environ)
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
        self._watch_lock = threading.Lock()
        # Seconds podman stop waits before SIGKILL; 0 once nobody may wait for the harness.
        self._stop_grace = 2
        self._pidfile = os.path.join(session_dir, "sandbox.pid")
        self._started = []
        self._finished = False
        self._process = None
        self._watchdog = None

    # -- side effects, each through one of these two
    def _run(self, argv, check=True, die_with_session=False):
        self.commands.append(argv)
        result = subprocess.run((DIE_WITH_SESSION if die_with_session else []) + argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False,
                                env=self.environ)
        if check and result.returncode != 0:
            raise SessionError("%s failed (exit %d): %s" % (" ".join(argv[:3]), result.returncode,
                                                            result.stderr.strip()[-500:]))
        return result

    def write(self, name, text, mode=0o600):
        path = os.path.join(self.session_dir, name)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as handle:
            handle.write(text)
        return path

    # -- removal that outlives this process
    def start_watchdog(self, record):
        """Start a process (_watchdog) that removes this session's containers and writes
        RECORD, the record as prepared at start, if this one dies without saying it has
        (release_watchdog). Its own session: a signal to this process group or terminal
        does not reach it."""
        names = [self.plan["names"]["sandbox"]] + ([self.plan["names"]["gate"]] if self.plan["gate"] else [])
        argv = _watchdog.argv(sys.executable, record["record"], _podman.remove(self.podman, names))
        read_end, write_end = os.pipe()
        try:
            process = subprocess.Popen(argv, stdin=read_end,
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
        conf = self.write("gate-session.conf", self.plan["gate"]["conf_text"], 0o644)
        name = self.plan["names"]["gate"]
        self._started.append(name)
        argv = _podman.gate_run(self.podman, gate_image, name, policy_dir, conf,
                                extra=["--detach", "--label", "%s=%s" % (SESSION_LABEL, self.plan["session_id"])])

        def start_and_watch():
            try:
                self._run(argv, die_with_session=True)
            except (SessionError, OSError) as error:
                self.gate_error = "the gate did not start: %s" % error
                self.stop_sandbox()
                return
            finally:
                self._gate_started.set()
            result = subprocess.run(_podman.wait(self.podman, name), stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, check=False, env=self.environ)
            if result.returncode == 0 and not self._finished:
                self.gate_died = True
                self.stop_sandbox()

        threading.Thread(target=start_and_watch, daemon=True).start()

    def collect_gate_log(self):
        if self.plan["gate"] is None:
            return
        result = self._run(_podman.logs(self.podman, self.plan["names"]["gate"]), check=False)
        self.gate_log = result.stdout + result.stderr

    # -- the sandbox
    def run_sandbox(self, stdout, stdin=None):
        """Run the sandbox attached; return its exit code.

        STDOUT receives its output; STDIN, when given, is a terminal shared with stdout
        (an interactive session: podman gets a TTY and follows its size)."""
        policy = self.write("policy", self.plan["policy_text"], 0o644)
        options = dict(self.plan["sandbox_options"], policy_file=policy, pidfile=self._pidfile)
        argv = _podman.sandbox_run(self.podman, **options)
        self.commands.append(argv)
        self._started.append(options["name"])
        report_read, report_write = os.pipe()
        env_read, env_write = os.pipe()
        reader = threading.Thread(target=self._read_report, args=(report_read,), daemon=True)
        reader.start()
        threading.Thread(target=write_environment, args=(env_write, self.plan["environment"]), daemon=True).start()
        # podman --preserve-fds hands descriptors 3 and 4 to the container: a shell puts
        # the two pipes there from descriptors above them (bash: dash reads only
        # single-digit descriptors in redirections).
        inherited = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (report_write, env_read)]
        for fd in (report_write, env_read):
            os.close(fd)
        relay = ["bash", "-c", 'exec %d>&%d %d<&%d %d>&- %d<&-; exec "$@"' % (
            REPORT_FD, inherited[0], ENV_FD, inherited[1], inherited[0], inherited[1]), "bash"]
        try:
            self._process = subprocess.Popen(
                DIE_WITH_SESSION + relay + argv, stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=stdout,
                stderr=stdout if stdin is not None else subprocess.STDOUT, env=self.environ, pass_fds=inherited)
        finally:
            for fd in inherited:
                os.close(fd)
        if stdin is not None:
            threading.Thread(target=follow_window_size, args=(stdin, self._process), daemon=True).start()
        threading.Thread(target=self._stop_when_wanted, args=(self._process,), daemon=True).start()
        unreported = threading.Timer(REPORT_WAIT, self._start_enforcement_watch)
        unreported.daemon = True
        unreported.start()
        try:
            return self._process.wait()
        finally:
            unreported.cancel()
            self._finished = True
            self._stop_wanted.set()  # ends _stop_when_wanted's wait; the sandbox has exited
            reader.join(timeout=2)
            self._end_enforcement_watch()

    def _stop_when_wanted(self, process):
        # A stop that runs before the sandbox's container exists does nothing: repeat it.
        self._stop_wanted.wait()
        while process.poll() is None:
            self._run(_podman.stop(self.podman, [self.plan["names"]["sandbox"]], grace=self._stop_grace), check=False)
            time.sleep(0.2)

    def _read_report(self, fd):
        with os.fdopen(fd, "r") as report:
            # nft -j prints one line. podman holds the pipe open until the sandbox exits:
            # the line, not the end of the file, says the entrypoint has installed its table.
            text = report.readline()
            if text.strip():
                self._start_enforcement_watch()
            text += report.read()
        try:
            self.ruleset = json.loads(text) if text.strip() else None
        except ValueError:
            self.ruleset = {"unparsed": text[:4000]}

    def controller_lost(self, reason):
        """Whatever controlled the session went away (_controller.Watch): stop the
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
    def _start_enforcement_watch(self):
        with self._watch_lock:
            if self.plan["enforcement_watch"] is None or self._finished or self.enforcement_watch is not None:
                return
            self.enforcement_watch = EnforcementWatch(self._pidfile, self.plan["policy_text"],
                                                      self.plan["enforcement_watch"]["tools"], self._enforcement_lost)
            self.enforcement_watch.start()

    def _enforcement_lost(self, lost):
        if not self._finished:
            self.enforcement_lost = lost
            self.stop_sandbox(at_once=True)

    def _end_enforcement_watch(self):
        with self._watch_lock:
            watch = self.enforcement_watch
        if watch is not None:
            watch.stop()

    def enforcement_report(self):
        """What the record keeps about the watch."""
        if self.plan["enforcement_watch"] is None:
            return {"watched": False, "why": "allow_unenforced"}
        if self.enforcement_watch is None:
            return {"watched": False, "why": "the sandbox ended before the entrypoint reported its table"}
        return dict(self.enforcement_watch.report(), watched=True)

    def cleanup(self):
        """Remove every container this session started; safe to call more than once."""
        self._finished = True
        if self.plan["names"]["gate"] in self._started:
            self._gate_started.wait()
        if self.plan["gate"] is not None and not self.gate_log:
            self.collect_gate_log()
        if self._started:
            self._run(_podman.remove(self.podman, self._started), check=False)
            self._started = []
        self.release_watchdog()


def environment_bytes(environment):
    """ENVIRONMENT as the harness's exec reads it: NAME=VALUE pairs, each ended by NUL."""
    return b"".join(("%s=%s" % item).encode("utf-8") + b"\0" for item in sorted(environment.items()))


def write_environment(fd, environment):
    """Write the harness's environment into the pipe FD and close it. The sandbox may
    end before reading it (a refusal before the drop): then there is nobody to tell."""
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(environment_bytes(environment))
    except OSError:
        pass


def follow_window_size(terminal, process, interval=0.2):
    """Relay terminal resizes to podman as SIGWINCH.

    The terminal belongs to ansible-playbook's process group, so the kernel's SIGWINCH
    goes there, not to podman; podman resizes the sandbox's TTY when it gets one."""
    last = None
    while process.poll() is None:
        try:
            size = fcntl.ioctl(terminal, termios.TIOCGWINSZ, b"\0" * 8)
        except OSError:
            return
        if last is not None and size != last:
            try:
                process.send_signal(signal.SIGWINCH)
            except OSError:
                return
        last = size
        time.sleep(interval)


class signals_raise(object):
    """Within the block, SIGTERM, SIGINT and SIGHUP raise Interrupted (so cleanup runs)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __enter__(self):
        self._previous = dict((s, signal.getsignal(s)) for s in self.SIGNALS)

        def handler(signum, _frame):
            raise Interrupted(signal.Signals(signum).name)

        for s in self.SIGNALS:
            signal.signal(s, handler)
        return self

    def __exit__(self, *_exc):
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        return False
