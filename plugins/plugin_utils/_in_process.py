# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A module's work done in the task's own process when the host is this machine.

A module's trip costs Ansible about 0.3 s (its payload built, a Python started, the
collection imported again) before the module does anything: a warm session made seven.
On a local connection, as this user (no become) and with no task environment, the host
is the process running the task: the module's execute(params, check_mode, run, environ)
runs here, over the same spec and the same functions, its commands through a Runner with
the host processes' environment (_host_env). Anywhere else the module runs on the host.

A headless session keeps the module's process shape without its trip (forked_result):
it runs in a child of the task's process whose standard output is a pipe read here, so
that when this worker dies (SIGKILL included) the session sees its output lose its
reader, stops its sandbox and writes its record, as the module does.
"""

from __future__ import annotations

import json
import os
import signal
import traceback

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
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


def module_result(action, task_vars, spec, execute, module_args=None, module_name=None, **constraints):
    """The result of MODULE_NAME (default: ACTION's own module) for MODULE_ARGS (default:
    the task's): EXECUTE here when runs_here, over the arguments checked against SPEC and
    CONSTRAINTS as the module checks them; else the module on the host."""
    # pylint: disable=protected-access
    args = action._task.args if module_args is None else module_args
    if not runs_here(action):
        return action._execute_module(module_name=module_name or action._task.resolved_action, module_args=args,
                                      task_vars=task_vars)
    run = Runner(subprocess_execute(host_environment(os.environ)))
    return execute(validated(spec, args, **constraints), action._task.check_mode, run, os.environ)


def validated(spec, args, where="", **constraints):
    """ARGS checked against SPEC and CONSTRAINTS and defaulted, as a module checks its
    own; AnsibleActionFail naming what is wrong (in WHERE, an option holding ARGS)."""
    validation = ArgumentSpecValidator(spec, **constraints).validate(args)
    if validation.error_messages:
        place = " in %s" % where if where else ""
        raise AnsibleActionFail("Validation of arguments failed:\n%s" % "\n".join(
            ("Unsupported parameters%s: %s" % (place, error.msg)) if isinstance(error, UnsupportedError)
            else error.msg + place for error in validation.errors))
    return validation.validated_parameters


def forked_result(work):
    """WORK()'s result (a dict) from a child of this process whose standard output is a
    pipe read here until it closes, the result coming back as JSON as a module's does (the
    blank lines a session writes to find out whether its reader is still there are
    dropped, as Ansible drops them before a module's JSON). A child that raised or died
    gives a failed result saying so."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves through os._exit; its effects are tested
        _child(work, read_end, write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().strip()
    _pid, status = os.waitpid(pid, 0)
    try:
        return json.loads(text)
    except ValueError:
        return {"failed": True, "msg": "the session's process ended (wait status %d) without a result: %s"
                % (status, text[-2000:].decode("utf-8", "replace"))}


def _child(work, read_end, write_end):
    """The forked child: standard output to the pipe, signals as a module's process has
    them (ansible's worker catches SIGINT and SIGTERM to signal its children), WORK run,
    its result written, and out through os._exit (nothing of the worker's runs here)."""
    code = 0
    try:
        os.close(read_end)
        os.dup2(write_end, 1)
        os.close(write_end)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        data = json.dumps(work())
    except BaseException:  # pylint: disable=broad-except
        code = 1
        data = json.dumps({"failed": True, "msg": "the session failed: %s" % traceback.format_exc()})
    try:
        view = memoryview(data.encode("utf-8"))
        while view:
            view = view[os.write(1, view):]
    except OSError:
        code = 1
    os._exit(code)  # pylint: disable=protected-access


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
