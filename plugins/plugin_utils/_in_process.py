# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A module's work done in the task's own process when the host is this machine.

A module's trip costs Ansible about 0.3 s (its payload built, a Python started, the
collection imported again) before the module does anything: a warm session made seven.
On a local connection, as this user (no become) and with no task environment, the host
is the process running the task: the module's execute(params, check_mode, run, environ)
runs here, over the same spec and the same functions, its commands through a Runner with
the host processes' environment (_host_env). Anywhere else the module runs on the host.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_env import host_environment
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute

LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")


def runs_here(action):
    """True when ACTION's host is this process's: a local connection, no become, no
    task environment (which only a module's process would get; a task without one has
    [{}])."""
    return (action._connection.transport in LOCAL_CONNECTIONS  # pylint: disable=protected-access
            and not action._play_context.become  # pylint: disable=protected-access
            and not any(action._task.environment or ()))  # pylint: disable=protected-access


def module_result(action, task_vars, spec, execute, module_args=None, **constraints):
    """ACTION's module's result for MODULE_ARGS (default: the task's): EXECUTE here when
    runs_here, over the arguments checked against SPEC and CONSTRAINTS as the module
    checks them; else the module on the host."""
    # pylint: disable=protected-access
    args = action._task.args if module_args is None else module_args
    if not runs_here(action):
        return action._execute_module(module_name=action._task.resolved_action, module_args=args,
                                      task_vars=task_vars)
    validation = ArgumentSpecValidator(spec, **constraints).validate(args)
    if validation.error_messages:
        raise AnsibleActionFail("Validation of arguments failed:\n%s" % "\n".join(validation.error_messages))
    run = Runner(subprocess_execute(host_environment(os.environ)))
    return execute(validation.validated_parameters, action._task.check_mode, run, os.environ)


class ModuleAction(ActionBase):
    """The action plugin of a module whose whole work is its execute(): module_result over
    SPEC() and CONSTRAINTS(), the module's own."""

    TRANSFERS_FILES = False

    @staticmethod
    def spec():
        raise NotImplementedError

    @staticmethod
    def constraints():
        return {}

    @staticmethod
    def execute(params, check_mode, run, environ):
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super(ModuleAction, self).run(tmp, task_vars)
        result.update(module_result(self, task_vars, self.spec(), self.execute, **self.constraints()))
        return result
