#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: gate_policy
short_description: Validate an egress policy and render it once per policy hash
description:
  - Validates the allow entries and CONNECT ports strictly; an invalid entry fails with
    a message naming it, before anything is written.
  - Renders the gate's squid policy part and a C(policy.json) record into
    C(STATE_DIR/policies/<policy hash>/), where the hash covers the rendered files, and
    returns them as the facts C(aisb_policy_hash), C(aisb_policy_dir), C(aisb_policy).
  - A new directory is checked with the real parsers before it appears under its final
    name, C(squid -k parse) in the gate image (with a sample session part including the
    policy part) and C(nft -c) through the sandbox entrypoint's C(--check) (with a
    sample gate address); an existing one is left alone but for its modification time,
    which marks it used now (retention keeps policies used within its days).
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
author: aisb developers (@aisb)
options:
  allow:
    description:
      - Allow entries. C(example.com) allows that name, C(.example.com) it and its
        subdomains, C(host:port) that host also on that port.
      - An IP address or CIDR (C(198.18.0.5), C(198.18.0.0/24)) is pinned in the
        sandbox's ruleset for TCP to the CONNECT ports; C(ip:port), C(cidr:port) and
        C([ipv6]:port) pin that port only. Pinned entries never reach squid.
      - C(host:port=address) (C(models.lan:8000=10.0.0.5)) lets that name on that port
        only reach that private IPv4 address (10/8, 172.16/12, 192.168/16, 100.64/10),
        through the gate, which never resolves the name; a self-hosted model server.
      - An IPv6 address there is refused (ULA, link-local, C(::1)); an IPv4-mapped one
        is told its plain IPv4 form.
      - C(host methods=GET,HEAD) allows that name and narrows its plain HTTP to those
        methods (DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT) - any other gets the gate's
        403. Its CONNECT tunnels cannot be narrowed without interception, so such an
        entry names no port or address. See docs/security.md, method rules.
      - An empty list is legal; the gate then denies everything.
    type: list
    elements: raw
    default: []
  connect_ports:
    description: Ports that CONNECT may reach on every allowed name.
    type: list
    elements: raw
    default: [443]
  state_dir:
    description: Directory for the collection's state; policies go under C(policies/).
    type: path
    required: true
  gate_image:
    description:
      - Gate image whose squid parses the rendered configuration.
      - Required unless the policy directory exists already or in check mode.
    type: str
  sandbox_image:
    description:
      - Sandbox image whose entrypoint checks the ruleset with C(nft -c).
      - Required unless the policy directory exists already or in check mode.
    type: str
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Validates the entries and reports the hash; writes and runs nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Render the policy for the gate
  aisb.sandbox.gate_policy:
    allow: [api.anthropic.com, .github.com, "git.example.org:2222", 198.18.0.0/24]
    connect_ports: [443]
    state_dir: ~/.local/state/aisb
    gate_image: localhost/aisb-gate:0123456789abcdef
    sandbox_image: localhost/aisb-sandbox:fedcba9876543210
"""

RETURN = r"""
policy_hash:
  description: sha256 of the rendered policy files.
  returned: success
  type: str
policy_dir:
  description: Directory holding C(squid-policy.conf) and C(policy.json).
  returned: success
  type: str
  sample: /home/dev/.local/state/aisb/policies/5e1f0c2a9b3d4e6f
policy:
  description: The validated policy, as written to C(policy.json).
  returned: success
  type: dict
  sample:
    allow: [.github.com, 198.18.0.0/24]
    connect_ports: [443]
    domains: [.github.com]
    host_ports: []
    pins: [[198.18.0.0/24, 443]]
    private: []
ansible_facts:
  description: RV(policy_hash), RV(policy_dir) and RV(policy) as C(aisb_policy_hash), C(aisb_policy_dir) and C(aisb_policy).
  returned: success
  type: dict
commands:
  description: The podman commands that ran, in order.
  returned: success
  type: list
  elements: list
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import (
    _content_hash, _host_tools, _podman, _state_layout)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _policy, _policy_dir, _squid
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner

# Only for the nft -c check: the real address and port come with each session.
SAMPLE_GATE = ("100.64.0.1", 3128)


def argspec():
    return dict(
        allow=dict(type="list", elements="raw", default=[]),
        connect_ports=dict(type="list", elements="raw", default=[443]),
        state_dir=dict(type="path", required=True),
        gate_image=dict(type="str"),
        sandbox_image=dict(type="str"),
        executable=dict(type="str", default="podman"),
    )


def check(params, run, podman, staging, policy):
    """None when the real parsers accept the staged policy, else why not (RUN: a
    _runner.Runner)."""
    scratch = tempfile.mkdtemp(prefix=".check-", dir=os.path.dirname(staging))
    try:
        _policy_dir.write_files(scratch, {
            "session.conf": _squid.render_session_conf(SAMPLE_GATE[1], "parse-check", _podman.GATE_POLICY_CONF).encode(),
            "sandbox-policy": _policy.render_sandbox_policy(policy, SAMPLE_GATE).encode(),
        })
        checks = [
            ("squid -k parse", _podman.squid_parse(podman, params["gate_image"], staging,
                                                   os.path.join(scratch, "session.conf"))),
            ("nft -c", _podman.ruleset_check(podman, params["sandbox_image"], os.path.join(scratch, "sandbox-policy"))),
        ]
        for name, argv in checks:
            rc, out, err = run(argv)
            if rc != 0:
                return "the rendered policy does not pass %s (rc=%s): %s" % (name, rc, (err or out).strip()[-2000:])
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def execute(params, check_mode, run, _environ):
    """The task's result (failed=True with msg on an error). RUN: a _runner.Runner."""
    try:
        policy, record, files, digest = _policy_dir.render(params["allow"], params["connect_ports"])
    except _policy.PolicyError as error:
        return dict(failed=True, msg=str(error))
    policies = _state_layout.policies_dir(params["state_dir"])
    final = os.path.join(policies, digest[:_content_hash.TAG_LENGTH])
    result = dict(policy_hash=digest, policy_dir=final, policy=record, commands=[],
                  ansible_facts=dict(aisb_policy_hash=digest, aisb_policy_dir=final, aisb_policy=record))
    if os.path.isdir(final) and not check_mode:
        os.utime(final)
    if os.path.isdir(final) or check_mode:
        return dict(result, changed=not os.path.isdir(final))
    if not (params["gate_image"] and params["sandbox_image"]):
        return dict(result, failed=True, msg="gate_image and sandbox_image are needed to check a new policy")
    podman, problem = _host_tools.resolve(params["executable"])
    if problem:
        return dict(failed=True, msg=problem)
    if not os.path.isdir(policies):
        os.makedirs(policies, 0o755)
    staging = tempfile.mkdtemp(prefix=".staging-", dir=policies)
    try:
        _policy_dir.write_files(staging, files)
        problem = check(params, run, podman, staging, policy)
        if problem:
            return dict(failed=True, msg=problem, commands=run.commands)
        result["commands"] = run.commands
        # Appears under its final name only once both parsers accepted it.
        os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dict(result, changed=True)


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
