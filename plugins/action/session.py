# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session: validate, resolve the environment, check the
facts are there, then run the session module on the host."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils._session_inputs import (
    SessionInputError, build_environment, check_argv)
from ansible_collections.aisb.sandbox.plugins.modules.session import argument_spec

FACTS = "aisb_host"


def action_argument_spec():
    """The module's options, less what this plugin fills in, plus pass_environment."""
    spec = argument_spec()
    del spec["host_facts"]
    spec["pass_environment"] = dict(type="list", elements="str", default=[])
    return spec


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        validation, args = self.validate_argument_spec(argument_spec=action_argument_spec())
        del validation
        try:
            # Values named in variables, plus names passed through from this controller's
            # environment: nothing else reaches the sandbox.
            environment = build_environment(args["environment"], args.pop("pass_environment"), os.environ)
            check_argv(args["command"], "command")
        except SessionInputError as error:
            return dict(result, failed=True, status="refused", msg=str(error))
        facts = (task_vars.get("ansible_facts") or {}).get(FACTS)
        if not facts and not args["allow_unenforced"]:
            return dict(result, failed=True, status="refused",
                        msg="ansible_facts.%s is missing: run aisb.sandbox.host_capabilities (provision.yml "
                            "does) before a session, or gather it in the play." % FACTS)
        args["environment"] = environment
        args["host_facts"] = facts or {}
        result.update(self._execute_module(module_name="aisb.sandbox.session", module_args=args,
                                           task_vars=task_vars))
        return result
