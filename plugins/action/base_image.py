# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.base_image: the module's work in this process when the host
is this machine (plugin_utils/_in_process), else the module on the host."""

from __future__ import annotations

from ansible_collections.aisb.sandbox.plugins.modules import base_image as module
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import ModuleAction


class ActionModule(ModuleAction):

    spec = staticmethod(module.argspec)
    execute = staticmethod(module.execute)
