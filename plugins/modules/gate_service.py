#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gate_service
short_description: A long-lived egress gate for one policy (gate up / gate down)
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
description:
  - Sessions start and remove a gate of their own. This module is the one named
    exception, a gate that outlives any session, for tools that want a standing proxy
    with a fixed policy. It listens on the host's loopback only.
  - The container is named C(aisb-gate-policy-<policy hash>) and labelled with the
    policy hash, so C(podman ps) shows which policy it relays for.
  - O(state=up) starts it unless it runs already (a stopped one is replaced);
    O(state=down) removes it.
author: aisb developers (@aisb)
options:
  state:
    description: C(up) or C(down).
    type: str
    choices: [up, down]
    default: up
  policy_dir:
    description: Directory of the rendered policy (the gate role's C(aisb_policy_dir)).
    type: path
    required: true
  gate_image:
    description: The gate image. Required for O(state=up).
    type: str
  port:
    description: Host-loopback port to listen on. A free one is picked when not given.
    type: int
attributes:
  check_mode:
    description: Reports what would change and starts or removes nothing.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Gate up for the current policy
  aisb.sandbox.gate_service:
    policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
    gate_image: "{{ ansible_facts['aisb_gate_image'] }}"
  register: gate

- name: Gate down
  aisb.sandbox.gate_service:
    state: down
    policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
"""

RETURN = r"""
name:
  description: The gate container's name.
  returned: always
  type: str
port:
  description: The host-loopback port it listens on.
  returned: when O(state=up)
  type: int
proxy:
  description: The proxy URL for clients on this host.
  returned: when O(state=up)
  type: str
commands:
  description: The podman commands that ran.
  returned: always
  type: list
  elements: list
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils._runner import module_runner
from ansible_collections.aisb.sandbox.plugins.module_utils._gate_loopback import free_loopback_port, gate_answers
from ansible_collections.aisb.sandbox.plugins.module_utils._squid import render_session_conf

POLICY_LABEL = "aisb.policy"


def argspec():
    return dict(
        state=dict(type="str", choices=["up", "down"], default="up"),
        policy_dir=dict(type="path", required=True),
        gate_image=dict(type="str"),
        port=dict(type="int"),
        executable=dict(type="str", default="podman"),
    )


def inspect(run, podman, name):
    """(state, port) of the gate container, or (None, None) when there is none."""
    rc, out, _err = run(
        [podman, "container", "inspect", "--format", '{{.State.Status}} {{index .Config.Labels "aisb.port"}}', name])
    if rc != 0:
        return None, None
    state, _sep, port = out.strip().partition(" ")
    return state, int(port) if port.isdigit() else None


def execute_module(module):
    params = module.params
    podman = params["executable"]
    policy_hash = os.path.basename(params["policy_dir"].rstrip("/"))
    name = "aisb-gate-policy-" + policy_hash
    run = module_runner(module)
    state, port = inspect(run, podman, name)
    if params["state"] == "down":
        if state is not None and not module.check_mode:
            run.checked(_podman.remove(podman, [name]))
        return dict(changed=state is not None, name=name, commands=run.commands)
    if not params["gate_image"]:
        module.fail_json(msg="gate_image is required for state=up (the gate role's aisb_gate_image)")
    if state == "running" and (params["port"] is None or params["port"] == port):
        return dict(changed=False, name=name, port=port, proxy="http://127.0.0.1:%d" % port, commands=run.commands)
    if module.check_mode:
        return dict(changed=True, name=name, commands=run.commands)
    port = params["port"] or free_loopback_port()
    conf_dir = os.path.join(os.path.dirname(os.path.dirname(params["policy_dir"])), "gates", policy_hash)
    os.makedirs(conf_dir, exist_ok=True)
    conf = os.path.join(conf_dir, "gate-session.conf")
    with open(conf, "w") as handle:
        handle.write(render_session_conf(port, "policy-" + policy_hash, _podman.GATE_POLICY_CONF))
    run.checked(_podman.remove(podman, [name]))
    run.checked(_podman.gate_run(podman, params["gate_image"], name, params["policy_dir"], conf,
                                 extra=["--detach", "--label", "%s=%s" % (POLICY_LABEL, policy_hash),
                                        "--label", "aisb.port=%d" % port]))
    # Polled until the gate answers: through the Runner's executor, not recorded.
    if not gate_answers(port, lambda: inspect(run.execute, podman, name)[0] == "running"):
        _rc, out, err = run(_podman.logs(podman, name))
        run(_podman.remove(podman, [name]))
        module.fail_json(msg="the gate did not answer on 127.0.0.1:%d: %s" % (port, (out + err)[-800:]),
                         commands=run.commands)
    return dict(changed=True, name=name, port=port, proxy="http://127.0.0.1:%d" % port, commands=run.commands)


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    module.exit_json(**execute_module(module))


if __name__ == "__main__":
    main()
