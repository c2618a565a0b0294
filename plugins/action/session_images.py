# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session_images: the key, when not given, from this
play (plugin_utils/_role_inputs: the roles run here, on the controller, so their inputs
are read here), then the module's work in this process when the host is this machine
(plugin_utils/_in_process), else the module on the host."""

from __future__ import annotations

import hashlib

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.modules import session_images as module
from ansible_collections.aisb.sandbox.plugins.plugin_utils import _role_inputs
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        if not args.get("key") and args.get("remember") is None:
            args["key"] = self._inputs_key(task_vars or {})
        result.update(module_result(self, task_vars, module.argspec(), module.execute, module_args=args))
        return result

    def _inputs_key(self, task_vars):
        """The roles' inputs' key in this play, or None when a refresh is asked for."""
        root = _role_inputs.collection_root()
        values = dict((name, self._templar.template(task_vars[name]))
                      for name in _role_inputs.role_variables(root) if name in task_vars)
        if _role_inputs.refresh_asked(values):
            return None
        files = dict((path, self._file_digest(path)) for path in _role_inputs.listed_files(values))
        return _role_inputs.inputs_key(_role_inputs.collection_digest(root), values, files)

    def _file_digest(self, path):
        """sha256 of the file PATH names as the roles' file lookup finds it, or None."""
        try:
            with open(self._find_needle("files", path), "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
        except (AnsibleError, OSError):
            return None
