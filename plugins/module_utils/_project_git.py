# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's guard of the project's git, on the host: before the sandbox starts,
the read-only mounts that keep what the host's git runs out of the agent's reach (or
the refusal); after it ends, what the agent created that the host's git would run.
Ansible's configuration at the project's top rides along (_project_ansible).

_project_layout reads, _project_guard decides, _podman writes the mount options.
"""

import os

from ansible_collections.aisb.sandbox.plugins.module_utils import (
    _podman, _project_ansible, _project_guard, _project_layout)


def protect(project, environ, label=""):
    """(protection, problems) for the resolved PROJECT. PROTECTION holds the podman
    options (mounts) and what to compare after the session; PROBLEMS, one sentence per
    refusal, means the session must not start. LABEL: the project mount's label option."""
    home = environ.get("HOME") or os.path.expanduser("~")
    layout = _project_layout.read(project, home, environ)
    decided = _project_guard.plan(layout, _project_layout.kind)
    if decided["refusals"]:
        return None, ["project %s is refused: %s" % (project, refusal) for refusal in decided["refusals"]]
    read_only = decided["read_only"] + _project_ansible.read_only(project)
    return {"project": project, "home": home, "read_only": read_only, "pinned": decided["pinned"],
            "mounts": _podman.project_mounts(project, read_only, decided["pinned"], label),
            "before": _project_guard.snapshot(layout), "ansible_before": _project_ansible.snapshot(project)}, []


def report(protection, environ):
    """The record's project_git: what was read-only, and the findings (_project_guard.findings)."""
    layout = _project_layout.read(protection["project"], protection["home"], environ)
    return {"read_only": protection["read_only"], "pinned": protection["pinned"],
            "findings": _project_guard.findings(protection["before"], _project_guard.snapshot(layout)),
            "ansible_findings": _project_ansible.findings(protection["ansible_before"],
                                                          _project_ansible.snapshot(protection["project"]))}


def problem(record):
    """One sentence for the task when the agent created what the host's git would run, or None."""
    findings = (record.get("project_git") or {}).get("findings")
    if not findings:
        return None
    return ("the agent created what the host's git would take commands from; look at each before running git "
            "in or below it: %s" % "; ".join("%s (%s)" % (os.path.join(record["project"], f["path"]), f["what"])
                                             for f in findings))
