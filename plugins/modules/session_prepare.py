#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: session_prepare
short_description: Everything a session needs before it starts, in one task
version_added: 0.2.0
description:
  - Playbook C(aisb.sandbox.run_agent) runs it first. In one task, in this order, each
    step stopping the task with its own refusal, it does what four modules do -
    M(aisb.sandbox.team_settings) (the team file with the developer's O(settings) on top),
    M(aisb.sandbox.session_inputs) (the session's inputs checked - the project, the
    command or prompt, the environment, the credentials, the policy's entries - with the
    settings found for those the settings give), M(aisb.sandbox.host_capabilities) (the
    host's facts, reused while their fingerprint matches; a host provision.yml never ran
    on is refused in one sentence naming it) and M(aisb.sandbox.session_images) (the
    images and policy the image and gate roles last gave for the same inputs).
  - On a local connection as this user each runs in the task's own process; elsewhere
    each is its module on the host.
  - The images' key is computed from the play's variables as they will be once this
    task's result is registered (under the task's C(register) name), so that a play whose
    variables name that result (C(run_agent.yml)'s role inputs do) gets the key its roles
    would be given.
  - The result is hidden (C(no_log)) when the settings carry environment values,
    provider credentials or git remotes.
author: aisb developers (@aisb)
options:
  project:
    description:
      - The directory the agent works in. Refused, before anything else but the team
        file, when missing.
    type: str
  settings:
    description:
      - The developer's values, the options of M(aisb.sandbox.team_settings) but
        C(project), each left out not given.
    type: dict
    default: {}
  inputs:
    description:
      - The session's own inputs, which no setting gives - C(harness_state), C(command),
        C(prompt), C(prompt_file) and C(interactive), as M(aisb.sandbox.session_inputs)
        takes them.
    type: dict
    default: {}
  base_image:
    description: The probe image's base, as M(aisb.sandbox.host_capabilities) takes it.
    type: str
attributes:
  check_mode:
    description: Reads and checks as usual; it never changes anything.
    support: full
  diff_mode:
    description: No diff.
    support: none
seealso:
  - module: aisb.sandbox.team_settings
  - module: aisb.sandbox.session_inputs
  - module: aisb.sandbox.host_capabilities
  - module: aisb.sandbox.session_images
"""

EXAMPLES = r"""
- name: Prepare the session
  aisb.sandbox.session_prepare:
    project: ~/src/app
    settings:
      allow: [pypi.org]
    inputs:
      prompt: fix the tests
  register: prepared

- name: Build the images when none were found
  ansible.builtin.include_role:
    name: aisb.sandbox.image
  when: not prepared.images.found
"""

RETURN = r"""
settings:
  description: The session's settings, as M(aisb.sandbox.team_settings) returns them.
  returned: success
  type: dict
allow_origins:
  description: Where each allow entry came from, as M(aisb.sandbox.team_settings) returns it.
  returned: success
  type: dict
team_file:
  description: The team file applied, or null when the workstation has none.
  returned: success
  type: str
settings_file:
  description: The developer's settings file read on the controller, or null.
  returned: success
  type: str
project:
  description: The project directory, resolved, as M(aisb.sandbox.session_inputs) returns it.
  returned: success
  type: str
state_dir:
  description: The collection's state directory, as M(aisb.sandbox.host_capabilities) returns it.
  returned: success
  type: str
images:
  description:
    - What M(aisb.sandbox.session_images) found - C(key) (null when a refresh is asked
      for) and C(found).
  returned: success
  type: dict
commands:
  description: The podman commands the host's facts and the images' lookup ran, in order.
  returned: success
  type: list
  elements: list
ansible_facts:
  description:
    - C(aisb_host), the host's facts; when the images were found, C(aisb_sandbox_image),
      C(aisb_gate_image) and C(aisb_policy_dir), as the roles set them.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def argument_spec():
    return dict(
        project=dict(type="str"),
        settings=dict(type="dict", default={}),
        inputs=dict(type="dict", default={}),
        base_image=dict(type="str"),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.fail_json(msg="aisb.sandbox.session_prepare runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
