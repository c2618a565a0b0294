# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session.

Validates the arguments, builds the sandbox's environment from named values and named
pass-throughs of this controller's environment, refuses without host facts, then:
- headless: runs the session module on the host;
- interactive: runs the session right here, on ansible-playbook's own terminal.
  ansible-core detaches task workers from the terminal (setsid, stdio on /dev/null),
  but the terminal is still open in the ansible-playbook process, our parent: the
  worker opens the same terminal device again (without making it its controlling
  terminal) and hands it to podman. Keys, Ctrl-C and the harness's output go through
  the TTY podman sets up; resizes are relayed to podman. The controller must be the
  workstation (a local connection).
Either way the session ends with ansible-playbook: this worker waits for the module with
nobody watching ansible-playbook, so when that process goes (SIGKILL included) the worker
goes too, and the module sees its output lose its reader; an interactive session here
is stopped (see module_utils/_controller).
"""

from __future__ import annotations

import json
import os

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils import _controller, _session_run
from ansible_collections.aisb.sandbox.plugins.module_utils._session_inputs import (
    SessionInputError, build_environment, check_command)
from ansible_collections.aisb.sandbox.plugins.modules.session import argument_spec

FACTS = "aisb_host"
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")


def playbook_terminal():
    """A descriptor on ansible-playbook's terminal, or None when it has none."""
    for stream in (0, 1, 2):
        try:
            path = os.readlink("/proc/%d/fd/%d" % (os.getppid(), stream))
        except OSError:
            continue
        if not path.startswith("/dev/"):
            continue
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            continue
        if os.isatty(fd):
            return fd
        os.close(fd)
    return None


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec())
        interactive = args["interactive"]
        names = args["pass_environment"]
        optional = [n for n in args["optional_environment"]
                    if n in os.environ and n not in names and n not in args["environment"]]
        args.update(interactive=False, pass_environment=[], optional_environment=[])
        try:
            # Values named in variables, plus names passed through from this controller's
            # environment: nothing else reaches the sandbox.
            environment = build_environment(args["environment"], names + optional, os.environ)
            check_command(args["command"])
        except SessionInputError as error:
            return dict(result, failed=True, status="refused", msg=str(error))
        facts = args["host_facts"]
        if facts is None:
            facts = (task_vars.get("ansible_facts") or {}).get(FACTS)
        if not facts and not args["allow_unenforced"]:
            return dict(result, failed=True, status="refused",
                        msg="ansible_facts.%s is missing: run aisb.sandbox.host_capabilities (provision.yml "
                            "does) before a session, or gather it in the play." % FACTS)
        # As JSON text: results then hide the values as one string (see the module's option).
        args["environment"] = json.dumps(environment, sort_keys=True)
        args["host_facts"] = facts or {}
        if interactive:
            result.update(self._run_interactive(args))
            return result
        # Nothing is left to report to once ansible-playbook is gone: leave, and the module
        # sees its stdout lose its reader.
        watch = _controller.Watch(lambda _reason: os._exit(1), parent=os.getppid()).start()
        try:
            result.update(self._execute_module(module_name="aisb.sandbox.session", module_args=args,
                                               task_vars=task_vars))
        finally:
            watch.stop()
        return result

    def _run_interactive(self, args):
        if self._connection.transport not in LOCAL_CONNECTIONS:
            return dict(failed=True, status="refused",
                        msg="an interactive session runs on the controller's terminal: use a local "
                            "connection on the workstation, or pass a prompt or command to run headless")
        terminal = playbook_terminal()
        if terminal is None:
            return dict(failed=True, status="refused",
                        msg="an interactive session needs ansible-playbook to run in a terminal; "
                            "pass a prompt or command to run headless")
        try:
            environ = dict(os.environ)
            inputs, facts, problems, warnings = _session_run.prepare(args, environ)
            if problems:
                return dict(failed=True, status="refused", msg=" ".join(problems), problems=problems)
            if self._task.check_mode:
                return dict(changed=False, status="planned", msg="check mode: nothing started")
            inputs["executable"] = args["executable"]
            inputs["interactive"] = True
            outcome = _session_run.finish(_session_run.execute(inputs, facts, environ, terminal=terminal,
                                                               parent=os.getppid()))
            outcome["warnings"] = warnings
            return outcome
        finally:
            os.close(terminal)
