# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A review-mode session's own files: the overlay's upper and work directories in the
session directory, the project's manifest taken as the sandbox starts, the record's
`review` section (its paths at start, every change with its flags at the end), and what
project_review needs to show, apply or discard them.

In review mode podman mounts the project at /project as an overlay
(`-v PROJECT:/project:O,upperdir=UPPER,workdir=WORK`): the agent reads the project and
writes only to UPPER, so the host's tree does not change until the user applies.
"""

from __future__ import annotations

import json
import os
import threading
import time

from ansible_collections.aisb.sandbox.plugins.module_utils import _project_manifest, _project_review
from ansible_collections.aisb.sandbox.plugins.module_utils._session_plan import RECORD, SESSION_ID, session_directory

REVIEW_DIR = "review"
REVIEW_DIR_MODE = 0o700


def review_dir(session_dir):
    return os.path.join(session_dir, REVIEW_DIR)


class Review(object):
    """One review session's overlay directories, and the project's manifest taken in a
    thread beside the sandbox's start: the overlay never writes to the project, so the
    manifest reads the same tree while the sandbox starts as before it (measured: 10,000
    files take 0.05 to 0.37 s, by load, which the session's start no longer waits for)."""

    def __init__(self, project, session_dir, environ):
        base = review_dir(session_dir)
        self.project = project
        # The developer's environment: which git configuration the host reads (flags).
        self.environ = environ
        self.paths = {"upper": os.path.join(base, "upper"), "work": os.path.join(base, "work"),
                      "manifest": os.path.join(base, "manifest.json")}
        os.mkdir(base, REVIEW_DIR_MODE)
        os.mkdir(self.paths["upper"])
        os.mkdir(self.paths["work"])
        self.manifest = {"tree_hash": None, "tree_paths": None, "manifest_s": None, "manifest_error": None}
        self._thread = threading.Thread(target=self._take_manifest, name="aisb-review-manifest")
        self._thread.daemon = True
        self._thread.start()

    def _take_manifest(self):
        started = time.monotonic()
        try:
            entries = _project_manifest.take(self.project)
            self.manifest["tree_hash"] = _project_manifest.save(self.paths["manifest"], entries)
            self.manifest["tree_paths"] = len(entries)
        except OSError as error:
            self.manifest["manifest_error"] = "the project's manifest could not be taken: %s" % error
        self.manifest["manifest_s"] = round(time.monotonic() - started, 3)

    @property
    def overlay(self):
        """(upper, work) for the sandbox's project mount."""
        return self.paths["upper"], self.paths["work"]

    def section(self):
        """The record's review section as known now."""
        return dict(self.paths, **self.manifest)

    def end(self):
        """The record's review section after the session: every change the upper
        directory holds, with its flags, or the error that kept them from being read."""
        self._thread.join()
        try:
            items = _project_review.changes(self.paths["upper"], self.project, self.environ)
        except (OSError, _project_review.ReviewError) as error:
            return dict(self.section(), changes=None, flagged=None, error=str(error))
        return dict(self.section(), changes=items, flagged=[item["path"] for item in items if item["flags"]],
                    error=None)


def load_record(state, session_id):
    """(session directory, record) of review session SESSION_ID under the state directory
    STATE; ReviewError when there is none, it has not ended, or it ran in direct mode."""
    if not SESSION_ID.match(session_id or ""):
        raise _project_review.ReviewError("%r is not a session id (like 20261130T230455-1a2b3c4d)" % session_id)
    session_dir = session_directory(state, session_id)
    try:
        with open(os.path.join(session_dir, RECORD)) as handle:
            record = json.load(handle)
    except FileNotFoundError:
        raise _project_review.ReviewError(
            "session %s has no record in %s: it has not ended, or never ran" % (session_id, session_dir))
    if record.get("project_mode") != "review" or not record.get("review"):
        raise _project_review.ReviewError("session %s did not run in review mode (aisb_project_mode=review): "
                                          "its changes went to the project directly" % session_id)
    return session_dir, record


def host_changes(review, project):
    """Paths of PROJECT that differ from its manifest (taken at session start, or after
    the last apply), less its git directories (an apply never writes there, and the
    session's end fetches the agent's commits into them); ReviewError when there is no
    manifest to compare with."""
    try:
        manifest = _project_manifest.load(review["manifest"])
    except (OSError, ValueError):
        raise _project_review.ReviewError(
            "the session has no manifest of the project (%s): whether the project changed since the session "
            "started cannot be checked, so nothing is applied; discard the session" % review.get("manifest_error"))
    return [path for path in _project_manifest.differences(manifest, _project_manifest.take(project))
            if not _project_review.in_git_directory(path)]


def retake_manifest(review, project):
    """After an apply: the project as it is now is what the next apply checks against."""
    return _project_manifest.save(review["manifest"], _project_manifest.take(project))


def note(session_dir, record, entry):
    """Add ENTRY (what an apply or discard did) to the record's review history, on disk."""
    record["review"].setdefault("history", []).append(entry)
    path = os.path.join(session_dir, RECORD)
    with open(path + ".new", "w") as handle:
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.rename(path + ".new", path)
