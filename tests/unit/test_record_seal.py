# SPDX-License-Identifier: GPL-3.0-or-later
"""A session record's seal, from the attacker's side: whoever edits a record without the
workstation's key (one byte anywhere, events reordered or removed, the seal itself taken
off) is caught, and a record from before seals is reported unsigned, not refused."""

import json
import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record

KEY = b"k" * 32


def record():
    return {"schema_version": _session_record.SCHEMA_VERSION, "session_id": "20261130T090000-abcdef01",
            "started_at": "2026-11-30T09:00:00Z", "command": ["pi", "-p", "fix it"], "network": "allow",
            "gate": {"allowed": [{"time": 1.5, "method": "CONNECT", "url": "a.test:443", "status": "TCP_TUNNEL/200",
                                  "dst": "198.18.0.10"},
                                 {"time": 2.5, "method": "GET", "url": "http://a.test/", "status": "TCP_MISS/200",
                                  "dst": "198.18.0.10"}],
                     "denied": [{"time": 3.5, "method": "CONNECT", "url": "evil.test:443",
                                 "status": "TCP_DENIED/403", "dst": "-"}],
                     "answered": [], "hints": []},
            "enforcement_watch": {"watched": True, "lost": None, "readings": 12},
            "ended_at": "2026-11-30T09:01:00Z", "exit_code": 0, "status": "exited", "reason": ""}


def written(tmp_path, value=None, key=KEY):
    _session_record.write(str(tmp_path), value or record(), key)
    return tmp_path / "record.json"


def checked(tmp_path, key=KEY):
    return _session_record.check(str(tmp_path), key)


def test_a_record_as_written_is_signed_and_intact(tmp_path):
    written(tmp_path)
    result = checked(tmp_path)
    assert (result.state, result.problems) == ("signed", [])
    sealed = _session_record.read(str(tmp_path))
    assert sealed["mac"]["algorithm"] == "HMAC-SHA256"
    assert [kind for kind, _hash in sealed["chain"]["events"]] == [
        "start", "gate allowed", "gate allowed", "gate denied", "finding enforcement_watch", "end"]


def test_every_one_byte_edit_anywhere_in_the_file_is_caught(tmp_path):
    """Each byte of the file in turn changed (to another printable byte that keeps the
    file's length): none of them passes as signed."""
    path = written(tmp_path)
    original = path.read_bytes()
    passed = []
    for at in range(len(original)):
        for replacement in (b"0", b" "):
            if original[at:at + 1] == replacement:
                continue
            path.write_bytes(original[:at] + replacement + original[at + 1:])
            result = checked(tmp_path)
            if result.state != "failed" or not result.problems:
                passed.append((at, replacement))
    assert passed == []


def test_a_value_changed_names_what_no_longer_matches(tmp_path):
    path = written(tmp_path)
    value = json.loads(path.read_text())
    value["gate"]["denied"][0]["url"] = "evil.tesu:443"
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    result = checked(tmp_path)
    assert result.state == "failed"
    assert any("event 4 (gate denied)" in problem for problem in result.problems), result.problems
    assert any("MAC" in problem for problem in result.problems), result.problems


def test_events_reordered_are_caught(tmp_path):
    path = written(tmp_path)
    value = json.loads(path.read_text())
    value["gate"]["allowed"].reverse()
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    result = checked(tmp_path)
    assert result.state == "failed" and "event 2 (gate allowed)" in " ".join(result.problems)


def test_reordering_the_chain_with_its_events_is_caught_by_the_mac(tmp_path):
    """Whoever has no key can recompute the chain for a reordered record: the MAC still fails."""
    path = written(tmp_path)
    value = json.loads(path.read_text())
    value["gate"]["allowed"].reverse()
    value["chain"] = _record_seal.chain(_record_seal.events(value))
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    result = checked(tmp_path)
    assert result.state == "failed" and result.problems == [
        "its MAC does not match its content: it was changed after the collection wrote it"]


def test_an_event_removed_is_caught(tmp_path):
    path = written(tmp_path)
    value = json.loads(path.read_text())
    del value["gate"]["denied"][0]
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    result = checked(tmp_path)
    assert result.state == "failed"
    assert any("5 events where its chain has 6" in problem for problem in result.problems), result.problems


def test_a_seal_taken_off_a_current_record_is_not_unsigned_but_failed(tmp_path):
    path = written(tmp_path)
    value = json.loads(path.read_text())
    del value["mac"], value["chain"]
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    result = checked(tmp_path)
    assert result.state == "failed" and result.problems[0].startswith("no MAC, which every record of schema_version 2 has")


def test_a_record_from_before_seals_is_reported_unsigned(tmp_path):
    (tmp_path / "record.json").write_text(json.dumps({"session_id": "s", "status": "exited", "gate": None}))
    result = checked(tmp_path)
    assert result.state == "unsigned" and result.problems == []
    assert "schema_version 1" in result.note and "cannot be checked" in result.note


def test_another_workstations_key_is_named(tmp_path):
    written(tmp_path, key=b"o" * 32)
    result = checked(tmp_path)
    assert result.state == "failed" and "signed with another key" in result.problems[0]


def test_no_key_on_the_host_fails_a_signed_record(tmp_path):
    written(tmp_path)
    result = checked(tmp_path, key=None)
    assert result.state == "failed" and "no record key" in result.problems[0]


def test_a_record_that_is_not_json_fails_naming_it(tmp_path):
    (tmp_path / "record.json").write_text("{not json")
    result = checked(tmp_path)
    assert result.state == "failed" and "not a session record" in result.problems[0]


def test_a_lost_enforcement_the_record_does_not_say_fails_even_when_signed(tmp_path):
    """A session whose watch saw its table change must have ended enforcement-lost (77)."""
    value = record()
    value["enforcement_watch"]["lost"] = {"what": "the table changed", "at_text": "09:00:30"}
    written(tmp_path, value)
    result = checked(tmp_path)
    assert result.state == "failed"
    assert result.problems == ["its enforcement watch saw enforcement lost (the table changed at 09:00:30) "
                               "but its status is exited, exit 0"]
    written(tmp_path, dict(value, status="enforcement-lost", exit_code=77))
    assert checked(tmp_path).problems == []
    # Ended for a reason of its own, which its status names: the watch's helpers ended with it.
    written(tmp_path, dict(value, status="interrupted", exit_code=None))
    assert checked(tmp_path).problems == []


def test_the_key_is_made_once_private_and_read_back(tmp_path):
    path = str(tmp_path / "state" / "record.key")
    key = _record_seal.workstation_key(path)
    assert len(key) == _record_seal.KEY_BYTES and _record_seal.workstation_key(path) == key
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert _record_seal.read_key(path) == key
    assert _record_seal.read_key(str(tmp_path / "none")) is None


def test_a_key_file_others_may_read_is_refused(tmp_path):
    path = tmp_path / "record.key"
    path.write_bytes(KEY)
    os.chmod(str(path), 0o644)
    with pytest.raises(_record_seal.KeyFileError) as raised:
        _record_seal.read_key(str(path))
    assert str(path) in str(raised.value) and "0600" in str(raised.value)


def test_an_older_record_rewritten_stays_unsigned(tmp_path):
    """Review rewrites a record with its history: sealing a version-1 record would vouch
    for content this collection never checked."""
    written(tmp_path, {"session_id": "s", "status": "exited"})
    assert "mac" not in _session_record.read(str(tmp_path)) and checked(tmp_path).state == "unsigned"
