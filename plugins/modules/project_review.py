#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: project_review
short_description: Show, apply or discard what a review-mode session changed in its project
version_added: 0.1.0
description:
  - A session run with O(aisb.sandbox.session#module:project_mode=review) left the project
    as it was and kept the agent's writes in an upper directory in its session directory.
    This module reads them against the project.
  - O(action=show) lists every added, changed and deleted path, the flagged ones (the host
    may run them, or they change how its tools behave, each with the reasons), a unified
    diff of the text files, and the project's paths that changed since the session started.
  - O(action=apply) refuses when any path of the project changed since the session started
    (or since the last apply), then applies the unflagged changes and the flagged ones
    named in O(apply_flagged). Devices, fifos and sockets are never applied, nor anything in
    or at a C(.git) (the agent's commits come back as refs, see O(branch)); changes under the
    project's git directories do not count as the project having changed. No symbolic
    link is followed, in the upper directory or in the project; files are written under a
    new name and renamed into place. Afterwards the project's manifest is taken again, so
    a later apply (of flagged paths named then) checks against the project as this one
    left it; paths already applied no longer show as changes.
  - O(action=discard) removes the upper and work directories with C(podman unshare),
    since the overlay leaves its work directory owned by the user namespace's root.
  - Each apply and discard is added to the record's C(review.history).
author: aisb developers (@aisb)
options:
  session:
    description: The session's id (the record's C(session_id), the session directory's name).
    type: str
    required: true
  action:
    description: C(show), C(apply) or C(discard).
    type: str
    choices: [show, apply, discard]
    default: show
  apply_flagged:
    description:
      - Flagged paths to apply as well. A directory names everything under it.
    type: list
    elements: str
    default: []
  branch:
    description:
      - With O(action=apply), also create this branch in the project's repository at the
        agent's HEAD as the session's end brought it back (C(refs/aisb/<session>/HEAD)), without
        checking it out and without running a hook. The agent's git directory itself is never
        applied.
    type: str
  executable:
    description: The podman executable (for C(podman unshare) on discard).
    type: str
    default: podman
attributes:
  check_mode:
    description: Shows what apply or discard would do and changes nothing.
    support: full
  diff_mode:
    description: Not supported; O(action=show) returns the diff.
    support: none
notes:
  - Sessions live in C($XDG_STATE_HOME/aisb/sessions/ID) (default C(~/.local/state)) of the
    user this module runs as.
"""

EXAMPLES = r"""
- name: Show what session 20261130T230455-1a2b3c4d changed
  aisb.sandbox.project_review:
    session: 20261130T230455-1a2b3c4d

- name: Apply it, with one flagged path, and the agent's commits as branch agent-work
  aisb.sandbox.project_review:
    session: 20261130T230455-1a2b3c4d
    action: apply
    apply_flagged: [package.json]
    branch: agent-work
"""

RETURN = r"""
project:
  description: The project directory.
  returned: always
  type: str
changes:
  description:
    - Every path the session adds, changes or deletes, against the project as it is now.
    - Each has C(path), C(change) (added, changed, deleted), C(type) (file, dir, symlink,
      special) and C(mode), C(was) (the old type and mode) when it replaced something,
      C(target) for a link, and C(flags) (reasons; empty when not flagged).
  returned: always
  type: list
  elements: dict
summary:
  description: One line a change (C(added), C(changed) or C(deleted), the path, and why it is flagged).
  returned: always
  type: list
  elements: str
flagged:
  description: The paths of the flagged changes.
  returned: always
  type: list
  elements: str
diff:
  description:
    - A unified diff of the text files among the changes, up to about a million characters
      (then a line says how many changes are left out).
  returned: when O(action=show)
  type: str
host_changed:
  description: Paths of the project changed since the session started (or the last apply).
  returned: when O(action) is show or apply
  type: list
  elements: str
applied:
  description: The paths applied.
  returned: when O(action=apply)
  type: list
  elements: str
held:
  description: Paths not applied, each with C(path) and C(why).
  returned: when O(action=apply)
  type: list
  elements: dict
branch:
  description: The branch O(branch) created, at the agent's HEAD.
  returned: when O(branch) was given and created
  type: str
unmatched:
  description: Entries of O(apply_flagged) that name no change.
  returned: when O(action=apply)
  type: list
  elements: str
commands:
  description: The podman commands that ran.
  returned: always
  type: list
  elements: list
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils import (
    _host_tools, _podman, _project_commits, _project_review, _review_apply, _review_session)
from ansible_collections.aisb.sandbox.plugins.module_utils._host_facts import format_time, state_dir
from ansible_collections.aisb.sandbox.plugins.module_utils._runner import Runner, module_execute

DIFF_LIMIT = 1 << 20


def argument_spec():
    return dict(
        session=dict(type="str", required=True),
        action=dict(type="str", choices=["show", "apply", "discard"], default="show"),
        apply_flagged=dict(type="list", elements="str", default=[]),
        branch=dict(type="str"),
        executable=dict(type="str", default="podman"),
    )


def shown_diff(upper, project, items):
    """The text diffs of ITEMS, up to about DIFF_LIMIT characters: a task's result is not
    the place for a whole generated tree."""
    parts, size = [], 0
    for index, item in enumerate(items):
        if size > DIFF_LIMIT:
            parts.append("(the diff stops here, over %d characters: %d more changes)\n"
                         % (DIFF_LIMIT, len(items) - index))
            break
        parts.append(_project_review.text_diff(upper, project, item))
        size += len(parts[-1])
    return "".join(parts)


def summary_line(item):
    flags = "  (flagged: %s)" % "; ".join(item["flags"]) if item["flags"] else ""
    return "%-8s %s%s" % (item["change"], item["path"], flags)


def execute(params, environ, run, check_mode):
    """The module's result for PARAMS; raises ReviewError on a refusal."""
    session_dir, record = _review_session.load_record(state_dir(environ), params["session"])
    review, project = record["review"], record["project"]
    result = dict(project=project, changes=[], summary=[], flagged=[], commands=run.commands, changed=False)
    if not os.path.isdir(review["upper"]):
        raise _project_review.ReviewError("session %s was discarded: nothing is left to show or apply"
                                          % params["session"])
    if params["action"] == "discard":
        if not check_mode:
            removal = ["rm", "-rf", "--", _review_session.review_dir(session_dir)]
            podman, problem = _host_tools.resolve(params["executable"])
            if problem:
                raise _project_review.ReviewError(problem)
            rc, _out, err = run(_podman.unshare(podman, removal))
            if rc != 0:
                raise _project_review.ReviewError("could not remove the upper directory: %s" % _podman.error_line(err))
            _review_session.note(session_dir, record, {"action": "discard", "at": format_time(time.time())})
        return dict(result, changed=True)
    items = _project_review.changes(review["upper"], project, environ)
    result.update(changes=items, summary=[summary_line(item) for item in items],
                  flagged=[item["path"] for item in items if item["flags"]],
                  host_changed=_review_session.host_changes(review, project))
    if params["action"] == "show":
        result["diff"] = shown_diff(review["upper"], project, items)
        return result
    changed = result["host_changed"]
    if changed:
        raise _project_review.ReviewError(
            "the project changed since the session started or the last apply (%d paths: %s%s): applying "
            "over it could lose those changes; apply refused"
            % (len(changed), ", ".join(changed[:10]), ", ..." if len(changed) > 10 else ""))
    named = params["apply_flagged"]
    result["unmatched"] = [name for name in named
                           if not any(_review_apply.is_named(item["path"], [name]) for item in items)]
    if check_mode:
        return dict(result, applied=[], held=[], changed=bool(items))
    if params.get("branch"):
        # First: a branch refused (its name taken, no commits brought back) applies nothing.
        git, refused = _host_tools.resolve("git")
        refused = refused or _project_commits.branch(run, git, project, params["session"], params["branch"])
        if refused:
            raise _project_review.ReviewError(refused)
    outcome = _review_apply.apply(review["upper"], project, items, named)
    if params.get("branch"):
        outcome["branch"] = params["branch"]
    tree_hash = _review_session.retake_manifest(review, project)
    _review_session.note(session_dir, record, dict(outcome, action="apply", at=format_time(time.time()),
                                                   named=named, tree_hash=tree_hash))
    return dict(result, changed=bool(outcome["applied"]), **outcome)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    run = Runner(module_execute(module))
    try:
        result = execute(module.params, dict(os.environ), run, module.check_mode)
    except (OSError, _project_review.ReviewError) as error:
        module.fail_json(msg=str(error), commands=run.commands)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
