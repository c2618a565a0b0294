# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.team_settings: the module reads the workstation's
team file; here the developer's values (the task's, over their settings file's, read
here on the controller: _settings_file) are applied to it (_team.apply_team), so they
never travel to the workstation and back."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError, refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import agent_trees
from ansible_collections.aisb.sandbox.plugins.modules.team_settings import argument_spec, execute
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import LOCAL_CONNECTIONS, module_result
from ansible_collections.aisb.sandbox.plugins.plugin_utils._settings_file import apply_settings, read_settings_file


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec())
        read = module_result(self, task_vars, argument_spec(), execute, module_args={})
        if read.get("failed"):
            return dict(result, **read)
        project = args.pop("project")
        given = dict((key, value) for key, value in args.items() if value is not None)
        team_file = read["path"] if read["team"] else None
        # The state directory here is always the agent's to write; the project only when
        # the session is on this machine (over SSH it is the workstation's, not here).
        trees = agent_trees(project if self._connection.transport in LOCAL_CONNECTIONS else None, os.environ)
        try:
            settings_file, from_file = read_settings_file(os.path.expanduser("~"), trees, os.getuid())
            settings, origins = apply_settings(read["team"], given, from_file, settings_file, read["path"])
        except RefusedError as error:
            return dict(result, **refused_result(error, team_file=team_file))
        result.update(changed=False, settings=settings, allow_origins=origins, team_file=team_file,
                      settings_file=settings_file if from_file else None)
        if settings["environment"] or settings["credentials"] or settings["git_remotes"]:
            # Values, credential keys and git tokens (a Vault value, say) are shown nowhere.
            result["_ansible_no_log"] = True
        return result
