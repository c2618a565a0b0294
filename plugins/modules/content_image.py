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
      - When set, also return the tag as the fact C(<fact_name>) and the hashed inputs as
        C(<fact_name>_inputs).
    type: str
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details:
      - Reports whether a build would run; pulls and builds nothing.
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
  description: What was hashed, file contents as sha256 digests.
  returned: success
  type: dict
  sample:
    scheme: aisb-content-hash-1
    files: {Containerfile: "9b1c...", entrypoint: "77de..."}
    base_image_id: "sha256:0f1e..."
    build_args: {}
    extra: {}
built:
  description: Whether this run built the image (or would, in check mode).
  returned: success
  type: bool
ansible_facts:
  description: The tag and the inputs as facts, when O(fact_name) is set.
  returned: success and O(fact_name) is set
  type: dict
  sample: {aisb_sandbox_image: "localhost/aisb-sandbox:3f2a9c0d1e4b5a67", aisb_sandbox_image_inputs: {}}
commands:
  description: The podman commands that ran, in order.
  returned: success
  type: list
  elements: list
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils import _content_hash, _podman

LABEL_PREFIX = "io.aisb."


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
        executable=dict(type="str", default="podman"),
    )


def read_context(directory):
    """Every regular file under DIRECTORY as {relative path: bytes}.

    A symlink is refused: the hash would then depend on what it points at build time.
    """
    files = {}
    for root, dirs, names in os.walk(directory):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                raise ValueError("%s: only regular files belong in a build context" % path)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = handle.read()
    return files


def context_files(entries):
    """{relative path: (bytes, mode)} from the files option; ValueError on a path that
    leaves the context or a mode that is not octal."""
    files = {}
    for entry in entries:
        path = os.path.normpath(entry["path"])
        if os.path.isabs(path) or path == "." or path.split(os.sep)[0] == "..":
            raise ValueError("files: path %r must be relative and stay inside the context" % entry["path"])
        try:
            mode = int(entry["mode"], 8)
        except ValueError:
            raise ValueError("files: mode %r of %s is not an octal mode" % (entry["mode"], entry["path"]))
        files[path] = (entry["content"].encode("utf-8"), mode)
    return files


def write_context(directory, files):
    """Make DIRECTORY hold exactly FILES ({relative path: (bytes, mode)}): files whose
    content and mode already match are left alone, any other file is removed."""
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            if os.path.relpath(path, directory) not in files:
                os.remove(path)
    for relative, (data, mode) in files.items():
        path = os.path.join(directory, relative)
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        if os.path.islink(path):
            os.remove(path)  # writing would go through it, to wherever it points
        if not os.path.isfile(path) or _read(path) != data:
            with open(path, "wb") as handle:
                handle.write(data)
        os.chmod(path, mode)


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


class Runner:
    """Runs podman commands and remembers them for the result."""

    def __init__(self, module):
        self.module = module
        self.commands = []

    def __call__(self, argv, check=True):
        self.commands.append(argv)
        rc, out, err = self.module.run_command(argv)
        if check and rc != 0:
            self.module.fail_json(msg="%s failed (rc=%d): %s" % (" ".join(argv[:3]), rc, err.strip()),
                                  rc=rc, stdout=out, stderr=err, commands=self.commands)
        return rc, out.strip()


def base_image_id(module, run, podman, reference):
    """ID of REFERENCE, pulled first when missing and pullable; None in check mode if missing."""
    rc, out = run(_podman.image_id(podman, reference), check=False)
    if rc == 0:
        return out
    if module.check_mode:
        # It may be imported or pulled by an earlier task that check mode did not run.
        return None
    if _podman.is_local(reference):
        module.fail_json(msg="base image %s does not exist: a localhost/ image is never pulled" % reference,
                         commands=run.commands)
    run(_podman.pull(podman, reference))
    return run(_podman.image_id(podman, reference))[1]


def facts(params, tag, inputs):
    if not params["fact_name"]:
        return {}
    return {params["fact_name"]: tag, params["fact_name"] + "_inputs": inputs}


def execute_module(module):
    params = module.params
    # In check mode on a bare host podman is not installed yet: report a build.
    podman = module.get_bin_path(params["executable"], required=not module.check_mode)
    run = Runner(module)
    try:
        if params["files"] is None:
            files = read_context(params["context"])
        else:
            given = context_files(params["files"])
            if not module.check_mode:
                write_context(params["context"], given)
            files = dict((path, data) for path, (data, _mode) in given.items())
    except (OSError, ValueError) as error:
        module.fail_json(msg="cannot read build context %s: %s" % (params["context"], error))
    rendered = "Containerfile" in files
    if not rendered and not module.check_mode:
        module.fail_json(msg="build context %s has no Containerfile" % params["context"])
    base_id = base_image_id(module, run, podman, params["base_image"]) if podman and rendered else None
    if base_id is None:
        # Only in check mode: an earlier task would install podman, import or pull the
        # base image, or render the context, so the tag cannot be known yet.
        module.exit_json(changed=True, built=True, image=None, hash=None, inputs={}, commands=run.commands,
                         ansible_facts=facts(params, None, {}),
                         msg="podman, the base image or the build context is not there yet (check mode)")
    build_args = dict((name, str(value)) for name, value in params["build_args"].items())
    inputs = _content_hash.build_inputs(files, base_id, build_args, params["extra_inputs"])
    digest = _content_hash.content_hash(inputs)
    tag = _content_hash.image_tag(params["name"], digest)
    exists = run(_podman.image_exists(podman, tag), check=False)[0] == 0
    if not exists and not module.check_mode:
        labels = {LABEL_PREFIX + "content-hash": digest,
                  LABEL_PREFIX + "inputs": json.dumps(inputs, sort_keys=True, separators=(",", ":")),
                  LABEL_PREFIX + "base-image": params["base_image"]}
        run(_podman.build(podman, tag, params["context"], base_id, labels, build_args))
    module.exit_json(changed=not exists, built=not exists, image=tag, hash=digest, inputs=inputs,
                     commands=run.commands, ansible_facts=facts(params, tag, inputs))


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
