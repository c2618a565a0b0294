# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The images and policy run_agent.yml's image and gate roles last gave for the same
inputs, so that a warm session includes neither role (issue 30: a role's tasks cost
Ansible about 0.35 s a warm run, whatever they find).

One JSON file in the images' directory, {key: entry}; the key (plugin_utils/_role_inputs)
hashes everything the roles read: this collection's roles and plugins, the value of every
variable they name, the files they read from a variable's paths. An entry is found only
while both images exist, each base image they were built from is still what its
reference names (one podman call for all of them), and the policy's directory exists.
Any image build removes the file (content_image: a refresh, a new base, other inputs),
so an entry never outlives a build that could have made another image current.

Pure: the entry's shape, the references asked about, the verdict. Side effects: the
file, and RUN (a _runner.Runner) for podman.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _files, _podman

FILE = "session-images.json"
# Entries kept: sessions of projects with other settings alternate.
KEEP = 16
FIELDS = ("image", "gate_image", "policy_dir")


def path(images_dir):
    """IMAGES_DIR/session-images.json."""
    return os.path.join(images_dir, FILE)


def entry(image, gate_image, policy_dir, bases):
    """An entry: the two image tags, the policy's directory, and BASES ({base image
    reference: its image ID}) the images were built from."""
    return {"image": image, "gate_image": gate_image, "policy_dir": policy_dir, "bases": dict(bases),
            "at": int(time.time())}


def well_formed(found):
    """Whether FOUND (read from the file) has an entry's shape: anything else is no entry."""
    return (isinstance(found, dict) and all(isinstance(found.get(name), str) and found[name] for name in FIELDS)
            and isinstance(found.get("bases"), dict) and found["bases"]
            and all(isinstance(ref, str) and isinstance(image_id, str) for ref, image_id in found["bases"].items()))


def references(found):
    """The images one podman call asks for, in order: the bases, then the two tags."""
    return sorted(found["bases"]) + [found["image"], found["gate_image"]]


def current(found, ids):
    """Whether IDS (podman's answer for references(FOUND), in order) says every image
    exists and every base reference still names the image the entry was built from."""
    bases = sorted(found["bases"])
    return len(ids) == len(bases) + 2 and all(ids) and all(
        ids[index] == found["bases"][ref] for index, ref in enumerate(bases))


def read(file_path):
    """The file's entries ({} when missing or unreadable)."""
    try:
        with open(file_path) as handle:
            entries = json.load(handle)
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def entry_for(file_path, key):
    """The well-formed entry for KEY whose policy's directory exists, else None."""
    found = read(file_path).get(key)
    return found if well_formed(found) and os.path.isdir(found["policy_dir"]) else None


def images_current(run, podman, found):
    """Whether the images and bases of the entry FOUND are as it says (one podman call)."""
    rc, out, _err = run(_podman.image_id(podman, *references(found)))
    return rc == 0 and current(found, out.split())


def remember(file_path, key, new):
    """Keep NEW under KEY, with the KEEP - 1 newest others."""
    entries = read(file_path)
    entries.pop(key, None)
    kept = sorted(((name, old) for name, old in entries.items() if isinstance(old, dict)),
                  key=lambda item: item[1].get("at", 0) if isinstance(item[1].get("at"), int) else 0)
    entries = dict(kept[-(KEEP - 1):])
    entries[key] = new
    os.makedirs(os.path.dirname(file_path), 0o700, exist_ok=True)
    _files.write_whole(file_path, json.dumps(entries, sort_keys=True), mode=0o600)


def forget(images_dir):
    """Remove the file (an image was built): nothing found before the next remember()."""
    try:
        os.unlink(path(images_dir))
    except FileNotFoundError:
        pass
