# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a harness loads and runs from the project at start (its extensions, hooks, MCP
servers, plugins: code the previous session's agent may have written there), off unless
the operator says so (aisb_project_harness_code), through the harness's own switches.

A recipe's project_code names them: {"off": SWITCHES, "on": SWITCHES}, each optional,
SWITCHES {"args": [...], "env": {name: value}, "hide": [name]}. The args go right after
the recipe's command when the session's command starts with it (the harness itself, not
a shell running it); the env always; each directory that hide names at the project's
top, when there is one, is covered in the sandbox by an empty read-only one (for code a
harness loads that no switch of its own stops). Pure.
"""

from __future__ import annotations

import re

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, check_env_name, check_env_value)

STATES = ("off", "on")
SWITCHES = ("args", "env", "hide")
# A directory at the project's top, as podman's --tmpfs takes a path: no '/', ':' or ','.
HIDDEN_NAME = re.compile(r"\A\.?[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


def recipe_switches(harness):
    """The recipe HARNESS's project_code, checked: {"off": {"args", "env", "hide"}, "on": ...}
    (empty where it names none); InputError naming what is wrong."""
    given = harness.get("project_code") or {}
    if not isinstance(given, dict) or set(given) - set(STATES):
        raise InputError("harness project_code must be a dict with off and/or on, got %r" % (given,))
    found = {}
    for state in STATES:
        switches = given.get(state) or {}
        where = "harness project_code %s" % state
        if not isinstance(switches, dict) or set(switches) - set(SWITCHES):
            raise InputError("%s must be a dict with args, env and/or hide, got %r" % (where, switches))
        args, env, hide = switches.get("args") or [], switches.get("env") or {}, switches.get("hide") or []
        if not isinstance(args, list) or not all(isinstance(arg, str) and arg for arg in args):
            raise InputError("%s args must be a list of non-empty strings, got %r" % (where, args))
        if not isinstance(env, dict):
            raise InputError("%s env must be a dict of variable names and values, got %r" % (where, env))
        for name, value in env.items():
            check_env_name(name, where + " env")
            check_env_value(name, value, where + " env")
        if not isinstance(hide, list) or not all(isinstance(name, str) and HIDDEN_NAME.match(name) for name in hide):
            raise InputError("%s hide must be a list of names of directories at the project's top, got %r"
                             % (where, hide))
        found[state] = {"args": list(args), "env": dict(env), "hide": list(hide)}
    return found


def apply_switches(recipe, command, environment, allowed):
    """(command, environment, record) with the RECIPE's (a _recipes.Recipe) project_code switches
    for ALLOWED (aisb_project_harness_code) applied to COMMAND and ENVIRONMENT. The
    record says what was given: {"args": the args put in the command, "env", "hide"}, or
    None for a recipe without project_code (the harness has no switch: codex, shell).
    InputError when ENVIRONMENT gives a switch's variable another value."""
    if recipe.project_code is None:
        return list(command), dict(environment), None
    switches = recipe.project_code["on" if allowed else "off"]
    prefix = list(recipe.command)
    clashes = sorted(name for name, value in switches["env"].items()
                     if name in environment and environment[name] != value)
    if clashes:
        raise InputError(
            "aisb_environment sets %s, which the harness's switch for project code sets to %s with "
            "aisb_project_harness_code %s: leave it out (aisb_project_harness_code decides)"
            % (", ".join(clashes), ", ".join(switches["env"][name] for name in clashes), str(allowed).lower()))
    started = bool(prefix) and list(command[:len(prefix)]) == prefix
    args = switches["args"] if started else []
    command = list(command[:len(prefix)]) + args + list(command[len(prefix):]) if started else list(command)
    return command, dict(environment, **switches["env"]), {"args": args, "env": switches["env"],
                                                           "hide": switches["hide"]}
