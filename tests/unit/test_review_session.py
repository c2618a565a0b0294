# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode's session side and the project_review module: the overlay mount, the
record's review section, and show / apply / discard over a session directory."""

import json
import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils import _podman, _review_session
from ansible_collections.aisb.sandbox.plugins.module_utils._project_review import ReviewError
from ansible_collections.aisb.sandbox.plugins.module_utils._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.project_review import execute

SESSION = "20261130T230455-1a2b3c4d"


def test_review_mode_mounts_the_project_as_an_overlay():
    argv = _podman.sandbox_run("podman", "n", "img", "/home/dev/app", "z", "/s/policy", "pasta", {}, {}, [],
                               False, 0, ["true"], project_overlay=("/s/review/upper", "/s/review/work"))
    assert argv[argv.index("--volume") + 1] == (
        "/home/dev/app:/project:O,upperdir=/s/review/upper,workdir=/s/review/work")


@pytest.fixture
def session(tmp_path):
    """A review session that has ended: its project, state directory and record."""
    project, state = tmp_path / "app", tmp_path / "state"
    project.mkdir()
    (project / "main.py").write_text("print(1)\n")
    (project / "old.txt").write_text("old\n")
    session_dir = state / "aisb" / "sessions" / SESSION
    session_dir.mkdir(parents=True)
    review = _review_session.Review(str(project), str(session_dir),
                                    {"HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"})
    upper = review.overlay[0]
    with open(os.path.join(upper, "main.py"), "w") as handle:
        handle.write("print(2)\n")
    os.mknod(os.path.join(upper, "old.txt"), stat.S_IFCHR | 0o600, os.makedev(0, 0))
    os.makedirs(os.path.join(upper, ".git", "hooks"))
    with open(os.path.join(upper, ".git", "hooks", "post-checkout"), "w") as handle:
        handle.write("#!/bin/sh\n")
    record = {"session_id": SESSION, "project": str(project), "project_mode": "review",
              "review": review.end()}
    (session_dir / "record.json").write_text(json.dumps(record))
    return {"project": project, "dir": session_dir, "environ": {"XDG_STATE_HOME": str(state)}, "record": record}


def fake_run(results=None):
    return Runner(lambda argv, timeout=None: (results or {}).get(argv[1], (0, "", "")))


def params(action, **more):
    return dict({"session": SESSION, "action": action, "apply_flagged": [], "executable": "podman"}, **more)


def test_the_record_lists_the_changes_with_flags(session):
    review = session["record"]["review"]
    assert [(i["path"], i["change"]) for i in review["changes"]] == [
        (".git", "added"), (".git/hooks", "added"), (".git/hooks/post-checkout", "added"),
        ("main.py", "changed"), ("old.txt", "deleted")]
    assert review["flagged"] == [".git", ".git/hooks", ".git/hooks/post-checkout"] and review["error"] is None
    assert review["tree_paths"] == 2 and len(review["tree_hash"]) == 64 and review["manifest_error"] is None


def test_without_a_manifest_nothing_is_applied(session):
    os.unlink(session["record"]["review"]["manifest"])
    with pytest.raises(ReviewError, match="no manifest"):
        execute(params("apply"), session["environ"], fake_run(), False)
    assert (session["project"] / "old.txt").exists()


def test_show_changes_nothing(session):
    result = execute(params("show"), session["environ"], fake_run(), False)
    assert result["changed"] is False and result["host_changed"] == []
    assert "-print(1)\n+print(2)\n" in result["diff"]
    assert result["summary"][0].startswith("added    .git  (flagged: git runs hooks")
    assert (session["project"] / "main.py").read_text() == "print(1)\n"


def test_apply_applies_unflagged_then_flagged_when_named(session):
    result = execute(params("apply"), session["environ"], fake_run(), False)
    assert result["applied"] == ["main.py", "old.txt"] and len(result["held"]) == 3
    assert sorted(os.listdir(session["project"])) == ["main.py"]
    # The manifest follows the apply: naming the flagged paths later is not refused.
    result = execute(params("apply", apply_flagged=["main.py", "nothing"]), session["environ"], fake_run(), False)
    assert result["applied"] == [] and result["unmatched"] == ["main.py", "nothing"]
    # A git directory's content is never applied, named or not.
    result = execute(params("apply", apply_flagged=[".git"]), session["environ"], fake_run(), False)
    assert result["applied"] == [] and [h["path"] for h in result["held"]] == [
        ".git", ".git/hooks", ".git/hooks/post-checkout"]
    history = json.loads((session["dir"] / "record.json").read_text())["review"]["history"]
    assert [entry["action"] for entry in history] == ["apply", "apply", "apply"]


def test_apply_after_the_project_changed_is_refused(session):
    (session["project"] / "main.py").write_text("print(3)\n")
    refused = r"project changed since the session started or the last apply \(1 paths: main.py\)"
    with pytest.raises(ReviewError, match=refused):
        execute(params("apply"), session["environ"], fake_run(), False)
    assert (session["project"] / "main.py").read_text() == "print(3)\n"
    assert (session["project"] / "old.txt").exists()


def test_discard_removes_the_review_directory_through_podman_unshare(session, programs_as_named):
    ran = fake_run()
    result = execute(params("discard"), session["environ"], ran, False)
    assert result["changed"] and ran.commands == [
        ["podman", "unshare", "rm", "-rf", "--", str(session["dir"] / "review")]]
    history = json.loads((session["dir"] / "record.json").read_text())["review"]["history"]
    assert history[0]["action"] == "discard"


def test_failed_discard_is_reported(session, programs_as_named):
    with pytest.raises(ReviewError, match="could not remove"):
        execute(params("discard"), session["environ"], fake_run({"unshare": (1, "", "Error: no")}), False)


@pytest.mark.parametrize("session_id, message", [
    ("../../etc", "not a session id"),
    ("20261130T230455-00000000", "has no record"),
])
def test_unknown_sessions_are_refused(session, session_id, message):
    with pytest.raises(ReviewError, match=message):
        execute(params("show", session=session_id), session["environ"], fake_run(), False)


def test_direct_sessions_are_refused(session):
    (session["dir"] / "record.json").write_text(json.dumps({"project": "/x", "project_mode": "direct"}))
    with pytest.raises(ReviewError, match="did not run in review mode"):
        execute(params("show"), session["environ"], fake_run(), False)


def test_check_mode_applies_nothing(session):
    result = execute(params("apply"), session["environ"], fake_run(), True)
    assert result["applied"] == [] and (session["project"] / "old.txt").exists()


def test_a_long_diff_stops_and_says_how_much_is_left(session, monkeypatch):
    monkeypatch.setattr("ansible_collections.aisb.sandbox.plugins.modules.project_review.DIFF_LIMIT", 10)
    result = execute(params("show"), session["environ"], fake_run(), False)
    assert result["diff"].endswith("over 10 characters: 4 more changes)\n")


def test_the_agents_commits_become_a_branch_by_name_with_no_hook_and_a_bad_name_applies_nothing(session):
    run = fake_run()
    result = execute(params("apply", branch="agent-work"), session["environ"], run, False)
    assert result["branch"] == "agent-work" and result["applied"] == ["main.py", "old.txt"]
    git = run.commands[-1]
    assert git[1:3] == ["--git-dir=%s/.git" % session["project"], "-c"] and "core.hooksPath=/dev/null" in git
    assert git[-4:] == ["branch", "--no-track", "agent-work", "refs/aisb/%s/HEAD" % SESSION]
    with pytest.raises(ReviewError, match="'--force' is not a plain branch name"):
        execute(params("apply", branch="--force"), session["environ"], fake_run(), False)
