# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report: one row per host from what verify.yml's probe task returned.

Plain functions over plain data, no I/O: the fleet_report action plugin writes what
they return. One pass over the hosts, so a report costs O(hosts). argument_spec is the
fleet_report options, shared by the module (its documentation) and the action plugin.
"""

import json

REPORT_VERSION = 1
HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
UNREACHABLE = "unreachable"
FAILED = "probe failed"
# The Markdown table, in this order.
COLUMNS = ("host", "distro", "podman", "passt", "gate path", "model holds", "seccomp profile", "limits enforceable",
           "session records", "reasons")


def argument_spec():
    return dict(
        results=dict(type="dict", required=True),
        dest=dict(type="path", required=True),
        require_all=dict(type="bool", default=True),
        records=dict(type="dict"),
    )


def host_entry(host, answer):
    """HOST's report entry from ANSWER, the result its probe task registered (None when
    it has none). Every probe keeps its evidence; a host never reached or never
    measured says so in `error` instead of being left out."""
    entry = {"host": host, "status": UNREACHABLE, "error": "", "cached": False, "measured_at": "",
             "fingerprint": {}, "probes": {}, "verdict": {}, "reasons": []}
    if not answer:
        return dict(entry, error="no result: the play never reached this host")
    if answer.get("unreachable"):
        return dict(entry, error=answer.get("msg") or "unreachable")
    facts = (answer.get("ansible_facts") or {}).get("aisb_host")
    if answer.get("failed") or not facts:
        return dict(entry, status=FAILED,
                    error=answer.get("msg") or "host_capabilities returned no aisb_host facts")
    verdict = facts.get("verdict") or {}
    return dict(entry, status=HOLDS if verdict.get("model_holds") is True else DOES_NOT_HOLD,
                cached=bool(answer.get("cached")), measured_at=facts.get("measured_at", ""),
                fingerprint=facts.get("fingerprint") or {}, probes=facts.get("probes") or {},
                verdict=verdict, reasons=list(verdict.get("reasons") or []))


def records_entry(answer):
    """A host's session records as its session_records task found them (ANSWER, None when
    it has none): counts, the records that failed and why, the unsigned ones, or the error
    that kept them from being checked. A host that could not be reached has its own row
    (unreachable): its records are not checked, and verify_require_all says whether that fails."""
    if answer and answer.get("unreachable"):
        return {"checked": False, "why": answer.get("msg") or "unreachable"}
    if not answer or not answer.get("records"):
        return {"checked": True, "counts": {}, "failed_records": [], "unsigned_records": [],
                "error": (answer or {}).get("msg") or "no result: the records were not checked"}
    return {"checked": True, "counts": answer["records"], "failed_records": list(answer.get("failed_records") or []),
            "unsigned_records": list(answer.get("unsigned_records") or []), "error": ""}


def records_intact(entry):
    """Whether a host's report ENTRY has no record that failed its check (True when the
    play did not check records)."""
    records = entry["records"]
    return not records["checked"] or (not records["error"] and not records["failed_records"])


def fleet_report(answers, generated_at, records=None):
    """The report for ANSWERS, (host, registered result) pairs in inventory order, and
    RECORDS, host to its session_records result (None: records were not checked)."""
    hosts = [dict(host_entry(host, answer), records={"checked": False} if records is None else
                  records_entry(records.get(host))) for host, answer in answers]
    counts = dict((status, 0) for status in (HOLDS, DOES_NOT_HOLD, UNREACHABLE, FAILED))
    for entry in hosts:
        counts[entry["status"]] += 1
    summary = {"hosts": len(hosts), "hold": counts[HOLDS], "do_not_hold": counts[DOES_NOT_HOLD],
               "unreachable": counts[UNREACHABLE], "probe_failed": counts[FAILED]}
    if records is not None:
        summary["records_failed"] = len([entry for entry in hosts if not records_intact(entry)])
    return {
        "report_version": REPORT_VERSION,
        "generated_at": generated_at,
        "summary": summary,
        "hosts": hosts,
    }


def summary_line(summary):
    """"N hosts, N hold, N do not, N unreachable, N probe failed", and ", N with records
    failing their check" when records were checked."""
    line = "%(hosts)d hosts, %(hold)d hold, %(do_not_hold)d do not, %(unreachable)d unreachable, " \
        "%(probe_failed)d probe failed" % summary
    if "records_failed" in summary:
        line += ", %d with records failing their check" % summary["records_failed"]
    return line


def all_hold(report):
    summary = report["summary"]
    return summary["hold"] == summary["hosts"]


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def _cell(text):
    # A pipe would end the cell and a newline the row.
    return " ".join(str(text).split()).replace("|", "\\|")


def seccomp_cell(probe):
    """Whether the sandbox's seccomp profile held on a host (its probe, None on facts from
    before it existed): a need of the model, so a failure is in bold."""
    if probe is None:
        return "not measured"
    if not probe.get("measured", True):
        return "**not measured**"
    return "holds" if probe.get("ok") is True else "**no**"


def records_cell(records):
    """A host's session records: counts, any failure in bold."""
    if not records["checked"]:
        return "not checked"
    if records["error"]:
        return "**not checked**"
    counts = records["counts"]
    cell = "%d signed, %d unsigned" % (counts.get("signed", 0), counts.get("unsigned", 0))
    return cell + (", **%d failed**" % counts.get("failed", 0) if records["failed_records"] else "")


def records_reasons(records):
    """The reasons column's lines for a host's session records: each failed record and why."""
    if not records["checked"]:
        return []
    if records["error"]:
        return ["session records not checked: %s" % records["error"]]
    return ["record %s: %s" % (failed["record"], "; ".join(failed["problems"]))
            for failed in records["failed_records"]]


def table_row(entry):
    """ENTRY's cells, in COLUMNS order."""
    if entry["status"] == UNREACHABLE:
        return [entry["host"], "", "", "", "", "**%s**" % entry["status"], "", "", "", _cell(entry["error"])]
    if entry["status"] == FAILED:
        # Reached: its records were checked, or why not is a reason of its own.
        return [entry["host"], "", "", "", "", "**%s**" % entry["status"], "", "", records_cell(entry["records"]),
                "<br>".join(_cell(reason) for reason in [entry["error"]] + records_reasons(entry["records"]))]
    fingerprint, verdict = entry["fingerprint"], entry["verdict"]
    return [entry["host"], fingerprint.get("distro", ""), fingerprint.get("podman", ""),
            fingerprint.get("passt", "") or "unknown", verdict.get("gate_path", ""),
            "yes" if verdict.get("model_holds") is True else "**no**",
            seccomp_cell(entry["probes"].get("seccomp_profile")),
            # Limits are informational (the model holds without them): no alarm in bold.
            "yes" if verdict.get("limits_enforceable") is True else "no",
            records_cell(entry["records"]),
            "<br>".join(_cell(reason) for reason in entry["reasons"] + records_reasons(entry["records"]))]


def render_markdown(report):
    lines = ["# Sandbox networking model: fleet report", "",
             "Generated %s by aisb.sandbox.verify. %s." % (report["generated_at"], summary_line(report["summary"])),
             "", "| %s |" % " | ".join(COLUMNS), "|%s" % ("---|" * len(COLUMNS))]
    lines += ["| %s |" % " | ".join(table_row(entry)) for entry in report["hosts"]]
    return "\n".join(lines) + "\n"
