# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's options: one argument spec and its constraints, shared by the session
module and its action plugin (which resolves the controller-side options first)."""

from __future__ import annotations

# Resolved on the controller by the action plugin, never sent to the module: the
# harness recipe and the prompt become COMMAND, the names become values in ENVIRONMENT,
# and an interactive session runs in the action itself.
CONTROLLER_OPTIONS = ("harness", "prompt", "prompt_file", "pass_environment", "interactive")


def argument_spec():
    return dict(
        project=dict(type="str", required=True),
        image=dict(type="str", required=True),
        gate_image=dict(type="str"),
        policy_dir=dict(type="path"),
        network=dict(type="str", choices=["allow", "none", "no-gate"], default="allow"),
        # Tests only: the other gate path where the host's facts measured both.
        gate_path=dict(type="str", choices=["map-host-loopback", "tcp-forward"]),
        command=dict(type="list", elements="str"),
        # A recipe as the image role keeps it: its other keys (packages, ...) are the build's.
        harness=dict(type="dict"),
        prompt=dict(type="str"),
        prompt_file=dict(type="path"),
        # raw: a dict, or its JSON text. The action plugin sends the text, so the values
        # are hidden in results as one string: a short value ("0", "true") would
        # otherwise be masked wherever it occurs, the exit code included.
        environment=dict(type="raw", default={}, no_log=True),
        # Names, not values: nothing secret.
        pass_environment=dict(type="list", elements="str", default=[], no_log=False),
        # The operator's entries (_credentials); the action plugin sends them resolved, each
        # with its key, as JSON text: hidden in results as one string, like environment.
        credentials=dict(type="raw", default=[], no_log=True),
        interactive=dict(type="bool"),
        host_facts=dict(type="dict"),
        max_facts_age=dict(type="int", default=604800),
        limits=dict(type="dict", default={}, options=dict(
            memory=dict(type="str"), pids=dict(type="int"), cpus=dict(type="str"))),
        require_limits=dict(type="bool", default=False),
        allow_unenforced=dict(type="bool", default=False),
        project_mode=dict(type="str", choices=["direct", "review"], default="direct"),
        executable=dict(type="str", default="podman"),
    )


def constraints():
    """The checks across options, as AnsibleModule and validate_argument_spec take them."""
    return dict(
        mutually_exclusive=[("command", "prompt", "prompt_file")],
        required_one_of=[("command", "harness")],
        required_by={"prompt": ("harness",), "prompt_file": ("harness",)},
        required_if=[("network", "allow", ("gate_image", "policy_dir")), ("network", "no-gate", ("policy_dir",))],
    )
