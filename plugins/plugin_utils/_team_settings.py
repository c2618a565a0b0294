# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's settings on the controller: the module reads the workstation's team file;
here the developer's values (the task's, over their settings file's, read here on the
controller: _settings_file) are applied to it (_team.apply_team), so they never travel
to the workstation and back. Used by the team_settings and session_prepare actions."""

from __future__ import annotations

import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError, refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import agent_trees
from ansible_collections.aisb.sandbox.plugins.modules import team_settings as module
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import LOCAL_CONNECTIONS, module_result
from ansible_collections.aisb.sandbox.plugins.plugin_utils._settings_file import apply_settings, read_settings_file

MODULE = "aisb.sandbox.team_settings"


def team_settings(action, task_vars, values, project):
    """team_settings' result for VALUES (the developer's, checked against _team.user_spec:
    None is a value not given) and PROJECT (None when not given) through ACTION: settings,
    allow_origins, team_file, settings_file; a refused result when the team file, the
    settings file or a value is refused."""
    given = dict((name, value) for name, value in values.items() if value is not None)
    read = module_result(action, task_vars, module.argument_spec(), module.execute, module_args={},
                         module_name=MODULE)
    if read.get("failed"):
        return read
    team_file = read["path"] if read["team"] else None
    # The state directory here is always the agent's to write; the project only when
    # the session is on this machine (over SSH it is the workstation's, not here).
    local = action._connection.transport in LOCAL_CONNECTIONS  # pylint: disable=protected-access
    trees = agent_trees(project if local else None, os.environ)
    try:
        settings_file, from_file = read_settings_file(os.path.expanduser("~"), trees, os.getuid())
        settings, origins = apply_settings(read["team"], given, from_file, settings_file, read["path"])
    except RefusedError as error:
        return refused_result(error, team_file=team_file)
    result = dict(changed=False, settings=settings, allow_origins=origins, team_file=team_file,
                  settings_file=settings_file if from_file else None)
    if settings["environment"] or settings["credentials"] or settings["git_remotes"]:
        # Values, credential keys and git tokens (a Vault value, say) are shown nowhere.
        result["_ansible_no_log"] = True
    return result
