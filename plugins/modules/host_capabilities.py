#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: host_capabilities
short_description: Measure what rootless podman gives this host and record it as facts
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
description:
  - Runs the network check as the connecting user. Real containers measure every part of
    the sandbox's networking model (pasta and its host-loopback mapping, the in-container
    nftables default-drop table, setpriv dropping every capability set, IPv6, UDP, limits,
    bind mounts) and the result is returned as C(ansible_facts.aisb_host).
  - No probe sends a packet to an address outside the host. A negative probe aims at a
    listener the module itself runs, so a leak is seen by that listener.
  - The facts are written to O(path) with a fingerprint of what they depend on (podman,
    passt, OCI runtime, kernel, distro, probe image). With O(cached=true) they are
    returned without starting a container while that fingerprint still matches and they
    are younger than O(max_age).
  - Run it as the workstation user, without become; rootless podman is what it measures.
  - The probe image must be Debian or Ubuntu based when the module builds it (it installs
    nftables with apt). It needs bash, GNU coreutils (C(timeout), C(date +%N)), util-linux
    C(setpriv) and C(nft).
author: aisb developers (@aisb)
options:
  base_image:
    description:
      - Image the probe image is built from (nftables added with apt), tagged
        C(localhost/aisb-probe:<hash of its inputs>).
      - Pulled when missing, unless it is a C(localhost/) image.
      - Defaults to C(docker.io/library/ubuntu:24.04) when O(probe_image) is not set.
    type: str
  probe_image:
    description:
      - A ready probe image to use instead of building one from O(base_image).
    type: str
  cached:
    description:
      - Return the facts stored at O(path) without probing when their fingerprint matches
        this host, they were measured with the same O(probe_image) or O(base_image), and
        they are younger than O(max_age). Otherwise probe again.
      - The fingerprint's versions are read with C(podman info) only when podman's, pasta's,
        the OCI runtime's or conmon's executables, podman's C(containers.conf) files, the
        kernel or C(/etc/os-release) changed since it last ran (a session reads them the
        same way); the probe image's ID is read every time.
    type: bool
    default: false
  max_age:
    description:
      - Oldest stored facts, in seconds, that O(cached=true) returns.
    type: int
    default: 604800
  path:
    description:
      - Where the facts are stored.
      - Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb/host_capabilities.json).
    type: path
  probe_timeout:
    description:
      - Seconds one probe container may run; a probe that takes longer is stopped and
        reported as hung.
    type: int
    default: 60
  require_provisioned:
    description:
      - Fail at once, measuring nothing, with one sentence naming C(aisb.sandbox.provision)
        when the host lacks podman (O(executable)) or the host tools a session's
        enforcement watch needs (C(nsenter), C(setpriv), C(nft), C(python3)). C(run_agent.yml) sets
        it; C(verify.yml) does not, so an unprovisioned host still gets its report row.
    type: bool
    default: false
  local_fact:
    description:
      - The local fact file kept for fleet reporting (role C(aisb.sandbox.capabilities) writes
        it as root); RV(local_fact_current) says whether it already holds these facts.
    type: path
notes:
  - Check mode probes as usual (probes change nothing) but writes no facts file and pulls
    or builds no image; without the probe image the container probes report that.
attributes:
  check_mode:
    description: Probes as usual; writes no facts file and builds no image.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Measure the host, reusing facts younger than a day
  aisb.sandbox.host_capabilities:
    cached: true
    max_age: 86400

- name: Probe with an image built without a registry
  aisb.sandbox.host_capabilities:
    base_image: localhost/aisb-base:trixie

- name: Refuse a host where the model does not hold
  ansible.builtin.assert:
    that: ansible_facts['aisb_host']['verdict']['model_holds']
    fail_msg: "{{ ansible_facts['aisb_host']['verdict']['reasons'] | join(' ') }}"
"""

RETURN = r"""
cached:
  description: Whether the facts came from O(path) without probing.
  returned: always
  type: bool
path:
  description: The facts file.
  returned: always
  type: str
local_fact_current:
  description:
    - Whether O(local_fact) exists with mode C(0644) and holds the facts returned (its copy
      need not be written again).
  returned: when O(local_fact) is given and the facts were read or measured
  type: bool
state_dir:
  description:
    - The state directory, C(${XDG_STATE_HOME:-~/.local/state}/aisb), where the collection keeps the facts,
      sessions, images' records and logs, policies and the harness's kept state.
  returned: success
  type: str
ansible_facts:
  description: The measured facts.
  returned: always
  type: dict
  contains:
    aisb_host:
      description: The host's capabilities (see docs/architecture.md for the schema).
      returned: always
      type: dict
      contains:
        schema_version:
          description: Version of this layout.
          type: int
          returned: always
        measured_at:
          description: UTC time of the measurement, C(YYYY-MM-DDTHH:MM:SSZ).
          type: str
          returned: always
        fingerprint:
          description: What the result depends on, and C(hash) over it.
          type: dict
          returned: always
        probe_image:
          description: The image the probes ran in (empty when none could be had).
          type: str
          returned: always
        probe_source:
          description: The O(probe_image) or O(base_image) it came from.
          type: str
          returned: always
        probes:
          description: >-
            One entry per probe, C({ok, detail, evidence{command, rc, stderr}}); the sandbox
            probes add C(network), the pasta option they ran on (plain pasta where the host's
            loopback cannot be mapped). C(seccomp_profile) says whether the sandbox's seccomp
            profile holds (nft works as root under it, the agent's C(unshare -Urn) is refused).
          type: dict
          returned: always
        verdict:
          description: >-
            C(model_holds) (every probe the sandbox's networking needs passed),
            C(no_gate_holds) (network no-gate's enforcement held on plain pasta; measured
            only where there is no gate path), C(gate_path) (the gate path, how a sandbox
            reaches its gate on the host's loopback: C(map-host-loopback), C(tcp-forward)
            (pasta C(-T), where the mapping is missing; holds when the
            C(tcp_forward_sandbox) probe passes) or C(none)),
            C(limits_enforceable), C(bind_mount_label), C(reasons) (one sentence with the
            fix per failed probe the model needs) and C(notes) (informational probes that failed).
          type: dict
          returned: always
commands:
  description: >-
    The commands that ran, in the order they started (the probes run side by side; each
    probe's own are also in its evidence).
  returned: always
  type: list
  elements: list
"""

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_env, _host_tools, _podman, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts, _host_probes, _host_verdict
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _enforcement_watch
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner


def constraints():
    return dict(mutually_exclusive=[("base_image", "probe_image")])


def argspec():
    return dict(
        base_image=dict(type="str"),
        probe_image=dict(type="str"),
        cached=dict(type="bool", default=False),
        max_age=dict(type="int", default=604800),
        path=dict(type="path"),
        probe_timeout=dict(type="int", default=60),
        executable=dict(type="str", default="podman"),
        require_provisioned=dict(type="bool", default=False),
        local_fact=dict(type="path"),
    )


def measure(params, check_mode, run, environ, now):
    """The stored facts while they still stand for this host, else a new measurement
    (probe image, probes, verdict), stored outside check mode. RUN: a _runner.Runner."""
    problem = _enforcement_watch.unprovisioned(params["executable"]) if params["require_provisioned"] else None
    podman, refused = _host_tools.resolve(params["executable"])
    if refused and shutil.which(params["executable"]):
        problem = refused
    if problem:
        return {"failed": True, "changed": False, "msg": problem}
    # Installed nowhere: its name, which the system's PATH does not find either (each probe says so).
    podman = podman or params["executable"]
    base_image = params["base_image"] or (None if params["probe_image"] else _images.DEFAULT_BASE_IMAGE)
    path = params["path"] or _state_layout.facts_path(environ)
    state = _state_layout.state_dir(environ)
    # Where a fresh fingerprint is also kept for sessions (check mode writes nothing).
    cache_environ = None if check_mode else _host_env.host_environment(environ)
    previous = _host_facts.load(path)
    source = params["probe_image"] or base_image
    if params["cached"] and previous and previous.get("probe_source") == source:
        # podman info's part as a session's admission reads it: kept while the host's key stands.
        fingerprint = (_host_facts.current_fingerprint(run, _host_facts.PROBE_IMAGE_ALIAS, podman) if check_mode
                       else _host_facts.cached_fingerprint(run, cache_environ, _host_facts.PROBE_IMAGE_ALIAS, podman))
        if not _host_facts.stale_reasons(previous, fingerprint, now, params["max_age"]):
            return {"changed": False, "cached": True, "path": path, "state_dir": state,
                    "ansible_facts": {"aisb_host": previous}}
    image, changed, image_error = _images.ensure_probe_image(
        run, podman, base_image, params["probe_image"], check_mode,
        log_dir=_state_layout.image_logs_dir(state))
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Read while the probes run: it starts no container and depends on none of them.
        # No image: an empty reference, so a stale alias from an older measurement is not counted.
        fingerprint = pool.submit(_host_facts.current_fingerprint, run, image or "", podman, cache_environ)
        probes = _host_probes.run_probes(_host_probes.Prober(run, podman, image, params["probe_timeout"],
                                                             image_error))
    facts = {
        "schema_version": _host_facts.SCHEMA_VERSION,
        "measured_at": _host_facts.format_time(now),
        "fingerprint": fingerprint.result(),
        "probe_image": image or "",
        "probe_source": source,
        "probes": probes,
        # Where each program the collection runs on the host is (_host_tools), podman's as given.
        "host_tools": _host_tools.resolve_all(dict(
            ((tool, tool) for tool in _host_tools.RECORDED), podman=params["executable"]))[0],
        "verdict": _host_verdict.verdict(probes),
    }
    changed = changed or _host_facts.change_key(previous) != _host_facts.change_key(facts)
    if not check_mode:
        if image:
            run(_podman.tag(podman, image, _host_facts.PROBE_IMAGE_ALIAS))
        _host_facts.save(path, facts)
    return {"changed": changed, "cached": False, "path": path, "state_dir": state,
            "ansible_facts": {"aisb_host": facts}}


def execute(params, check_mode, run, environ):
    """The task's result (failed=True with msg on an error), its commands in it."""
    result = dict(measure(params, check_mode, run, environ, time.time()), commands=run.commands)
    if params["local_fact"] and "ansible_facts" in result:
        result["local_fact_current"] = _host_facts.local_fact_current(params["local_fact"],
                                                                      result["ansible_facts"]["aisb_host"])
    return result


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True, **constraints())
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
