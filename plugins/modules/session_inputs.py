#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: session_inputs
short_description: Check a session's inputs before any image work
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.session_inputs
description:
  - Runs the same checks M(aisb.sandbox.session) runs on its inputs, with the same
    options, and starts nothing. C(run_agent.yml) runs it first (a step of
    M(aisb.sandbox.session_prepare)), so a wrong input fails in seconds instead of after
    the image builds.
  - Its action plugin, on the controller, resolves the command (the O(harness) recipe
    and the prompt, or O(command)), reads O(prompt_file), builds the environment from
    O(environment) and O(pass_environment), and reads the O(credentials)' keys. This
    module, on the workstation, resolves O(project) and refuses what a session refuses.
  - O(allow) and O(connect_ports) are parsed as M(aisb.sandbox.gate_policy) parses them;
    squid's and nft's own checks of the rendered policy, and the host facts, come later
    (the gate role, the session).
author: aisb developers (@aisb)
options:
  allow:
    description:
      - The policy's allow entries, parsed as M(aisb.sandbox.gate_policy) parses them
        (the forms its documentation lists); the harness recipe's own are
        the collection's.
    type: list
    elements: raw
    default: []
  connect_ports:
    description: Ports that CONNECT may reach on every allowed name, as for M(aisb.sandbox.gate_policy).
    type: list
    elements: raw
    default: [443]
attributes:
  check_mode:
    description: Checks as usual; it never changes anything.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Check the session's inputs before building anything
  aisb.sandbox.session_inputs:
    project: ~/src/app
    harness: pi
    prompt: fix the tests
"""

RETURN = r"""
project:
  description: The project directory, resolved (C(~) expanded, symlinks resolved).
  returned: success
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_admission import session_project
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import input_constraints, input_spec


def execute(params, _check_mode, _run, environ):
    """The project resolved, or the refusal a session would give."""
    try:
        return dict(changed=False, project=session_project(params["project"], environ))
    except InputError as error:
        return refused_result(error)


def main():
    module = AnsibleModule(argument_spec=input_spec(), supports_check_mode=True, **input_constraints())
    exit_module(module, execute(module.params, module.check_mode, None, os.environ))


if __name__ == "__main__":
    main()
