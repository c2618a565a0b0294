# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A harness's state that persists per project (the recipe's `state`; pi: its sessions,
for pi --continue): one directory per project under the state directory, named by a
hash of the project's resolved path, mounted read-write into that project's sessions
only. aisb_harness_state=fresh wipes it before the session.

The agent writes anything below each mounted directory, links included: the host
creates the directories and removes them, and never follows what is inside. In review
mode each one is the lower layer of an overlay (_review_session): the agent's writes go
to the session's upper directory, and project_review applies them only when named
(reading them with lstat, never through a link, as it reads the project).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import posixpath
import re
import uuid

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_config import HOME
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

MODES = ("keep", "fresh", "none")
DIR_MODE = 0o700
# Beside a project's state directory: who writes it now (claim()).
LOCK_SUFFIX = ".lock"
# Beside the state, written by the host only (not mounted): which project this is.
PROJECT_FILE = "project"
STATE_NAME = re.compile(r"\A[a-z0-9][a-z0-9.-]{0,63}\Z")
# What a session refused by claim() can do instead of waiting.
NOTHING_KEPT = "or run this one with aisb_harness_state=none (nothing kept)"


def recipe_state(harness):
    """The recipe's `state`, {name: path inside}, checked; {} when it has none."""
    state = harness.get("state") or {}
    if not isinstance(state, dict):
        raise InputError("harness state must be a dict of name and path inside, got %r" % (state,))
    for name, inside in state.items():
        if not isinstance(name, str) or not STATE_NAME.match(name):
            raise InputError("harness state name %r must be lower-case letters, digits, '.' and '-'" % (name,))
        if not isinstance(inside, str) or posixpath.normpath(inside) != inside or not inside.startswith(HOME + "/"):
            raise InputError("harness state %s path %r must be a normalised path under %s" % (name, inside, HOME))
    return dict(state)


def project_state_dir(state, project):
    """The directory of PROJECT's (resolved path) harness state under the state directory STATE."""
    digest = hashlib.sha256(project.encode("utf-8")).hexdigest()[:32]
    return os.path.join(_state_layout.harness_state_dir(state), digest)


def plan(state, project, recipe, mode, review=False):
    """What a session keeps: {dir, mode, mounts: [(host directory, path inside)]}, or
    None when the RECIPE (a _recipes.Recipe) keeps nothing. REVIEW: a review-mode session, which never
    writes the kept state, so cannot wipe it."""
    if mode not in MODES:
        raise InputError("aisb_harness_state must be one of %s, got %r" % (", ".join(MODES), mode))
    if review and mode == "fresh":
        raise InputError("aisb_harness_state=fresh wipes the project's kept harness state, which a review-mode "
                         "session never writes (aisb_project_mode=review): run it with aisb_harness_state=none "
                         "for a session without the kept state, or keep")
    names = recipe.state
    if not names or mode == "none":
        return None
    directory = project_state_dir(state, project)
    return {"dir": directory, "mode": mode,
            "mounts": [(os.path.join(directory, name), inside) for name, inside in sorted(names.items())]}


def prepare(kept, project, run, podman, session_id):
    """Claim KEPT's (plan()) directory for SESSION_ID (claim()), make its directories, after
    wiping them when its mode is fresh; the record's section. RUN: a _runner.Runner
    (podman unshare)."""
    directory, wiped = kept["dir"], False
    claim(directory, session_id)
    if kept["mode"] == "fresh" and os.path.lexists(directory):
        wipe(directory, run, podman)
        wiped = True
    # Only what is below each mounted directory is the agent's: these levels are the host's.
    for outside, _inside in kept["mounts"]:
        os.makedirs(outside, DIR_MODE, exist_ok=True)
    with open(os.path.join(directory, PROJECT_FILE), "w") as handle:
        handle.write(project + "\n")
    return {"dir": directory, "mode": kept["mode"], "wiped": wiped,
            "mounts": dict((inside, outside) for outside, inside in kept["mounts"])}


def claim(directory, session_id, otherwise=NOTHING_KEPT):
    """Make this process the one writer of DIRECTORY (a project's kept state) until it
    ends: an exclusive lock on DIRECTORY.lock, beside it (never mounted), holding
    SESSION_ID (a session's id, or what else writes it: a review's apply). Two sessions
    writing one state would each overwrite the other's files (a harness's conversation
    index, say); a second session of the project is refused, naming the first, and
    OTHERWISE what it can do instead of waiting. The lock goes with this process, however
    it ends."""
    os.makedirs(os.path.dirname(directory), DIR_MODE, exist_ok=True)
    fd = os.open(directory + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "unknown"
        os.close(fd)
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise SessionError("the harness state %s could not be locked: %s" % (directory, error.strerror))
        raise SessionError("another session of this project (%s) is running with its kept harness state: one "
                           "session writes it at a time; wait for that one to end%s"
                           % (holder, ", " + otherwise if otherwise else ""))
    os.ftruncate(fd, 0)
    os.write(fd, session_id.encode("utf-8"))
    # Not closed: the lock is held until this process ends.


def wipe(directory, run, podman):
    """Remove DIRECTORY and all the agent left in it. Renamed first, so a session of the
    same project still running writes into what is being removed, never into the new
    one; removed in podman's user namespace, where a directory the agent made unreadable
    is still removable; rm never follows a link."""
    doomed = "%s.wiping-%s" % (directory, uuid.uuid4().hex[:8])
    os.rename(directory, doomed)
    rc, _out, err = run(_podman.remove_tree(podman, doomed))
    if rc != 0:
        raise SessionError("the harness state %s could not be wiped: %s" % (directory, _podman.error_line(err)))
