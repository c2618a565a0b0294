# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session record, sessions/<id>/record.json: the one place it is written, read and
checked.

Every record says its schema_version (SCHEMA_VERSION, set by the session when it
prepares the record: the watchdog, a program of its own, completes that one when the
session's process dies); the session writes it whole at its end, review rewrites it with
each apply or discard, retention and review read it through read(), verify.yml checks it
through check(). Each write seals it with the workstation's key (_record_seal).
"""

import json
import os
from typing import List, NamedTuple

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal
from ansible_collections.aisb.sandbox.plugins.module_utils.common._files import write_whole
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import (
    RECORD, record_key_path, session_directory, session_ids)

# The record's layout: raised when a field changes meaning or goes away, not when one is
# added. Records written before it was kept have none and are version 1. 2: sealed (chain,
# mac), and gate.allowed holds only requests relayed (gate.answered: the gate's own answers).
SCHEMA_VERSION = 2
READ_VERSIONS = (1, 2)
RECORD_MODE = 0o600


class RecordError(ValueError):
    """A record that is not one this collection reads; the message names it."""


class RecordCheck(NamedTuple):
    """One record's check: its PATH, STATE (signed, unsigned or failed), PROBLEMS (each a
    phrase that follows its path and a colon) and NOTE (why an unsigned one cannot be checked)."""
    path: str
    state: str
    problems: List[str]
    note: str


def path(session_dir):
    """Where SESSION_DIR's record lies."""
    return os.path.join(session_dir, RECORD)


def write(session_dir, record, key):
    """Write RECORD, sealed with KEY (_record_seal.seal), into SESSION_DIR whole (a reader
    sees the old file or the new one, never part of one), readable by its user only; its path."""
    final = path(session_dir)
    write_whole(final, _record_seal.text(_record_seal.seal(record, key)), RECORD_MODE)
    return final


def read(session_dir):
    """SESSION_DIR's record; FileNotFoundError when there is none, RecordError when it is
    no JSON object or has a schema version this collection does not read."""
    with open(path(session_dir)) as handle:
        try:
            record = json.load(handle)
        except ValueError as error:
            raise RecordError("%s is not a session record: %s" % (path(session_dir), error))
    if not isinstance(record, dict):
        raise RecordError("%s is not a session record: it holds no JSON object" % path(session_dir))
    version = record.get("schema_version", 1)
    if version not in READ_VERSIONS:
        raise RecordError("%s has schema_version %r; this collection reads versions %s: read it with the "
                          "collection that wrote it" % (path(session_dir), version,
                                                        ", ".join(str(v) for v in READ_VERSIONS)))
    return record


def check(session_dir, key):
    """SESSION_DIR's record checked against the workstation's KEY (None: it has none): a
    RecordCheck; a record that cannot be read fails, naming why."""
    try:
        with open(path(session_dir), "rb") as handle:
            data = handle.read()
    except OSError as error:
        return RecordCheck(path(session_dir), "failed", ["unreadable: %s" % error.strerror], "")
    state, problems, note = _record_seal.check(data, key)
    return RecordCheck(path(session_dir), state, problems, note)


def check_kept(state, last=0):
    """(the key's path, a RecordCheck for each record kept under the state directory STATE,
    oldest first: the newest LAST sessions' when LAST > 0). A session directory without a
    record (a session running now) has no check; KeyFileError for a key file this
    collection does not use."""
    key_path = record_key_path(state)
    key = _record_seal.read_key(key_path)
    ids = session_ids(state)
    checks = [check(session_directory(state, session_id), key) for session_id in ids[-last if last > 0 else 0:]
              if os.path.lexists(path(session_directory(state, session_id)))]
    return key_path, checks
