#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r"""
module: content_image
short_description: Build a container image tagged by the hash of every build input
description:
  - Hashes every file of a build context, the base image's ID, the build arguments and
    any extra data the caller names, and tags the image C(NAME:<hash>).
  - Builds only when no image with that tag exists; an unchanged input set never
    rebuilds and a changed one can never reuse a stale image.
  - The build runs with C(--pull=never) from exactly the base image ID that was hashed
    (C(--from)). A base image under C(localhost/) must already exist; any other is
    pulled once when missing.
  - Labels on the image record the full hash and the hashed inputs.
  - A refresh (O(refresh_stamp)) rebuilds from a freshly pulled base (a C(localhost/) base
    is never pulled, it is as fresh as its last import) without podman's layer cache, so
    the package installs fetch today's packages. The stamp is hashed too and stored in
    O(records_dir) once the build succeeds; every later run hashes the stored stamp, so
    the refreshed image gets a tag of its own and later runs find it, never the old one.
  - Each run marks the tag it returns as used now (C(used/) in O(records_dir)), which
    the retention module reads.
  - When the build runs in the action plugin's process (a local connection as this user),
    its progress is shown on ansible-playbook's stderr while podman builds - the current
    step read from the build log (podman's C(STEP) lines) and the seconds since it started,
    one line rewritten on a terminal, a line per step otherwise, every character that could
    drive a terminal shown as C(?). Nothing is shown when nothing is built.
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
author: aisb developers (@aisb)
options:
  name:
    description: Image repository without a tag, e.g. C(localhost/aisb-sandbox).
    type: str
    required: true
  context:
    description:
      - Build context directory with a C(Containerfile). Every regular file in it is
        hashed; symlinks are refused.
    type: path
    required: true
  files:
    description:
      - The build context's files, given here instead of rendered by earlier tasks (one
        task instead of one per file). They are written to O(context) outside check mode,
        which then holds exactly these, and hashed from what is given.
    type: list
    elements: dict
    suboptions:
      path:
        description: Path inside the context, relative, without C(..).
        type: str
        required: true
      content:
        description: The file's text.
        type: str
        required: true
      mode:
        description: The file's mode, for example C(0755) for a script the image runs.
        type: str
        default: "0644"
  base_image:
    description: The image the Containerfile builds on (its C(FROM)).
    type: str
    required: true
  build_args:
    description: Build arguments (C(--build-arg NAME=VALUE)); hashed too.
    type: dict
    default: {}
  extra_inputs:
    description: Other data the build depends on (for example the harness recipe); hashed too.
    type: dict
    default: {}
  fact_name:
    description:
      - When set, also return the tag as the fact C(<fact_name>), the hashed inputs as
        C(<fact_name>_inputs) and O(base_image) as C(<fact_name>_base_image).
    type: str
  log_dir:
    description:
      - Where a build writes its log as it runs, one file per image and content hash
        (C(<name's last part>-<hash>.log)), kept after the build. A failed build's error
        names it and shows its last lines.
      - Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb/images/logs).
    type: path
  records_dir:
    description:
      - Where the images' refresh stamps (C(refreshed/<name's last part>)) and last-use
        marks (C(used/<name's last part>-<hash>)) are kept. A build removes
        C(session-images.json) there (what M(aisb.sandbox.session_images) remembered).
      - Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb/images).
    type: path
  refresh_stamp:
    description:
      - Refresh the image, with this stamp (the UTC time of the refresh, like
        C(2026-12-01T05:30:00Z)) in its hashed inputs. The same stamp as the stored one
        is that refresh, already done, and builds nothing.
    type: str
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details:
      - Reports whether a build would run; pulls, builds and records nothing.
      - When podman, the base image or the rendered context is missing (an earlier task
        would install, import or render it), reports a build with RV(image) null.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Build the sandbox image when its inputs changed
  aisb.sandbox.content_image:
    name: localhost/aisb-sandbox
    context: ~/.local/state/aisb/images/sandbox
    base_image: docker.io/library/ubuntu:24.04
    extra_inputs:
      recipe: {packages: [nodejs], install: [], command: [pi]}
    fact_name: aisb_sandbox_image
"""

RETURN = r"""
image:
  description: The content-addressed tag; null in check mode when it cannot be known yet.
  returned: success
  type: str
  sample: localhost/aisb-sandbox:3f2a9c0d1e4b5a67
hash:
  description: Full sha256 of the inputs.
  returned: success
  type: str
inputs:
  description: What was hashed, file contents as sha256 digests; C(refreshed) (the last refresh's stamp) once the image was refreshed.
  returned: success
  type: dict
  sample:
    scheme: aisb-content-hash-1
    files: {Containerfile: "9b1c...", entrypoint: "77de..."}
    base_image_id: "sha256:0f1e..."
    build_args: {}
    extra: {}
    refreshed: "2026-12-01T05:30:00Z"
built:
  description: Whether this run built the image (or would, in check mode).
  returned: success
  type: bool
log:
  description: >-
    The build log this run wrote (in check mode, where a build would write it); null when
    nothing is to be built or the tag is not known yet.
  returned: success
  type: str
seconds:
  description: How long the build took; null when nothing was built.
  returned: success
  type: int
msg:
  description: What was built, in how long, and its log; or why the tag is not known yet (check mode).
  returned: when a build ran, or the tag is not known yet
  type: str
ansible_facts:
  description: The tag, the inputs and the base image as facts, when O(fact_name) is set.
  returned: success and O(fact_name) is set
  type: dict
  sample: {aisb_sandbox_image: "localhost/aisb-sandbox:3f2a9c0d1e4b5a67", aisb_sandbox_image_inputs: {}}
commands:
  description: The podman commands that ran, in order.
  returned: success
  type: list
  elements: list
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module, module_runner


def argspec():
    return dict(
        name=dict(type="str", required=True),
        context=dict(type="path", required=True),
        files=dict(type="list", elements="dict", options=dict(
            path=dict(type="str", required=True), content=dict(type="str", required=True),
            mode=dict(type="str", default="0644"))),
        base_image=dict(type="str", required=True),
        build_args=dict(type="dict", default={}),
        extra_inputs=dict(type="dict", default={}),
        fact_name=dict(type="str"),
        log_dir=dict(type="path"),
        records_dir=dict(type="path"),
        refresh_stamp=dict(type="str"),
        executable=dict(type="str", default="podman"),
    )


def execute(params, check_mode, run, environ):
    """The task's result (failed=True with msg on an error). RUN: a _runner.Runner."""
    return execute_showing(params, check_mode, run, environ, None)


def execute_showing(params, check_mode, run, environ, progress):
    """execute() with PROGRESS, _images.ensure's: the action plugin's, which shows a build
    that runs in its process."""
    podman, problem = _host_tools.resolve(params["executable"])
    if problem and not check_mode:
        return dict(failed=True, msg=problem)
    try:
        if params["files"] is None:
            files = _images.read_context(params["context"])
        else:
            given = _images.context_files(params["files"])
            if not check_mode:
                _images.write_context(params["context"], given)
            files = dict((path, data) for path, (data, _mode) in given.items())
    except (OSError, ValueError) as error:
        return dict(failed=True, msg="cannot read build context %s: %s" % (params["context"], error))
    rendered = "Containerfile" in files
    if not rendered and not check_mode:
        return dict(failed=True, msg="build context %s has no Containerfile" % params["context"])
    image = _images.Image()
    if podman and rendered:
        build_args = dict((name, str(value)) for name, value in params["build_args"].items())
        try:
            state = _state_layout.state_dir(environ)
            image = _images.ensure(run, podman, params["name"], files, params["base_image"], check_mode,
                                   context=params["context"], build_args=build_args, extra=params["extra_inputs"],
                                   log_dir=params["log_dir"] or _state_layout.image_logs_dir(state),
                                   records_dir=params["records_dir"] or _state_layout.images_dir(state),
                                   refresh_stamp=params["refresh_stamp"], progress=progress)
        except _images.ImageError as error:
            return dict(failed=True, msg=str(error), rc=error.rc, stdout=error.stdout, stderr=error.stderr,
                        commands=run.commands)
        except ValueError as error:
            return dict(failed=True, msg=str(error), commands=run.commands)
    if image.tag is None and not check_mode:
        return dict(failed=True, msg="base image %s does not exist: a localhost/ image is never pulled"
                    % params["base_image"], commands=run.commands)
    fact = params["fact_name"]
    result = dict(changed=image.built or image.tag is None, built=image.built or image.tag is None, image=image.tag,
                  hash=image.digest, inputs=image.inputs, commands=run.commands, log=image.log, seconds=image.seconds,
                  ansible_facts={fact: image.tag, fact + "_inputs": image.inputs,
                                 fact + "_base_image": params["base_image"]} if fact else {})
    if image.seconds is not None:
        result["msg"] = "built %s from %s in %d s; build log %s" % (
            image.tag, params["base_image"], image.seconds, image.log)
    if image.tag is None:
        # Only in check mode: an earlier task would install podman, import or pull the
        # base image, or render the context, so the tag cannot be known yet.
        result["msg"] = "podman, the base image or the build context is not there yet (check mode)"
    return result


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, module_runner(module), os.environ))


if __name__ == "__main__":
    main()
