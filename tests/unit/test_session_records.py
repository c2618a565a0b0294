# SPDX-License-Identifier: GPL-3.0-or-later
"""The session_records module's work over a state directory: every record kept (or the
newest N) checked, a failed one named with why, older ones reported unsigned."""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record, _state_layout
from ansible_collections.aisb.sandbox.plugins.modules.session_records import summary

IDS = ["20261201T090000-0000000a", "20261201T100000-0000000b", "20261201T110000-0000000c",
       "20261201T120000-0000000d"]


def kept(tmp_path):
    """A state directory with a signed record for each of IDS but the last (running: no
    record yet), the first from before seals."""
    state = str(tmp_path)
    key = _record_seal.workstation_key(_state_layout.record_key_path(state))
    for session_id in IDS:
        os.makedirs(_state_layout.session_directory(state, session_id))
    with open(_session_record.path(_state_layout.session_directory(state, IDS[0])), "w") as handle:
        json.dump({"session_id": IDS[0], "status": "exited"}, handle)
    for session_id in IDS[1:3]:
        _session_record.write(_state_layout.session_directory(state, session_id),
                              {"schema_version": _session_record.SCHEMA_VERSION, "session_id": session_id,
                               "status": "exited", "exit_code": 0}, key)
    return state


def test_every_record_kept_is_checked_and_counted(tmp_path):
    state = kept(tmp_path)
    key_path, checks = _session_record.check_kept(state)
    result = summary(key_path, checks)
    assert result["records"] == {"checked": 3, "signed": 2, "unsigned": 1, "failed": 0}
    assert result["unsigned_records"] == [_session_record.path(_state_layout.session_directory(state, IDS[0]))]
    assert "failed" not in result and result["msg"] == "3 records: 2 signed, 1 unsigned, 0 failed"
    assert result["key"] == os.path.join(state, "record.key")


def test_a_record_edited_by_one_byte_fails_the_task_naming_it(tmp_path):
    state = kept(tmp_path)
    edited = _session_record.path(_state_layout.session_directory(state, IDS[1]))
    with open(edited, "rb") as handle:
        data = handle.read()
    with open(edited, "wb") as handle:
        handle.write(data.replace(b'"exit_code": 0', b'"exit_code": 1'))
    result = summary(*_session_record.check_kept(state))
    assert result["failed"] is True and result["records"]["failed"] == 1
    assert result["failed_records"] == [{"record": edited, "problems": [
        "event 2 (end) does not match its chain: changed, moved or another left out before it",
        "its MAC does not match its content: it was changed after the collection wrote it"]}]
    assert edited in result["msg"] and "MAC does not match" in result["msg"]


def test_last_checks_only_the_newest(tmp_path):
    state = kept(tmp_path)
    _key_path, checks = _session_record.check_kept(state, last=2)
    # The newest two sessions: one has no record yet.
    assert [c.path for c in checks] == [_session_record.path(_state_layout.session_directory(state, IDS[2]))]


def test_no_sessions_no_checks(tmp_path):
    assert _session_record.check_kept(str(tmp_path))[1] == []
