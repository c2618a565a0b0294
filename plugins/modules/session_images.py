#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: session_images
short_description: Find the images and policy the image and gate roles last gave for the same inputs
description:
  - Playbook C(aisb.sandbox.run_agent) asks it (a step of M(aisb.sandbox.session_prepare))
    before the image and gate roles, and
    includes them only when it finds nothing (their 14 tasks cost a warm session 0.7 s
    whatever they find); after they ran it remembers what they gave.
  - The action plugin computes O(key) when it is not given - a sha256 over this
    collection's roles and plugins, the value in this play of every variable the two
    roles name, and the contents of the files the roles read from a variable's paths
    (the extra CA certificates) - and finds nothing when a refresh is asked for
    (C(aisb_refresh), C(image_refresh), C(gate_refresh)).
  - An entry is found only while both images exist, each base image they were built from
    is still the image its reference names (one C(podman image inspect) for all of them),
    and the policy's directory exists; then the policy's directory is marked used now, as
    M(aisb.sandbox.gate_policy) marks it.
  - Entries are kept in C(session-images.json) in O(images_dir), the 16 newest. Any image
    build (M(aisb.sandbox.content_image)) removes that file.
version_added: 0.2.0
extends_documentation_fragment:
  - aisb.sandbox.podman
author: aisb developers (@aisb)
options:
  key:
    description:
      - The inputs' key. Computed by the action plugin from the play when not given;
        C(aisb.sandbox.run_agent) passes the key its lookup returned when it remembers.
    type: str
  remember:
    description:
      - Remember this entry under O(key) instead of finding one (nothing is written in
        check mode).
    type: dict
    suboptions:
      image:
        description: The sandbox image's tag (C(aisb_sandbox_image)).
        type: str
        required: true
      gate_image:
        description: The gate image's tag (C(aisb_gate_image)).
        type: str
        required: true
      policy_dir:
        description: The policy's directory (C(aisb_policy_dir)).
        type: path
        required: true
      bases:
        description:
          - Each base image reference the images were built from, mapped to its image ID
            (C(aisb_sandbox_image_base_image) and C(aisb_sandbox_image_inputs.base_image_id),
            the gate image's likewise).
        type: dict
        required: true
  images_dir:
    description: Where the file is kept. Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb/images).
    type: path
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Finds as outside check mode; remembers nothing and marks nothing used.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Find the images and policy of the last session with these inputs
  aisb.sandbox.session_images:
  register: found

- name: Remember what the roles gave
  aisb.sandbox.session_images:
    key: "{{ found.key }}"
    remember:
      image: "{{ ansible_facts['aisb_sandbox_image'] }}"
      gate_image: "{{ ansible_facts['aisb_gate_image'] }}"
      policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
      bases: {"localhost/aisb-base:trixie": "0123abcd..."}
  when: not found.found and found.key is not none
"""

RETURN = r"""
key:
  description: The inputs' key; null when a refresh is asked for (nothing is found or remembered then).
  returned: always
  type: str
found:
  description: Whether a current entry was found for RV(key).
  returned: always
  type: bool
ansible_facts:
  description: The entry found, as the facts the roles set - C(aisb_sandbox_image), C(aisb_gate_image), C(aisb_policy_dir).
  returned: when found
  type: dict
commands:
  description: The podman commands that ran, in order.
  returned: always
  type: list
  elements: list
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _session_images
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner


def argspec():
    return dict(
        key=dict(type="str", no_log=False),
        remember=dict(type="dict", options=dict(
            image=dict(type="str", required=True),
            gate_image=dict(type="str", required=True),
            policy_dir=dict(type="path", required=True),
            bases=dict(type="dict", required=True),
        )),
        images_dir=dict(type="path"),
        executable=dict(type="str", default="podman"),
    )


def execute(params, check_mode, run, environ):
    """The task's result. RUN: a _runner.Runner."""
    key = params["key"]
    result = dict(changed=False, key=key, found=False, commands=run.commands)
    if not key:
        return result  # a refresh: nothing to find or remember
    file_path = _session_images.path(params["images_dir"] or _state_layout.images_dir(_state_layout.state_dir(environ)))
    given = params["remember"]
    if given is not None:
        if not check_mode:
            _session_images.remember(file_path, key, _session_images.entry(
                given["image"], given["gate_image"], given["policy_dir"], given["bases"]))
        return dict(result, changed=True)
    found = _session_images.entry_for(file_path, key)
    if found is None:
        return result
    podman, problem = _host_tools.resolve(params["executable"])
    if problem:
        return dict(result, failed=True, msg=problem)
    if not _session_images.images_current(run, podman, found):
        return result
    if not check_mode:
        os.utime(found["policy_dir"])  # used now: retention keeps it
    return dict(result, found=True, ansible_facts=dict(
        aisb_sandbox_image=found["image"], aisb_gate_image=found["gate_image"], aisb_policy_dir=found["policy_dir"]))


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
