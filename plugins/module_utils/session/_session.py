# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session from admitted inputs to its record: plan, run, record, report.

Shared by the session module (headless, inside a task) and the action plugin's
interactive path (the ansible-playbook process, which holds the terminal). Admission
comes first (_session_admission.admit).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

from ansible_collections.aisb.sandbox.plugins.module_utils.common import (
    _host_tools, _podman, _record_seal, _seccomp, _session_record)
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_state
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.project import (
    _project_ansible, _project_commits, _project_git)
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _review_session
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _controller
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import CredentialInjector
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_broker import GitBroker
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_plan import (
    ELSEWHERE, PROVIDER_DIRECT, new_placeholder, parse_refusals)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError, refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.gate._gate_loopback import free_loopback_port
from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _ruleset
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import connect_hint
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import held_sentence, keys_held
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute
from ansible_collections.aisb.sandbox.plugins.module_utils.session._canaries import CANARY_NAME
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_admission import admit
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_outcome import Outcome
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_plan import (
    SessionPlan, kept_state_mounts, plan_session)
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_runner import SessionRunner
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import parse_gate_log, sent_by_host
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import (
    TRANSCRIPT, images_dir, new_session_id, record_key_path, session_directory, state_dir)
from ansible_collections.aisb.sandbox.plugins.module_utils.session._terminal import Interrupted, signals_raise

SESSION_DIR_MODE = 0o700
# The most of a headless transcript the task's result carries (the play shows it).
ANSWER_BYTES = 65536
# An environment value at least this long is hidden in the answer the play shows: a
# secret is long, while flags and numbers ("0", "true") are everywhere in an answer.
HIDDEN_VALUE_LENGTH = 8
HIDDEN = "********"
# The module's stdout, whose reader is the controller's side (see _controller).
STDOUT = 1
# The record's upload status when a budget's quota was spent.
UPLOAD_EXCEEDED = "upload-budget-exceeded"


def image_labels(run, podman, image):
    """IMAGE's labels (its content hash and inputs) for the record; {} when unreadable."""
    rc, out, _err = run(_podman.image_labels(podman, image))
    try:
        return json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}


class Started(NamedTuple):
    """A planned session whose directory exists: its PLAN (a _session_plan.SessionPlan), its
    RUNNER (a SessionRunner), REVIEW (a _review_session.Review in review mode, else None), INJECTOR
    (the credential injector, bound but not serving, when there are provider credentials,
    else None), KEPT (the record's harness_state section, or None) and BROKER (the git
    broker, bound but not serving, when there are git remotes, else None)."""
    plan: SessionPlan
    runner: SessionRunner
    review: Optional[_review_session.Review]
    injector: Optional[CredentialInjector]
    kept: Optional[dict]
    broker: Optional[GitBroker]


def start(inputs, facts, environ, run):
    """Plan the session, make its directory and the project's kept harness state (wiped
    first when asked: RUN, a _runner.Runner, runs podman unshare): a Started."""
    session_id = new_session_id()
    port = free_loopback_port() if inputs.network == "allow" else None
    injector = None
    if inputs.credentials:
        placeholders = dict((entry["variable"], new_placeholder()) for entry in inputs.credentials)
        injector = CredentialInjector(inputs.credentials, placeholders, private=inputs.policy.private,
                                      budget=inputs.token_budget)
    broker = GitBroker(inputs.git_remotes, session_id, private=inputs.policy.private) if inputs.git_remotes else None
    try:
        session_dir = session_directory(state_dir(environ), session_id)
        # What the plan mounts from the session's directory, made after it: a refused
        # plan leaves nothing behind.
        project_mounts = (_project_git.mounts(inputs.project_git, session_dir, inputs.project_label)
                          if inputs.project_git is not None else [])
        review_overlays = (_review_session.overlays(session_dir, kept_state_mounts(inputs))
                           if inputs.project_mode == "review" else None)
        plan = plan_session(session_id, session_dir, inputs, facts, port,
                            (placeholders, injector.port) if injector else None,
                            project_mounts=project_mounts, review=review_overlays,
                            broker=broker.port if broker else None)
        os.makedirs(session_dir, mode=SESSION_DIR_MODE)
        # Retention keeps what sessions use: the images' last use is now.
        for tag in filter(None, (inputs.image, inputs.gate_image)):
            _images.mark_used(images_dir(state_dir(environ)), tag)
        kept = None
        if inputs.harness_state is not None:
            kept = _harness_state.prepare(inputs.harness_state, inputs.project, run, inputs.executable, session_id)
        review = None
        if inputs.project_git is not None:
            # The git directories' overlays keep their upper layers in the session's directory.
            _project_git.make_overlays(inputs.project_git, session_dir)
        if inputs.project_mode == "review":
            # The agent writes to upper directories in the session's, never to the project
            # nor to its kept harness state (claimed above all the same: the overlays' lower
            # layers must not change while they are mounted).
            review = _review_session.Review(inputs.project, session_dir, environ, kept_state_mounts(inputs))
    except BaseException:
        for server in (injector, broker):
            if server is not None:
                server.close()
        raise
    return Started(plan, SessionRunner(plan, session_dir, inputs.host_tools, environ=environ), review, injector, kept,
                   broker)


def seccomp_report(plan):
    """What the record keeps about the sandbox's seccomp profile."""
    if plan.sandbox_options.seccomp_profile is None:
        return None
    return {"profile": plan.sandbox_options.seccomp_profile, "sha256": _seccomp.digest(plan.seccomp_profile),
            "derived_from": _seccomp.HOST_DEFAULT_PROFILE}


def credentials_report(inputs, injector, gate_log):
    """What the record keeps about the provider credentials: the entries without their
    keys, each request the injector relayed or refused, and each request the gate
    refused for carrying a placeholder elsewhere or going to a provider past its injector."""
    if not inputs.credentials:
        return None
    entries = [dict((k, v) for k, v in entry.items() if k != "key") for entry in inputs.credentials]
    decisions = injector.decisions if injector is not None else {"injected": [], "refused": [], "refused_unlisted": 0}
    return dict(decisions, entries=entries, elsewhere=parse_refusals(gate_log, ELSEWHERE),
                provider_direct=parse_refusals(gate_log, PROVIDER_DIRECT))


def gate_report(policy, gate_log):
    """The gate's decisions, and a hint for each refused CONNECT whose name is allowed on
    other ports (the allow entry that would relay it; see _policy.connect_hint)."""
    # The canaries' CONNECTs (_canaries, every round): to CANARY_NAME, or to an allowed name
    # with a ClientHello naming CANARY_NAME; counted, not among the sandbox's.
    hello = " sni=%s " % CANARY_NAME
    lines = (gate_log or "").splitlines()
    report = parse_gate_log("\n".join(line for line in lines if hello not in line + " "))
    canary = "%s:443" % CANARY_NAME
    report["canary_connects"] = len([entry for entry in report["denied"] if entry["url"] == canary]) + len(
        [line for line in lines if hello in line + " "])
    report["denied"] = [entry for entry in report["denied"] if entry["url"] != canary]
    hints = (connect_hint(policy, entry["url"]) for entry in report["denied"] if entry["method"] == "CONNECT")
    report["hints"] = sorted(set(hint for hint in hints if hint))
    # Where the bytes went: what squid read from the sandbox, by host relayed to.
    report["sent_by_host"] = sent_by_host(report)
    return report


def upload_report(policy_text, gate_port, injector_port, watch):
    """Each upload budget of POLICY_TEXT by destination kind (gate, injector): its bytes,
    what the sandbox had sent at the watch's last reading (headers of every packet with
    payload included), and when the kernel said it was spent; None without a budget.
    "status" is upload-budget-exceeded when one was spent."""
    budgets = _ruleset.budgets(policy_text)
    if not budgets:
        return None
    report = {}
    for kind, port in (("gate", gate_port), ("injector", injector_port)):
        if port in budgets:
            name = _ruleset.BUDGET_PREFIX + str(port)
            spent = (watch.get("quota_spent") or {}).get(name)
            report[kind] = {"budget": budgets[port], "sent": (watch.get("quota_used") or {}).get(name),
                            "spent_at": spent["at_text"] if spent else None}
    exceeded = any(entry["spent_at"] or entry["sent"] == entry["budget"] for entry in report.values())
    report["status"] = UPLOAD_EXCEEDED if exceeded else "within-budget"
    return report


def execute(inputs, facts, environ, run, key, terminal=None, parent=None, warnings=()):
    """Run an admitted session to its end; return the record (also written to disk,
    sealed with KEY, the workstation's record key).

    WARNINGS: the admission's (with allow_unenforced, each problem it started despite).

    RUN: a _runner.Runner for the short commands around the session (image labels).
    TERMINAL: a terminal's file descriptor for an interactive session; None runs
    headless, the output going to the session's transcript.
    The session ends with status controller-lost when this process's stdout loses its
    reader (the module's: ansible-playbook's worker or the SSH connection went away) or,
    given PARENT, when this process's parent is no longer PARENT (see _controller)."""
    plan, runner, review, injector, kept, broker = start(inputs, facts, environ, run)
    transcript = os.path.join(runner.session_dir, TRANSCRIPT) if terminal is None else None
    # Everything known before anything runs: the watchdog completes it if this process dies.
    record = {
        "schema_version": _session_record.SCHEMA_VERSION,
        "session_id": plan.session_id,
        "started_at": format_time(time.time()),
        "project": inputs.project,
        "command": inputs.command,
        "network": inputs.network,
        # network no-gate: each allowed name and the addresses pinned for it.
        "pinned_names": inputs.hosts,
        "project_mode": inputs.project_mode,
        # review mode: where the agent's writes go, and the project's manifest.
        "review": review.section() if review else None,
        "harness": inputs.harness,
        "image": {"tag": inputs.image},
        # Where this ansible-playbook's configuration and plugins came from (the action plugin).
        "ansible_origin": inputs.ansible_origin,
        # The programs it runs on the host, each in the system's directories (_host_tools).
        "host_tools": inputs.host_tools,
        "gate_image": inputs.gate_image,
        "policy_dir": inputs.policy_dir,
        # The policy's allow entries, each with its origin: team, user or harness.
        "allow": inputs.allow,
        "policy": plan.policy_text,
        "facts_fingerprint": (facts.get("fingerprint") or {}).get("hash"),
        "limits": plan.limits,
        # The sandbox's seccomp profile (its file in the session's directory) and the
        # host's default it was rendered from; None: podman's default (allow_unenforced).
        "seccomp": seccomp_report(plan),
        # What the admission warned of: with allow_unenforced, what did not hold.
        "admission_warnings": list(warnings),
        "environment_names": sorted(inputs.environment),
        # Provider keys the agent was handed as they are (the operator named them).
        "provider_keys_held": keys_held(inputs.environment),
        # The operator's harness configuration (paths inside), and the project's kept state.
        "harness_config": [inside for _name, inside in inputs.harness_mounts],
        "harness_state": kept,
        # Whether the harness may load and run the project's own code (extensions, hooks,
        # MCP servers, plugins), and the recipe's switches that said so (None: it has none).
        "project_harness_code": inputs.project_harness_code.get("allowed", False),
        "project_harness_code_switches": inputs.project_harness_code.get("switches"),
        # Without decisions until the end: the watchdog's record says which keys were in use.
        "credentials": credentials_report(inputs, None, ""),
        "tokens": injector.usage_report() if injector else None,
        "transcript": transcript,
        "record": _session_record.path(runner.session_dir),
    }
    watch = _controller.ControllerWatch(runner.controller_lost, output=STDOUT, parent=parent)
    ended = Outcome("exited", None, "")
    try:
        with signals_raise():
            runner.start_watchdog(record, record_key_path(state_dir(environ)))
            watch.start()
            for server in (injector, broker):
                if server is not None:
                    server.start()
            if plan.gate is not None:
                runner.start_gate(inputs.gate_image, inputs.policy_dir)
            if terminal is None:
                with open(transcript, "w") as output:
                    ended = Outcome("exited", runner.run_sandbox(output), "")
            else:
                ended = Outcome("exited", runner.run_sandbox(terminal, terminal), "")
    except Interrupted as signal_name:
        ended = Outcome("interrupted", None, "ansible-playbook received %s" % signal_name)
    except SessionError as error:
        ended = Outcome(error.status, None, str(error))
    finally:
        # The sandbox has ended: a controller that goes now changes nothing the cleanup does.
        watch.stop()
        # Read while the containers are removed (podman's work, most of the session's end):
        # a content-hash tag's labels never change.
        with ThreadPoolExecutor(max_workers=1) as pool:
            labels = pool.submit(image_labels, run, inputs.executable, inputs.image)
            runner.cleanup()
        for server in (injector, broker):
            if server is not None:
                server.close()
    outcome = runner.outcome(ended)
    record["image"]["labels"] = labels.result()
    record.update({
        "ended_at": format_time(time.time()),
        "exit_code": outcome.rc,
        "status": outcome.status,
        "reason": outcome.reason,
        "ruleset": runner.ruleset,
        "enforcement_watch": runner.enforcement_report(),
        # Each upload budget (the sandbox's quotas): bytes, sent, spent.
        "upload": upload_report(plan.policy_text, plan.gate.port if plan.gate else None,
                                injector.port if injector else None, runner.enforcement_report()),
        "gate": gate_report(inputs.policy, runner.gate_log),
        "credentials": credentials_report(inputs, injector, runner.gate_log),
        # Each provider's input and output tokens, requests, and the budget's state.
        "tokens": injector.usage_report() if injector else None,
        # The git remotes the broker served (no token) and each push: its refs, old and new
        # ids, relayed or refused and why.
        "git": broker.report() if broker else None,
        "commands": runner.commands,
    })
    if review is not None:
        # Every change the agent made, with its flags.
        record["review"] = review.end()
    if inputs.project_git is not None:
        # The repositories the agent made, which the host's git would take commands from.
        record["project_git"] = _project_git.report(inputs.project_git, environ)
    # The agent's branches and HEAD as data, under refs/aisb/<session id>/ of each repository.
    record["commits"] = bring_back(inputs, plan, runner, run, review, environ)
    try:
        _session_record.write(runner.session_dir, record, key)
    except OSError as error:
        # Everything has stopped already; say so instead of failing without a status.
        record["record_error"] = "the record could not be written to %s: %s" % (record["record"], error.strerror)
        record["record"] = None
    return record


def bring_back(inputs, plan, runner, run, review, environ):
    """_project_commits.bring_back for this session's repositories, each into itself:
    direct mode's, from the sandbox's mounts; review mode's, the same repositories as
    the host has them, from its overlay."""
    if inputs.project_git is not None:
        repositories, mounts, overlay = (inputs.project_git["repositories"],
                                         plan.sandbox_options.project_mounts, None)
    elif review is not None:
        repositories, mounts, overlay = _project_git.project_repositories(inputs.project, environ), [], review.overlay
    else:
        return []
    # The host's own git, from the system's directories (_host_tools), never the project's.
    git, missing = _host_tools.resolve("git")
    commits = [{"repository": path, "refs": {}, "error": missing} for path in repositories] if missing else \
        _project_commits.bring_back(run, inputs.executable, git, inputs.image, inputs.project, repositories,
                                    runner.session_dir, plan.session_id, mounts, overlay, inputs.project_label)
    overlays = os.path.join(runner.session_dir, _project_git.GIT_DIR)
    if inputs.project_git is not None and os.path.lexists(overlays):
        # The overlays' work directories belong to the user namespace's root: removed
        # inside it, with the upper layers (their commits are in the bundles now).
        run(_podman.remove_tree(inputs.executable, overlays))
    return commits


def run_session(params, environ, check_mode, terminal=None, parent=None):
    """A session from the options PARAMS to the task's result (failed=True on any
    refusal), with the admission's warnings in its "warnings"."""
    run = Runner(subprocess_execute(host_environment(environ)))
    inputs, facts, problems, warnings = admit(params, environ, run, interactive=terminal is not None)
    key = None
    if not problems and not check_mode:
        try:
            # Before anything starts: a session whose record cannot be signed does not run.
            key = _record_seal.workstation_key(record_key_path(state_dir(environ)))
        except (OSError, _record_seal.KeyFileError) as error:
            problems = [str(error) if isinstance(error, _record_seal.KeyFileError) else
                        "the record key %s cannot be made: %s" % (record_key_path(state_dir(environ)), error)]
    if problems:
        result = refused_result(" ".join(problems), problems=problems)
    elif check_mode:
        result = {"changed": False, "status": "planned", "msg": "check mode: nothing started"}
    else:
        result = task_result(execute(inputs, facts, environ, run, key, terminal=terminal, parent=parent,
                                     warnings=warnings), answer=params["answer"])
        result["answer"] = hide_values(result["answer"], inputs.environment.values())
    result["commands"] = run.commands + result.get("commands", [])
    held = held_sentence(keys_held(inputs.environment)) if inputs is not None else None
    # The play prints warnings whether the task failed or not.
    origin = _project_ansible.origin_warning(params.get("ansible_origin"))
    result["warnings"] = (warnings + ([held] if held else []) + ([origin] if origin else [])
                          + result.get("gate", {}).get("hints", []) + result.get("warnings", []))
    return result


def budget_note(tokens):
    """One line for the play when the session's token budget was spent, else ""."""
    if not any(figures["exceeded"] for figures in (tokens or {}).values()):
        return ""
    budget = next(iter(tokens.values()))["budget"]
    used = ", ".join("%s %d" % (name, figures["input"] + figures["output"]) for name, figures in sorted(tokens.items()))
    return "token budget %d spent (%s); requests after it were refused (429)" % (budget, used)


def upload_note(upload):
    """One line for the play when an upload budget was spent, else ""."""
    if not upload or upload["status"] != UPLOAD_EXCEEDED:
        return ""
    return "%s: %s; packets with payload after it were reset" % (UPLOAD_EXCEEDED, ", ".join(
        "%s budget %d, sent %s" % (kind, entry["budget"], entry["sent"])
        for kind, entry in sorted(upload.items()) if kind != "status"))


def transcript_end(path, limit=ANSWER_BYTES):
    """The transcript at PATH as text, its last LIMIT bytes from a line's start (after a
    line naming the file) when it is longer; "" when there is none."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            data = handle.read()
    except OSError:
        return ""
    if size > limit:
        data = b"(the last %d bytes of %s)\n" % (limit, path.encode()) + data[data.find(b"\n") + 1:]
    return data.decode("utf-8", "replace")


def hide_values(text, values):
    """TEXT with each of VALUES at least HIDDEN_VALUE_LENGTH long replaced by HIDDEN, as
    Ansible hides a no_log value (the transcript keeps them)."""
    for value in sorted((v for v in values if len(v) >= HIDDEN_VALUE_LENGTH), key=len, reverse=True):
        text = text.replace(value, HIDDEN)
    return text


def task_result(record, answer=True):
    """The task result for a finished session: failed unless the harness exited 0.
    ANSWER: read the transcript's end into its answer (False: the caller shows the
    transcript itself, and the answer is empty)."""
    gate = record["gate"]
    result = {
        "changed": True, "rc": record["exit_code"], "status": record["status"], "reason": record["reason"],
        "session_id": record["session_id"], "record": record["record"],
        "transcript": record["transcript"], "answer": transcript_end(record["transcript"]) if answer else "",
        "commands": record["commands"],
        "gate": {"allowed": len(gate["allowed"]), "denied": len(gate["denied"]),
                 "answered": len(gate["answered"]), "hints": gate["hints"]},
        "token_budget": budget_note(record.get("tokens")),
        "upload": upload_note(record.get("upload")),
        # Which of the agent's refs arrived under refs/aisb/<session id>/ (the play's last line).
        "commits": _project_commits.summary(record.get("commits")),
    }
    ansible_findings = (record.get("project_git") or {}).get("ansible_findings")
    warnings = [_project_git.warning(record),
                _project_ansible.warning(record["project"], ansible_findings) if ansible_findings else None]
    if any(warnings):
        result["warnings"] = [warning for warning in warnings if warning]
    problems = []
    if record["status"] != "exited" or record["exit_code"] != 0:
        problems.append("session %s %s%s" % (
            record["session_id"], record["status"] if record["status"] != "exited" else
            "exited %s" % record["exit_code"], (": " + record["reason"]) if record["reason"] else ""))
    if record.get("record_error"):
        problems.append(record["record_error"])
    if problems:
        result["failed"] = True
        result["msg"] = "; ".join(problems + gate["hints"])
    return result
