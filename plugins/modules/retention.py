#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: retention
short_description: Remove this collection's old images, session directories and policies
description:
  - Images of C(localhost/aisb-sandbox), C(localhost/aisb-gate) and C(localhost/aisb-probe)
    only, never another repository's. Kept - each repository's current tag (the one a
    run used last, from the last-use marks content_image writes, else the newest), the
    image C(localhost/aisb-probe:current) names, any image a container uses (running or
    stopped), and any tag used within O(days). The rest is removed with C(podman rmi),
    never forced, with its build log and last-use mark.
  - Session directories (C(sessions/<session id>/) in the state directory) - kept are the
    newest O(keep_sessions), those whose containers exist, those holding a review that
    waits for C(review.yml), and those that ended (or started, without a record) within
    O(days). The rest is removed, records and transcripts with them.
  - Policy directories (C(policies/<policy hash>/), the gate role's) - kept are the one
    used last, any a container is labelled with (a running session's gate, the long-lived
    gate), any a long-lived gate's unit names (C(aisb-gate-policy-<hash>.container) in
    O(unit_dir), started or stopped), any a kept session's record names, and any used
    within O(days) (the gate role marks a policy used each time it renders or finds it).
    The rest is removed.
  - Nothing else in the state directory is touched.
version_added: 0.1.0
extends_documentation_fragment:
  - aisb.sandbox.podman
author: aisb developers (@aisb)
options:
  days:
    description: How many days records and unused images are kept. 0 keeps only what is current, in use or among the newest sessions.
    type: int
    default: 30
  keep_sessions:
    description: How many of the newest session directories are kept whatever their age.
    type: int
    default: 20
  state_dir:
    description: The state directory. Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb).
    type: path
  unit_dir:
    description: The user's quadlet directory, where long-lived gates' units are. Defaults to C(${XDG_CONFIG_HOME:-~/.config}/containers/systemd).
    type: path
attributes:
  check_mode:
    description: Lists what would be removed and removes nothing.
    support: full
  diff_mode:
    description: The images, session directories and policies before and after.
    support: full
"""

EXAMPLES = r"""
- name: What would go after 14 days (run with --check)
  aisb.sandbox.retention:
    days: 14
  check_mode: true
  register: retention

- name: Prune
  aisb.sandbox.retention:
    days: 14
    keep_sessions: 50
"""

RETURN = r"""
removed:
  description: What was removed (in check mode, what would be).
  returned: always
  type: dict
  sample: {images: ["localhost/aisb-gate:0f3a9c0d1e4b5a67"], sessions: ["20261101T090000-1a2b3c4d"], policies: ["5d41402abc4b2a76"]}
kept:
  description: What stays and why, by image tag, by session id and by policy hash.
  returned: always
  type: dict
  sample:
    images: {"localhost/aisb-gate:9a3a9c0d1e4b5a67": current}
    sessions: {"20261201T053000-5e6f7a8b": among the newest 20}
    policies: {"7d793037a0760186": a container uses it}
commands:
  description: The podman commands that ran.
  returned: always
  type: list
  elements: list
"""

import json
import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import (
    _host_tools, _podman, _session_record, _state_layout)
from ansible_collections.aisb.sandbox.plugins.module_utils.gate import _gate_unit
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.retention import _retention
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy_dir import policy_hash
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import module_runner
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SESSION_ID, review_directory


def argspec():
    return dict(
        days=dict(type="int", default=_retention.DEFAULT_DAYS),
        keep_sessions=dict(type="int", default=_retention.DEFAULT_KEEP_SESSIONS),
        state_dir=dict(type="path"),
        unit_dir=dict(type="path"),
        executable=dict(type="str", default="podman"),
    )


def last_used(used_dir):
    """{tag: mtime} from the last-use marks in USED_DIR (each holds its tag)."""
    marks = {}
    for name in os.listdir(used_dir) if os.path.isdir(used_dir) else []:
        path = os.path.join(used_dir, name)
        with open(path) as handle:
            marks[handle.read().strip()] = os.stat(path).st_mtime
    return marks


def sessions(sessions_dir):
    """[(session id, record's mtime or None, has a review directory)] under SESSIONS_DIR."""
    found = []
    for name in os.listdir(sessions_dir) if os.path.isdir(sessions_dir) else []:
        path = os.path.join(sessions_dir, name)
        if SESSION_ID.match(name) and os.path.isdir(path) and not os.path.islink(path):
            record = _session_record.path(path)
            found.append((name, os.stat(record).st_mtime if os.path.isfile(record) else None,
                          os.path.isdir(review_directory(path))))
    return found


def policies(policies_dir):
    """[(policy hash, the directory's mtime)] under POLICIES_DIR."""
    found = []
    for name in os.listdir(policies_dir) if os.path.isdir(policies_dir) else []:
        path = os.path.join(policies_dir, name)
        if _retention.POLICY_NAME.match(name) and os.path.isdir(path) and not os.path.islink(path):
            found.append((name, os.stat(path).st_mtime))
    return found


def recorded_policy(session_dir):
    """The policy hash SESSION_DIR's record names, None without one."""
    try:
        policy_dir = _session_record.read(session_dir).get("policy_dir")
    except (OSError, ValueError):
        return None
    return policy_hash(policy_dir) if isinstance(policy_dir, str) else None


def policies_in_use(containers, unit_dir, kept_sessions_dir, kept_sessions):
    """{policy hash: why it stays}: from containers' policy labels, long-lived gates'
    units in UNIT_DIR, and the records of KEPT_SESSIONS (ids under KEPT_SESSIONS_DIR)."""
    in_use = {}
    for session in kept_sessions:
        name = recorded_policy(os.path.join(kept_sessions_dir, session))
        if name:
            in_use[name] = "a kept session's record names it"
    for unit in os.listdir(unit_dir) if os.path.isdir(unit_dir) else []:
        name = _gate_unit.unit_policy(unit)
        if name:
            in_use[name] = "a long-lived gate's unit names it"
    for container in containers:
        name = (container.get("Labels") or {}).get(_gate_unit.POLICY_LABEL)
        if name:
            in_use[name] = "a container uses it"
    return in_use


def remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def remove_session(run, podman, path):
    """Remove the session directory PATH; None, or why it could not be. A session's overlay
    work directories (review mode's, the git directories' when its module was killed and
    the watchdog wrote the record) belong to the user namespace's root: what the user
    cannot remove is removed inside it, where rm follows no link and stays on the file
    system."""
    try:
        shutil.rmtree(path)
        return None
    except OSError:
        rc, _out, err = run(_podman.remove_tree(podman, path))
        return "podman unshare rm failed: %s" % _podman.error_line(err) if rc != 0 else None


def execute_module(module):
    params = module.params
    for name in ("days", "keep_sessions"):
        try:
            _retention.check_count(params[name], name)
        except ValueError as error:
            module.fail_json(msg=str(error))
    podman = _host_tools.module_program(module, params["executable"])
    state = params["state_dir"] or _state_layout.state_dir(os.environ)
    images_dir = _state_layout.images_dir(state)
    sessions_dir = _state_layout.sessions_dir(state)
    run = module_runner(module)
    images = json.loads(run.checked(_podman.images_json(podman)) or "[]")
    containers = json.loads(run.checked(_podman.containers_json(podman)) or "[]")
    now = time.time()
    image_verdicts = _retention.images_to_remove(
        _retention.image_tags(images), last_used(os.path.join(images_dir, _images.USED_MARKS)),
        set(container["ImageID"] for container in containers), _retention.alias_ids(images), now, params["days"])
    container_names = [name for container in containers for name in container.get("Names") or []]
    session_verdicts = _retention.sessions_to_remove(
        sessions(sessions_dir), container_names, now, params["days"], params["keep_sessions"])
    policies_dir = _state_layout.policies_dir(state)
    in_use = policies_in_use(containers, params["unit_dir"] or _gate_unit.unit_dir(os.environ),
                             sessions_dir, [session for session, why in session_verdicts if why])
    policy_verdicts = _retention.policies_to_remove(policies(policies_dir), in_use, now, params["days"])
    verdicts = dict(images=image_verdicts, sessions=session_verdicts, policies=policy_verdicts)
    removed = dict((kind, [name for name, why in found if why is None]) for kind, found in verdicts.items())
    kept = dict((kind, dict((name, why) for name, why in found if why)) for kind, found in verdicts.items())
    if not module.check_mode:
        for tag in list(removed["images"]):
            rc, _out, err = run(_podman.remove_image(podman, tag))
            if rc != 0:
                # A session created a container from it since the listing: podman refused.
                removed["images"].remove(tag)
                kept["images"][tag] = "podman refused: %s" % _podman.error_line(err)
                continue
            remove_quietly(os.path.join(images_dir, _images.USED_MARKS, _images.used_mark(tag)))
            remove_quietly(_images.build_log(_state_layout.image_logs_dir(state), tag))
        for session in list(removed["sessions"]):
            problem = remove_session(run, podman, _state_layout.session_directory(state, session))
            if problem:
                removed["sessions"].remove(session)
                kept["sessions"][session] = problem
        for name in removed["policies"]:
            shutil.rmtree(os.path.join(policies_dir, name))
    result = dict(changed=any(removed.values()), removed=removed, kept=kept, commands=run.commands)
    if module._diff:
        result["diff"] = dict(
            before="".join(line + "\n" for kind in verdicts for line in sorted(list(kept[kind]) + removed[kind])),
            after="".join(line + "\n" for kind in verdicts for line in sorted(kept[kind])))
    return result


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    module.exit_json(**execute_module(module))


if __name__ == "__main__":
    main()
