# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.session.

Validates the options, resolves what only the controller has (the harness recipe and
the prompt into the sandbox's command, named pass-throughs of this controller's
environment into values, the harness configuration's directory into its files), refuses without host facts, then:
- headless: runs the session in a process of its own, which cleans up and writes the
  record when this worker is killed: forked from this worker when the host is this
  process's (plugin_utils/_in_process.runs_here: no module trip), else the session
  module on the host;
- interactive: runs the session right here, on ansible-playbook's own terminal.
  ansible-core detaches task workers from the terminal (setsid, stdio on /dev/null),
  but the terminal is still open in the ansible-playbook process, our parent: the
  worker opens the same terminal device again (without making it its controlling
  terminal) and hands it to podman. Keys, Ctrl-C and the harness's output go through
  the TTY podman sets up; resizes are relayed to podman. The controller must be the
  workstation (a local connection).
Either way the session ends with ansible-playbook: this worker waits for the session's
process watching ansible-playbook, so when that process goes (SIGKILL included) the
worker goes too, and the session's process sees its output lose its reader; an
interactive session here is stopped (see module_utils/session/_controller).
"""

from __future__ import annotations

import os
import sys

import ansible
from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import get_all_plugin_loaders
from ansible.utils.collection_loader import AnsibleCollectionConfig

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.project._project_ansible import origin
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _controller
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session import run_session
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import argument_spec, constraints
from ansible_collections.aisb.sandbox.plugins.module_utils.session._terminal import playbook_terminal
from ansible_collections.aisb.sandbox.plugins.plugin_utils._aisb_command import config_in_use
from ansible_collections.aisb.sandbox.plugins.plugin_utils._controller_options import (
    local_agent_trees, resolve_controller_options)
from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import (
    LOCAL_CONNECTIONS, forked_result, runs_here)

FACTS = "aisb_host"


def ansible_origin(project):
    """_project_ansible.origin of this ansible-playbook for PROJECT: its configuration
    file, the directories its plugin loaders search (configured and beside the playbook),
    its collection and role paths, the Python and Ansible running it, and this collection.
    The empty configuration file aisb made for the run is recorded as none, with a note."""
    paths = [("%s path" % name, path) for name, loader in get_all_plugin_loaders()
             for path in loader.print_paths().split(os.pathsep)]
    try:
        paths += [("collections path", path) for path in AnsibleCollectionConfig.collection_paths]
    except NotImplementedError:
        pass  # no collection finder in this process: nothing loads collections
    paths += [("roles path", path) for path in C.DEFAULT_ROLES_PATH or []]
    paths += [("python", sys.executable), ("ansible", os.path.dirname(ansible.__file__)),
              ("collection aisb.sandbox", os.path.dirname(os.path.dirname(__file__)))]
    config_file, note = config_in_use(C.CONFIG_FILE, os.environ)
    found = origin(os.path.expanduser(project), config_file, paths)
    if note:
        found["config_note"] = note
    return found


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=argument_spec(), **constraints())
        try:
            args, interactive = resolve_controller_options(
                args, os.environ, local_agent_trees(self._connection.transport, args.get("project")))
        except InputError as error:
            return dict(result, **refused_result(error))
        args["ansible_origin"] = ansible_origin(args["project"])
        facts = args.get("host_facts")
        if facts is None:
            facts = (task_vars.get("ansible_facts") or {}).get(FACTS)
        if not facts and not args["allow_unenforced"]:
            return dict(result, **refused_result(
                "ansible_facts.%s is missing: run aisb.sandbox.host_capabilities (provision.yml does) before a "
                "session, or gather it in the play." % FACTS))
        args["host_facts"] = facts or {}
        if interactive:
            result.update(self._run_interactive(args))
            return result
        # Nothing is left to report to once ansible-playbook is gone: leave, and the session's
        # process (forked or the module) sees its stdout lose its reader.
        watch = _controller.ControllerWatch(lambda _reason: os._exit(1), parent=os.getppid()).start()
        try:
            if runs_here(self):
                result.update(forked_result(lambda: run_session(args, dict(os.environ), self._task.check_mode)))
            else:
                result.update(self._execute_module(module_name="aisb.sandbox.session", module_args=args,
                                                   task_vars=task_vars))
        finally:
            watch.stop()
        return result

    def _run_interactive(self, args):
        if self._connection.transport not in LOCAL_CONNECTIONS:
            return refused_result("an interactive session runs on the controller's terminal: use a local "
                                  "connection on the workstation, or pass a prompt or command to run headless")
        terminal = playbook_terminal(os.getppid())
        if terminal is None:
            return refused_result("an interactive session needs ansible-playbook to run in a terminal; "
                                  "pass a prompt or command to run headless")
        try:
            return run_session(args, dict(os.environ), self._task.check_mode, terminal=terminal, parent=os.getppid())
        finally:
            os.close(terminal)
