# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report: one row per host whatever happened to it, counts, and rendering."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.fleet import _fleet_report

FINGERPRINT = {"distro": "debian 13", "podman": "5.4.2", "passt": "passt_0.0~git20250503", "hash": "abc"}


def probed(holds, reasons=(), cached=False, gate_path="map-host-loopback"):
    """What host_capabilities registers on a host it measured."""
    return {"changed": False, "cached": cached, "ansible_facts": {"aisb_host": {
        "measured_at": "2026-11-30T09:00:00Z", "fingerprint": FINGERPRINT,
        "probes": {"pasta": {"ok": holds, "detail": "d", "evidence": {"command": ["podman"], "rc": 0}}},
        "verdict": {"model_holds": holds, "gate_path": gate_path, "limits_enforceable": False,
                    "reasons": list(reasons)}}}}


UNREACHABLE = {"unreachable": True, "changed": False, "msg": "ssh: connect to host 127.0.0.1 port 9: Connection refused"}
TIMED_OUT = {"failed": True, "msg": "Timed out after 20 second(s).", "timedout": {"period": 20}}


def report(*answers):
    return _fleet_report.fleet_report(answers, "2026-11-30T10:00:00Z")


def test_measured_hosts_keep_fingerprint_probes_and_verdict():
    entry = report(("a", probed(True, cached=True)))["hosts"][0]
    assert entry["status"] == "holds" and entry["cached"] is True and entry["error"] == ""
    assert entry["fingerprint"] == FINGERPRINT
    assert entry["probes"]["pasta"]["evidence"]["command"] == ["podman"]
    assert entry["verdict"]["gate_path"] == "map-host-loopback"


def test_every_outcome_is_a_row_and_counted():
    built = report(("holds", probed(True)), ("no-pasta", probed(False, ["pasta: missing."], gate_path="none")),
                   ("gone", UNREACHABLE), ("hung", TIMED_OUT), ("never", None),
                   ("broken", {"failed": True, "msg": "podman: not found"}))
    assert [(e["host"], e["status"]) for e in built["hosts"]] == [
        ("holds", "holds"), ("no-pasta", "does not hold"), ("gone", "unreachable"), ("hung", "probe failed"),
        ("never", "unreachable"), ("broken", "probe failed")]
    assert built["summary"] == {"hosts": 6, "hold": 1, "do_not_hold": 1, "unreachable": 2, "probe_failed": 2}
    assert [e["error"] for e in built["hosts"][2:]] == [
        UNREACHABLE["msg"], TIMED_OUT["msg"], "no result: the play never reached this host", "podman: not found"]
    assert built["hosts"][1]["reasons"] == ["pasta: missing."]
    assert not _fleet_report.all_hold(built)


def test_a_result_without_facts_is_a_failed_probe():
    entry = report(("odd", {"changed": False}))["hosts"][0]
    assert entry["status"] == "probe failed" and "no aisb_host facts" in entry["error"]


def test_all_hold_only_when_every_host_holds():
    assert _fleet_report.all_hold(report(("a", probed(True)), ("b", probed(True))))
    assert not _fleet_report.all_hold(report(("a", probed(True)), ("b", UNREACHABLE)))
    # An empty inventory proves nothing, but nothing failed to hold either.
    assert _fleet_report.all_hold(report())


def test_summary_line():
    built = report(("a", probed(True)), ("b", probed(False, ["x."])), ("c", UNREACHABLE))
    assert _fleet_report.summary_line(built["summary"]) == "3 hosts, 1 hold, 1 do not, 1 unreachable, 0 probe failed"


def test_json_round_trips():
    built = report(("a", probed(True)), ("b", UNREACHABLE))
    assert json.loads(_fleet_report.render_json(built)) == built


def test_markdown_table_one_row_per_host_with_escaped_cells():
    built = report(("ok", probed(True)),
                   ("bad", probed(False, ["pasta: a | b\nc.", "gate_path is none."], gate_path="none")),
                   ("gone", UNREACHABLE))
    lines = _fleet_report.render_markdown(built).splitlines()
    assert "3 hosts, 1 hold, 1 do not, 1 unreachable, 0 probe failed" in lines[2]
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == ("| host | distro | podman | passt | gate path | model holds | seccomp profile "
                        "| limits enforceable | session records | reasons |")
    assert table[2] == ("| ok | debian 13 | 5.4.2 | passt_0.0~git20250503 | map-host-loopback | yes | not measured "
                        "| no | not checked |  |")
    assert table[3].endswith("| **no** | not measured | no | not checked | pasta: a \\| b c.<br>gate_path is none. |")
    assert table[4] == "| gone |  |  |  |  | **unreachable** |  |  |  | %s |" % UNREACHABLE["msg"]
    assert len(table) == 5


def test_unknown_passt_version_says_so():
    answer = probed(False, ["x."])
    answer["ansible_facts"]["aisb_host"]["fingerprint"] = dict(FINGERPRINT, passt="")
    assert "| unknown |" in _fleet_report.render_markdown(report(("h", answer)))


@pytest.mark.parametrize("probe, cell", [
    ({"ok": True, "detail": "d"}, "holds"), ({"ok": False, "detail": "leak"}, "**no**"),
    ({"ok": False, "measured": False, "detail": "did not start"}, "**not measured**"), (None, "not measured")])
def test_the_seccomp_profile_column_says_whether_it_held(probe, cell):
    answer = probed(True)
    if probe is not None:
        answer["ansible_facts"]["aisb_host"]["probes"] = {"seccomp_profile": probe}
    row = _fleet_report.table_row(report(("h", answer))["hosts"][0])
    assert row[_fleet_report.COLUMNS.index("seccomp profile")] == cell


def records(signed=3, unsigned=0, failed=()):
    """What session_records registers on a host."""
    return dict({"changed": False, "records": {"checked": signed + unsigned + len(failed), "signed": signed,
                                               "unsigned": unsigned, "failed": len(failed)},
                 "failed_records": [{"record": path, "problems": ["its MAC does not match its content"]}
                                    for path in failed], "unsigned_records": ["/old"] * unsigned, "key": "/k"},
                **({"failed": True, "msg": "failed"} if failed else {}))


def test_a_host_with_an_edited_record_fails_naming_it_and_the_others_pass():
    built = _fleet_report.fleet_report(
        [("a", probed(True)), ("b", probed(True)), ("c", probed(True))], "T",
        {"a": records(), "b": records(signed=2, failed=["/s/x/record.json"]), "c": records(unsigned=1)})
    assert [_fleet_report.records_intact(entry) for entry in built["hosts"]] == [True, False, True]
    assert built["summary"]["records_failed"] == 1
    assert _fleet_report.summary_line(built["summary"]).endswith(", 1 with records failing their check")
    rows = [_fleet_report.table_row(entry) for entry in built["hosts"]]
    column = _fleet_report.COLUMNS.index("session records")
    assert [row[column] for row in rows] == ["3 signed, 0 unsigned", "2 signed, 0 unsigned, **1 failed**",
                                             "3 signed, 1 unsigned"]
    assert rows[1][-1] == "record /s/x/record.json: its MAC does not match its content"


def test_records_a_reached_host_could_not_check_fail_it():
    built = _fleet_report.fleet_report([("a", probed(True)), ("b", probed(True)), ("c", probed(True))], "T",
                                       {"a": TIMED_OUT, "b": {"failed": True, "msg": "the record key /k must be"}})
    assert [_fleet_report.records_intact(entry) for entry in built["hosts"]] == [False, False, False]
    assert _fleet_report.table_row(built["hosts"][1])[-1] == "session records not checked: the record key /k must be"
    assert _fleet_report.table_row(built["hosts"][2])[-1] == \
        "session records not checked: no result: the records were not checked"


def test_a_host_whose_probe_failed_still_shows_its_records():
    built = _fleet_report.fleet_report([("hung", TIMED_OUT)], "T", {"hung": TIMED_OUT})
    row = _fleet_report.table_row(built["hosts"][0])
    assert row[_fleet_report.COLUMNS.index("session records")] == "**not checked**"
    assert row[-1] == "%s<br>session records not checked: %s" % (TIMED_OUT["msg"], TIMED_OUT["msg"])
    assert built["summary"]["records_failed"] == 1


def test_an_unreachable_hosts_records_are_not_checked_and_its_row_says_why():
    built = _fleet_report.fleet_report([("gone", UNREACHABLE)], "T", {"gone": UNREACHABLE})
    assert _fleet_report.records_intact(built["hosts"][0]) and built["summary"]["records_failed"] == 0
    assert built["hosts"][0]["records"] == {"checked": False, "why": UNREACHABLE["msg"]}


def test_without_records_nothing_about_them_fails():
    built = report(("a", probed(True)))
    assert _fleet_report.records_intact(built["hosts"][0]) and "records_failed" not in built["summary"]
