#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: session_records
short_description: Check the session records kept on a workstation
description:
  - Checks every session record kept in the state directory (C(sessions/<id>/record.json)),
    or the newest O(last), as the workstation user. A record is C(signed) when its hash chain
    over its events matches them, its HMAC-SHA256 with this workstation's key
    (C(record.key) in the state directory) matches its content, its bytes are those the
    collection wrote, and its session did not lose its enforcement and still end as if it
    held (status C(exited) where it should be C(enforcement-lost)).
  - A record written before records were sealed (schema_version 1, no MAC) is C(unsigned),
    reported as such; it does not fail the task, since whether it changed cannot be known.
  - Any other record C(failed) - edited (one byte is enough), its events reordered or
    removed, its seal taken off, signed with another workstation's key, unreadable - and
    the task fails naming each such record and why.
  - A session directory without a record (a session running now) is not checked.
  - Playbook C(aisb.sandbox.verify) runs it on every host; M(aisb.sandbox.fleet_report)
    gives each host's outcome a column.
version_added: 0.1.0
author: aisb developers (@aisb)
options:
  last:
    description: Check only the newest this many sessions' records. 0 checks every record kept.
    type: int
    default: 0
  state_dir:
    description: The state directory. Defaults to C(${XDG_STATE_HOME:-~/.local/state}/aisb).
    type: path
attributes:
  check_mode:
    description: Reads only; the same in check mode.
    support: full
  diff_mode:
    description: No diff.
    support: none
"""

EXAMPLES = r"""
- name: Check the newest 100 records
  aisb.sandbox.session_records:
    last: 100
  register: records
"""

RETURN = r"""
records:
  description: How many records were C(checked), and how many are C(signed), C(unsigned) and C(failed).
  returned: always
  type: dict
  sample: {checked: 14, signed: 12, unsigned: 1, failed: 1}
failed_records:
  description: Each record that failed, its C(record) path and its C(problems), each a phrase that follows the path and a colon.
  returned: always
  type: list
  elements: dict
  sample: [{record: /home/dev/.local/state/aisb/sessions/20261130T090000-1a2b3c4d/record.json,
            problems: ["its MAC does not match its content: it was changed after the collection wrote it"]}]
unsigned_records:
  description: The paths of the records written before records were sealed.
  returned: always
  type: list
  elements: str
key:
  description: The path of this workstation's record key.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import state_dir


def summary(key_path, checks):
    """The module's result for CHECKS (RecordChecks), failed when any record failed."""
    counts = {"checked": len(checks), "signed": 0, "unsigned": 0, "failed": 0}
    for checked in checks:
        counts[checked.state] += 1
    failed = [{"record": c.path, "problems": c.problems} for c in checks if c.state == "failed"]
    result = {"changed": False, "records": counts, "failed_records": failed, "key": key_path,
              "unsigned_records": [c.path for c in checks if c.state == "unsigned"]}
    line = "%(checked)d records: %(signed)d signed, %(unsigned)d unsigned, %(failed)d failed" % counts
    if failed:
        return dict(result, failed=True, msg="%s: %s" % (line, "; ".join(
            "%s: %s" % (entry["record"], "; ".join(entry["problems"])) for entry in failed)))
    return dict(result, msg=line)


def main():
    module = AnsibleModule(argument_spec=dict(last=dict(type="int", default=0), state_dir=dict(type="path")),
                           supports_check_mode=True)
    if module.params["last"] < 0:
        module.fail_json(msg="last is %d: it is how many of the newest records are checked, 0 or more (0: every one)"
                         % module.params["last"])
    state = module.params["state_dir"] or state_dir(dict(os.environ))
    try:
        key_path, checks = _session_record.check_kept(state, module.params["last"])
    except _record_seal.KeyFileError as error:
        module.fail_json(msg=str(error), records={}, failed_records=[], unsigned_records=[], key="")
    module.exit_json(**summary(key_path, checks))


if __name__ == "__main__":
    main()
