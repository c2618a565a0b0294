# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The agent's commits brought back as data: at the session's end a short container
(no network, no capability, the sandbox's image, the project as the agent left it)
writes a git bundle of each repository's new commits, its branches and HEAD; the host
verifies each bundle and fetches it into refs/aisb/<session id>/, reading nothing of
the agent's (no configuration, hooks, attributes or index: a bundle file is data).

docs/security.md ("The project's git") says what each side reads, as measured.
"""

import os
import re

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman

# In the session's directory: the bundles, one per repository, by number.
BUNDLES = "bundles"
REF_ROOT = "refs/aisb"
# What the host's git is told for every command here: no hook (the developer's own
# reference-transaction hook included), no fsmonitor, every object checked, no
# maintenance started, no tags, no FETCH_HEAD, no submodule fetched.
HOST_GIT = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "fetch.fsckObjects=true",
            "-c", "transfer.fsckObjects=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false"]
FETCH_OPTIONS = ["--no-write-fetch-head", "--no-tags", "--no-auto-gc", "--no-recurse-submodules", "--quiet"]
# A branch name brought back: what git allows, less what a refspec would read as more
# than a name (git refuses ':', '*', '..' in ref names; checked here so that a bundle
# written by the agent's git cannot name anything else).
BRANCH = re.compile(r"^refs/heads/(?!.*\.\.)(?!.*//)[A-Za-z0-9_][A-Za-z0-9._/+@-]*(?<![./])$")
HEAD_LINE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$")
# git bundle create refuses a bundle with no commit in it: nothing new in that repository.
EMPTY = "Refusing to create empty bundle"
BUNDLE_TIMEOUT = 300
FETCH_TIMEOUT = 300


def session_refs(session_id):
    return "%s/%s" % (REF_ROOT, session_id)


def bundle(run, podman, image, project, mounts, repositories, session_dir, overlay=None, label=""):
    """Write SESSION_DIR/bundles/<n>.bundle for each of REPOSITORIES (git directories
    relative to PROJECT) from the project as the sandbox left it: MOUNTS (direct mode's
    project_mounts, the git directories' overlays among them) or OVERLAY (review mode's
    upper and work); LABEL: the project mount's label. Returns {repository: error
    sentence or None}."""
    out = os.path.join(session_dir, BUNDLES)
    try:
        os.mkdir(out, 0o700)
    except OSError as error:
        return dict((path, "the bundles' directory %s could not be made: %s" % (out, error.strerror))
                    for path in repositories)
    hosts = [(os.path.join(project, path), "%s/%d" % (_podman.BUNDLE_HOST, number))
             for number, path in enumerate(repositories)]
    argv = _podman.commits_bundle(podman, image, project, mounts, overlay, out, hosts, repositories, label)
    rc, _out, err = run(argv, timeout=BUNDLE_TIMEOUT)
    if rc != 0:
        return dict((path, "the bundle container failed (exit %s): %s" % (rc, _podman.error_line(err)))
                    for path in repositories)
    errors = {}
    for number, path in enumerate(repositories):
        status = _read(os.path.join(out, "%d.rc" % number)).strip()
        message = _read(os.path.join(out, "%d.err" % number)).strip()
        errors[path] = None if status == "0" or EMPTY in message else (
            "git bundle create failed in %s (exit %s): %s" % (path, status or "?", message[-300:]))
    return errors


def bundle_path(session_dir, number):
    return os.path.join(session_dir, BUNDLES, "%d.bundle" % number)


def fetch(run, git, project, repository, bundle_file, session_id):
    """Verify BUNDLE_FILE against REPOSITORY's git directory on the host and fetch its
    branches and HEAD into refs/aisb/SESSION_ID/. Returns (refs {name: object}, error
    sentence or None)."""
    gitdir = os.path.join(project, repository)
    base = [git, "--git-dir=%s" % gitdir] + HOST_GIT
    rc, _out, err = run(base + ["bundle", "verify", "--quiet", bundle_file], timeout=FETCH_TIMEOUT)
    if rc != 0:
        return {}, "the bundle of %s did not verify: %s" % (repository, err.strip()[-300:])
    rc, heads, err = run(base + ["bundle", "list-heads", bundle_file], timeout=FETCH_TIMEOUT)
    if rc != 0:
        return {}, "the bundle of %s could not be listed: %s" % (repository, err.strip()[-300:])
    refspecs, skipped = refspecs_for(heads, session_id)
    if refspecs:
        rc, _out, err = run(base + ["fetch"] + FETCH_OPTIONS + [bundle_file] + refspecs, timeout=FETCH_TIMEOUT)
        if rc != 0:
            return {}, "fetching the bundle of %s failed: %s" % (repository, err.strip()[-300:])
    rc, listed, err = run(base + ["for-each-ref", "--format=%(refname) %(objectname)", session_refs(session_id)],
                          timeout=FETCH_TIMEOUT)
    refs = dict(line.split(" ", 1) for line in listed.splitlines() if " " in line) if rc == 0 else {}
    return refs, ("not brought back (not a plain branch name): %s" % ", ".join(skipped)) if skipped else None


def refspecs_for(heads, session_id):
    """(refspecs, skipped names) for the lines of git bundle list-heads HEADS: HEAD to
    refs/aisb/SESSION_ID/HEAD, each branch to refs/aisb/SESSION_ID/heads/<name>, forced."""
    refspecs, skipped = [], []
    for line in heads.splitlines():
        match = HEAD_LINE.match(line.strip())
        name = match.group(2) if match else line.strip()
        if name == "HEAD":
            refspecs.append("+HEAD:%s/HEAD" % session_refs(session_id))
        elif match and BRANCH.match(name):
            refspecs.append("+%s:%s/heads/%s" % (name, session_refs(session_id), name[len("refs/heads/"):]))
        elif name:
            skipped.append(name[:200])
    return refspecs, skipped


def bring_back(run, podman, git, image, project, repositories, session_dir, session_id, mounts=(), overlay=None,
               label=""):
    """The record's commits: [{"repository", "refs": {name: object}, "error"}] for each
    of REPOSITORIES, after bundle() and fetch()."""
    if not repositories:
        return []
    errors = bundle(run, podman, image, project, mounts, repositories, session_dir, overlay, label)
    found = []
    for number, path in enumerate(repositories):
        refs, error = {}, errors[path]
        if error is None and os.path.exists(bundle_path(session_dir, number)):
            refs, error = fetch(run, git, project, path, bundle_path(session_dir, number), session_id)
        found.append({"repository": path, "refs": refs, "error": error})
    return found


def branch(run, git, project, session_id, name):
    """Create branch NAME in PROJECT's top repository at refs/aisb/SESSION_ID/HEAD (no
    checkout, no hook). Returns None, or the sentence why not."""
    if not BRANCH.match("refs/heads/" + (name or "")):
        return "%r is not a plain branch name (letters, digits, '._/+@-', no '..')" % name
    start = "%s/HEAD" % session_refs(session_id)
    rc, _out, err = run([git, "--git-dir=%s" % os.path.join(project, ".git")] + HOST_GIT +
                        ["branch", "--no-track", name, start], timeout=FETCH_TIMEOUT)
    return None if rc == 0 else "git branch %s %s failed: %s" % (name, start, err.strip()[-300:])


def summary(commits):
    """One line for the play: which refs arrived, or "" when none did and none failed."""
    parts = []
    for entry in commits or []:
        where = "" if entry["repository"] == ".git" else " in %s" % entry["repository"]
        if entry["refs"]:
            parts.append("%s%s" % (", ".join(sorted(entry["refs"])), where))
        if entry["error"]:
            parts.append("not brought back%s: %s" % (where, entry["error"]))
    return "; ".join(parts)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read(1 << 16)
    except OSError:
        return ""
