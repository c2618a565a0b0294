#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: base_image
short_description: Import the base image from its root filesystem archive when it is missing
version_added: 0.2.0
extends_documentation_fragment:
  - aisb.sandbox.podman
description:
  - Where no registry is reachable, C(provision.yml) makes the base image (C(aisb_base_image))
    from a root filesystem archive (C(aisb_base_image_archive), debootstrap's output, say).
    It is imported when the image is missing, and again with O(refresh=true).
  - Runs as the workstation user, in the task's own process when the host is this machine
    (no module trip).
author: aisb developers (@aisb)
options:
  image:
    description: The base image's reference, C(localhost/aisb-base:trixie) say.
    type: str
    required: true
  archive:
    description: The root filesystem archive on the host.
    type: path
    required: true
  refresh:
    description: Import again even when the image exists (C(aisb_refresh)).
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Looks for the image; reports the import it would make.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Import the base image from its root filesystem archive (again on a refresh)
  aisb.sandbox.base_image:
    image: localhost/aisb-base:trixie
    archive: /opt/aisb/trixie-rootfs.tar
    refresh: "{{ aisb_refresh | default(false) | bool }}"
"""

RETURN = r"""
imported:
  description: Whether the archive was imported (in check mode, whether it would be).
  returned: success
  type: bool
commands:
  description: The podman commands that ran, in order.
  returned: always
  type: list
  elements: list
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner


def argspec():
    return dict(
        image=dict(type="str", required=True),
        archive=dict(type="path", required=True),
        refresh=dict(type="bool", default=False),
        executable=dict(type="str", default="podman"),
    )


def execute(params, check_mode, run, environ):  # pylint: disable=unused-argument
    """The task's result. RUN: a _runner.Runner."""
    result = dict(changed=False, commands=run.commands)
    podman, problem = _host_tools.resolve(params["executable"])
    if problem:
        return dict(result, failed=True, msg=problem)
    rc, _out, err = run(_podman.image_exists(podman, params["image"]))
    if rc not in (0, 1):
        return dict(result, failed=True, msg="podman image exists %s failed (rc=%s): %s"
                    % (params["image"], rc, _podman.error_line(err)))
    if rc == 0 and not params["refresh"]:
        return dict(result, imported=False)
    if not check_mode:
        rc, _out, err = run(_podman.import_archive(podman, params["archive"], params["image"]))
        if rc != 0:
            return dict(result, failed=True, msg="podman import of %s as %s failed (rc=%s): %s"
                        % (params["archive"], params["image"], rc, _podman.error_line(err)))
    return dict(result, changed=True, imported=True)


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
