#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: team_settings
short_description: A session's settings - the workstation's team file with the developer's values on top
version_added: 0.1.0
description:
  - Playbook C(aisb.sandbox.run_agent) runs it as the first step of its first task
    (M(aisb.sandbox.session_prepare)), before anything else - every later task takes its
    settings from RV(settings). Playbook
    C(aisb.sandbox.prune) runs it first too, for the retention settings.
  - This module, on the workstation, reads the team file C(/etc/aisb/team.json)
    (M(aisb.sandbox.team_file) writes it). A file that is a link, not root's, writable by
    group or others, in such a directory, or not a valid team file is refused - the
    settings would not be the team's.
  - Its action plugin, on the controller, applies the developer's values (the options;
    each left out is not given). For a setting the team file's C(user_may_add) names,
    list entries and dict names are added to the team's, other values replace it. A value
    for any other setting is refused, naming the team file, unless it changes nothing.
  - Without a team file every given value applies and the rest take the collection's
    defaults, as before team files.
  - The developer's own settings file C(~/.config/aisb/settings.yml) (the same C(aisb_*)
    names, YAML), read by the action plugin on the controller as the user running the
    play, gives the values of the settings the options leave out; the team file filters
    them as it filters the options, and a refusal they cause names the file. The file
    is refused when it or a directory on its way from the home directory is writable by
    group or others or another user's, when it is a link out of the home directory or
    into the O(project) or the state directory (the agent writes there), when it names
    anything but those settings or uses YAML anchors, aliases or tags, and when it is
    readable by others and holds a key (C(aisb_credentials) C(value)).
  - The result is hidden (C(no_log)) when the settings carry environment values,
    provider credentials or git remotes.
author: aisb developers (@aisb)
options:
  allow:
    description: The developer's allow entries (C(aisb_allow)), as M(aisb.sandbox.gate_policy) takes them.
    type: list
    elements: raw
  connect_ports:
    description: The developer's CONNECT ports (C(aisb_connect_ports)).
    type: list
    elements: raw
  pass_environment:
    description: Names passed from the developer's shell (C(aisb_pass_environment)).
    type: list
    elements: str
  environment:
    description: Environment values (C(aisb_environment)), a dict.
    type: raw
  credentials:
    description: Provider credential entries (C(aisb_credentials)).
    type: raw
  limits:
    description: Resource limits (C(aisb_limits)) - C(memory), C(pids), C(cpus).
    type: dict
  require_limits:
    description: Refuse a host where the limits are not enforced (C(aisb_require_limits)).
    type: bool
  network:
    description: The network mode (C(aisb_network)).
    type: str
    choices: [allow, none, no-gate]
  harness:
    description: The harness, a recipe's name (C(aisb_harness)) - a built-in one or one of O(recipes).
    type: raw
  recipes:
    description: The operator's own recipes, name to recipe (C(aisb_recipes); docs/harnesses.md).
    type: raw
  harness_config:
    description: The harness configuration's directory (C(aisb_harness_config)).
    type: str
  project_mode:
    description: C(direct) or C(review) (C(aisb_project_mode)).
    type: str
    choices: [direct, review]
  allow_unenforced:
    description: Start where enforcement cannot be verified (C(aisb_allow_unenforced)).
    type: bool
  project_harness_code:
    description: Let the harness load and run the project's own code at start (C(aisb_project_harness_code)).
    type: bool
  retention_days:
    description: Days records and unused images are kept (C(aisb_retention_days)), 0 or more.
    type: int
  retention_sessions:
    description: The newest session directories kept at any age (C(aisb_retention_sessions)), 0 or more.
    type: int
  project:
    description:
      - The session's project, as C(aisb.sandbox.run_agent) is given it. A settings file
        that resolves inside it is refused when the session runs on this machine (a local
        connection).
    type: str
  git_remotes:
    description:
      - The developer's git remotes (C(aisb_git_remotes)), entries as M(aisb.sandbox.session)'s
        O(aisb.sandbox.session#module:git_remotes) takes them. Where a team file governs, a
        remote it does not list is refused unless C(user_may_add) names C(git_remotes), and an
        entry for a remote it lists is refused unless it is the team's entry as it is (its
        C(branches), C(username) and token source are the team's).
    type: raw
  token_budget:
    description:
      - The session's token budget (C(aisb_token_budget)), 1 or more. The team's value is
        the default and the ceiling - a developer's value above it is refused unless
        C(user_may_add) names C(token_budget); one at or below it applies.
    type: int
  upload_budget:
    description:
      - The bytes the sandbox may send to the gate (C(aisb_upload_budget)), 1 or more. The
        team's value is the default and the ceiling, as for O(token_budget).
    type: int
  provider_upload_budget:
    description:
      - The bytes the sandbox may send to the credential injector
        (C(aisb_provider_upload_budget)), 1 or more. The team's value is the default and the
        ceiling, as for O(token_budget).
    type: int
attributes:
  check_mode:
    description: Reads as usual; it never changes anything.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Apply the team's settings
  aisb.sandbox.team_settings:
    allow: "{{ aisb_allow | default(omit) }}"
    network: "{{ aisb_network | default(omit) }}"
  register: team
"""

RETURN = r"""
settings:
  description:
    - Every setting, by name without C(aisb_) - C(allow), C(connect_ports),
      C(pass_environment), C(environment), C(credentials), C(limits), C(require_limits),
      C(network), C(harness), C(recipes), C(harness_config), C(project_mode), C(allow_unenforced),
      C(project_harness_code), C(retention_days), C(retention_sessions), C(token_budget), C(upload_budget) and
      C(provider_upload_budget) (null - no budget - unless set), C(allowed_harnesses) (the team's list of recipe
      names a developer may choose; null - any), C(git_remotes) (the team's remotes, then those a developer
      added, each as written with its defaults filled in).
  returned: success
  type: dict
allow_origins:
  description:
    - Each allow entry of RV(settings) and where it came from - C(team), C(user) (an option's
      value) or C(settings file PATH) (the developer's settings file).
  returned: success
  type: dict
  sample: {github.com: team, pypi.org: user}
team_file:
  description: The team file applied, or null when the workstation has none.
  returned: always
  type: str
  sample: /etc/aisb/team.json
settings_file:
  description: The developer's settings file read on the controller, or null when there is none or it is empty.
  returned: success
  type: str
  sample: /home/dev/.config/aisb/settings.yml
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import refused_result
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import exit_module
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import TEAM_FILE, TeamError, read_team_file, user_spec


def argument_spec():
    """The developer's values (user_spec) and the project whose tree the settings file
    must not be in."""
    return dict(user_spec(), project=dict(type="str"))


def execute(_params, _check_mode, _run, _environ):
    """The team file as read (refused_result when it cannot be trusted)."""
    try:
        return dict(changed=False, team=read_team_file(), path=TEAM_FILE)
    except TeamError as error:
        return refused_result(error, path=TEAM_FILE)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    exit_module(module, execute(module.params, module.check_mode, None, os.environ))


if __name__ == "__main__":
    main()
