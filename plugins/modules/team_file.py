#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: team_file
short_description: Write the team's session settings to the workstation's team file
version_added: 0.1.0
description:
  - Writes the settings every session on this workstation starts from, and which of them
    a developer may add to, to C(/etc/aisb/team.json) (root's, mode 0644, in
    C(/etc/aisb), root's, mode 0755). Playbook C(aisb.sandbox.run_agent) applies it with no inventory
    and no extra vars (M(aisb.sandbox.team_settings)).
  - Validates first, with the parser the sessions read the file with; an invalid setting
    fails naming it and what is allowed, and nothing is written. The new file is written
    beside the old one and renamed over it, then read back through that parser (owner,
    mode, content) before the module reports success.
  - Must run as root (C(become)). Does not remove a team file; C(rm /etc/aisb/team.json)
    as root does.
author: aisb developers (@aisb)
options:
  team:
    description:
      - The team's session settings, as provision.yml's C(aisb_team) holds them - a dict
        with C(settings) and C(user_may_add) (both optional); any other key fails.
      - C(settings) - the team's values, by name without C(aisb_). The variables of
        C(run_agent.yml) - C(allow), C(connect_ports), C(pass_environment),
        C(environment), C(credentials), C(limits), C(require_limits), C(network),
        C(harness) (a recipe's name), C(recipes) (the team's own recipes, name to recipe,
        as docs/harnesses.md has them), C(harness_config), C(project_mode), C(allow_unenforced),
        C(project_harness_code), C(token_budget) (a whole number of tokens, 1 or more),
        C(upload_budget) and C(provider_upload_budget) (whole numbers of bytes, 1 or more),
        C(git_remotes) (the remotes the agent pushes its own branches to through the
        session's git broker, entries as M(aisb.sandbox.session)'s
        O(aisb.sandbox.session#module:git_remotes) takes them); and of
        C(prune.yml) - C(retention_days), C(retention_sessions) (whole numbers, 0 or
        more). Each is checked as the session or M(aisb.sandbox.retention) checks it. A
        setting left out is the collection's default (C(allow) none, C(connect_ports)
        443, C(network) allow, C(harness) pi, ..., C(retention_days) 30,
        C(retention_sessions) 20). C(allowed_harnesses) - the recipe names a developer
        may choose with C(aisb_harness) when C(user_may_add) names C(harness) (a list,
        each a built-in recipe or one of C(recipes); the team's C(harness) among them;
        left out - any); a team-only setting, never in C(user_may_add). C(credentials) entries take their key and
        C(git_remotes) entries their token C(from_file) (a file on the workstation, the
        developer's alone) or C(from_environment), never C(value) - every local user can
        read the team file.
      - C(user_may_add) - the settings a developer may add to. C(allow),
        C(connect_ports), C(pass_environment), C(credentials) and C(git_remotes) - the
        developer's entries go after the team's (a git remote the team lists cannot be
        changed - not its C(branches), C(username) or token source); C(environment), C(limits) and C(recipes) - the developer's names go
        beside the team's (a name the team set cannot be changed); any other setting -
        the developer's value replaces the team's. A developer's value for a setting not
        named here is refused, naming the team file, unless it changes nothing (or, for
        C(token_budget), C(upload_budget) and C(provider_upload_budget), unless it is at most
        the team's - the team's is the ceiling).
    type: dict
    required: true
attributes:
  check_mode:
    description: Validates and reports whether the file would change; writes nothing.
    support: full
  diff_mode:
    description: The old and new file text.
    support: full
"""

EXAMPLES = r"""
- name: Install the team's session settings
  aisb.sandbox.team_file:
    team:
      settings:
        allow: [github.com, .npmjs.org]
        network: allow
        limits: {memory: 4g, pids: 1024}
      user_may_add: [allow]
  become: true
"""

RETURN = r"""
path:
  description: The team file.
  returned: always
  type: str
  sample: /etc/aisb/team.json
team:
  description: The team file's content as the sessions read it (C(settings), C(user_may_add)).
  returned: success
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common._files import write_whole
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import (
    TEAM_FILE, TeamError, read_team_file, render_team, root_only)

DIRECTORY_MODE = 0o755
FILE_MODE = 0o644


def argspec():
    return dict(
        team=dict(type="dict", required=True),
    )


def current_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def sound(path):
    """Whether PATH and its directory are root's and writable by root alone."""
    try:
        return all(root_only(os.lstat(one)) for one in (path, os.path.dirname(path)))
    except FileNotFoundError:
        return False


def write(path, text):
    """TEXT to PATH, root's, FILE_MODE: written beside it, then renamed over it."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, DIRECTORY_MODE)
    os.chown(directory, 0, 0)
    os.chmod(directory, DIRECTORY_MODE)
    write_whole(path, text, FILE_MODE, owner=(0, 0))


def execute_module(module):
    params = module.params
    result = dict(path=TEAM_FILE, changed=False)
    try:
        text = render_team(params["team"])
    except TeamError as error:
        module.fail_json(msg=str(error), **result)
    old = current_text(TEAM_FILE)
    # Same text with another owner or mode is written again.
    result["changed"] = old != text or not sound(TEAM_FILE)
    if module._diff:
        result["diff"] = dict(before=old, after=text, before_header=TEAM_FILE, after_header=TEAM_FILE)
    if module.check_mode:
        module.exit_json(**result)
    if os.geteuid() != 0:
        module.fail_json(msg="the team file %s is root's: run this task with become" % TEAM_FILE, **result)
    try:
        if result["changed"]:
            write(TEAM_FILE, text)
        # As the sessions will read it: owner, mode, directory and content.
        result["team"] = read_team_file()
    except (OSError, TeamError) as error:
        module.fail_json(msg="the team file %s could not be written: %s" % (TEAM_FILE, error), **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(argument_spec=argspec(), supports_check_mode=True)
    execute_module(module)


if __name__ == "__main__":
    main()
