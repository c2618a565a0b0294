# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's options: one argument spec and its constraints, shared by the session
module and its action plugin (which resolves the controller-side options first)."""

from __future__ import annotations

# Resolved on the controller by the action plugin, never sent to the module: the
# prompt becomes COMMAND (with the harness recipe's), and an interactive session runs in
# the action itself. The pass-through names go on beside their values in ENVIRONMENT (the
# team file's check), and so does the harness's name (the module resolves it again).
CONTROLLER_OPTIONS = ("prompt", "prompt_file", "interactive")


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
        # A recipe's name (_recipes.recipe_for): a recipe is policy, never a play variable.
        # raw: a recipe given as a dict is refused with a sentence, not turned into text.
        harness=dict(type="raw"),
        # The operator's own recipes, {name: recipe}: the team file's and the developer's.
        recipes=dict(type="dict", default={}),
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
        # The operator's git remotes (_git_remotes), the agent's pushes go through the git
        # broker; sent resolved, each with its token, as JSON text, like credentials.
        git_remotes=dict(type="raw", default=[], no_log=True),
        # Input and output tokens the injector relays before it refuses (_credential_injector).
        token_budget=dict(type="int", no_log=False),
        # Bytes the sandbox may send to the gate, and to the injector (the sandbox's quotas).
        upload_budget=dict(type="int"),
        provider_upload_budget=dict(type="int"),
        # A directory on the controller (aisb_harness_config); the action plugin sends its
        # files, read and checked there, as JSON text.
        harness_config=dict(type="raw"),
        # Set by the action plugin: the directory harness_config's files were read from.
        harness_config_dir=dict(type="str"),
        harness_state=dict(type="str", choices=["keep", "fresh", "none"], default="keep"),
        # Whether the harness may load and run what the project gives it (_harness_code).
        project_harness_code=dict(type="bool", default=False),
        interactive=dict(type="bool"),
        # false: the caller prints the transcript itself (aisb run), so the result's answer
        # stays empty instead of a second read of the transcript's end.
        answer=dict(type="bool", default=True),
        host_facts=dict(type="dict"),
        max_facts_age=dict(type="int", default=604800),
        limits=dict(type="dict", default={}, options=dict(
            memory=dict(type="str"), pids=dict(type="int"), cpus=dict(type="str"))),
        require_limits=dict(type="bool", default=False),
        allow_unenforced=dict(type="bool", default=False),
        project_mode=dict(type="str", choices=["direct", "review"], default="direct"),
        # Allow entry -> team or user (aisb.sandbox.team_settings), for the record.
        allow_origins=dict(type="dict", default={}),
        executable=dict(type="str", default="podman"),
        # Set by the action plugin: _project_ansible.origin of this ansible-playbook.
        ansible_origin=dict(type="dict"),
    )


# What aisb.sandbox.session_inputs checks before any image work: the session's own
# options, minus what only the image and gate roles produce.
INPUT_OPTIONS = ("project", "network", "command", "harness", "recipes", "harness_config", "harness_state", "prompt",
                 "prompt_file", "environment", "pass_environment", "credentials", "git_remotes", "token_budget", "upload_budget",
                 "provider_upload_budget", "interactive", "project_mode")


def input_spec():
    """The session's argument spec for INPUT_OPTIONS, as the session has them, and the
    policy's entries as gate_policy takes them (the session reads them rendered)."""
    spec = argument_spec()
    found = dict((name, spec[name]) for name in INPUT_OPTIONS)
    found.update(allow=dict(type="list", elements="raw", default=[]),
                 connect_ports=dict(type="list", elements="raw", default=[443]))
    return found


def input_constraints():
    """constraints() that hold among INPUT_OPTIONS alone."""
    return dict((kind, value) for kind, value in constraints().items() if kind != "required_if")


def constraints():
    """The checks across options, as AnsibleModule and validate_argument_spec take them."""
    return dict(
        mutually_exclusive=[("command", "prompt", "prompt_file")],
        required_one_of=[("command", "harness")],
        required_by={"prompt": ("harness",), "prompt_file": ("harness",)},
        required_if=[("network", "allow", ("gate_image", "policy_dir")), ("network", "no-gate", ("policy_dir",))],
    )
