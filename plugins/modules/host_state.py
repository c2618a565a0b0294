#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: host_state
short_description: Read what the host role decides on, in one trip
version_added: 0.2.0
description:
  - The host role's reads (which packages are missing, podman's version, the subordinate
    id files, whether C(/dev/net/tun), udev, the kernel's user namespace switches and the
    files the role writes exist, and what they hold) in one module run, as root. Each was
    a module trip of its own (0.3-0.9 s each as root); the role's writing tasks now run
    only when what this reads differs from what they would write.
  - Reads only; changes nothing.
author: aisb developers (@aisb)
options:
  packages:
    description: Packages that must be installed.
    type: list
    elements: str
    default: []
  package_query:
    description:
      - The query printing C(NAME installed) for each installed package among those
        appended to it (C(dpkg-query) or C(rpm)); it may exit 1 when some are not
        installed. Required with O(packages).
    type: list
    elements: str
  read:
    description: Files whose text is returned (null for a file that does not exist).
    type: list
    elements: path
    default: []
  stat:
    description: Paths whose existence, type, mode and owner are returned (not followed when a link).
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Reads in check mode as outside it.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Read what the host role decides on
  aisb.sandbox.host_state:
    packages: [podman, passt]
    package_query: ["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n"]
    read: [/etc/subuid, /etc/subgid]
    stat: [/dev/net/tun]
  register: host_state
"""

RETURN = r"""
missing_packages:
  description: The packages of O(packages) the query did not report installed, in their order.
  returned: always
  type: list
  elements: str
podman_version:
  description: The version C(podman --version) reports (C(X.Y.Z)); empty when podman is not installed.
  returned: always
  type: str
contents:
  description: Each path of O(read) mapped to its text, or null when it does not exist.
  returned: always
  type: dict
stats:
  description:
    - Each path of O(stat) mapped to C(exists), and when it exists C(isdir), C(mode) (four
      octal digits, as ansible.builtin.stat reports it), C(uid) and C(gid).
  returned: always
  type: dict
commands:
  description: The commands that ran, in order.
  returned: always
  type: list
  elements: list
"""

import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner

VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def argspec():
    return dict(
        packages=dict(type="list", elements="str", default=[]),
        package_query=dict(type="list", elements="str"),
        read=dict(type="list", elements="path", default=[]),
        stat=dict(type="list", elements="path", default=[]),
    )


def missing_packages(packages, query_output):
    """The PACKAGES that QUERY_OUTPUT (lines 'NAME installed') does not name, in order."""
    installed = set(line.split()[0] for line in query_output.splitlines() if re.match(r"^\S+ installed$", line))
    return [name for name in packages if name not in installed]


def podman_version(output):
    """X.Y.Z from `podman --version`'s OUTPUT, or ''."""
    match = VERSION.search(output)
    return match.group(0) if match else ""


def path_stat(path):
    """PATH's exists, and when it exists isdir, mode, uid and gid (lstat: a link is not followed)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return dict(exists=False)
    return dict(exists=True, isdir=stat.S_ISDIR(found.st_mode), mode="%04o" % stat.S_IMODE(found.st_mode),
                uid=found.st_uid, gid=found.st_gid)


def file_text(path):
    """PATH's text, or None when it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def execute(params, check_mode, run, environ):  # pylint: disable=unused-argument
    """The task's result. RUN: a _runner.Runner."""
    result = dict(changed=False, missing_packages=[], commands=run.commands)
    if params["packages"]:
        if not params["package_query"]:
            return dict(result, failed=True, msg="package_query is required with packages: the query that "
                                                 "prints 'NAME installed' for each installed package")
        rc, out, err = run(params["package_query"] + params["packages"])
        # Both query tools exit 1 when some package is not installed, and still print the rest.
        if rc not in (0, 1) and not out:
            return dict(result, failed=True, rc=rc, stderr=err,
                        msg="%s failed (rc=%s): %s" % (params["package_query"][0], rc, err.strip()))
        result["missing_packages"] = missing_packages(params["packages"], out)
    # The system's podman (the Runner runs with the system's PATH), as the role's command did.
    rc, out, _err = run(_podman.version("podman"))
    result["podman_version"] = podman_version(out) if rc == 0 else ""
    result["contents"] = dict((path, file_text(path)) for path in params["read"])
    result["stats"] = dict((path, path_stat(path)) for path in params["stat"])
    return result


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
