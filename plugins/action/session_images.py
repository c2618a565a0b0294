# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session_images: the key, when not given, from this
play (plugin_utils/_role_inputs: the roles run here, on the controller, so their inputs
are read here), then the module's work in this process when the host is this machine
(plugin_utils/_in_process), else the module on the host."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.modules import session_images as module
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result
from ansible_collections.aisb.sandbox.plugins.plugin_utils._role_inputs import play_key


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        if not args.get("key") and args.get("remember") is None:
            args["key"] = play_key(self, task_vars or {})
        result.update(module_result(self, task_vars, module.argspec(), module.execute, module_args=args))
        return result
