# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's plan: everything it will run, computed from its inputs and the host facts.

Pure: plan_session() turns admitted inputs (_session_inputs.SessionInputs) into a
SessionPlan, built whole: the gate's configuration, the sandbox's podman options
(_podman.SandboxOptions), the policy file the entrypoint reads and the harness's
environment. _session_runner executes a plan.
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import Dict, List, NamedTuple, Optional, Tuple

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials import _credential_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import (
    GIT_CONFIG_FILE, GIT_CONFIG_PATH, git_config)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_config import SESSION_SUBDIR
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK, render_sandbox_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import render_session_conf

GATE_PATHS = ("map-host-loopback", "tcp-forward")
SESSION_LABEL = "aisb.session"
# The entrypoint writes the ruleset it installed, as nft JSON, to this descriptor and
# closes it before the harness runs: the record gets it, the agent never holds it.
REPORT_FD = 3
# The harness's environment arrives on this descriptor (NAME=VALUE pairs, each ended by
# a NUL byte), read only after every privilege is dropped (the image's harness-exec).
ENV_FD = 4
# In the session's directory: the policy file the sandbox mounts, and where podman writes
# the sandbox's host PID (the enforcement watch enters its namespaces).
POLICY_FILE = "policy"
PIDFILE = "sandbox.pid"
# Where podman writes the gate's host PID (squid's: the enforcement watch reads it).
GATE_PIDFILE = "gate.pid"


class SessionNames(NamedTuple):
    """The session's container names."""
    sandbox: str
    gate: str


class GatePlan(NamedTuple):
    """The session's gate: its host loopback PORT, squid's session configuration, where
    podman writes squid's host PID, and the allowed (name, port) the canaries' mismatched
    ClientHello goes to (sni_canary_target), or None."""
    port: int
    conf_text: str
    pidfile: str
    sni_canary: Optional[Tuple[str, int]]


class SessionPlan(NamedTuple):
    """Everything a session will run (plan_session), built whole: nothing changes it after."""
    session_id: str
    names: SessionNames
    # The harness's, applied after the privilege drop; never podman's own.
    environment: Dict[str, str]
    policy_text: str
    # Files the session writes into its directory for the sandbox to read, (name, text):
    # the operator's harness configuration and the placeholders' settings, never a key.
    session_files: List[Tuple[str, str]]
    # (name in the session's directory, path inside), mounted read-only.
    read_only_mounts: List[Tuple[str, str]]
    # None without a gate (network none or no-gate).
    gate: Optional[GatePlan]
    # The tools the table is watched from outside with ({nsenter, setpriv, nft, python3: path}) for
    # the whole session; None when the operator asked to run unenforced (debugging only).
    enforcement_watch: Optional[Dict[str, str]]
    limits: List[str]
    sandbox_options: _podman.SandboxOptions
    # The sandbox's seccomp profile, written to its sandbox_options.seccomp_profile; None:
    # podman's default (allow_unenforced on a host without one to derive it from).
    seccomp_profile: Optional[str]


def proxy_environment(proxy_url, direct=()):
    """Proxy settings for the usual tools: curl, pip, git (lower and upper case), npm,
    and node's own fetch (NODE_USE_ENV_PROXY). DIRECT: more addresses reached without
    the proxy (the credential injector's)."""
    if proxy_url is None:
        return {}
    local = ",".join(["localhost", "127.0.0.1", "::1"] + [a for a in direct if a != "127.0.0.1"])
    return {
        "HTTP_PROXY": proxy_url, "HTTPS_PROXY": proxy_url, "http_proxy": proxy_url,
        "https_proxy": proxy_url, "NO_PROXY": local, "no_proxy": local,
        "npm_config_proxy": proxy_url, "npm_config_https_proxy": proxy_url,
        "NODE_USE_ENV_PROXY": "1",
    }


def network_plan(mode, gate_path, port, also_forward=()):
    """(podman --network value, gate as the sandbox reaches it or None, proxy URL or None).
    ALSO_FORWARD: more host-loopback ports the sandbox reaches at the gate's address."""
    if mode == "none":
        return "none", None, None
    if mode == "no-gate":
        return _podman.NO_GATE_NETWORK, None, None
    if gate_path == "map-host-loopback":
        # --no-map-gw: the gateway address would otherwise lead to the host's loopback
        # too, on every port; the ruleset blocks it, this removes it.
        return (_podman.pasta_network(map_host_loopback=[MAPPED_LOOPBACK], no_map_gw=True),
                (MAPPED_LOOPBACK, port), "http://%s:%d" % (MAPPED_LOOPBACK, port))
    if gate_path == "tcp-forward":
        # -T PORT: the sandbox's own 127.0.0.1:PORT is forwarded to the host's.
        return (_podman.tcp_forward_network([port] + list(also_forward)), ("127.0.0.1", port),
                "http://127.0.0.1:%d" % port)
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


def kept_state_mounts(inputs):
    """(host directory, path inside) for each directory of the project's kept harness state."""
    return list((inputs.harness_state or {}).get("mounts", []))


def upload_budgets(inputs, gate, injector_port):
    """(port, bytes) of the sandbox's quotas: the gate's port with aisb_upload_budget, the
    injector's with aisb_provider_upload_budget."""
    budgets = []
    if gate is not None and inputs.upload_budget:
        budgets.append((gate[1], inputs.upload_budget))
    if injector_port and inputs.provider_upload_budget:
        budgets.append((injector_port, inputs.provider_upload_budget))
    return budgets


def plan_session(session_id, session_dir, inputs, facts, port, injector=None, project_mounts=(), review=None,
                 broker=None):
    """Everything a session will run (a SessionPlan), from admitted INPUTS (SessionInputs),
    the host FACTS and the gate's loopback PORT (None without a gate); SESSION_DIR is the
    session's directory (not made yet: a refusal here comes before anything is made).
    INJECTOR, with credentials: (their placeholders {variable: placeholder}, the injector's
    loopback port). PROJECT_MOUNTS: direct mode's options for the git directories' overlays
    and read-only paths (_project_git.mounts). REVIEW: review mode's overlays
    (_review_session.overlays): the project's (upper, work), which replaces its mount, and
    the kept state's, which replace the state's read-write mounts. BROKER: the git broker's
    loopback port, with git remotes (git_config says where the sandbox's git finds it)."""
    verdict = facts.get("verdict") or {}
    if not inputs.allow_unenforced and not inputs.watch_tools:
        # No session runs unwatched by omission.
        raise SessionError("no tools to watch the sandbox's table with (nsenter, setpriv, nft, python3): "
                           "admission finds them")
    placeholders, injector_port = injector or ({}, None)
    # The injector and the broker are reached like the gate, at the gate's address: one
    # more pinned port each.
    served = [one for one in (injector_port, broker) if one]
    network, gate, proxy_url = network_plan(inputs.network, inputs.gate_path or verdict.get("gate_path"), port,
                                            served)
    if served and gate is None:
        raise SessionError("provider credentials and git remotes need network allow: the sandbox reaches their "
                           "injector and broker where it reaches the gate")
    policy = inputs.policy
    if served:
        policy = policy._replace(pins=tuple(sorted(set(policy.pins) | set((gate[0], one) for one in served))))
    environment = dict(inputs.environment)
    environment.update(proxy_environment(proxy_url, [gate[0]] if served else []))
    # The operator's harness configuration, its provider URLs moved behind the injector
    # in the recipe's endpoint files, then pi's models.json from the credentials: merged
    # into the operator's when both go to the same path.
    session_files = dict((posixpath.join(SESSION_SUBDIR, f["path"]), f["text"]) for f in inputs.harness_files)
    read_only_mounts = list(inputs.harness_mounts)
    if injector_port:
        injector_url = "http://%s:%s" % (gate[0], injector_port)
        environment.update(_credential_plan.base_urls(inputs.credentials, inputs.credential_urls, injector_url,
                                                      environment))
        environment.update(_credential_plan.harness_environment(placeholders, injector_url))
        for path in inputs.harness_endpoints:
            name = posixpath.join(SESSION_SUBDIR, path)
            session_files[name] = _credential_plan.moved_urls(session_files[name], inputs.credentials, injector_url)
        operator_paths = dict((inside, name) for name, inside in read_only_mounts)
        operator_models = operator_paths.get(_credential_plan.PI_MODELS_PATH)
        models = _credential_plan.pi_models(inputs.credentials, injector_url, session_files.get(operator_models))
        if operator_models:
            session_files[operator_models] = models
        elif models is not None:
            session_files[_credential_plan.PI_MODELS_FILE] = models
            read_only_mounts.append((_credential_plan.PI_MODELS_FILE, _credential_plan.PI_MODELS_PATH))
        # An operator's config.toml is codex's as given (its URLs moved above).
        codex = _credential_plan.codex_config(inputs.credentials, injector_url)
        if codex is not None and _credential_plan.CODEX_CONFIG_PATH not in operator_paths:
            session_files[_credential_plan.CODEX_CONFIG_FILE] = codex
            read_only_mounts.append((_credential_plan.CODEX_CONFIG_FILE, _credential_plan.CODEX_CONFIG_PATH))
    git_files = []
    if broker:
        # git's system configuration, read-only: the listed remotes' URLs lead to the broker.
        session_files[GIT_CONFIG_FILE] = git_config(inputs.git_remotes, "http://%s:%d" % (gate[0], broker))
        git_files.append((os.path.join(session_dir, GIT_CONFIG_FILE), GIT_CONFIG_PATH))
    state_mounts = kept_state_mounts(inputs)
    environment["AISB_SESSION"] = session_id
    names = SessionNames(sandbox="aisb-sandbox-" + session_id, gate="aisb-gate-" + session_id)
    limits = limit_options(inputs.limits, verdict.get("limits_enforceable") is True, inputs.require_limits)
    project_overlay, state_overlays = review or (None, ())
    read_only_mounts = sorted(read_only_mounts)
    sandbox_options = _podman.SandboxOptions(
        name=names.sandbox, image=inputs.image, project=inputs.project,
        project_label=inputs.project_label, policy_file=os.path.join(session_dir, POLICY_FILE), network=network,
        # The entrypoint's whole environment beyond podman's defaults: the session's
        # own values, nothing an operator or the project wrote.
        env={"AISB_SESSION": session_id, "AISB_REPORT_FD": str(REPORT_FD), "AISB_ENV_FD": str(ENV_FD)},
        labels={SESSION_LABEL: session_id}, limits=limits,
        interactive=inputs.interactive, preserve_fds=ENV_FD - 2,
        command=(["--allow-unenforced"] if inputs.allow_unenforced else []) + list(inputs.command),
        hosts=[(name, address) for name, addresses in sorted(inputs.hosts.items()) for address in addresses],
        pidfile=os.path.join(session_dir, PIDFILE),
        # Review mode: the agent writes to upper directories in the session's, never to
        # the project nor to its kept harness state.
        project_overlay=project_overlay,
        project_mounts=list(project_mounts),
        writable_dirs=sorted(set(_credential_plan.writable_dir(inside)
                                 for _name, inside in read_only_mounts + state_mounts)),
        read_only_files=[(os.path.join(session_dir, name), inside) for name, inside in read_only_mounts] + git_files,
        # (host directory, path inside): the project's kept harness state, read-write.
        state_mounts=[] if review else state_mounts,
        state_overlays=list(state_overlays),
        # Paths inside the project covered by an empty read-only directory (project code off).
        hidden_dirs=["/project/" + name for name in inputs.hidden_dirs],
        seccomp_profile=(os.path.join(session_dir, _seccomp.PROFILE_FILE)
                         if inputs.seccomp_profile is not None else None),
    )
    gate_plan = None
    if gate is not None:
        gate_plan = GatePlan(port, render_session_conf(port, session_id, _podman.GATE_POLICY_CONF, before_policy=(
            _credential_plan.gate_refusal_conf(session_id, inputs.credentials, placeholders))),
            os.path.join(session_dir, GATE_PIDFILE), sni_canary_target(policy))
    return SessionPlan(
        session_id=session_id, names=names, environment=environment,
        policy_text=render_sandbox_policy(policy, gate, upload_budgets(inputs, gate, injector_port)),
        session_files=sorted(session_files.items()),
        read_only_mounts=read_only_mounts, gate=gate_plan,
        enforcement_watch=None if inputs.allow_unenforced else inputs.watch_tools, limits=limits,
        sandbox_options=sandbox_options, seccomp_profile=inputs.seccomp_profile)


def sni_canary_target(policy):
    """(name, port) of a CONNECT the gate relays for POLICY (its first allowed name, a
    wildcard entry's own name, on its first CONNECT port), or None when it allows none:
    the canaries send it a ClientHello naming another name (_canaries)."""
    if not policy.domains:
        return None
    return policy.domains[0].lstrip("."), policy.connect_ports[0]


def environment_bytes(environment):
    """ENVIRONMENT as the harness's exec reads it: NAME=VALUE pairs, each ended by NUL."""
    return b"".join(("%s=%s" % item).encode("utf-8") + b"\0" for item in sorted(environment.items()))
