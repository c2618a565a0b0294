# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A review-mode session's own files: the overlay's upper and work directories in the
session directory, the project's manifest taken as the sandbox starts, the record's
`review` section (its paths at start, every change with its flags at the end), and what
project_review needs to show, apply or discard them.

In review mode podman mounts the project at /project as an overlay
(`-v PROJECT:/project:O,upperdir=UPPER,workdir=WORK`): the agent reads the project and
writes only to UPPER, so the host's tree does not change until the user applies. Each
directory of the project's kept harness state (_harness_state) is an overlay the same
way, its upper and work directories in review/state/NAME: the harness's next session
reads that state as its own history, so what the agent wrote there is listed apart,
every change flagged, and applied only when the user names it.
"""

from __future__ import annotations

import os
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record
from ansible_collections.aisb.sandbox.plugins.module_utils.review import (
    _project_manifest, _project_review, _review_flags)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import (
    SESSION_ID, record_key_path, review_directory, session_directory)

REVIEW_DIR_MODE = 0o700
# Under the review directory: one directory per kept state, by its name.
STATE_DIR = "state"


def _state_base(base, outside):
    """A kept state's overlay directory under the review directory BASE: its host directory's name."""
    return os.path.join(base, STATE_DIR, os.path.basename(outside))


def overlays(session_dir, state_mounts=()):
    """What a Review in SESSION_DIR will mount, known before it is made (the session's
    plan): (the project's overlay (upper, work), the kept states' overlays (host
    directory, path inside, upper, work), by name).
    STATE_MOUNTS: the kept state's (host directory, path inside) pairs."""
    base = review_directory(session_dir)
    paths = _overlay_paths(base)
    state = [(outside, inside) + tuple(_overlay_paths(_state_base(base, outside))[layer] for layer in ("upper", "work"))
             for outside, inside in sorted(state_mounts, key=lambda mount: os.path.basename(mount[0]))]
    return (paths["upper"], paths["work"]), state


class Review(object):
    """One review session's overlay directories, and the project's manifest taken in a
    thread beside the sandbox's start: the overlay never writes to the project, so the
    manifest reads the same tree while the sandbox starts as before it (measured: 10,000
    files take 0.05 to 0.37 s, by load, which the session's start no longer waits for)."""

    def __init__(self, project, session_dir, environ, state_mounts=()):
        base = review_directory(session_dir)
        self.project = project
        # The developer's environment: which git configuration the host reads (flags).
        self.environ = environ
        self.paths = _overlay_paths(base)
        os.mkdir(base, REVIEW_DIR_MODE)
        os.mkdir(self.paths["upper"])
        os.mkdir(self.paths["work"])
        self.manifest = {"tree_hash": None, "tree_paths": None, "manifest_s": None, "manifest_error": None}
        # STATE_MOUNTS: the kept state's (host directory, path inside) pairs (_harness_state.plan);
        # a state's name is its host directory's.
        self.state = {}
        if state_mounts:
            os.mkdir(os.path.join(base, STATE_DIR))
        for outside, inside in state_mounts:
            name = os.path.basename(outside)
            os.mkdir(_state_base(base, outside))
            self.state[name] = dict(_overlay_paths(_state_base(base, outside)), dir=outside, inside=inside,
                                    tree_hash=None, tree_paths=None, manifest_error=None)
            os.mkdir(self.state[name]["upper"])
            os.mkdir(self.state[name]["work"])
        self._thread = threading.Thread(target=self._take_manifest, name="aisb-review-manifest")
        self._thread.daemon = True
        self._thread.start()

    def _take_manifest(self):
        started = time.monotonic()
        trees = [(self.manifest, self.project, self.paths["manifest"], "the project's")] + [
            (state, state["dir"], state["manifest"], "the kept state %s's" % name)
            for name, state in sorted(self.state.items())]
        for entry, root, path, what in trees:
            try:
                entries = _project_manifest.take(root)
                entry["tree_hash"] = _project_manifest.save(path, entries)
                entry["tree_paths"] = len(entries)
            except OSError as error:
                entry["manifest_error"] = "%s manifest could not be taken: %s" % (what, error)
        self.manifest["manifest_s"] = round(time.monotonic() - started, 3)

    @property
    def overlay(self):
        """(upper, work) for the sandbox's project mount."""
        return self.paths["upper"], self.paths["work"]

    def section(self):
        """The record's review section as known now."""
        return dict(self.paths, state=dict((name, dict(state)) for name, state in self.state.items()),
                    **self.manifest)

    def end(self):
        """The record's review section after the session: every change the upper
        directories hold, the project's and each kept state's, with their flags, or the
        error that kept them from being read."""
        self._thread.join()
        section = dict(self.section(), **listed(_project_review.changes, self.paths["upper"], self.project,
                                                self.environ))
        for name, state in section["state"].items():
            state.update(listed(state_changes, name, state))
        return section


def _overlay_paths(base):
    return {"upper": os.path.join(base, "upper"), "work": os.path.join(base, "work"),
            "manifest": os.path.join(base, "manifest.json")}


def listed(read, *args):
    """{changes, flagged, error} from READ(*ARGS), which lists changes, or the error it raised."""
    try:
        items = read(*args)
    except (OSError, _project_review.ReviewError) as error:
        return {"changes": None, "flagged": None, "error": str(error)}
    return {"changes": items, "flagged": [item["path"] for item in items if item["flags"]], "error": None}


def state_changes(name, state):
    """The changes of the kept state NAME (its record section STATE): every one flagged."""
    return _project_review.changes(state["upper"], state["dir"], None, _review_flags.state_flags(name))


def load_record(state, session_id):
    """(session directory, record, the workstation's record key) of review session
    SESSION_ID under the state directory STATE; ReviewError when there is none, it has not
    ended, it ran in direct mode, or it fails its check (its paths say where review reads
    and writes: an edited record must not choose them)."""
    if not SESSION_ID.match(session_id or ""):
        raise _project_review.ReviewError("%r is not a session id (like 20261130T230455-1a2b3c4d)" % session_id)
    session_dir = session_directory(state, session_id)
    try:
        record = _session_record.read(session_dir)
        key = _record_seal.read_key(record_key_path(state))
    except FileNotFoundError:
        raise _project_review.ReviewError(
            "session %s has no record in %s: it has not ended, or never ran" % (session_id, session_dir))
    except (_session_record.RecordError, _record_seal.KeyFileError) as error:
        raise _project_review.ReviewError(str(error))
    checked = _session_record.check(session_dir, key)
    if checked.state == "failed":
        raise _project_review.ReviewError("the record %s fails its check, so nothing of it is used: %s"
                                          % (checked.path, "; ".join(checked.problems)))
    if record.get("project_mode") != "review" or not record.get("review"):
        raise _project_review.ReviewError("session %s did not run in review mode (aisb_project_mode=review): "
                                          "its changes went to the project directly" % session_id)
    return session_dir, record, key


def host_changes(review, project, what="the project"):
    """Paths of PROJECT (WHAT: the project, or a kept state) that differ from its manifest
    (taken at session start, or after the last apply), less its git directories (an
    apply never writes there, and the session's end fetches the agent's commits into
    them); ReviewError when there is no manifest to compare with."""
    try:
        manifest = _project_manifest.load(review["manifest"])
    except (OSError, ValueError):
        raise _project_review.ReviewError(
            "the session has no manifest of %s (%s): whether it changed since the session started cannot be "
            "checked, so nothing is applied; discard the session" % (what, review.get("manifest_error")))
    return [path for path in _project_manifest.differences(manifest, _project_manifest.take(project))
            if not _project_review.in_git_directory(path)]


def retake_manifest(review, project):
    """After an apply: the project as it is now is what the next apply checks against."""
    return _project_manifest.save(review["manifest"], _project_manifest.take(project))


def note(session_dir, record, entry, key):
    """Add ENTRY (what an apply or discard did) to the record's review history, on disk,
    sealed again with KEY."""
    record["review"].setdefault("history", []).append(entry)
    _session_record.write(session_dir, record, key)
