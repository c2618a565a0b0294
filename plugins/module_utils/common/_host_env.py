# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The environment of every process a session starts on the host.

podman, setpriv, the shells that hand descriptors on and the watchdog run with this
environment and no other: the system's PATH (_host_tools: never one the operator or the
project names, so no project file can stand in for a command or for a helper podman
looks up on PATH, such as pasta) and the few names rootless podman needs to find this
user's storage and runtime directory.
Operator values, pass-throughs and recipe names never reach a host process: they go
to the harness through a pipe (see _session_runner.SessionRunner.run_sandbox).
"""

from __future__ import annotations

from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_tools import HELPER_DIR_VARIABLE, SYSTEM_PATH

# What rootless podman reads to find the user's configuration, storage, runtime
# directory and systemd user bus; the locale only shapes messages.
KEPT_NAMES = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "DBUS_SESSION_BUS_ADDRESS")
# The user's own settings for podman and its libraries (PODMAN_IGNORE_CGROUPSV1_WARNING,
# CONTAINERS_CONF, XDG_RUNTIME_DIR, ...): the workstation's, never the operator's,
# whose values travel only in the sandbox's pipe; never HELPER_DIR_VARIABLE.
KEPT_PREFIXES = ("XDG_", "PODMAN_", "CONTAINERS_")


def host_environment(environ):
    """The environment for host processes, from the session's own ENVIRON."""
    kept = dict((name, value) for name, value in environ.items()
                if (name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)) and name != HELPER_DIR_VARIABLE)
    kept["PATH"] = SYSTEM_PATH
    return kept
