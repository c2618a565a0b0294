# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session_inputs: the controller's options resolved and
the policy parsed here, then the module's check on the host (plugin_utils/_inputs_check)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.plugin_utils._inputs_check import checked_inputs


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        result.update(checked_inputs(self, task_vars, self._task.args))
        return result
