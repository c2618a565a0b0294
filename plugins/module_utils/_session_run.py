# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session from parameters to record: validate, check the facts, plan, run, record.

Shared by the session module (headless, inside a task) and the interactive path
(the ansible-playbook process, which holds the terminal).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

from ansible_collections.aisb.sandbox.plugins.module_utils import _controller, _project_git, _session
from ansible_collections.aisb.sandbox.plugins.module_utils._enforcement_watch import find_tools
from ansible_collections.aisb.sandbox.plugins.module_utils._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils._host_facts import (
    cached_fingerprint, check_host_facts, format_time, state_dir)
from ansible_collections.aisb.sandbox.plugins.module_utils._policy import (
    PolicyError, no_gate_names, parse_policy, pin_resolved)
from ansible_collections.aisb.sandbox.plugins.module_utils._session_inputs import (
    SessionInputError, build_environment, check_command, resolve_project)

SESSION_DIR_MODE = 0o700
TRANSCRIPT = "transcript.log"
RECORD = "record.json"
# The module's stdout, whose reader is the controller's side (see _controller).
STDOUT = 1
EXIT_STATUS = {77: "enforcement could not be installed or verified",
               78: "the sandbox's policy was missing or unreadable",
               79: "the gate never answered the sandbox",
               # podman's own exit codes: it, not the harness, failed.
               125: "podman could not run the sandbox",
               126: "podman could not execute the harness command",
               127: "podman did not find the harness command"}


def exit_reason(rc):
    """What an exit code of the sandbox's podman says beyond the harness's own result."""
    if rc in EXIT_STATUS:
        return EXIT_STATUS[rc]
    if rc is not None and rc > 128:
        # podman exits 128+N when signal N ended the sandbox's first process.
        return "the sandbox was killed by signal %d" % (rc - 128)
    return ""


def enforcement_lost_reason(lost):
    """One sentence for the record and the task: what changed in the sandbox's table."""
    changes = ["-" + line for line in lost["removed"]] + ["+" + line for line in lost["added"]]
    shown = "; ".join(changes[:6]) + ("; ..." if len(changes) > 6 else "")
    return "%s at %s%s; the sandbox was stopped" % (lost["what"], lost["at_text"], (": " + shown) if shown else "")


def _run_capture(argv):
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                            env=host_environment(os.environ))
    return result.returncode, result.stdout, result.stderr


def resolve_names(names, getaddrinfo=socket.getaddrinfo):
    """{name: [address, ...]} as this host resolves NAMES now (network no-gate pins them);
    SessionInputError naming the first name that does not resolve."""
    resolved = {}
    for name in names:
        try:
            infos = getaddrinfo(name, None, 0, socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise SessionInputError(
                "allow entry %r does not resolve on this host (%s): network no-gate pins the addresses "
                "the allowed names have at session start" % (name, getattr(error, "strerror", None) or error))
        resolved[name] = sorted(set(info[4][0] for info in infos))
    return resolved


def no_gate_refusal(verdict):
    """Why network no-gate must not run on a host with this VERDICT, or None."""
    if verdict.get("gate_path") == "map-host-loopback":
        return ("network no-gate is refused: aisb_host.verdict.gate_path is map-host-loopback, so this host "
                "can run the gate, which is strictly better (it filters by name and never pins whatever "
                "else an address serves); use network allow")
    return None


def podman_directories(environ, home):
    """Where rootless podman keeps this user's storage, configuration and runtime files:
    files there that the agent wrote would be read by the host's podman."""
    data = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [os.path.join(data, "containers"), os.path.join(config, "containers")]
    return found + ([environ["XDG_RUNTIME_DIR"]] if environ.get("XDG_RUNTIME_DIR") else [])


def prepare(params, environ, now=None):
    """Validate PARAMS and the host facts; return (inputs, facts, problems, warnings).

    Nothing starts here. PROBLEMS non-empty means the session must not start.
    """
    now = time.time() if now is None else now
    warnings = []
    home = environ.get("HOME") or os.path.expanduser("~")
    state = state_dir(environ)
    protected = [state] + podman_directories(environ, home)
    try:
        project = resolve_project(params["project"], home, protected)
        policy = parse_policy(params["allow"], params["connect_ports"])
        environment = build_environment(params["environment"], [], {})
        command = check_command(params["command"])
        names = no_gate_names(policy) if params["network"] == "no-gate" else ()
    except (SessionInputError, PolicyError) as error:
        return None, None, [str(error)], warnings
    if params["network"] == "allow" and not (params.get("gate_image") and params.get("policy_dir")):
        return None, None, ["network=allow needs gate_image and policy_dir (run the gate role first)"], warnings
    facts = params.get("host_facts") or {}
    refusal = no_gate_refusal(facts.get("verdict") or {}) if params["network"] == "no-gate" else None
    if refusal:
        return None, None, [refusal], warnings
    fingerprint = cached_fingerprint(_run_capture, environ, podman=params["executable"])
    problems = check_host_facts(facts, fingerprint, now, params["max_facts_age"], network=params["network"])
    watch_tools, missing_tools = find_tools()
    if missing_tools:
        problems.append(missing_tools)
    if problems and params["allow_unenforced"]:
        warnings.extend("allow_unenforced: starting anyway although " + p for p in problems)
        problems = []
    if problems:
        return None, facts, problems, warnings
    try:
        hosts = resolve_names(names)
        policy = pin_resolved(policy, hosts)
    except (SessionInputError, PolicyError) as error:
        return None, None, [str(error)], warnings
    # project git guard (WIRING.md): read-only mounts for what the host's git runs, or a refusal.
    project_git, refusals = _project_git.protect(project, environ, (facts.get("verdict") or {}).get("bind_mount_label", ""))
    if refusals:
        return None, None, refusals, warnings
    inputs = {
        "project_git": project_git,
        "project": project, "project_label": (facts.get("verdict") or {}).get("bind_mount_label", ""),
        "image": params["image"], "gate_image": params.get("gate_image"),
        "policy_dir": params.get("policy_dir"), "policy": policy, "network": params["network"],
        "environment": environment, "command": command, "interactive": params.get("interactive", False),
        "allow_unenforced": params["allow_unenforced"], "limits": params.get("limits") or {},
        "require_limits": params.get("require_limits", False), "hosts": hosts, "watch_tools": watch_tools,
    }
    return inputs, facts, problems, warnings


def _image_labels(executable, image):
    rc, out, _err = _run_capture([executable, "image", "inspect", "--format", "{{json .Labels}}", image])
    try:
        return json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}


def start(inputs, facts, environ):
    """Plan the session and make its directory; returns (plan, runner)."""
    session_id = _session.new_session_id()
    port = _session.free_loopback_port() if inputs["network"] == "allow" else None
    plan = _session.plan_session(session_id, inputs, facts, port)
    session_dir = os.path.join(state_dir(environ), "sessions", session_id)
    os.makedirs(session_dir, mode=SESSION_DIR_MODE)
    runner = _session.SessionRunner(plan, session_dir, podman=inputs.get("executable", "podman"), environ=environ)
    return plan, runner


def execute(inputs, facts, environ, terminal=None, parent=None):
    """Run a prepared session to its end; return the record (also written to disk).

    TERMINAL: a terminal's file descriptor for an interactive session; None runs
    headless, the output going to the session's transcript.
    The session ends with status controller-lost when this process's stdout loses its
    reader (the module's: ansible-playbook's worker or the SSH connection went away) or,
    given PARENT, when this process's parent is no longer PARENT (see _controller)."""
    plan, runner = start(inputs, facts, environ)
    transcript = os.path.join(runner.session_dir, TRANSCRIPT) if terminal is None else None
    # Everything known before anything runs: the watchdog completes it if this process dies.
    record = {
        "session_id": plan["session_id"],
        "started_at": format_time(time.time()),
        "project": inputs["project"],
        "command": inputs["command"],
        "network": inputs["network"],
        # network no-gate: each allowed name and the addresses pinned for it.
        "pinned_names": inputs["hosts"],
        "image": {"tag": inputs["image"]},
        "gate_image": inputs.get("gate_image"),
        "policy_dir": inputs.get("policy_dir"),
        "policy": plan["policy_text"],
        "facts_fingerprint": (facts.get("fingerprint") or {}).get("hash"),
        "limits": plan["limits"],
        "environment_names": sorted(inputs["environment"]),
        "transcript": transcript,
        "record": os.path.join(runner.session_dir, RECORD),
    }
    watch = _controller.Watch(runner.controller_lost, output=STDOUT, parent=parent)
    rc, status, reason = None, "exited", ""
    try:
        with _session.signals_raise():
            runner.start_watchdog(record)
            watch.start()
            if plan["gate"] is not None:
                runner.start_gate(inputs["gate_image"], inputs["policy_dir"])
            if terminal is None:
                with open(transcript, "w") as output:
                    rc = runner.run_sandbox(output)
            else:
                rc = runner.run_sandbox(terminal, terminal)
    except _session.Interrupted as signal_name:
        status, reason = "interrupted", "ansible-playbook received %s" % signal_name
    except _session.SessionError as error:
        status, reason = "failed", str(error)
    finally:
        # The sandbox has ended: a controller that goes now changes nothing the cleanup does.
        watch.stop()
        runner.cleanup()
    if runner.enforcement_lost:
        rc, status, reason = 77, "enforcement-lost", enforcement_lost_reason(runner.enforcement_lost)
    elif runner.gate_error:
        status, reason = "failed", runner.gate_error
    elif runner.gate_died:
        status, reason = "gate-died", "the gate exited while the sandbox ran; the sandbox was stopped"
    elif runner.lost and status == "exited":
        status, reason = "controller-lost", runner.lost + "; the sandbox was stopped"
    elif status == "exited":
        reason = exit_reason(rc)
    record["image"]["labels"] = _image_labels(runner.podman, inputs["image"])
    record.update({
        "ended_at": format_time(time.time()),
        "exit_code": rc,
        "status": status,
        "reason": reason,
        "ruleset": runner.ruleset,
        "enforcement_watch": runner.enforcement_report(),
        "gate": _session.parse_gate_log(runner.gate_log),
        "commands": runner.commands,
        # project git guard (WIRING.md): what the agent created that the host's git would run.
        "project_git": _project_git.report(inputs["project_git"], environ),
    })
    try:
        runner.write(RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
    except OSError as error:
        # Everything has stopped already; say so instead of failing without a status.
        record["record_error"] = "the record could not be written to %s: %s" % (record["record"], error.strerror)
        record["record"] = None
    return record


def summary(record):
    gate = record["gate"]
    return {
        "rc": record["exit_code"], "status": record["status"], "reason": record["reason"],
        "session_id": record["session_id"], "record": record["record"],
        "transcript": record["transcript"], "commands": record["commands"],
        "gate": {"allowed": len(gate["allowed"]), "denied": len(gate["denied"])},
    }


def run_headless(params, check_mode, warn):
    """The session module's body: a result dict (with failed=True on any refusal)."""
    environ = dict(os.environ)
    inputs, facts, problems, warnings = prepare(params, environ)
    for warning in warnings:
        warn(warning)
    if problems:
        return {"failed": True, "status": "refused", "msg": " ".join(problems), "problems": problems,
                "commands": []}
    if check_mode:
        return {"changed": False, "status": "planned", "commands": [], "msg": "check mode: nothing started"}
    inputs["executable"] = params["executable"]
    record = execute(inputs, facts, environ)
    return finish(record)


def finish(record):
    """The task result for a finished session: failed unless the harness exited 0."""
    result = summary(record)
    result["changed"] = True
    problems = []
    if record["status"] != "exited" or record["exit_code"] != 0:
        problems.append("session %s %s%s" % (
            record["session_id"], record["status"] if record["status"] != "exited" else
            "exited %s" % record["exit_code"], (": " + record["reason"]) if record["reason"] else ""))
    if record.get("record_error"):
        problems.append(record["record_error"])
    if _project_git.problem(record):  # project git guard (WIRING.md)
        problems.append(_project_git.problem(record))
    if problems:
        result["failed"] = True
        result["msg"] = "; ".join(problems)
    return result
