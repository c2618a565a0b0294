# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Content hashes of image build inputs.

An image is tagged by the hash of everything its build reads: every file of the
build context (the rendered Containerfile, entrypoint, ruleset template, copied
CA certificates...), the base image's ID, the build arguments and any other input
the caller names (the harness recipe), and the image's last refresh stamp once it
was refreshed (a refresh installs current packages from an unchanged context: the stamp
is what changed). A changed input can never reuse a stale image, and an unchanged one
is never rebuilt.
"""

import hashlib
import json

# Bumped when the way inputs are hashed changes, so old tags are never mistaken for new.
SCHEME = "aisb-content-hash-1"
TAG_LENGTH = 16


def build_inputs(files, base_image_id, build_args=None, extra=None, refreshed=None):
    """The hashed inputs as one JSON-ready dict.

    FILES maps context-relative paths to their bytes; BUILD_ARGS maps names to
    strings; EXTRA is any JSON-serialisable data the build depends on; REFRESHED the
    refresh stamp (absent from the inputs of an image never refreshed, whose tag stays
    what it was before refreshes existed).
    """
    inputs = {
        "scheme": SCHEME,
        "files": file_digests(files),
        "base_image_id": base_image_id,
        "build_args": dict(sorted((build_args or {}).items())),
        "extra": extra if extra is not None else {},
    }
    if refreshed is not None:
        inputs["refreshed"] = refreshed
    return inputs


def file_digests(files):
    """{path: sha256 hex digest} of FILES ({path: bytes})."""
    return dict((path, hashlib.sha256(data).hexdigest()) for path, data in sorted(files.items()))


def content_hash(inputs):
    """sha256 hex digest of INPUTS (JSON-ready data, e.g. from build_inputs) in canonical form."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def image_tag(repository, digest):
    """The image reference for REPOSITORY tagged by DIGEST."""
    return "%s:%s" % (repository, digest[:TAG_LENGTH])
