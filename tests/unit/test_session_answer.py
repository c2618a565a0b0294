# SPDX-License-Identifier: GPL-3.0-or-later
"""The headless answer a session's result carries: the transcript whole, or its end from
a line's start after a line naming the file; none when the caller shows the transcript
itself (answer=false)."""

from ansible_collections.aisb.sandbox.plugins.module_utils.session._session import (
    hide_values, task_result, transcript_end)


def test_a_short_transcript_is_the_answer_whole(tmp_path):
    path = tmp_path / "transcript.log"
    path.write_bytes("the tests pass \u2713\nbye\n".encode())
    assert transcript_end(str(path)) == "the tests pass \u2713\nbye\n"


def test_a_long_transcript_gives_its_end_from_a_line_start_and_says_so(tmp_path):
    path = tmp_path / "transcript.log"
    path.write_text("".join("line %03d\n" % number for number in range(100)))
    answer = transcript_end(str(path), limit=40)
    assert answer.splitlines() == ["(the last 40 bytes of %s)" % path, "line 096", "line 097", "line 098", "line 099"]


def test_no_transcript_no_answer(tmp_path):
    assert transcript_end(None) == "" and transcript_end(str(tmp_path / "gone.log")) == ""


def test_long_environment_values_are_hidden_in_the_answer_and_short_ones_kept():
    answer = "SECRET=s3cr3t-v4lue-77\nZERO=0\nYES=true\nTOKEN=abcdefgh and s3cr3t-v4lue-77\n"
    shown = hide_values(answer, ["s3cr3t-v4lue-77", "0", "true", "abcdefgh", "s3cr3t"])
    assert shown == "SECRET=********\nZERO=0\nYES=true\nTOKEN=******** and ********\n"


def finished(transcript):
    return {"session_id": "sid", "exit_code": 0, "status": "exited", "reason": "", "record": "/s/record.json",
            "transcript": transcript, "commands": [], "gate": {"allowed": [], "denied": [], "answered": [], "hints": []}}


def test_the_answer_is_read_only_when_wanted(tmp_path, monkeypatch):
    path = tmp_path / "transcript.log"
    path.write_text("the answer\n")
    assert task_result(finished(str(path)))["answer"] == "the answer\n"
    # aisb run streams the transcript itself: the result neither reads nor carries it.
    opened = []
    monkeypatch.setattr("builtins.open", lambda *args, **kwargs: opened.append(args) or 1 / 0)
    assert task_result(finished(str(path)), answer=False)["answer"] == "" and opened == []
