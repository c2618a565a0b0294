#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_report
short_description: Write the fleet report of the sandbox networking model on the controller
version_added: 0.1.0
description:
  - An action that runs on the controller only. It turns what M(aisb.sandbox.host_capabilities)
    returned on every host into one report and writes it to O(dest) on the controller.
  - C(fleet-report.json) holds one object per host (status, fingerprint, every probe with
    its evidence, verdict, reasons, session records); C(fleet-report.md) one table (host,
    distro, podman, passt, gate path (how a sandbox reaches its gate), model holds (whether
    the sandbox's networking holds there), seccomp profile, limits enforceable, session
    records, reasons) and a summary line.
  - A host whose result says it was unreachable, or whose probe failed (an error, a task
    timeout), or that has no result at all, is a row of its own with the message.
  - Fails after writing the report when any host does not hold the model, unless
    O(require_all=false), and when any host's session records fail their check (an edited
    record, or records that could not be checked), whatever O(require_all) says.
  - Playbook C(aisb.sandbox.verify) runs it once, after probing every host.
author: aisb developers (@aisb)
options:
  results:
    description:
      - Host name to the result its M(aisb.sandbox.host_capabilities) task registered
        (C(null) when it has none), in the order the report lists them.
    type: dict
    required: true
  dest:
    description:
      - Directory on the controller for C(fleet-report.json) and C(fleet-report.md);
        created when missing. Relative to the controller's working directory.
    type: path
    required: true
  require_all:
    description:
      - Fail when any host does not hold the model, was unreachable or could not be probed.
    type: bool
    default: true
  records:
    description:
      - Host name to the result its M(aisb.sandbox.session_records) task registered (C(null)
        when it has none). Each host's records get a column, each failed record is named
        with why among the host's reasons. Omitted, records are not checked (the column
        says so).
    type: dict
notes:
  - Check mode builds the report and returns it but writes no file.
attributes:
  action:
    description: All of the work happens in the action plugin, on the controller.
    support: full
  check_mode:
    description: Builds the report, writes nothing.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Probe every host; a host that cannot be reached or probed is still reported
  aisb.sandbox.host_capabilities:
  register: probe
  ignore_unreachable: true
  ignore_errors: true

- name: Write the report once, on the controller
  aisb.sandbox.fleet_report:
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'probe'))) }}"
    dest: reports/fleet
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
json_path:
  description: Absolute path of the JSON report (written unless in check mode).
  returned: always
  type: str
markdown_path:
  description: Absolute path of the Markdown report (written unless in check mode).
  returned: always
  type: str
summary:
  description: >-
    Counts of C(hosts), C(hold), C(do_not_hold), C(unreachable) and C(probe_failed), and with
    O(records), C(records_failed), the hosts whose session records fail their check.
  returned: always
  type: dict
summary_line:
  description: >-
    The summary as one line, C(N hosts, N hold, N do not, N unreachable, N probe failed),
    with O(records) C(, N with records failing their check).
  returned: always
  type: str
hosts:
  description: Host name to its status (C(holds), C(does not hold), C(unreachable), C(probe failed)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.fleet._fleet_report import argument_spec


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.fail_json(msg="aisb.sandbox.fleet_report runs on the controller through its action plugin")


if __name__ == "__main__":
    main()
