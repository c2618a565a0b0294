# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.content_image: the module's work in this process when the host
is this machine (plugin_utils/_in_process), else the module on the host."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.modules.content_image import argspec, execute
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        result.update(module_result(self, task_vars, argspec(), execute))
        return result
