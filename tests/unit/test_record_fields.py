# SPDX-License-Identifier: GPL-3.0-or-later
"""The session record's field table (_record_fields, the source of docs/reference-record.md)
is the code's: every field the session, its watchdog and the seal write is described, no
other, each written when the table says; every status a session ends with is named; the
page is what the table makes."""

import ast
import sys
from pathlib import Path

from ansible_collections.aisb.sandbox.plugins.module_utils.common import (
    _errors, _record_fields, _record_seal, _session_record)
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _watchdog

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "plugins" / "module_utils" / "session"
sys.path.insert(0, str(REPO / "docs" / "docsite"))
import gen_reference  # noqa: E402  pylint: disable=wrong-import-position

WHEN = dict((name, when) for name, when, _what, _see in _record_fields.FIELDS)
CONDITIONAL = set(name for name, when in WHEN.items()
                  if when not in (_record_fields.START, _record_fields.END, _record_fields.START_END,
                                  _record_fields.SEAL))


def function(path, name):
    return next(node for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.FunctionDef) and node.name == name)


def keys(node):
    return set(key.value for key in node.keys if isinstance(key, ast.Constant))


def record_key(target):
    """The top-level key a subscript assignment to record[...] (or deeper) writes, else None."""
    while isinstance(target, ast.Subscript):
        if isinstance(target.value, ast.Name) and target.value.id == "record":
            return target.slice.value if isinstance(target.slice, ast.Constant) else None
        target = target.value
    return None


def writes(tree):
    """(keys of the dict literals assigned to record, keys written to record after it:
    record.update({...}), record[KEY]... = ..., dict(record, KEY=...))."""
    first, later = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "record" and isinstance(node.value, ast.Dict):
                    first |= keys(node.value)
                elif record_key(target):
                    later.add(record_key(target))
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and \
                node.args[0].id == "record" and isinstance(node.func, ast.Name) and node.func.id == "dict":
            later |= set(keyword.arg for keyword in node.keywords)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == "record" and \
                node.args and isinstance(node.args[0], ast.Dict):
            later |= keys(node.args[0])
    return first, later


def test_the_table_names_each_field_once_with_a_sentence():
    names = [name for name, _when, _what, _see in _record_fields.FIELDS]
    assert len(names) == len(set(names))
    assert all(what.endswith(".") and when for _name, when, what, _see in _record_fields.FIELDS)
    version = next(what for name, _when, what, _see in _record_fields.FIELDS if name == "schema_version")
    assert version.startswith("The record's layout: %d." % _session_record.SCHEMA_VERSION)


def test_every_field_the_session_writes_is_described_when_it_is_written():
    start, end = writes(function(SESSION / "_session.py", "execute"))
    assert start == set(name for name, when in WHEN.items() if when in (_record_fields.START, _record_fields.START_END))
    assert set(name for name, when in WHEN.items() if when == _record_fields.END) <= end - start
    assert set(name for name, when in WHEN.items() if when == _record_fields.START_END) <= end & start
    assert end - start <= set(WHEN)


def test_the_watchdogs_record_and_the_seal_write_only_described_fields():
    fallback, end = writes(ast.parse((SESSION / "_watchdog.py").read_text()))
    assert fallback <= set(name for name, when in WHEN.items() if when == _record_fields.START)
    assert end - {"seal_error"} <= set(name for name, when in WHEN.items() if when == _record_fields.END)
    assert set(name for name, when in WHEN.items() if when == _record_fields.SEAL) == set(_record_seal.SEAL_FIELDS)
    _session_start, session_end = writes(function(SESSION / "_session.py", "execute"))
    assert CONDITIONAL == {"record_error", "seal_error"} and CONDITIONAL <= session_end | end


def test_every_status_a_session_ends_with_is_named():
    statuses = {_errors.TaskError.status, _watchdog.STATUS}
    for path in SESSION.glob("*.py"):
        statuses |= set(node.args[0].value for node in ast.walk(ast.parse(path.read_text()))
                        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Outcome"
                        and node.args and isinstance(node.args[0], ast.Constant))
    described = next(what for name, _when, what, _see in _record_fields.FIELDS if name == "status")
    assert len(statuses) >= 7 and [status for status in sorted(statuses) if "`%s`" % status not in described] == []


def test_the_reference_page_is_what_its_sources_make():
    stale = [str(page) for page, text in gen_reference.pages().items() if page.read_text(encoding="utf-8") != text]
    assert stale == [], "run python3 docs/docsite/gen_rst.py"
    assert "| `gate` | end |" in gen_reference.record_page()
