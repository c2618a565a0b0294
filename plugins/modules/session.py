#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: session
short_description: Run one sandboxed harness session behind its own egress gate
version_added: 0.1.0
description:
  - Runs on the workstation as its user. Use the M(aisb.sandbox.session) action, which
    validates the inputs, reads the host facts and passes them here; this module is its
    host-side half.
  - Checks the host facts against the host as it is now (fingerprint, schema, age,
    verdict) and refuses to start on any problem unless O(allow_unenforced=true).
  - Starts a squid gate for this session on a free host-loopback port, waits until it
    answers, runs the sandbox attached with its output in a transcript, then removes the
    gate. Every container it started is removed on every exit path, signals included.
  - Writes a session record (JSON) to C($XDG_STATE_HOME/aisb/sessions/ID/record.json).
author: aisb developers
options:
  project:
    description: Directory mounted at /project. C(~) is expanded and symlinks resolved.
    type: str
    required: true
  image:
    description: Sandbox image tag (from the image role).
    type: str
    required: true
  gate_image:
    description: Gate image tag (from the gate role). Needed when O(network=allow).
    type: str
  policy_dir:
    description: Directory holding the rendered squid policy part (from the gate role).
    type: path
  allow:
    description: The policy's allow entries; pinned ip/cidr entries go into the ruleset.
    type: list
    elements: str
    default: []
  connect_ports:
    description: Ports CONNECT may reach.
    type: list
    elements: int
    default: [443]
  network:
    description: C(allow) runs the gate; C(none) gives the sandbox no network at all.
    type: str
    choices: [allow, none]
    default: allow
  command:
    description: The harness command line, passed as a list and never through a shell.
    type: list
    elements: str
    required: true
  environment:
    description: The sandbox's whole environment besides the proxy settings.
    type: dict
    default: {}
  host_facts:
    description: C(ansible_facts.aisb_host) as the controller holds it.
    type: dict
    default: {}
  max_facts_age:
    description: Oldest facts, in seconds, trusted without probing again.
    type: int
    default: 604800
  limits:
    description: Resource limits, applied when the host facts say they are enforceable.
    type: dict
    default: {}
    suboptions:
      memory:
        description: podman --memory value, for example C(2g).
        type: str
      pids:
        description: podman --pids-limit value.
        type: int
      cpus:
        description: podman --cpus value, for example C(1.5).
        type: str
  require_limits:
    description: Refuse to start when O(limits) cannot be enforced on this host.
    type: bool
    default: false
  allow_unenforced:
    description:
      - Start even when the host facts say enforcement does not hold, and let the
        entrypoint run when it cannot install or verify the ruleset. For debugging only.
    type: bool
    default: false
  executable:
    description: The podman binary.
    type: str
    default: podman
notes:
  - Check mode validates everything and starts nothing.
"""

EXAMPLES = r"""
- name: Run a command in the sandbox
  aisb.sandbox.session:
    project: ~/src/app
    image: "{{ aisb_sandbox_image }}"
    gate_image: "{{ aisb_gate_image }}"
    policy_dir: "{{ aisb_policy_dir }}"
    allow: [example.com]
    command: [curl, -sI, https://example.com]
"""

RETURN = r"""
rc:
  description: The harness's exit code (77 enforcement failed, 78 policy missing).
  returned: when the sandbox ran
  type: int
status:
  description: C(exited), C(gate-died), C(interrupted) or C(refused).
  returned: always
  type: str
session_id:
  description: The session's id, also in every gate log line.
  returned: when a session started
  type: str
record:
  description: Path of the session record.
  returned: when a session started
  type: str
transcript:
  description: Path of the harness's output.
  returned: when a session started
  type: str
gate:
  description: How many requests the gate allowed and denied.
  returned: when a session started
  type: dict
commands:
  description: The podman command lines that ran.
  returned: always
  type: list
  elements: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils._session_run import run_headless


def argument_spec():
    return dict(
        project=dict(type="str", required=True),
        image=dict(type="str", required=True),
        gate_image=dict(type="str"),
        policy_dir=dict(type="path"),
        allow=dict(type="list", elements="str", default=[]),
        connect_ports=dict(type="list", elements="int", default=[443]),
        network=dict(type="str", choices=["allow", "none"], default="allow"),
        command=dict(type="list", elements="str", required=True),
        environment=dict(type="dict", default={}, no_log=True),
        host_facts=dict(type="dict", default={}),
        max_facts_age=dict(type="int", default=604800),
        limits=dict(type="dict", default={}, options=dict(
            memory=dict(type="str"), pids=dict(type="int"), cpus=dict(type="str"))),
        require_limits=dict(type="bool", default=False),
        allow_unenforced=dict(type="bool", default=False),
        executable=dict(type="str", default="podman"),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    result = run_headless(module.params, module.check_mode, module.warn)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
