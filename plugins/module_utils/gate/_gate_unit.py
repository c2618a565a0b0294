# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The long-lived gate as a systemd user service: a podman quadlet (NAME.container in the
user's quadlet directory), which podman's generator turns into NAME.service at every
daemon-reload and user-manager start. Pure rendering and parsing; gate_service writes it
and drives systemctl.

The container's options are _podman.gate_options (the same as a session's gate); they go
in PodmanArgs, after quadlet's own (--replace --rm --cgroups=split --sdnotify=conmon -d):
podman takes the last of a repeated option.
"""

import os
import re

# Words that go into the unit: quadlet and systemd give %, $, quotes, backslashes and
# white space meanings of their own, so only these characters are written.
SAFE_WORD = re.compile(r"\A[A-Za-z0-9._/@+=:,-]+\Z")
PORT_LABEL = "aisb.port"
POLICY_LABEL = "aisb.policy"
# cgroups v1 (no unified root): a rootless podman cannot make quadlet's split cgroup
# ("mkdir /sys/fs/cgroup/memory/...: permission denied", measured on the build
# machine's hybrid hierarchy); it can run the container in podman's own.
CGROUPS_V1_OPTIONS = ["--cgroups=enabled"]


# A long-lived gate's unit (and container) name: this prefix and its policy's hash.
UNIT_PREFIX = "aisb-gate-policy-"
QUADLET_EXTENSION = ".container"


def unit_name(policy_hash):
    return UNIT_PREFIX + policy_hash


def unit_policy(file_name):
    """The policy hash a long-lived gate's unit file FILE_NAME (unit_file's) names; None
    for any other file."""
    name, extension = os.path.splitext(file_name)
    return name[len(UNIT_PREFIX):] if name.startswith(UNIT_PREFIX) and extension == QUADLET_EXTENSION else None


def unit_dir(environ):
    """The user's quadlet directory: ${XDG_CONFIG_HOME:-~/.config}/containers/systemd."""
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "containers", "systemd")


def unit_file(directory, name):
    return os.path.join(directory, name + QUADLET_EXTENSION)


def service(name):
    """The service the generator makes of NAME.container."""
    return name + ".service"


def cgroups_v1(root="/sys/fs/cgroup"):
    """Whether this host has no unified cgroup hierarchy at ROOT (v1 or hybrid)."""
    return not os.path.exists(os.path.join(root, "cgroup.controllers"))


def check_words(words):
    """WORDS when every one is SAFE_WORD; ValueError naming the first that is not."""
    for word in words:
        if not SAFE_WORD.match(word):
            raise ValueError("%r cannot go into a systemd unit: only letters, digits and ._/@+=:,- are written there"
                             % word)
    return words


def render_unit(name, image, options, command, policy_hash, port, at_boot):
    """The quadlet for the gate NAME: IMAGE run with OPTIONS (a list of podman options,
    the policy and port labels added here) and COMMAND; AT_BOOT: started with the user
    manager (a stopped gate's unit has no [Install] and stays stopped)."""
    options = list(options) + ["--label", "%s=%s" % (POLICY_LABEL, policy_hash), "--label", "%s=%d" % (PORT_LABEL, port)]
    check_words([name, image] + options + list(command))
    lines = [
        "# Written by aisb.sandbox.gate_service: the long-lived gate for policy %s." % policy_hash,
        "[Unit]",
        "Description=aisb gate for policy %s on 127.0.0.1:%d" % (policy_hash, port),
        "",
        "[Quadlet]",
        "# It listens on the host's loopback and needs no network-online.target, which a",
        "# user manager can only poll the system manager for (90 s where there is none).",
        "DefaultDependencies=false",
        "",
        "[Container]",
        "ContainerName=" + name,
        "Image=" + image,
        "PodmanArgs=" + " ".join(options),
        "Exec=" + " ".join(command),
        "",
        "[Service]",
        "Restart=on-failure",
    ]
    if at_boot:
        lines += ["", "[Install]", "WantedBy=default.target"]
    return "\n".join(lines) + "\n"


def unit_port(text):
    """The port the unit TEXT's gate listens on (its port label), None when it names none."""
    found = re.search(r"--label %s=([0-9]+)\b" % re.escape(PORT_LABEL), text)
    return int(found.group(1)) if found else None


def unit_image(text):
    """The image the unit TEXT runs, None when it names none."""
    found = re.search(r"^Image=(\S+)$", text, re.MULTILINE)
    return found.group(1) if found else None
