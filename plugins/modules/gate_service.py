#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gate_service
short_description: A long-lived egress gate for one policy, as a systemd user service
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
description:
  - Sessions start and remove a gate of their own. This module is the one named
    exception, a gate that outlives any session, for tools that want a standing proxy
    with a fixed policy. It listens on the host's loopback only.
  - It runs as a systemd user service - a podman quadlet,
    C(${XDG_CONFIG_HOME:-~/.config}/containers/systemd/aisb-gate-policy-<policy hash>.container),
    which podman's generator turns into C(aisb-gate-policy-<policy hash>.service). The
    container runs with the same options as a session's gate, labelled with the policy
    hash and port, so C(podman ps) shows which policy it relays for and where.
  - O(state=started) writes the unit (started with the user manager), starts or restarts
    the service and waits until the gate answers. O(state=stopped) keeps the unit without
    its start at boot and stops the service. O(state=absent) stops it and removes the
    unit and the gate's configuration. C(up) and C(down) are the names C(gate.yml) had,
    for C(started) and C(absent).
  - Needs the user's systemd manager (C(systemctl --user)); fails naming it when none
    answers. A gate that is to come back after a reboot needs the user's manager started
    at boot - C(loginctl enable-linger USER), the operator's decision; RV(lingering) says
    whether it is.
author: aisb developers (@aisb)
options:
  state:
    description: C(started), C(stopped) or C(absent); C(up) is C(started), C(down) is C(absent).
    type: str
    choices: [started, stopped, absent, up, down]
    default: started
  policy_dir:
    description: Directory of the rendered policy (the gate role's C(aisb_policy_dir)).
    type: path
    required: true
  gate_image:
    description: The gate image. Required for O(state=started).
    type: str
  port:
    description:
      - Host-loopback port to listen on. When not given, the port of an existing unit for
        this policy, else a free one picked now and kept in the unit.
    type: int
  unit_dir:
    description: The user's quadlet directory. Defaults to C(${XDG_CONFIG_HOME:-~/.config}/containers/systemd).
    type: path
  systemctl:
    description: The systemctl binary, found as O(executable) is (the system's directories only).
    type: str
    default: systemctl
attributes:
  check_mode:
    description: Reports what would change and writes, starts or stops nothing.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""

EXAMPLES = r"""
- name: Gate up for the current policy, as a user service
  aisb.sandbox.gate_service:
    policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
    gate_image: "{{ ansible_facts['aisb_gate_image'] }}"
  register: gate

- name: Gate down and gone
  aisb.sandbox.gate_service:
    state: absent
    policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
"""

RETURN = r"""
name:
  description: The gate container's name (the unit's, without C(.container)).
  returned: always
  type: str
unit:
  description: The quadlet file.
  returned: always
  type: str
port:
  description: The host-loopback port it listens on.
  returned: when O(state=started)
  type: int
proxy:
  description: The proxy URL for clients on this host.
  returned: when O(state=started)
  type: str
lingering:
  description: Whether the user's manager starts at boot (C(loginctl enable-linger)), so the gate comes back after a reboot.
  returned: always
  type: bool
commands:
  description: The podman and systemctl commands that ran.
  returned: always
  type: list
  elements: list
"""

import os
import pwd
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _podman, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.gate import _gate_unit
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _policy_dir
from ansible_collections.aisb.sandbox.plugins.module_utils.common._files import write_whole
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import module_runner
from ansible_collections.aisb.sandbox.plugins.module_utils.gate._gate_loopback import free_loopback_port, gate_answers
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import render_session_conf

STATES = {"up": "started", "down": "absent"}
LINGER_DIR = "/var/lib/systemd/linger"


def argspec():
    return dict(
        state=dict(type="str", choices=["started", "stopped", "absent", "up", "down"], default="started"),
        policy_dir=dict(type="path", required=True),
        gate_image=dict(type="str"),
        port=dict(type="int"),
        unit_dir=dict(type="path"),
        systemctl=dict(type="str", default="systemctl"),
        executable=dict(type="str", default="podman"),
    )


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def write(path, text):
    """Write TEXT to PATH whole (the generator or the gate reads the old or the new file)."""
    os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
    write_whole(path, text)


class Service(object):
    """The gate's unit and its service, through RUN (systemctl --user and podman)."""

    def __init__(self, module, run, name):
        self.module, self.run, self.name = module, run, name
        systemctl, problem = _host_tools.resolve(module.params["systemctl"])
        if problem:
            self.no_manager(problem)
        self.user = [systemctl, "--user"]
        self.unit = _gate_unit.unit_file(module.params["unit_dir"] or _gate_unit.unit_dir(os.environ), name)

    def no_manager(self, why):
        user = pwd.getpwuid(os.getuid()).pw_name
        self.module.fail_json(
            msg="no systemd user manager answers for %s (%s): the long-lived gate runs as a user service; log in "
                "through a session that starts one, or have it started at boot with sudo loginctl enable-linger %s"
                % (user, why, user), commands=self.run.commands)

    def require_manager(self):
        rc, _out, err = self.run(self.user + ["show", "--property=Version"])
        if rc != 0:
            self.no_manager("systemctl --user: %s" % (err.strip() or "rc %d" % rc))

    def active(self):
        return self.run(self.user + ["is-active", "--quiet", _gate_unit.service(self.name)])[0] == 0

    def systemctl(self, *args):
        self.run.checked(self.user + list(args))

    def failed(self, msg):
        _rc, out, err = self.run(self.user + ["status", "--no-pager", "--lines=20", _gate_unit.service(self.name)])
        self.module.fail_json(msg="%s; systemctl --user status: %s" % (msg, (out + err)[-1500:]),
                              commands=self.run.commands)


def lingering():
    return os.path.exists(os.path.join(LINGER_DIR, pwd.getpwuid(os.getuid()).pw_name))


def execute_module(module):
    params = module.params
    state = STATES.get(params["state"], params["state"])
    policy_dir = params["policy_dir"].rstrip("/")
    policy_hash = _policy_dir.policy_hash(policy_dir)
    name = _gate_unit.unit_name(policy_hash)
    conf_dir = _state_layout.gate_directory(policy_dir)
    conf = os.path.join(conf_dir, "gate-session.conf")
    run = module_runner(module)
    unit = Service(module, run, name)
    unit.require_manager()
    existing = read(unit.unit)
    result = dict(name=name, unit=unit.unit, lingering=lingering(), commands=run.commands)
    if state == "absent":
        changed = existing is not None or unit.active()
        if changed and not module.check_mode:
            run(unit.user + ["stop", _gate_unit.service(name)])  # rc 5 when the unit was never loaded
            if existing is not None:
                os.remove(unit.unit)
            unit.systemctl("daemon-reload")
            shutil.rmtree(conf_dir, ignore_errors=True)
        # A gate that gate.yml started as a plain container before it was a service.
        if not module.check_mode:
            run.checked(_podman.remove(_host_tools.module_program(module, params["executable"]), [name]))
        return dict(result, changed=changed)
    if state == "stopped":
        if existing is None:
            return dict(result, changed=False)
        image, port = _gate_unit.unit_image(existing), _gate_unit.unit_port(existing)
    else:
        image = params["gate_image"]
        if not image:
            module.fail_json(msg="gate_image is required for state=started (the gate role's aisb_gate_image)")
        port = params["port"] or (_gate_unit.unit_port(existing) if existing else None) or free_loopback_port()
    try:
        text = _gate_unit.render_unit(
            name, image, _podman.gate_options(policy_dir, conf, _gate_unit.CGROUPS_V1_OPTIONS
                                              if _gate_unit.cgroups_v1() else []),
            _podman.GATE_COMMAND, policy_hash, port, at_boot=state == "started")
    except ValueError as error:
        module.fail_json(msg=str(error), commands=run.commands)
    conf_text = render_session_conf(port, "policy-" + policy_hash, _podman.GATE_POLICY_CONF)
    rewrite = text != existing or read(conf) != conf_text
    active = unit.active()
    changed = rewrite or active != (state == "started")
    if state == "started":
        result.update(port=port, proxy="http://127.0.0.1:%d" % port)
    if module.check_mode or not changed:
        return dict(result, changed=changed)
    if rewrite:
        write(conf, conf_text)
        write(unit.unit, text)
        unit.systemctl("daemon-reload")
    if state == "stopped":
        unit.systemctl("stop", _gate_unit.service(name))
        return dict(result, changed=True)
    # Type=notify: systemctl returns once conmon reported the container started.
    if run(unit.user + ["restart" if rewrite else "start", _gate_unit.service(name)])[0] != 0:
        unit.failed("the gate service %s did not start" % _gate_unit.service(name))
    # Polled until the gate answers: through the Runner's executor, not recorded.
    if not gate_answers(port, lambda: run.execute(unit.user + ["is-active", "--quiet", _gate_unit.service(name)],
                                                  None)[0] == 0):
        unit.failed("the gate service %s did not answer on 127.0.0.1:%d" % (_gate_unit.service(name), port))
    return dict(result, changed=True)


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    module.exit_json(**execute_module(module))


if __name__ == "__main__":
    main()
