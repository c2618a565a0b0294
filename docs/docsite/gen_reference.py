# SPDX-License-Identifier: GPL-3.0-or-later
"""The reference pages whose source is code. docs/reference-record.md: the session
record's fields (plugins/module_utils/common/_record_fields.py) and the reasons its exit
codes carry (_session_outcome.EXIT_STATUS). docs/reference-refusals.md: the status a
task's error gives (_errors), why a host's network check fails and the fix
(_host_verdict.MEANS, FIXES and its sentences), why the gate refused a ClientHello
(_squid.SNI_REFUSALS) and why it answered a request itself (_squid.ANSWER_REASONS).
docs/docsite/gen_rst.py writes (or checks) them before the guides' RST;
tests/unit/test_record_fields.py holds the field table to the code that writes records,
test_host_verdict.py and test_sni_helper.py the refusal tables to theirs.
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
RECORD_PAGE = DOCS / "reference-record.md"
REFUSALS_PAGE = DOCS / "reference-refusals.md"
# The checkout importable as ansible_collections.aisb.sandbox, as the unit tests make it.
sys.path.insert(0, str(DOCS.parent / "tests"))
import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

from ansible_collections.aisb.sandbox.plugins.module_utils.common import (  # noqa: E402  pylint: disable=C0413
    _errors, _record_fields)
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import (  # noqa: E402  pylint: disable=C0413
    _host_probes, _host_verdict)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _squid  # noqa: E402  pylint: disable=C0413
from ansible_collections.aisb.sandbox.plugins.module_utils.session import (  # noqa: E402  pylint: disable=C0413
    _session_outcome)


def cell(text):
    return text.replace("|", "\\|")


def record_page():
    fields = _record_fields.FIELDS
    exits = _session_outcome.EXIT_STATUS
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


def refusals_page():
    verdict = _host_verdict
    reasons = [name for name in _host_probes.ORDER if name in verdict.FIXES]
    lines = [
        "<!-- SPDX-License-Identifier: GPL-3.0-or-later -->",
        "<!-- Made by docs/docsite/gen_rst.py (gen_reference.py) from plugins/module_utils/host_facts/_host_verdict.py"
        " and policy/_squid.py: edit those, then run it. -->",
        "# Reference: refusals and their fixes",
        "",
        "A refusal ends a task before anything starts, or ends one request, and says why. Most",
        "refusals are of an input, and their message names the input and what is allowed. This",
        "page lists the refusals whose reasons are a table in the code: why a host's network",
        "check fails, why the gate refused a ClientHello, and why it answered a request itself.",
        "How a session ended (its `status`, and the `reason` of its exit code) is in",
        "[reference-record.md](reference-record.md#what-an-exit-code-says).",
        "",
        "## A task that refuses",
        "A task that ends with an error says why in its `msg`, and its result's `status` says",
        "which kind of error it was:",
        "",
        "| `status` | the error |",
        "|---|---|",
    ]
    lines += ["| `%s` | %s |" % (error.status, cell(" ".join(error.__doc__.split())))
              for error in (_errors.RefusedError, _errors.SessionError)]
    lines += [
        "",
        "## A host whose network check failed",
        "A session refuses to start on a host whose network check (the host_capabilities",
        "module, run by provision.yml and verify.yml) did not find the sandbox's networking",
        "model holding: `aisb_host.verdict.model_holds` false (network no-gate needs",
        "`verdict.no_gate_holds`). `verdict.reasons` says why, one sentence per reason: the",
        "probe's name, what it measured, and the fix. The fleet report",
        "([fleet.md](fleet.md#reading-the-report)) carries the same sentences.",
        "",
        "| reason starts with | means | fix |",
        "|---|---|---|",
    ]
    lines += ["| `%s:` | %s | %s |" % (name, cell(verdict.MEANS[name]), cell(verdict.FIXES[name])) for name in reasons]
    lines += [
        "| `tcp_forward_sandbox:` | %s | %s |" % (
            cell(verdict.MEANS["tcp_forward_sandbox"]), cell(verdict.TCP_FORWARD_FIX)),
        "",
        "The verdict's other reasons, as it words them (PROBES: the probes' names):",
        "",
        "- `%s` On a host where network no-gate holds, it adds: `%s`" % (
            verdict.NO_GATE_PATH, verdict.NO_GATE_HOLDS.strip()),
        "- `%s`" % (verdict.PLAIN_PASTA_ONLY % "PROBES"),
        "- `%s` Probes that could not run (no pasta, no probe image, a hung container) share one"
        " sentence: fix the cause, and the rest follow." % (verdict.NOT_MEASURED % ("PROBES", "not measured: CAUSE")),
        "",
        "Informational probes (%s) are measured for the record and the fleet report but never"
        " make a host fail by themselves: they are in `verdict.notes` (`tcp_forward_sandbox` is a reason where"
        " the gate path is tcp-forward)." % ", ".join("`%s`" % name for name in verdict.INFORMATIONAL),
        "",
        "## A ClientHello the gate refused",
        "The gate reads the first bytes of every tunnel to a CONNECT port and opens it only for",
        "one TLS ClientHello naming the CONNECT host, and nothing else",
        "([security.md](security.md#tls-consistency-without-interception)). Any other first",
        "bytes are refused: the CONNECT was answered 200, but no server is contacted. The",
        "record's `gate.denied` entry for it, and the gate's access log (`reason=`), say why:",
        "",
        "| reason | the ClientHello |",
        "|---|---|",
    ]
    lines += ["| `%s` | %s |" % (reason, cell(what)) for reason, what in _squid.SNI_REFUSALS.items()]
    lines += [
        "",
        "## A request the gate answered itself",
        "The record's `gate.answered` holds the requests the gate answered without contacting",
        "any server, each with its `reason`, by the status it answered with:",
        "",
        "| status | `reason` |",
        "|---|---|",
    ]
    lines += ["| %s | %s |" % (code, cell(reason)) for code, reason in sorted(_squid.ANSWER_REASONS.items())]
    lines += ["| any other | %s |" % cell(_squid.ANSWER_REASON), ""]
    return "\n".join(lines)


def pages():
    """{page's path: the text its source makes}."""
    return {RECORD_PAGE: record_page(), REFUSALS_PAGE: refusals_page()}
