# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's inputs: the typed value the input checks (_input_checks) and the
admission (_session_admission.admit) produce (SessionInputs).
"""

from __future__ import annotations

import typing


class SessionInputs(typing.NamedTuple):
    """What a session runs with, once admitted (_session_admission.admit)."""

    project: str  # resolved, checked by check_project
    image: str
    command: typing.List[str]
    policy: typing.Any  # _policy.Policy, pinned for network no-gate
    network: str = "allow"
    # How the sandbox reaches its gate (_session_plan.GATE_PATHS): the verdict's, or the
    # one the gate_path option chose among those the facts measured (choose_gate_path).
    gate_path: typing.Optional[str] = None
    # "review": the project is an overlay's lower layer (_review_session); "direct" mounts it.
    project_mode: str = "direct"
    # Direct mode: _project_git.protect's mounts and what to compare after the session.
    project_git: typing.Optional[typing.Dict[str, typing.Any]] = None
    project_label: str = ""  # "z" where the host's verdict asks for SELinux relabelling
    gate_image: typing.Optional[str] = None
    policy_dir: typing.Optional[str] = None
    environment: typing.Dict[str, str] = {}
    interactive: bool = False
    allow_unenforced: bool = False
    limits: typing.Dict[str, typing.Any] = {}
    require_limits: bool = False
    # network no-gate: {name: [address, ...]} as this host resolved them at admission.
    hosts: typing.Dict[str, typing.List[str]] = {}
    # _seccomp.load_profile: the sandbox's seccomp profile (JSON text), rendered from the
    # host's default; None only when the operator allowed running unenforced without it.
    seccomp_profile: typing.Optional[str] = None
    # _enforcement_watch.find_tools: the host's nsenter, setpriv, nft and python3.
    watch_tools: typing.Dict[str, str] = {}
    # _host_tools.resolve: podman (the executable option), bash and setpriv, and the watch's.
    host_tools: typing.Dict[str, str] = {}
    # _project_ansible.origin, as the action plugin found it on the controller.
    ansible_origin: typing.Optional[typing.Dict[str, typing.Any]] = None
    executable: str = "podman"
    # The recipe's name (None: a session module run without one, its command given whole).
    harness: typing.Optional[str] = None
    # _credentials.check_resolved: the providers' entries, each with its key.
    credentials: typing.List[typing.Dict[str, typing.Any]] = []
    # _git_remotes.check_resolved_remotes: the remotes the git broker serves, each with its token.
    git_remotes: typing.List[typing.Dict[str, typing.Any]] = []
    # _harness_config: the operator's files ({path, text}) and their mounts (name in the
    # session's directory, path inside).
    harness_files: typing.List[typing.Dict[str, str]] = []
    harness_mounts: typing.List[typing.Tuple[str, str]] = []
    # Their paths whose provider URLs a session with credentials moves to the injector.
    harness_endpoints: typing.List[str] = []
    # _harness_state.plan: the project's kept directories, or None.
    harness_state: typing.Optional[typing.Dict[str, typing.Any]] = None
    # The policy's allow entries, each with its origin (_session_admission.allow_origins).
    allow: typing.List[typing.Dict[str, str]] = []
    # The recipe's credential_urls: {key variable: the variable of its provider's base URL}.
    credential_urls: typing.Dict[str, str] = {}
    # check_token_budget's: the tokens the injector relays before refusing, or None.
    token_budget: typing.Optional[int] = None
    # check_upload_budget's: the bytes the sandbox may send to the gate, and to the
    # injector, each its own quota in the sandbox's table; None: no quota.
    upload_budget: typing.Optional[int] = None
    provider_upload_budget: typing.Optional[int] = None
    # aisb_project_harness_code ("allowed") and the recipe's switches the session applied
    # (_harness_code.apply_switches: "args" put in the command, "env").
    project_harness_code: typing.Dict[str, typing.Any] = {}
    # Directories at the project's top the sandbox sees empty and read-only (the switches' hide).
    hidden_dirs: typing.List[str] = []
