# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The agent's commits brought back as data: at the session's end a short container
(no network, no capability, the sandbox's image, the project as the agent left it)
writes, for each repository, the list of the agent's branches, tags, stash and HEAD
that differ from the host's (name and object) and a git bundle of the new commits
they hold; the host verifies each bundle and fetches its objects, then points
refs/aisb/<session id>/ at each listed object it now has, of the right type, reading
nothing of the agent's (no configuration, hooks, attributes or index: the list and
the bundle are data).

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
# A branch or tag name brought back: what git allows, less what a refspec would read
# as more than a name (git refuses ':', '*', '..' in ref names; checked here so that a
# list or bundle written by the agent's git cannot name anything else).
NAME = r"(?!.*\.\.)(?!.*//)[A-Za-z0-9_][A-Za-z0-9._/+@-]*(?<![./])"
BRANCH = re.compile(r"^refs/heads/%s$" % NAME)
TAG = re.compile(r"^refs/tags/%s$" % NAME)
# The other refs brought back, by exact name.
SINGLE = ("HEAD", "refs/stash")
# The object types each kind of ref may point at: a tag may be annotated (a tag object).
TYPES = {"heads": ("commit",), "tags": ("commit", "tag"), "HEAD": ("commit",), "stash": ("commit",)}
REF_LINE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$")
# git bundle create refuses a bundle with no commit in it: nothing new in that repository.
EMPTY = "Refusing to create empty bundle"
# At most this many of a repository's refs are brought back in one session (each costs
# two short git commands on the host); the list read is bounded likewise.
MAX_REFS = 1000
MAX_LIST = 1 << 20
# The most refs a sentence of what was not brought back names.
MAX_NAMED = 20
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


def refs_path(session_dir, number):
    return os.path.join(session_dir, BUNDLES, "%d.refs" % number)


def fetch(run, git, project, repository, bundle_file, listed, session_id):
    """Verify BUNDLE_FILE (None: no new commits) against REPOSITORY's git directory on
    the host and fetch its objects (no ref written), then point refs/aisb/SESSION_ID/
    at each ref of LISTED (the text of the container's list) whose object the host now
    has, of the type its kind allows. Returns (refs {name: object}, error sentence or None)."""
    base = [git, "--git-dir=%s" % os.path.join(project, repository)] + HOST_GIT
    wanted, skipped = targets(listed, session_id)
    if bundle_file is not None:
        error = _fetch_bundle(run, base, repository, bundle_file)
        if error:
            return {}, error
    for target, name, obj, kind in wanted:
        rc, found, _err = run(base + ["cat-file", "-t", obj], timeout=FETCH_TIMEOUT)
        why = type_refusal(kind, found.strip() if rc == 0 else None, obj)
        if why is None:
            rc, _out, err = run(base + ["update-ref", target, obj], timeout=FETCH_TIMEOUT)
            why = None if rc == 0 else "git update-ref failed: %s" % err.strip()[-200:]
        if why:
            skipped.append("%s (%s)" % (name, why))
    rc, out, _err = run(base + ["for-each-ref", "--format=%(refname) %(objectname)", session_refs(session_id)],
                        timeout=FETCH_TIMEOUT)
    refs = dict(line.split(" ", 1) for line in out.splitlines() if " " in line) if rc == 0 else {}
    return refs, not_brought_back(skipped)


def not_brought_back(skipped):
    """The record's sentence for SKIPPED (each "name (why)"), at most MAX_NAMED named; None if empty."""
    if not skipped:
        return None
    more = len(skipped) - MAX_NAMED
    return "not brought back: %s%s" % (", ".join(skipped[:MAX_NAMED]), " and %d more" % more if more > 0 else "")


def _fetch_bundle(run, base, repository, bundle_file):
    """The bundle's objects into the host's repository (only its plainly named refs are
    fetched, into no ref: the list says where refs go). None, or the sentence why not."""
    rc, _out, err = run(base + ["bundle", "verify", "--quiet", bundle_file], timeout=FETCH_TIMEOUT)
    if rc != 0:
        return "the bundle of %s did not verify: %s" % (repository, err.strip()[-300:])
    rc, heads, err = run(base + ["bundle", "list-heads", bundle_file], timeout=FETCH_TIMEOUT)
    if rc != 0:
        return "the bundle of %s could not be listed: %s" % (repository, err.strip()[-300:])
    names = [name for name, _obj in _lines(heads) if kind_of(name)]
    if names:
        rc, _out, err = run(base + ["fetch"] + FETCH_OPTIONS + [bundle_file] + names, timeout=FETCH_TIMEOUT)
        if rc != 0:
            return "fetching the bundle of %s failed: %s" % (repository, err.strip()[-300:])
    return None


def _lines(text):
    """(name, object or None) for each non-empty line of TEXT, "object name" as git prints."""
    for line in text.splitlines():
        match = REF_LINE.match(line.strip())
        if match:
            yield match.group(2), match.group(1)
        elif line.strip():
            yield line.strip(), None


def kind_of(name):
    """The kind of ref NAME is brought back as ("heads", "tags", "HEAD", "stash"), None
    when it is not one of those with a plain name."""
    if BRANCH.match(name):
        return "heads"
    if TAG.match(name):
        return "tags"
    if name in SINGLE:
        return name.rsplit("/", 1)[-1]
    return None


def target(name, session_id):
    """Where ref NAME (kind_of() not None) arrives: refs/aisb/SESSION_ID/ then HEAD,
    stash, heads/<branch> or tags/<tag>."""
    return "%s/%s" % (session_refs(session_id), name[len("refs/"):] if name.startswith("refs/") else name)


def targets(listed, session_id):
    """([(target ref, name, object, kind)], [skipped, with why]) for LISTED, the text of
    the container's list (at most MAX_REFS lines taken)."""
    wanted, skipped = [], []
    for name, obj in _lines(listed):
        kind = kind_of(name)
        if obj is None or kind is None:
            skipped.append("%s (not a plain branch or tag name)" % name[:200])
        elif len(wanted) >= MAX_REFS:
            skipped.append("%s (more than %d refs)" % (name[:200], MAX_REFS))
        else:
            wanted.append((target(name, session_id), name, obj, kind))
    return wanted, skipped


def type_refusal(kind, found, obj):
    """None when an object of type FOUND (None: not in the repository) may be what a ref of
    KIND points at, else why not."""
    if found is None:
        return "object %s is neither in the bundle nor in this repository" % obj
    if found not in TYPES[kind]:
        return "%s is a %s, not a %s" % (obj, found, " or ".join(TYPES[kind]))
    return None


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
        listed = _read(refs_path(session_dir, number), MAX_LIST)
        if error is None and listed:
            bundle_file = bundle_path(session_dir, number)
            refs, error = fetch(run, git, project, path, bundle_file if os.path.exists(bundle_file) else None,
                                listed, session_id)
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


def _read(path, limit=1 << 16):
    try:
        with open(path, errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return ""
