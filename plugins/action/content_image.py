# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.content_image: the module's work in this process when the host
is this machine (plugin_utils/_in_process), else the module on the host. Here a build that
runs shows its step and time on ansible-playbook's stderr (plugin_utils/_build_progress)."""

from __future__ import annotations

import os

from ansible.utils.display import Display

from ansible_collections.aisb.sandbox.plugins.modules import content_image as module
from ansible_collections.aisb.sandbox.plugins.plugin_utils._build_progress import follower
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import ModuleAction


class ActionModule(ModuleAction):

    spec = staticmethod(module.argspec)

    def execute(self, params, check_mode, run, environ):  # pylint: disable=arguments-differ
        # The task worker's parent is ansible-playbook, whose stderr the line goes to.
        return module.execute_showing(params, check_mode, run, environ, follower(Display(), os.getppid()))
