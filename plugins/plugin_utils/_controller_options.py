# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's options that only the controller can resolve: the harness recipe and the
prompt into the sandbox's command, named pass-throughs of the controller's environment
into values, the operator's credentials into keys, the harness configuration's directory
into its files. Used by the session and session_inputs action plugins, so that neither
imports the other."""

from __future__ import annotations

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, agent_trees, build_environment, check_operator_path, check_token_budget, environment_values)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import (
    check_credentials, check_session_use, implicit_entries, resolve_credentials, sources)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import (
    check_git_remotes, resolve_git_remotes)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import KEY_VARIABLES
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_config import read_config
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import NO_RECIPE, recipe_for, session_command
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import CONTROLLER_OPTIONS
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import LOCAL_CONNECTIONS


def read_prompt_file(path):
    """The prompt in PATH (on the controller), as it is."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError("prompt_file %r cannot be read as UTF-8 text: %s"
                         % (path, getattr(error, "strerror", None) or error))


def resolve_controller_options(args, controller_env, writable=()):
    """ARGS with the controller's options resolved: (module args, interactive).

    The command: ARGS' own, or the harness recipe's with the prompt. The credentials:
    the operator's entries, and one for each built-in provider key this shell holds in a
    variable the recipe reads (implicit_entries), each key read from its source here; the
    git remotes' tokens likewise. The
    environment: the given values, the pass-through names' values and the recipe's names
    that are set here, except provider keys and the credentials' sources (a key reaches
    the sandbox only when the operator names it), then the recipe's env_values for names
    none of those set, except those that provider credentials fill (a placeholder, a base
    URL to the injector). The harness configuration: its directory's files, read and
    checked here. Interactive unless told, when no command or prompt says what to run.
    WRITABLE: the directories sessions let the agent write (agent_trees), where no file
    read here may be."""
    recipe = recipe_for(args["harness"], args.get("recipes")) if args.get("harness") is not None else NO_RECIPE
    for option in ("prompt_file", "harness_config"):
        if isinstance(args.get(option), str):
            check_operator_path(option, args[option], writable)
    prompt = read_prompt_file(args["prompt_file"]) if args["prompt_file"] is not None else args["prompt"]
    command = session_command(recipe, args["command"], prompt)
    names = args["pass_environment"]
    given = environment_values(args["environment"])
    network = args.get("network", "allow")
    written = check_credentials(args["credentials"])
    for index, entry in enumerate(written):
        if "from_file" in entry:
            check_operator_path("aisb_credentials[%d] from_file" % index, entry["from_file"], writable)
    for name in names:
        if name in sources(written):
            raise InputError("pass_environment name %s is the source of an aisb_credentials entry's key: the "
                             "injector holds it, the harness gets a placeholder; leave it out of "
                             "pass_environment" % name)
    url_variables = recipe.credential_urls
    implicit = implicit_entries(recipe.env, controller_env, written, names, given, url_variables) \
        if network == "allow" else []
    credentials = resolve_credentials(written + implicit, controller_env)
    remotes = check_git_remotes(args.get("git_remotes"))
    for index, entry in enumerate(remotes):
        if "from_file" in entry:
            check_operator_path("aisb_git_remotes[%d] from_file" % index, entry["from_file"], writable)
    if remotes and network != "allow":
        raise InputError("aisb_git_remotes need network allow: the sandbox reaches their broker where it reaches "
                         "the gate (network is %s)" % network)
    git_remotes = resolve_git_remotes(remotes, controller_env)
    check_token_budget(args.get("token_budget"))
    directory = args.get("harness_config")
    if directory is not None and not isinstance(directory, str):
        raise InputError("aisb_harness_config must be a directory on the controller, got %r" % (directory,))
    harness_config = read_config(directory, recipe)
    # Filled by the session: the placeholders, and the base URLs leading to their injector.
    filled = set(entry["variable"] for entry in credentials)
    filled |= set(url_variables[v] for v in filled if v in url_variables)
    unnamed = KEY_VARIABLES | sources(credentials) | filled
    optional = [n for n in recipe.env if n in controller_env and n not in names
                and n not in given and n not in unnamed]
    # Values named in variables, plus names passed through from this controller's
    # environment, over the recipe's fixed values: nothing else reaches the sandbox.
    environment = build_environment(given, names + optional, controller_env)
    environment = dict(dict((n, v) for n, v in recipe.env_values.items() if n not in filled),
                       **environment)
    # Here too, not only at admission: a refused key never leaves the controller.
    check_session_use(credentials, environment, network, url_variables)
    interactive = args["interactive"]
    if interactive is None:
        interactive = args["command"] is None and prompt is None
    # Unset options stay unset (the module's own defaults are the same spec's): a None
    # is no value of an option with choices (gate_path).
    module_args = dict((k, v) for k, v in args.items() if k not in CONTROLLER_OPTIONS and v is not None)
    # As JSON text: results then hide the values as one string (see the module's option).
    module_args.update(command=command, environment=json.dumps(environment, sort_keys=True),
                       credentials=json.dumps(credentials, sort_keys=True),
                       git_remotes=json.dumps(git_remotes, sort_keys=True),
                       harness_config=json.dumps(harness_config, sort_keys=True), harness_config_dir=directory)
    return module_args, interactive


def local_agent_trees(transport, project):
    """agent_trees of PROJECT for a session over TRANSPORT: only a local session's project
    is on this machine, where the controller's files are read; none otherwise."""
    return agent_trees(project, os.environ) if transport in LOCAL_CONNECTIONS else []
