# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's guard of the project's git, on the host: before the sandbox starts,
the mounts that keep every git directory and what the host's git runs out of the
agent's reach (or the refusal); after it ends, the repositories the agent created.
Ansible's configuration at the project's top rides along (_project_ansible).

_project_layout reads, _project_guard decides, _podman writes the mount options;
_project_commits brings the agent's commits back.
"""

import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.project import (
    _project_ansible, _project_guard, _project_layout)

# In the session's directory: each overlaid git directory's upper and work directories.
GIT_DIR = "git"
GIT_DIR_MODE = 0o700


def protect(project, environ):
    """(protection, problems) for the resolved PROJECT. PROTECTION holds what plan()
    decided, the repositories whose commits come back, and what to compare after the
    session; PROBLEMS, one sentence per refusal, means the session must not start."""
    home = environ.get("HOME") or os.path.expanduser("~")
    layout = _project_layout.read(project, home, environ)
    decided = _project_guard.plan(layout, _project_layout.kind)
    if decided["refusals"]:
        return None, ["project %s is refused: %s" % (project, refusal) for refusal in decided["refusals"]]
    read_only = decided["read_only"] + _project_ansible.read_only(project)
    return {"project": project, "home": home, "gitdirs": decided["gitdirs"], "read_only": read_only,
            "pinned": decided["pinned"], "repositories": repositories(layout),
            "before": _project_guard.snapshot(layout), "ansible_before": _project_ansible.snapshot(project)}, []


def repositories(layout):
    """The git directories that hold their own objects and refs (a linked worktree's
    commits go to its common directory's), relative to the project."""
    return sorted(path for path, info in layout["gitdirs"].items()
                  if {"objects", "refs"} <= set(info["entries"]) and path != ".")


def project_repositories(project, environ):
    """repositories() of PROJECT as the host has it: review mode's, whose overlay leaves
    the host's tree as it was (a project the walk cannot read whole: those it read)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    return repositories(_project_layout.read(project, home, environ))


def overlays(protection, session_dir):
    """(path, upper, work) for each git directory PROTECTION overlays, its directories in
    SESSION_DIR (made by make_overlays)."""
    return [(path,) + tuple(os.path.join(session_dir, GIT_DIR, str(number), layer) for layer in ("upper", "work"))
            for number, path in enumerate(protection["gitdirs"])]


def make_overlays(protection, session_dir):
    """Make the directories of the overlays (overlays()) in SESSION_DIR, which exists."""
    for _path, upper, work in overlays(protection, session_dir):
        for directory in (os.path.dirname(upper), upper, work):
            os.makedirs(directory, GIT_DIR_MODE)


def mounts(protection, session_dir, label):
    """The sandbox's podman options for PROTECTION (LABEL: the project mount's label):
    pure, the overlays' directories are made apart (make_overlays)."""
    return _podman.project_mounts(protection["project"], protection["read_only"], protection["pinned"],
                                  overlays(protection, session_dir), label)


def report(protection, environ):
    """The record's project_git: what was overlaid and read-only, and the findings
    (_project_guard.findings): the repositories the agent made."""
    layout = _project_layout.read(protection["project"], protection["home"], environ)
    return {"gitdirs": protection["gitdirs"], "read_only": protection["read_only"], "pinned": protection["pinned"],
            "findings": _project_guard.findings(protection["before"], _project_guard.snapshot(layout)),
            "ansible_findings": _project_ansible.findings(protection["ansible_before"],
                                                          _project_ansible.snapshot(protection["project"]))}


def warning(record):
    """One sentence for the play when the agent created what the host's git would take
    commands from, or None."""
    findings = (record.get("project_git") or {}).get("findings")
    if not findings:
        return None
    return ("the agent made new git repositories (the host's git takes configuration and commands from them); "
            "look at each before running git in or below it, or remove it: %s"
            % "; ".join("%s (%s)" % (os.path.join(record["project"], f["path"]), f["what"]) for f in findings))
