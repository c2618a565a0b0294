# SPDX-License-Identifier: GPL-3.0-or-later
"""How a finished session is reported: exit codes that are not the harness's own, and a
record that could not be written."""

from ansible_collections.aisb.sandbox.plugins.module_utils._session_run import exit_reason, finish


def record(**overrides):
    base = {"session_id": "sid", "exit_code": 0, "status": "exited", "reason": "", "record": "/s/record.json",
            "transcript": "/s/transcript.log", "commands": [], "gate": {"allowed": [], "denied": []}}
    base.update(overrides)
    return base


def test_exit_codes_of_podman_and_signals_are_named():
    assert exit_reason(0) == "" and exit_reason(3) == ""
    assert exit_reason(77) == "enforcement could not be installed or verified"
    assert exit_reason(79) == "the gate never answered the sandbox"
    assert exit_reason(125) == "podman could not run the sandbox"
    assert exit_reason(137) == "the sandbox was killed by signal 9"
    assert exit_reason(None) == ""


def test_a_clean_exit_succeeds():
    result = finish(record())
    assert result["changed"] is True and "failed" not in result


def test_a_record_that_could_not_be_written_fails_the_task_and_says_so():
    result = finish(record(record=None, record_error="the record could not be written to /s/record.json: "
                                                     "No space left on device"))
    assert result["failed"] is True
    assert result["msg"] == "the record could not be written to /s/record.json: No space left on device"


def test_both_problems_are_reported():
    result = finish(record(exit_code=137, reason="the sandbox was killed by signal 9", record=None,
                           record_error="the record could not be written to /s/record.json: Disk quota exceeded"))
    assert result["msg"] == ("session sid exited 137: the sandbox was killed by signal 9; "
                             "the record could not be written to /s/record.json: Disk quota exceeded")
