# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's admission: its inputs and the host checked before anything starts.

admit() resolves the project, reads the policy from its rendered directory, checks the
environment and the command, the host facts against the host as it is now, the tools
the enforcement watch needs, (direct mode) the project's git (_project_git), and the
harness's configuration and kept state (_harness_config, _harness_state); it returns the typed inputs (SessionInputs) or the reasons the session must not start.
"""

from __future__ import annotations

import os
import socket
import stat
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_config, _harness_state
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import check_resolved_remotes
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import (
    check_private_hosts, check_resolved, check_session_use)
from ansible_collections.aisb.sandbox.plugins.module_utils.session._enforcement_watch import find_tools
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_code import apply_switches
from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import (
    cached_fingerprint, check_host_facts)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_tools import resolve_all
from ansible_collections.aisb.sandbox.plugins.module_utils.common._seccomp import load_profile
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, agent_trees, build_environment, check_command, check_operator_path, check_token_budget,
    check_upload_budget, resolve_project)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import (
    PolicyError, no_gate_names, parse_policy, pin_resolved)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy_dir import read_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.project._project_git import protect as protect_project_git
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import NO_RECIPE, recipe_for
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_inputs import SessionInputs
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import state_dir
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import (
    DEFAULTS, TEAM_FILE, TeamError, check_session, read_team_file)


def resolve_names(names, getaddrinfo=socket.getaddrinfo):
    """{name: [address, ...]} as this host resolves NAMES now (network no-gate pins them);
    InputError naming the first name that does not resolve."""
    resolved = {}
    for name in names:
        try:
            infos = getaddrinfo(name, None, 0, socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise InputError(
                "allow entry %r does not resolve on this host (%s): network no-gate pins the addresses "
                "the allowed names have at session start" % (name, getattr(error, "strerror", None) or error))
        resolved[name] = sorted(set(info[4][0] for info in infos))
    return resolved


def no_gate_refusal(verdict):
    """Why network no-gate must not run on a host with this VERDICT, or None."""
    path = verdict.get("gate_path")
    if path == "map-host-loopback" or (path == "tcp-forward" and verdict.get("model_holds") is True):
        return ("network no-gate is refused: aisb_host.verdict.gate_path is %s, so this host "
                "can run the gate, which is strictly better (it filters by name and never pins whatever "
                "else an address serves); use network allow" % path)
    return None


# The probes that measured each gate path, sandbox and all: what gate_path needs passed.
GATE_PATH_EVIDENCE = {"map-host-loopback": ("host_loopback_reachable",),
                      "tcp-forward": ("tcp_forward", "tcp_forward_sandbox")}


def choose_gate_path(facts, requested):
    """(the gate path the session takes, or None with the refusal). The verdict's, unless
    REQUESTED (the gate_path option, for tests) names another one the facts measured
    working, sandbox probes included, on a host whose model holds."""
    verdict = (facts or {}).get("verdict") or {}
    if requested is None or requested == verdict.get("gate_path"):
        return verdict.get("gate_path"), None
    probes = (facts or {}).get("probes") or {}
    failed = [name for name in GATE_PATH_EVIDENCE[requested] if (probes.get(name) or {}).get("ok") is not True]
    if failed or verdict.get("model_holds") is not True:
        return None, ("gate_path %s is refused: the host facts do not say it works here (%s); the verdict's "
                      "gate path is %s" % (requested, ", ".join("aisb_host.probes.%s failed" % name for name in failed)
                                           or "aisb_host.verdict.model_holds is false", verdict.get("gate_path")))
    return requested, None


def podman_directories(environ, home):
    """Where rootless podman keeps this user's storage, configuration and runtime files:
    files there that the agent wrote would be read by the host's podman."""
    data = environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    found = [os.path.join(data, "containers"), os.path.join(config, "containers")]
    return found + ([environ["XDG_RUNTIME_DIR"]] if environ.get("XDG_RUNTIME_DIR") else [])


def session_project(raw, environ):
    """The project RAW names, resolved and checked (resolve_project) against this host's
    home and what the sandbox must never see: the state directory and podman's own; and
    ENVIRON's values for the session's host processes (host_environment: podman's
    CONTAINERS_CONF, XDG_CONFIG_HOME, ...) refused when one names a path the agent
    writes, as podman would read its configuration, hooks and helpers from there."""
    home = environ.get("HOME") or os.path.expanduser("~")
    project = resolve_project(raw, home, [state_dir(environ)] + podman_directories(environ, home))
    trees = agent_trees(project, environ)
    for name, value in sorted(host_environment(environ).items()):
        for part in value.split(":") if name != "PATH" else ():
            if os.path.isabs(part):
                check_operator_path("the environment's %s (which podman reads)" % name, part, trees)
    return project


def project_dirs(project, names):
    """Those of NAMES (a recipe's switch: directories at the project's top to cover) that
    PROJECT has; InputError for one that is there but no directory: a link would
    lead the harness to what it names, and covering it would cover its target."""
    found = []
    for name in names:
        path = os.path.join(project, name)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            raise InputError("%s cannot be read (%s): the harness's project code is off, and it would load "
                             "code from there" % (path, error.strerror))
        if not stat.S_ISDIR(mode):
            raise InputError("%s is not a directory (a link, say): with aisb_project_harness_code false the "
                             "session covers that directory so that the harness loads no code from it; "
                             "remove it, or set aisb_project_harness_code" % path)
        found.append(name)
    return found


def allow_origins(entries, origins, recipe):
    """The policy's allow ENTRIES for the record, each with where it came from: ORIGINS'
    word (team or user: run_agent.yml's team_settings), else the RECIPE's ("harness"),
    else "unspecified" (a session started without origins)."""
    return [{"entry": entry, "origin": origins.get(entry) or ("harness" if entry in recipe.allow else "unspecified")}
            for entry in entries]


def operator_environment(environment, recipe, passed, team_names):
    """The names of ENVIRONMENT (what the harness gets) that the operator's own values
    set: not those the RECIPE passes through or fixes, nor PASSED (pass_environment),
    unless TEAM_NAMES (the team's environment) has them."""
    own = set(passed) | set(recipe.env)
    return dict((name, value) for name, value in environment.items() if name in team_names or (
        name not in own and recipe.env_values.get(name) != value))


def check_team_file(params, entries, policy, recipe, environment, team_file=TEAM_FILE, git_remotes=()):
    """TeamError unless this host's team file (none: nothing to check) allows what the
    session was given: its policy's entries beyond the RECIPE's (host names: a
    recipe has no other), CONNECT ports, network, limits, the switches, the harness and
    the operator's recipes, the harness configuration, the ENVIRONMENT's operator
    values and the GIT_REMOTES (checked, tokens read) (_team.check_session). run_agent.yml's own variables can be overridden with -e:
    what the session runs with is checked, not what the play said it applied."""
    team = read_team_file(team_file)
    if team is None:
        return
    # Only a recipe's host names are its own (_recipes refuses any other entry in one).
    own = [entry for entry in recipe.allow if parse_policy([entry]).domains]
    limits = dict((name, value) for name, value in (params.get("limits") or {}).items() if value is not None)
    given = {"allow": [entry for entry in entries if entry not in own], "connect_ports": list(policy.connect_ports),
             "network": params["network"], "limits": limits, "require_limits": params.get("require_limits", False),
             "allow_unenforced": params["allow_unenforced"], "project_mode": params.get("project_mode") or "direct",
             "project_harness_code": params.get("project_harness_code", False),
             "token_budget": params.get("token_budget"), "upload_budget": params.get("upload_budget"),
             "provider_upload_budget": params.get("provider_upload_budget"), "harness": params.get("harness") or DEFAULTS["harness"],
             "recipes": params.get("recipes") or {}, "harness_config": params.get("harness_config_dir"),
             "pass_environment": params.get("pass_environment") or [],
             "git_remotes": list(git_remotes),
             "environment": operator_environment(environment, recipe, params.get("pass_environment") or [],
                                                 team["settings"].get("environment", {}))}
    try:
        check_session(team, given, team_file)
    except TeamError as error:
        raise TeamError("the session's own settings, checked again: %s" % error)


def admit(params, environ, run, interactive=False, now=None):
    """Check PARAMS (the session's options, as the action resolved them) and the host
    facts; return (inputs, facts, problems, warnings), INPUTS a SessionInputs.

    RUN is a _runner.Runner for the checks' own commands (podman's fingerprint).
    Nothing starts here. PROBLEMS non-empty means the session must not start.
    """
    now = time.time() if now is None else now
    warnings = []
    network = params["network"]
    try:
        project = session_project(params["project"], environ)
        policy, entries = read_policy(params.get("policy_dir")) if network != "none" else (parse_policy([]), [])
        environment = build_environment(params["environment"], [], {})
        command = check_command(params["command"])
        credentials = check_resolved(params.get("credentials") or [])
        git_remotes = check_resolved_remotes(params.get("git_remotes") or [])
        if git_remotes and network != "allow":
            raise InputError("git_remotes need network allow: the sandbox reaches their broker where it reaches "
                             "the gate (network is %s)" % network)
        token_budget = check_token_budget(params.get("token_budget"))
        upload_budget = check_upload_budget(params.get("upload_budget"), "aisb_upload_budget")
        provider_upload_budget = check_upload_budget(params.get("provider_upload_budget"),
                                                     "aisb_provider_upload_budget")
        if network != "allow" and (upload_budget or provider_upload_budget):
            raise InputError("aisb_upload_budget and aisb_provider_upload_budget meter what the sandbox sends to its "
                             "gate and injector: they need network allow (network is %s)" % network)
        # The recipe the harness's name stands for, resolved here: never one a play variable gave.
        recipe = recipe_for(params["harness"], params.get("recipes")) if params.get("harness") is not None \
            else NO_RECIPE
        check_session_use(credentials, environment, network, recipe.credential_urls)
        check_private_hosts(credentials, policy.private)
        names = no_gate_names(policy) if network == "no-gate" else ()
        allow = allow_origins(entries, params.get("allow_origins") or {}, recipe)
        check_team_file(params, entries, policy, recipe, environment, git_remotes=git_remotes)
        # After the team's check: the switches are the recipe's, not the operator's values.
        harness_code = params.get("project_harness_code", False)
        command, environment, switches = apply_switches(recipe, command, environment, harness_code)
        hidden_dirs = project_dirs(project, (switches or {}).get("hide", []))
        harness_files = _harness_config.check_config(params.get("harness_config"), recipe)
        harness_mounts = _harness_config.mounts(harness_files, recipe) if harness_files else []
        harness_endpoints = _harness_config.endpoint_paths(harness_files, recipe)
        harness_state = _harness_state.plan(state_dir(environ), project, recipe, params.get("harness_state") or "keep",
                                            review=params.get("project_mode") == "review")
    except RefusedError as error:
        return None, None, [str(error)], warnings
    if token_budget is not None and not credentials:
        warnings.append("aisb_token_budget %d bounds nothing here: no provider key goes through the credential "
                        "injector (aisb_credentials)" % token_budget)
    if provider_upload_budget is not None and not credentials:
        warnings.append("aisb_provider_upload_budget %d bounds nothing here: no provider key goes through the "
                        "credential injector (aisb_credentials)" % provider_upload_budget)
    facts = params.get("host_facts") or {}
    refusal = no_gate_refusal(facts.get("verdict") or {}) if network == "no-gate" else None
    if refusal:
        return None, None, [refusal], warnings
    # The system's programs, never the PATH's (_host_tools): refused even with allow_unenforced.
    host_tools, refusals = resolve_all(dict(podman=params["executable"], bash="bash", setpriv="setpriv"))
    if refusals:
        return None, None, refusals, warnings
    fingerprint = cached_fingerprint(run, host_environment(environ), podman=host_tools["podman"])
    problems = check_host_facts(facts, fingerprint, now, params["max_facts_age"], network=network)
    watch_tools, missing_tools = find_tools()
    host_tools.update((tool, path) for tool, path in watch_tools.items() if path)
    if missing_tools:
        problems.append(missing_tools)
    # The sandbox's seccomp profile, from podman's default on this host as it is now.
    seccomp_profile, seccomp_problem = load_profile()
    if seccomp_problem:
        problems.append(seccomp_problem)
    if problems and params["allow_unenforced"]:
        warnings.extend("allow_unenforced: starting anyway although " + p for p in problems)
        problems = []
    gate_path, refusal = choose_gate_path(facts, params.get("gate_path") if network == "allow" else None)
    if refusal:
        problems.append(refusal)
    if problems:
        return None, facts, problems, warnings
    try:
        hosts = resolve_names(names)
        policy = pin_resolved(policy, hosts)
    except (InputError, PolicyError) as error:
        return None, None, [str(error)], warnings
    project_mode = params.get("project_mode") or "direct"
    label = (facts.get("verdict") or {}).get("bind_mount_label", "")
    project_git = None
    if project_mode == "direct":
        # Overlays for the git directories and read-only mounts for what the host's git runs,
        # or a refusal. Not in review mode: the overlay keeps the host's tree unchanged, and
        # the guard's writable binds of the project's own directories would reach around it.
        project_git, refusals = protect_project_git(project, environ)
        if refusals:
            return None, None, refusals, warnings
    inputs = SessionInputs(
        project=project, project_label=label, image=params["image"], gate_image=params.get("gate_image"),
        policy_dir=params.get("policy_dir"), policy=policy, network=network, gate_path=gate_path,
        project_mode=project_mode,
        project_git=project_git, environment=environment, command=command, interactive=interactive,
        allow_unenforced=params["allow_unenforced"], limits=params.get("limits") or {},
        require_limits=params.get("require_limits", False), hosts=hosts, watch_tools=watch_tools,
        seccomp_profile=seccomp_profile,
        host_tools=host_tools, executable=host_tools["podman"],
        ansible_origin=params.get("ansible_origin"), credentials=credentials, git_remotes=git_remotes,
        harness_files=harness_files,
        harness_mounts=harness_mounts, harness_endpoints=harness_endpoints, harness_state=harness_state, allow=allow,
        credential_urls=recipe.credential_urls, token_budget=token_budget, upload_budget=upload_budget,
        provider_upload_budget=provider_upload_budget, harness=params.get("harness"),
        project_harness_code={"allowed": harness_code, "switches": switches}, hidden_dirs=hidden_dirs)
    return inputs, facts, problems, warnings
