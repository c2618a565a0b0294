# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session record, sessions/<id>/record.json: the one place it is written and read.

Every record says its schema_version (SCHEMA_VERSION, set by the session when it
prepares the record: the watchdog, a program of its own, completes that one when the
session's process dies); the session writes it whole at its end, review rewrites it with
each apply or discard, retention and review read it through read().
"""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common._files import write_whole
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import RECORD

# The record's layout: raised when a field changes meaning or goes away, not when one is
# added. Records written before it was kept have none and are version 1.
SCHEMA_VERSION = 1
RECORD_MODE = 0o600


class RecordError(ValueError):
    """A record that is not one this collection reads; the message names it."""


def path(session_dir):
    """Where SESSION_DIR's record lies."""
    return os.path.join(session_dir, RECORD)


def write(session_dir, record):
    """Write RECORD into SESSION_DIR whole (a reader sees the old file or the new one, never
    part of one), readable by its user only; its path."""
    final = path(session_dir)
    write_whole(final, json.dumps(record, indent=2, sort_keys=True) + "\n", RECORD_MODE)
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
    if version != SCHEMA_VERSION:
        raise RecordError("%s has schema_version %r; this collection reads version %d: read it with the "
                          "collection that wrote it" % (path(session_dir), version, SCHEMA_VERSION))
    return record
