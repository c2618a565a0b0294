# SPDX-License-Identifier: GPL-3.0-or-later
"""The environment of the processes a session starts on the host."""

from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_env import SYSTEM_PATH, host_environment


def test_path_is_the_system_path_whatever_the_caller_had():
    env = host_environment({"PATH": "/home/dev/src/app/bin:/usr/bin", "HOME": "/home/dev"})
    assert env["PATH"] == SYSTEM_PATH
    assert all(part.startswith(("/usr/", "/sbin", "/bin")) for part in SYSTEM_PATH.split(":"))


def test_only_what_rootless_podman_needs_is_kept():
    caller = {"HOME": "/home/dev", "XDG_RUNTIME_DIR": "/run/user/1000", "LD_PRELOAD": "/p/evil.so",
              "BASH_ENV": "/p/env", "LD_LIBRARY_PATH": "/p", "NODE_OPTIONS": "--require /p/x.js",
              "GIVEN_SECRET": "s", "IFS": "/", "SHELLOPTS": "xtrace", "PS4": "$(x)", "TMPDIR": "/p",
              "PODMAN_IGNORE_CGROUPSV1_WARNING": "1", "CONTAINERS_CONF": "/home/dev/c.conf",
              # podman would look for pasta, conmon, ... there first.
              "CONTAINERS_HELPER_BINARY_DIR": "/home/dev/src/app/bin"}
    assert host_environment(caller) == {"HOME": "/home/dev", "XDG_RUNTIME_DIR": "/run/user/1000",
                                        "PODMAN_IGNORE_CGROUPSV1_WARNING": "1",
                                        "CONTAINERS_CONF": "/home/dev/c.conf", "PATH": SYSTEM_PATH}
