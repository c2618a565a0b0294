# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.team_settings: the module reads the workstation's
team file; the developer's values are applied to it here (plugin_utils/_team_settings)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.modules.team_settings import argument_spec
from ansible_collections.aisb.sandbox.plugins.plugin_utils._team_settings import team_settings


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec())
        project = args.pop("project")
        result.update(team_settings(self, task_vars, args, project))
        return result
