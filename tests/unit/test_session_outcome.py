# SPDX-License-Identifier: GPL-3.0-or-later
"""How a finished session is reported: its one outcome (what ended it, in order), exit
codes that are not the harness's own, and a record that could not be written."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.session._session import gate_report, task_result, upload_report
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_outcome import (
    Outcome, Seen, decide, enforcement_lost_reason, exit_reason)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_admission import podman_directories


def record(**overrides):
    base = {"session_id": "sid", "exit_code": 0, "status": "exited", "reason": "", "record": "/s/record.json",
            "transcript": "/s/transcript.log", "commands": [], "gate": {"allowed": [], "denied": [], "answered": [], "hints": []}}
    base.update(overrides)
    return base


def test_exit_codes_of_podman_and_signals_are_named():
    assert exit_reason(0) == "" and exit_reason(3) == ""
    assert exit_reason(77) == "enforcement could not be installed or verified"
    assert exit_reason(79) == "the gate never answered the sandbox"
    assert exit_reason(125) == "podman could not run the sandbox"
    assert exit_reason(137) == "the sandbox was killed by signal 9"
    assert exit_reason(None) == ""


LOST = {"what": "the table changed", "at": 1.0, "at_text": "T", "last_good_at": 0.5, "removed": ["x"], "added": []}
EXITED = Outcome("exited", 0, "")


@pytest.mark.parametrize("ended, seen, expected", [
    # The harness's own exit, and podman's codes named.
    (EXITED, Seen(), EXITED),
    (Outcome("exited", 137, ""), Seen(), Outcome("exited", 137, "the sandbox was killed by signal 9")),
    # A lost or unreported enforcement outranks the harness's clean exit and everything else.
    (EXITED, Seen(enforcement_lost=LOST, gate_died=True, controller_lost="stdout closed"),
     Outcome("enforcement-lost", 77, "the table changed at T: -x; the sandbox was stopped")),
    (Outcome("interrupted", None, "ansible-playbook received SIGINT"), Seen(unreported="never reported"),
     Outcome("enforcement-unreported", 77, "never reported")),
    # The gate's failures keep the sandbox's rc.
    (Outcome("exited", 79, ""), Seen(gate_error="the gate did not start: x", gate_died=True),
     Outcome("failed", 79, "the gate did not start: x")),
    (Outcome("exited", 143, ""), Seen(gate_died=True),
     Outcome("gate-died", 143, "the gate exited while the sandbox ran; the sandbox was stopped")),
    # An interruption or a failure stands, controller or not; a controller lost only
    # changes a sandbox that exited.
    (Outcome("failed", None, "podman failed"), Seen(controller_lost="stdout closed"),
     Outcome("failed", None, "podman failed")),
    (Outcome("exited", 143, ""), Seen(controller_lost="stdout closed"),
     Outcome("controller-lost", 143, "stdout closed; the sandbox was stopped")),
])
def test_one_outcome_says_what_ended_the_session(ended, seen, expected):
    assert decide(ended, seen) == expected


def test_a_clean_exit_succeeds():
    result = task_result(record())
    assert result["changed"] is True and "failed" not in result


def test_a_record_that_could_not_be_written_fails_the_task_and_says_so():
    result = task_result(record(record=None, record_error="the record could not be written to /s/record.json: "
                                                          "No space left on device"))
    assert result["failed"] is True
    assert result["msg"] == "the record could not be written to /s/record.json: No space left on device"


def test_both_problems_are_reported():
    result = task_result(record(exit_code=137, reason="the sandbox was killed by signal 9", record=None,
                                record_error="the record could not be written to /s/record.json: Disk quota exceeded"))
    assert result["msg"] == ("session sid exited 137: the sandbox was killed by signal 9; "
                             "the record could not be written to /s/record.json: Disk quota exceeded")


def test_a_lost_enforcement_says_what_changed_and_when():
    lost = {"what": "the table changed", "at": 1796069616.5, "at_text": "2026-11-30T20:13:36Z", "last_good_at": 1.0,
            "removed": ["table inet aisb [handle 1]"], "added": ["table inet aisb [handle 7]"]}
    assert enforcement_lost_reason(lost) == ("the table changed at 2026-11-30T20:13:36Z: -table inet aisb [handle 1]; "
                                             "+table inet aisb [handle 7]; the sandbox was stopped")
    many = dict(lost, removed=["r%d" % i for i in range(8)], added=[])
    assert enforcement_lost_reason(many).endswith("-r5; ...; the sandbox was stopped")
    unread = dict(lost, what="the table cannot be read: no good reading for 4.0 s: nft exited 1", removed=[],
                  added=[])
    assert enforcement_lost_reason(unread) == ("the table cannot be read: no good reading for 4.0 s: nft exited 1 at "
                                               "2026-11-30T20:13:36Z; the sandbox was stopped")


def test_enforcement_lost_fails_the_task_with_its_reason():
    reason = "the table changed at T: -x; the sandbox was stopped"
    result = task_result(record(exit_code=77, status="enforcement-lost", reason=reason))
    assert result["failed"] is True and result["rc"] == 77 and result["status"] == "enforcement-lost"
    assert result["msg"] == "session sid enforcement-lost: the table changed at T: -x; the sandbox was stopped"


def test_podmans_own_directories_follow_the_xdg_variables():
    # A project holding podman's storage or containers.conf would let the agent write
    # what the host's podman reads.
    assert podman_directories({}, "/home/dev") == ["/home/dev/.local/share/containers", "/home/dev/.config/containers"]
    moved = podman_directories({"XDG_DATA_HOME": "/home/dev/data", "XDG_CONFIG_HOME": "/home/dev/conf",
                                "XDG_RUNTIME_DIR": "/run/user/1000"}, "/home/dev")
    assert moved == ["/home/dev/data/containers", "/home/dev/conf/containers", "/run/user/1000"]


def test_a_refused_connect_to_an_allowed_name_names_its_fix_in_the_record_and_the_task():
    """A Node harness on http://models.test/ sends CONNECT models.test:80: the record and
    the failed task say which allow entry would relay it; a refusal of an unlisted name,
    a CONNECT port or a host:port entry's own port gets no hint."""
    policy = parse_policy(["models.test", ".wild.test", "git.test:2222"])
    log = "\n".join("1796092404.336 session=s client=127.0.0.1 NONE_NONE/403 CONNECT %s dst=- hier=HIER_NONE "
                    "tls=splice sni=-" % target
                    for target in ("models.test:80", "a.wild.test:8000", "models.test:80", "unlisted.test:80",
                                   "models.test:443", "git.test:2222"))
    gate = gate_report(policy, log)
    assert len(gate["denied"]) == 6 and gate["canary_connects"] == 0
    assert [hint.split(":")[0] for hint in gate["hints"]] == [
        "the gate refused CONNECT a.wild.test", "the gate refused CONNECT models.test"]
    assert "add 'models.test:80' to aisb_allow" in gate["hints"][1]
    assert "Node harnesses (pi) tunnel http:// URLs with CONNECT" in gate["hints"][1]
    result = task_result(record(exit_code=1, gate=gate))
    assert result["failed"] is True and result["gate"]["hints"] == gate["hints"]
    assert result["msg"].startswith("session sid exited 1; the gate refused CONNECT a.wild.test:8000")
    assert "add 'a.wild.test:8000' to aisb_allow" in result["msg"]
    assert gate_report(parse_policy(["models.test:80"]), log)["hints"] == []
    # A private entry's name under an allowed wildcard: its other ports stay closed.
    private = gate_report(parse_policy([".wild.test", "a.wild.test:9000=10.0.0.5"]), log)
    assert private["hints"] == []


def test_a_spent_token_budget_is_named_in_the_result():
    figures = {"input": 10000, "output": 40000, "requests": 2, "unmetered": 0, "budget": 50000}
    spent = {"api.anthropic.com": dict(figures, exceeded=True), "models.test:9443": dict(figures, exceeded=True,
                                                                                         input=0, output=7)}
    assert task_result(record(tokens=spent))["token_budget"] == (
        "token budget 50000 spent (api.anthropic.com 50000, models.test:9443 7); requests after it were refused (429)")
    left = dict((name, dict(value, exceeded=False)) for name, value in spent.items())
    assert task_result(record(tokens=left))["token_budget"] == "" == task_result(record(tokens=None))["token_budget"]


def test_the_canaries_connects_are_counted_apart_from_the_sandboxs():
    log = "\n".join("1796092404.336 session=s client=127.0.0.1 TCP_TUNNEL/403 CONNECT %s dst=- hier=HIER_NONE "
                    "tls=splice sni=-" % target
                    for target in ("aisb-canary.invalid:443", "unlisted.test:443", "aisb-canary.invalid:443"))
    gate = gate_report(parse_policy(["models.test"]), log)
    assert gate["canary_connects"] == 2 and [entry["url"] for entry in gate["denied"]] == ["unlisted.test:443"]
    # The mismatched ClientHello's CONNECT to an allowed name: its refused verdict is the canary's.
    hello = ("1796092405.001 session=s client=127.0.0.1 NONE_NONE/200 CONNECT models.test:443 dst=- hier=HIER_NONE "
             "tls=terminate sni=aisb-canary.invalid up=517 reason=sni-differs")
    gate = gate_report(parse_policy(["models.test"]), log + "\n" + hello)
    assert gate["canary_connects"] == 3 and [entry["url"] for entry in gate["denied"]] == ["unlisted.test:443"]


def test_a_spent_upload_budget_is_named_in_the_result():
    spent = {"gate": {"budget": 100, "sent": 100, "spent_at": "2026-12-04T02:00:00Z"},
             "injector": {"budget": 50, "sent": 7, "spent_at": None}, "status": "upload-budget-exceeded"}
    assert task_result(record(upload=spent))["upload"] == (
        "upload-budget-exceeded: gate budget 100, sent 100, injector budget 50, sent 7; packets with payload "
        "after it were reset")
    within = dict(spent, status="within-budget")
    assert task_result(record(upload=within))["upload"] == "" == task_result(record(upload=None))["upload"]


def test_the_record_s_upload_section_names_each_budget_by_its_destination():
    policy = "gate 100.64.0.1 41234\npin 100.64.0.1 41300\nbudget 100.64.0.1 41234 1000\nbudget 100.64.0.1 41300 50\n"
    watch = {"quota_used": {"upload_41234": 1000, "upload_41300": 20},
             "quota_spent": {"upload_41234": {"at": 1.0, "at_text": "T"}}}
    assert upload_report(policy, 41234, 41300, watch) == {
        "gate": {"budget": 1000, "sent": 1000, "spent_at": "T"},
        "injector": {"budget": 50, "sent": 20, "spent_at": None}, "status": "upload-budget-exceeded"}
    # No reading after the start (the watch was not run): nothing known was sent.
    assert upload_report(policy, 41234, None, {"watched": False})["gate"] == {
        "budget": 1000, "sent": None, "spent_at": None}
    assert upload_report("gate 100.64.0.1 41234\n", 41234, None, watch) is None
