# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's inputs checked before any image work: the session action's own resolution
of the controller's options (its checks included) and the policy's entries parsed as
gate_policy parses them, then the module's check on the host. Used by the
session_inputs and session_prepare actions."""

from __future__ import annotations

import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError, parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import input_constraints, input_spec
from ansible_collections.aisb.sandbox.plugins.modules.session_inputs import execute
from ansible_collections.aisb.sandbox.plugins.plugin_utils._controller_options import (
    local_agent_trees, resolve_controller_options)
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result, validated

MODULE = "aisb.sandbox.session_inputs"

# run_agent.yml passes no project when the developer gave none: said here, before any
# other check, in the words of the playbook's own variable.
PROJECT_MISSING = (
    "project is missing: it is the directory the agent works in, mounted at /project (nothing else of this "
    "workstation is visible to it). Pass it as an extra var, ansible-playbook aisb.sandbox.run_agent "
    "-e project=~/src/app (a path with spaces as JSON, -e '{\"project\": \"/home/me/my app\"}').")


def checked_inputs(action, task_vars, given):
    """session_inputs' result for GIVEN (its options) through ACTION: the project
    resolved, or a refused result."""
    if given.get("project") is None:
        return refused_result(PROJECT_MISSING)
    args = validated(input_spec(), given, **input_constraints())
    try:
        resolve_controller_options(args, os.environ,
                                   local_agent_trees(action._connection.transport,  # pylint: disable=protected-access
                                                     args.get("project")))
        parse_policy(args["allow"], args["connect_ports"])
    except (InputError, PolicyError) as error:
        return refused_result(error)
    # The options as given (credential entries, never their keys: the host checks only
    # the project); unset ones left out, or mutually_exclusive would count them.
    module_args = dict((name, value) for name, value in args.items() if value is not None)
    return module_result(action, task_vars, input_spec(), execute, module_args=module_args, module_name=MODULE,
                         **input_constraints())
