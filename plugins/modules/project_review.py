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
  - The project's kept harness state (the recipe's C(state), such as pi's C(pi-sessions))
    was an overlay in that session as well. The agent's writes to it are listed apart, by
    the state's name, and every one is flagged, since the harness's next session in the
    project reads that state as its own history. They are applied only when named in
    O(apply_state).
  - O(action=show) lists every added, changed and deleted path, the flagged ones (the host
    may run them, or they change how its tools behave, each with the reasons), a unified
    diff of the text files, and the project's paths that changed since the session started.
  - O(action=apply) refuses when any path of the project changed since the session started
    (or since the last apply), or of a kept state named in O(apply_state), or when another
    session of the project holds its kept state now; then applies the unflagged changes,
    the flagged ones named in O(apply_flagged), and the kept state's named in
    O(apply_state). Devices, fifos and sockets are never applied, nor anything in or at
    a C(.git) (the agent's commits come back as refs, see O(branch)); changes under the
    project's git directories do not count as the project having changed. No symbolic
    link is followed, in the upper directory or in the project; files are written under a
    new name and renamed into place. Afterwards the manifests are taken again, so
    a later apply (of flagged paths named then) checks against the project as this one
    left it; paths already applied no longer show as changes.
  - O(action=discard) removes the upper and work directories (the kept state's too) with C(podman unshare),
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
      - Flagged paths of the project to apply as well. A directory names everything under it.
    type: list
    elements: str
    default: []
  apply_state:
    description:
      - Changes to the project's kept harness state to apply, by the state's name (all its
        changes) or C(NAME/PATH) (a path in it; a directory names everything under it).
      - A list of its own, never paths in O(apply_flagged), so that no project path can
        name the kept state.
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

- name: Apply, with what the agent wrote in pi's kept sessions
  aisb.sandbox.project_review:
    session: 20261130T230455-1a2b3c4d
    action: apply
    apply_state: [pi-sessions]
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
state:
  description:
    - The kept state's changes, by the state's name, each with C(dir) (the kept state on
      the host), C(inside) (where the sandbox saw it), C(changes) and C(flagged) (as the
      project's, every change flagged), C(host_changed) (its paths changed since the session
      started or the last apply), C(error) (why they could not be read, a kept state
      removed since, say; then none is applied) and, with O(action=apply), C(applied) and C(held).
  returned: always
  type: dict
summary:
  description:
    - One line a change (C(added), C(changed) or C(deleted), the path, and why it is flagged);
      a kept state's path after C(kept state NAME:).
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
      (then a line says how many changes are left out); a kept state's paths begin with its name.
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
  description: Entries of O(apply_flagged) and O(apply_state) that name no change.
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
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _errors, _host_tools, _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_state
from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_commits
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _project_review, _review_apply, _review_session
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import format_time
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, module_execute
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import review_directory, state_dir

DIFF_LIMIT = 1 << 20


def argument_spec():
    return dict(
        session=dict(type="str", required=True),
        action=dict(type="str", choices=["show", "apply", "discard"], default="show"),
        apply_flagged=dict(type="list", elements="str", default=[]),
        apply_state=dict(type="list", elements="str", default=[]),
        branch=dict(type="str"),
        executable=dict(type="str", default="podman"),
    )


def shown_diff(trees):
    """The text diffs of TREES' changes, [(upper, lower, items, prefix)], up to about
    DIFF_LIMIT characters: a task's result is not the place for a whole generated tree."""
    listed = [(upper, lower, item, prefix) for upper, lower, items, prefix in trees for item in items]
    parts, size = [], 0
    for index, (upper, lower, item, prefix) in enumerate(listed):
        if size > DIFF_LIMIT:
            parts.append("(the diff stops here, over %d characters: %d more changes)\n"
                         % (DIFF_LIMIT, len(listed) - index))
            break
        parts.append(_project_review.text_diff(upper, lower, item, prefix=prefix))
        size += len(parts[-1])
    return "".join(parts)


def summary_line(item, where=""):
    flags = "  (flagged: %s)" % "; ".join(item["flags"]) if item["flags"] else ""
    return "%-8s %s%s%s" % (item["change"], where, item["path"], flags)


def named_state(apply_state, kept):
    """APPLY_STATE's entries by state name, {name: [paths in it]} (a whole state: [""]);
    ReviewError naming an entry that names no state the session KEPT."""
    named = {}
    for entry in apply_state:
        name, _slash, path = entry.strip("/").partition("/")
        if name not in kept:
            raise _project_review.ReviewError(
                "apply_state names %s: the session kept %s; name a state, or NAME/PATH for a path in it"
                % (entry, ", ".join(sorted(kept)) or "no harness state"))
        named.setdefault(name, []).append(path)
    return named


def state_held(items, why="the harness's kept state: name it in apply_state to apply it"):
    return [{"path": item["path"], "why": why} for item in items]


def kept_state(name, state):
    """The record's section STATE of the kept state NAME with its changes (all flagged)
    and its paths changed since, or the error that kept them from being read (a kept
    state removed since: the project's changes are still shown and applied)."""
    try:
        changes = _review_session.state_changes(name, state)
        changed = _review_session.host_changes(state, state["dir"], "the kept state " + name)
    except (OSError, _project_review.ReviewError) as error:
        return dict(state, changes=[], flagged=[], host_changed=[], error="the kept state %s: %s" % (name, error))
    return dict(state, changes=changes, flagged=[item["path"] for item in changes], host_changed=changed, error=None)


def claim_state(session_id, states, named):
    """Become the one writer of the project's kept state (_harness_state.claim) until this
    module ends, when NAMED (named_state()) names any of STATES (the record's); ReviewError
    while another session of the project writes it."""
    if named:
        try:
            _harness_state.claim(os.path.dirname(states[next(iter(named))]["dir"]),
                                 "the review of session %s" % session_id, otherwise="")
        except _errors.SessionError as error:
            raise _project_review.ReviewError("the kept state cannot be applied now: %s" % error)


def check_state(kept, named):
    """Refuse (ReviewError) to apply the NAMED changes ({name: paths}, named_state()) of the
    KEPT states ({name: its section, with its changes and host_changed}) when a named
    state changed since the session started or the last apply."""
    for name in sorted(named):
        if kept[name]["error"]:
            raise _project_review.ReviewError("%s; nothing is applied" % kept[name]["error"])
        refuse_changed("the kept state " + name, kept[name]["host_changed"])


def refuse_changed(what, changed):
    """ReviewError when CHANGED (paths of WHAT changed since the session started or the
    last apply) is not empty: applying over them could lose those changes."""
    if changed:
        raise _project_review.ReviewError(
            "%s changed since the session started or the last apply (%d paths: %s%s): applying over it could lose "
            "those changes; apply refused" % (what, len(changed), ", ".join(changed[:10]),
                                              ", ..." if len(changed) > 10 else ""))


def apply_state(kept, named):
    """Apply the NAMED changes of each KEPT state (check_state()) into it, the rest held;
    each state's section gets applied, held and, when applied, its new tree_hash."""
    for name, state in kept.items():
        if name not in named:
            state.update(applied=[], held=state_held(state["changes"]))
            continue
        paths = [item["path"] for item in state["changes"]] if "" in named[name] else named[name]
        state.update(_review_apply.apply(state["upper"], state["dir"], state["changes"], paths))
        state["tree_hash"] = _review_session.retake_manifest(state, state["dir"])


def execute(params, environ, run, check_mode):
    """The module's result for PARAMS; raises ReviewError on a refusal."""
    session_dir, record, key = _review_session.load_record(state_dir(environ), params["session"])
    review, project = record["review"], record["project"]
    result = dict(project=project, changes=[], summary=[], flagged=[], commands=run.commands, changed=False)
    if not os.path.isdir(review["upper"]):
        raise _project_review.ReviewError("session %s was discarded: nothing is left to show or apply"
                                          % params["session"])
    if params["action"] == "discard":
        if not check_mode:
            podman, problem = _host_tools.resolve(params["executable"])
            if problem:
                raise _project_review.ReviewError(problem)
            rc, _out, err = run(_podman.remove_tree(podman, review_directory(session_dir)))
            if rc != 0:
                raise _project_review.ReviewError("could not remove the upper directory: %s" % _podman.error_line(err))
            _review_session.note(session_dir, record, {"action": "discard", "at": format_time(time.time())}, key)
        return dict(result, changed=True)
    named_kept = named_state(params["apply_state"], review.get("state") or {})
    if params["action"] == "apply" and not check_mode:
        # Before its manifest is read: nobody writes the kept state from here on.
        claim_state(params["session"], review["state"], named_kept)
    items = _project_review.changes(review["upper"], project, environ)
    kept = dict((name, kept_state(name, state)) for name, state in (review.get("state") or {}).items())
    result.update(changes=items, flagged=[item["path"] for item in items if item["flags"]],
                  summary=[summary_line(item) for item in items] + [
                      summary_line(item, "kept state %s: " % name) for name, state in sorted(kept.items())
                      for item in state["changes"]],
                  host_changed=_review_session.host_changes(review, project), state=kept)
    if params["action"] == "show":
        result["diff"] = shown_diff([(review["upper"], project, items, "")] + [
            (state["upper"], state["dir"], state["changes"], name + "/") for name, state in sorted(kept.items())])
        return result
    refuse_changed("the project", result["host_changed"])
    named = params["apply_flagged"]
    result["unmatched"] = [name for name in named
                           if not any(_review_apply.is_named(item["path"], [name]) for item in items)] + [
        "%s/%s" % (name, path) for name, paths in sorted(named_kept.items()) for path in paths
        if path and not any(_review_apply.is_named(item["path"], [path]) for item in kept[name]["changes"])]
    check_state(kept, named_kept)
    if check_mode:
        return dict(result, applied=[], held=[], changed=bool(items) or any(s["changes"] for s in kept.values()))
    if params.get("branch"):
        # First: a branch refused (its name taken, no commits brought back) applies nothing.
        git, refused = _host_tools.resolve("git")
        refused = refused or _project_commits.branch(run, git, project, params["session"], params["branch"])
        if refused:
            raise _project_review.ReviewError(refused)
    outcome = _review_apply.apply(review["upper"], project, items, named)
    apply_state(kept, named_kept)
    if params.get("branch"):
        outcome["branch"] = params["branch"]
    tree_hash = _review_session.retake_manifest(review, project)
    state_outcome = dict((name, {"applied": state["applied"], "held": state["held"], "tree_hash": state["tree_hash"]})
                         for name, state in kept.items())
    _review_session.note(session_dir, record, dict(outcome, action="apply", at=format_time(time.time()),
                                                   named=named, named_state=params["apply_state"],
                                                   tree_hash=tree_hash, state=state_outcome), key)
    return dict(result, changed=bool(outcome["applied"]) or any(s["applied"] for s in kept.values()), **outcome)


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
