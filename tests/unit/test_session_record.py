# SPDX-License-Identifier: GPL-3.0-or-later
"""The session record's one writer and reader: whole files, readable by their user only,
with a schema version a reader checks."""

import json
import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _session_record

KEY = b"k" * 32


def test_a_written_record_reads_back_whole_and_private(tmp_path):
    record = {"schema_version": _session_record.SCHEMA_VERSION, "session_id": "s", "status": "exited"}
    path = _session_record.write(str(tmp_path), record, KEY)
    assert path == str(tmp_path / "record.json") == _session_record.path(str(tmp_path))
    assert dict((k, v) for k, v in _session_record.read(str(tmp_path)).items() if k not in ("chain", "mac")) == record
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ["record.json"]
    # A rewrite (review's history) replaces it.
    _session_record.write(str(tmp_path), dict(record, status="interrupted"), KEY)
    assert _session_record.read(str(tmp_path))["status"] == "interrupted"


def test_a_record_from_before_versions_reads_as_version_1(tmp_path):
    (tmp_path / "record.json").write_text(json.dumps({"session_id": "s"}))
    assert _session_record.read(str(tmp_path)) == {"session_id": "s"}


@pytest.mark.parametrize("content, needle", [
    (json.dumps({"schema_version": 3}), "has schema_version 3; this collection reads versions 1, 2"),
    (json.dumps({"schema_version": "1"}), "has schema_version '1'"),
    (json.dumps(["a list"]), "is not a session record: it holds no JSON object"),
    ("{not json", "is not a session record: "),
])
def test_a_record_this_collection_does_not_read_is_refused_naming_it(tmp_path, content, needle):
    (tmp_path / "record.json").write_text(content)
    with pytest.raises(_session_record.RecordError) as raised:
        _session_record.read(str(tmp_path))
    assert str(raised.value).startswith(str(tmp_path / "record.json")) and needle in str(raised.value)


def test_no_record_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        _session_record.read(str(tmp_path))
