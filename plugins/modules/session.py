#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: session
short_description: Run one sandboxed harness session behind its own egress gate
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
  - aisb.sandbox.session_inputs
description:
  - Runs on the workstation as its user. Its action plugin, on the controller, validates
    the inputs, builds the environment, reads the host facts and either runs this module
    on the host (headless) or runs the session itself on ansible-playbook's terminal
    (interactive).
  - Checks the host facts against the host as it is now (fingerprint, schema, age,
    verdict) and refuses to start on any problem unless O(allow_unenforced=true).
  - Starts a squid gate for this session on a free host-loopback port and, at the same
    time, the sandbox, attached with its output in a transcript; the sandbox's entrypoint
    waits until the gate answers before the harness runs. Then removes the gate. Every
    container it started is removed on every exit path, signals included; a watchdog
    process removes them, and writes the record, if this one is killed (SIGKILL).
  - Ends with its controller. When this module's stdout loses its reader
    (ansible-playbook's worker or the SSH connection went away; a newline written to it
    every half second makes an ssh client or ControlPersist master in between notice)
    or, for an interactive session, when ansible-playbook exits, the sandbox is stopped
    and the session ends with status C(controller-lost).
  - Once the sandbox's entrypoint has reported its table, reads the sandbox's whole nftables
    ruleset from outside the sandbox every 2 seconds, with the host's C(nft) in the
    sandbox's network namespace, until the sandbox exits. The first reading must be the
    table the policy asks for and every later one the same as the first; every change to
    that ruleset is also heard as it is made (C(nft monitor)), the sandbox's routes,
    addresses and pasta process are compared with the first reading's, and canaries
    (direct TCP and UDP, a CONNECT to a name on no list through the gate) are tried from
    the sandbox's namespaces with the host's C(python3) every 5 seconds; a difference, an
    event, a failed canary, or no reading for 4 seconds, kills the sandbox at once and
    ends the session with status C(enforcement-lost) and exit code 77. A sandbox whose
    entrypoint has not reported its table 30 seconds after its container started
    (however long podman took to create it) is stopped, with status
    C(enforcement-unreported) and exit code 77. Refuses to start when the host has no
    C(nft), C(nsenter), C(setpriv) or C(python3) (C(provision.yml) installs them).
    Not with O(allow_unenforced=true).
  - Runs the sandbox under a seccomp profile of its own, rendered from podman's default
    (C(/usr/share/containers/seccomp.json)) less new namespaces, keyrings, bpf, perf,
    userfaultfd, io_uring, the new mount API, kexec and module loading; it is written to
    the session's directory and its sha256 kept in the record. Refuses to start when that
    file cannot be read or is no such profile, unless O(allow_unenforced=true) (then
    podman's default applies). The watch also reads the sandbox's C(/proc/PID/status), and
    a sandbox not in seccomp filter mode under one filter more than the session's own
    process is killed like one whose table changed (status C(enforcement-lost)).
  - Writes a session record (JSON) to C($XDG_STATE_HOME/aisb/sessions/ID/record.json).
author: aisb developers (@aisb)
options:
  image:
    description: Sandbox image tag (from the image role).
    type: str
    required: true
  gate_image:
    description: Gate image tag (from the gate role). Needed when O(network=allow).
    type: str
  policy_dir:
    description:
      - The rendered policy directory (from the gate role), the session's one policy. The
        gate's squid reads its C(squid-policy.conf); the sandbox's pins come from its
        C(policy.json), parsed again, and the session refuses to start when the two do
        not describe the same policy.
      - Needed unless O(network=none).
    type: path
  gate_path:
    description:
      - For tests. How the sandbox reaches its gate with O(network=allow), where the host
        has both ways; without it, the host facts' C(verdict.gate_path).
      - C(map-host-loopback) (pasta's C(--map-host-loopback)) or C(tcp-forward) (pasta's
        C(-T PORT), the one older passt has). Accepted only when the host facts measured
        that path working (C(probes.host_loopback_reachable), or C(probes.tcp_forward) and
        C(probes.tcp_forward_sandbox)) and C(verdict.model_holds) is true; refused
        otherwise, even with O(allow_unenforced).
    type: str
    choices: [map-host-loopback, tcp-forward]
  host_facts:
    description: The host facts. Defaults to C(ansible_facts.aisb_host).
    type: dict
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
  answer:
    description:
      - Read a headless session's transcript end into RV(answer). C(false) when the caller
        shows the transcript itself as it is written (C(aisb run) does); RV(answer) is then empty.
    type: bool
    default: true
  require_limits:
    description: Refuse to start when O(limits) cannot be enforced on this host.
    type: bool
    default: false
  allow_origins:
    description:
      - Where each allow entry came from, C(team) or C(user) (M(aisb.sandbox.team_settings)'s
        C(allow_origins)), for the record's C(allow) - the O(policy_dir)'s entries, each
        with its origin; an entry of the O(harness) recipe's own not named here is
        C(harness), any other C(unspecified).
    type: dict
    default: {}
  harness_config_dir:
    description:
      - Set by the action plugin - the directory (on the controller) the O(harness_config)
        files were read from; with a team file the module checks it is the team's.
    type: str
  project_harness_code:
    description:
      - Let the O(harness) load and run what the project gives it at start (pi's
        extensions and packages, Claude Code's project settings and C(.mcp.json), codex's
        and opencode's project configuration) - the playbooks' C(aisb_project_harness_code),
        a team setting.
      - C(false) turns it off through the harness's own switches, the recipe's
        C(project_code.off) (C(project_code.on) for C(true)) - arguments put right after
        the recipe's command when the session's command starts with it, variables always.
        The record says which (C(project_harness_code), C(project_harness_code_switches),
        null for a recipe without C(project_code) - the harness has no switch).
        See docs/harnesses.md.
    type: bool
    default: false
  allow_unenforced:
    description:
      - Start even when the host facts say enforcement does not hold, and let the
        entrypoint run when it cannot install or verify the ruleset; the table is not
        watched. For debugging only.
    type: bool
    default: false
  ansible_origin:
    description:
      - Set by the action plugin on the controller, not by a task - where this
        ansible-playbook read its configuration and plugins from, as far as the project
        goes - C(config_file) (the configuration file in use; null when there is none,
        and with C(config_note) when it was the empty one C(aisb) made for the run) and C(from_project) (each
        configuration file, plugin, collection or role path, Python or Ansible that lies
        in the project). The record keeps it; the play warns when C(from_project) names
        anything, since code from the project may then have run before any task.
    type: dict
notes:
  - Check mode validates everything and starts nothing.
  - Runs the programs it needs on the host (podman, bash, setpriv, nsenter, nft) from the
    system's directories only (C(/usr/sbin), C(/usr/bin), C(/sbin), C(/bin), root's alone),
    never through PATH, and refuses to start when one is not there; podman and every
    other host process run with that PATH.
"""

EXAMPLES = r"""
- name: Run a command in the sandbox
  aisb.sandbox.session:
    project: ~/src/app
    image: "{{ aisb_sandbox_image }}"
    gate_image: "{{ aisb_gate_image }}"
    policy_dir: "{{ aisb_policy_dir }}"
    command: [curl, -sI, https://example.com]

- name: Give the harness a prompt
  aisb.sandbox.session:
    project: ~/src/app
    image: "{{ ansible_facts['aisb_sandbox_image'] }}"
    gate_image: "{{ ansible_facts['aisb_gate_image'] }}"
    policy_dir: "{{ ansible_facts['aisb_policy_dir'] }}"
    harness: pi
    prompt_file: task.md
"""

RETURN = r"""
rc:
  description:
    - The harness's exit code (77 enforcement failed or was lost, 78 policy missing, 79 the
      gate never answered).
  returned: when the sandbox ran
  type: int
status:
  description:
    - C(exited), C(failed) (it could not start or end cleanly, see msg), C(gate-died),
      C(enforcement-lost) (the sandbox's table changed or could not be read while it ran, or
      it was not under its seccomp filter; it was killed, rc is 77 and the record says what
      changed and when),
      C(enforcement-unreported) (the entrypoint never reported its table within 30 seconds of
      the sandbox's container starting; it was stopped, rc is 77), C(interrupted),
      C(refused), or C(planned) in check mode.
    - C(controller-lost) (ansible-playbook, its worker or the connection to the host went
      away) is written to the record; nobody is left to receive the task's result.
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
answer:
  description: >-
    A headless session's output as the transcript holds it (its last 64 KiB, from a
    line's start, after a line naming the transcript when it is longer), each environment
    value of 8 characters or more in it shown as C(********) (the transcript keeps it);
    empty for an interactive session, and when O(answer) is false.
  returned: when a session started
  type: str
gate:
  description: >-
    How many requests the gate allowed (relayed), denied and answered itself (C(answered):
    no server contacted, as a 400 for an origin-form request), and C(hints), a sentence for each refused
    CONNECT to an allowed name on a port CONNECT may not use, naming the allow entry that
    would relay it (Node harnesses send http:// URLs as CONNECT); the hints are also warnings.
  returned: when a session started
  type: dict
upload:
  description:
    - When an upload budget (O(upload_budget), O(provider_upload_budget)) was spent,
      C(upload-budget-exceeded) and each budget's bytes and what was sent; else empty. The
      record's C(upload) has each budget, what was sent at the watch's last reading and
      when it was spent.
  returned: when a session started
  type: str
token_budget:
  description:
    - When the session's token budget (O(token_budget)) was spent, one sentence naming it and
      each provider's tokens (requests after it got 429); else empty. The record's C(tokens)
      has each provider's input and output tokens, requests and the budget.
  returned: when a session started
  type: str
commits:
  description:
    - Which of the agent's refs arrived as data under C(refs/aisb/<session_id>/) of each
      repository of the project, nested ones and submodules into themselves, in both modes
      (C(HEAD), C(heads/<branch>), C(tags/<tag>), C(stash), each that differs from the host's
      same-named ref, also at a commit the host already had), and what was not brought back
      and why (a name that is not plain, an object the host lacks, the wrong object type);
      empty when no ref changed. The record's C(commits) has each repository's refs. Take them with
      O(aisb.sandbox.project_review#module:branch) (review mode) or
      C(git reset refs/aisb/<session_id>/HEAD) / C(git branch NAME refs/aisb/<session_id>/HEAD).
  returned: when a session started
  type: str
commands:
  description: The podman command lines that ran.
  returned: always
  type: list
  elements: list
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session import run_session
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import (
    CONTROLLER_OPTIONS, argument_spec, constraints)


def execute(module):
    """The task's result; the action plugin resolves the controller's options first."""
    given = [name for name in CONTROLLER_OPTIONS if module.params[name]]
    if given or module.params["command"] is None:
        return refused_result("%s: resolved by the aisb.sandbox.session action on the controller, which sends the "
                              "command" % ", ".join(given or ["harness"]), warnings=[])
    return run_session(module.params, dict(os.environ), module.check_mode)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, **constraints())
    result = execute(module)
    for warning in result.pop("warnings"):
        module.warn(warning)
    exit_module(module, result)


if __name__ == "__main__":
    main()
