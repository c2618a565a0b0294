# SPDX-License-Identifier: GPL-3.0-or-later
"""The reference pages whose source is code: docs/reference-record.md, the session
record's fields (plugins/module_utils/common/_record_fields.py) and the reasons its exit
codes carry (_session_outcome.EXIT_STATUS). docs/docsite/gen_rst.py writes (or checks)
them before the guides' RST; tests/unit/test_record_fields.py holds the field table to
the code that writes records.
"""

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
MODULE_UTILS = DOCS.parent / "plugins" / "module_utils"
RECORD_PAGE = DOCS / "reference-record.md"


def load(relative):
    """A module of module_utils by its path: both sources are pure, with no imports of the
    collection, so no ansible_collections tree is needed."""
    path = MODULE_UTILS / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell(text):
    return text.replace("|", "\\|")


def record_page():
    fields = load("common/_record_fields.py").FIELDS
    exits = load("session/_session_outcome.py").EXIT_STATUS
    lines = [
        "<!-- SPDX-License-Identifier: GPL-3.0-or-later -->",
        "<!-- Made by docs/docsite/gen_rst.py (gen_reference.py) from plugins/module_utils/common/_record_fields.py"
        " and session/_session_outcome.py: edit those, then run it. -->",
        "# Reference: the session record",
        "",
        "Every session writes its record to `~/.local/state/aisb/sessions/<id>/record.json`",
        "(under `$XDG_STATE_HOME` when set), readable by its user only. `aisb show ID|last` prints it",
        "readable, `aisb ls` lists the sessions, and verify.yml checks each record's seal. The",
        "file sorts the fields by name; here they are grouped by what they say. *written* says",
        "when: at the session's start (the copy the watchdog completes when the session's",
        "process dies has these), at its end, or both.",
        "",
        "| field | written | what it holds |",
        "|---|---|---|",
    ]
    for name, when, what, see in fields:
        more = " ([more](%s))" % see if see else ""
        lines.append("| `%s` | %s | %s%s |" % (name, cell(when), cell(what), more))
    lines += [
        "",
        "## What an exit code says",
        "`reason` for an exit code that is not the harness's own:",
        "",
        "| `exit_code` | `reason` |",
        "|---|---|",
    ]
    lines += ["| %d | %s |" % (code, cell(reason)) for code, reason in sorted(exits.items())]
    lines += ["| above 128 | the sandbox was killed by signal (the code less 128) |", ""]
    return "\n".join(lines)


def pages():
    """{page's path: the text its source makes}."""
    return {RECORD_PAGE: record_page()}
