# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session_prepare: team_settings, session_inputs,
host_capabilities (cached facts) and session_images in one task, each through its own
plugin_utils or module, in the task's process when the host is this machine."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import input_spec
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import user_spec
from ansible_collections.aisb.sandbox.plugins.modules import host_capabilities, session_images
from ansible_collections.aisb.sandbox.plugins.modules.session_prepare import argument_spec
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import module_result, validated
from ansible_collections.aisb.sandbox.plugins.plugin_utils._inputs_check import checked_inputs
from ansible_collections.aisb.sandbox.plugins.plugin_utils._role_inputs import play_key
from ansible_collections.aisb.sandbox.plugins.plugin_utils._team_settings import team_settings

# The session's inputs no setting gives.
SESSION_INPUTS = ("harness_state", "command", "prompt", "prompt_file", "interactive")
# The session's inputs the settings give, by the same names; those of OMITTED_WHEN_EMPTY
# are left out when empty (no harness configuration, no budget), as run_agent.yml's
# session task leaves them out.
SETTINGS_INPUTS = ("network", "harness", "recipes", "harness_config", "environment", "pass_environment",
                   "credentials", "git_remotes", "token_budget", "upload_budget", "provider_upload_budget",
                   "project_mode", "allow", "connect_ports")
OMITTED_WHEN_EMPTY = ("harness_config", "token_budget", "upload_budget", "provider_upload_budget")


def session_inputs_args(project, inputs, settings):
    """session_inputs' options: PROJECT, the session's own INPUTS (those given) and what
    SETTINGS give."""
    given = dict((name, settings.get(name)) for name in SETTINGS_INPUTS)
    given.update(inputs)
    return dict(((name, value) for name, value in given.items()
                 if value is not None and (value or name not in OMITTED_WHEN_EMPTY)), project=project)


def register_names(register):
    """The names a task's REGISTER gives its result: a name (ansible-core 2.19), or a dict
    of names to what each takes of the result (2.20 on; the whole result unless a play
    says otherwise), or none."""
    if not register:
        return []
    return [register] if isinstance(register, str) else sorted(register)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec())
        values = validated(user_spec(), args["settings"], "settings")
        inputs = validated(dict((name, input_spec()[name]) for name in SESSION_INPUTS), args["inputs"], "inputs")
        prepared = team_settings(self, task_vars, values, args["project"])
        if prepared.get("failed"):
            return dict(result, **prepared)
        checked = checked_inputs(self, task_vars, session_inputs_args(args["project"], inputs, prepared["settings"]))
        if checked.get("failed"):
            return dict(result, **checked)
        host = module_result(self, task_vars, host_capabilities.argspec(), host_capabilities.execute,
                             module_args=dict(base_image=args["base_image"], cached=True, require_provisioned=True),
                             module_name="aisb.sandbox.host_capabilities", **host_capabilities.constraints())
        if host.get("failed"):
            return dict(result, **host)
        prepared.update(project=checked["project"], state_dir=host["state_dir"], ansible_facts=host["ansible_facts"])
        registered = dict((name, prepared) for name in register_names(self._task.register))
        found = module_result(self, task_vars, session_images.argspec(), session_images.execute,
                              module_args=dict(key=play_key(self, task_vars, registered)),
                              module_name="aisb.sandbox.session_images")
        if found.get("failed"):
            return dict(result, **found)
        prepared.update(changed=bool(host.get("changed")), images=dict(key=found["key"], found=found["found"]),
                        commands=host.get("commands", []) + found.get("commands", []))
        prepared["ansible_facts"] = dict(prepared["ansible_facts"], **found.get("ansible_facts", {}))
        result.update(prepared)
        return result
