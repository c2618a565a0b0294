# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.team_settings: the module reads the workstation's
team file; here the developer's values are applied to it (_team.apply_team), so they
never travel to the workstation and back."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import TeamError, apply_team, user_spec
from ansible_collections.aisb.sandbox.plugins.modules.team_settings import execute
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=user_spec())
        read = module_result(self, task_vars, user_spec(), execute, module_args={})
        if read.get("failed"):
            return dict(result, **read)
        user = dict((key, value) for key, value in args.items() if value is not None)
        try:
            settings, origins = apply_team(read["team"], user, read["path"])
        except TeamError as error:
            return dict(result, **refused_result(error, team_file=read["path"] if read["team"] else None))
        result.update(changed=False, settings=settings, allow_origins=origins,
                      team_file=read["path"] if read["team"] else None)
        if settings["environment"] or settings["credentials"]:
            # Values and credential keys (a Vault value, say) are shown nowhere.
            result["_ansible_no_log"] = True
        return result
