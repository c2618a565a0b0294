# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode's session side and the project_review module: the overlay mount, the
record's review section, and show / apply / discard over a session directory."""

import json
import os
import shutil
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _record_seal, _session_record, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_state, _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _review_session
from ansible_collections.aisb.sandbox.plugins.module_utils.review._project_review import ReviewError
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.project_review import execute

from builders import in_a_session

SESSION = "20261130T230455-1a2b3c4d"


def test_review_mode_mounts_the_project_as_an_overlay():
    argv = _podman.sandbox_run("podman", _podman.SandboxOptions(
        "n", "img", "/home/dev/app", "z", "/s/policy", "pasta", {}, {}, [], False, 0, ["true"],
        project_overlay=("/s/review/upper", "/s/review/work")))
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
    return dict({"session": SESSION, "action": action, "apply_flagged": [], "apply_state": [], "executable": "podman"},
                **more)


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
        ["podman", "unshare", "rm", "-rf", "--one-file-system", "--", str(session["dir"] / "review")]]
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


def test_a_signed_record_rewritten_stays_signed_and_an_edited_one_is_refused(session):
    """The record's review section names the directories review reads and writes: an
    edited record (here, its upper directory pointed elsewhere) must not choose them."""
    state = str(session["dir"].parent.parent)
    key = _record_seal.workstation_key(_state_layout.record_key_path(state))
    _session_record.write(str(session["dir"]), dict(session["record"], schema_version=2), key)
    execute(params("show"), session["environ"], fake_run(), False)
    execute(params("apply", apply_flagged=["nothing"]), session["environ"], fake_run(), False)
    assert _session_record.check(str(session["dir"]), key).state == "signed"
    assert _session_record.read(str(session["dir"]))["review"]["history"][0]["action"] == "apply"
    edited = _session_record.read(str(session["dir"]))
    edited["review"]["upper"] = "/home/dev/.ssh"
    (session["dir"] / "record.json").write_text(json.dumps(edited, indent=2, sort_keys=True) + "\n")
    with pytest.raises(ReviewError, match="fails its check, so nothing of it is used: .*MAC does not match"):
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


KEPT_FLAG = "the harness's kept state (pi-sessions): its next session in this project reads it"


@pytest.fixture
def kept(tmp_path):
    """A review session with the project's kept state (pi-sessions) that has ended: the
    agent changed, deleted and added in it, and planted a link out."""
    project, state = tmp_path / "app", tmp_path / "state"
    project.mkdir()
    (project / "main.py").write_text("print(1)\n")
    kept_plan = _harness_state.plan(str(state / "aisb"), str(project),
                                    _recipes.recipe_for("pi"), "keep", review=True)
    outside = kept_plan["mounts"][0][0]
    os.makedirs(outside)
    for name, text in [("keep.jsonl", "old\n"), ("gone.jsonl", "gone\n")]:
        (tmp_path / outside / name).write_text(text)
    session_dir = state / "aisb" / "sessions" / SESSION
    session_dir.mkdir(parents=True)
    review = _review_session.Review(str(project), str(session_dir), {"HOME": "/nonexistent"}, kept_plan["mounts"])
    (tmp_path / review.overlay[0] / "main.py").write_text("print(2)\n")
    upper = review.state["pi-sessions"]["upper"]
    with open(os.path.join(upper, "keep.jsonl"), "w") as handle:
        handle.write("old\nnew\n")
    os.mknod(os.path.join(upper, "gone.jsonl"), stat.S_IFCHR | 0o600, os.makedev(0, 0))
    os.makedirs(os.path.join(upper, "later"))
    with open(os.path.join(upper, "later", "l.jsonl"), "w") as handle:
        handle.write("later\n")
    os.symlink("/etc/passwd", os.path.join(upper, "escape"))
    record = {"session_id": SESSION, "project": str(project), "project_mode": "review", "review": review.end()}
    (session_dir / "record.json").write_text(json.dumps(record))
    return {"project": project, "dir": session_dir, "environ": {"XDG_STATE_HOME": str(state)}, "record": record,
            "kept": tmp_path / outside, "state_dir": kept_plan["dir"], "upper": upper}


def tree(root):
    """{relative path: content, link target or None for a directory} under ROOT."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = (
                "-> " + os.readlink(path) if os.path.islink(path) else None if os.path.isdir(path)
                else open(path).read())
    return found


def review_apply(kept, **options):
    """project_review's apply in a process of its own, as each task is (it holds the kept
    state's lock until it ends): its result, or the ReviewError's message."""
    return in_a_session(execute, params("apply", **options), kept["environ"], fake_run(), False)


def test_review_mode_mounts_the_kept_state_as_an_overlay_never_read_write():
    argv = _podman.sandbox_run("podman", _podman.SandboxOptions(
        "n", "img", "/home/dev/app", "z", "/s/policy", "pasta", {}, {}, [], False, 0, ["true"],
        project_overlay=("/s/review/upper", "/s/review/work"),
        state_overlays=[("/k/pi-sessions", "/home/agent/.pi/agent/sessions", "/s/u", "/s/w")]))
    assert "/k/pi-sessions:/home/agent/.pi/agent/sessions:O,upperdir=/s/u,workdir=/s/w" in argv
    assert not any(word.endswith(":rw") or ":rw," in word for word in argv)


def test_the_plan_mounts_the_overlays_a_review_makes(tmp_path):
    project, session_dir = tmp_path / "app", tmp_path / "session"
    kept = [(str(tmp_path / "kept" / name), "/home/agent/" + name) for name in ("b", "a")]
    for directory in [project, session_dir] + [tmp_path / "kept" / name for name in ("a", "b")]:
        directory.mkdir(parents=True)
    overlay, state_overlays = _review_session.overlays(str(session_dir), kept)
    assert not os.path.exists(overlay[0])  # known before the Review makes them
    review = _review_session.Review(str(project), str(session_dir), {"HOME": "/nonexistent"}, kept)
    assert review.overlay == overlay
    assert [outside for outside, _inside, _upper, _work in state_overlays] == [kept[1][0], kept[0][0]]
    assert state_overlays == [(state["dir"], state["inside"], state["upper"], state["work"])
                              for _name, state in sorted(review.state.items())]
    assert all(os.path.isdir(path) for path in list(overlay) + [o[layer] for o in state_overlays for layer in (2, 3)])
    review.end()


def test_the_record_lists_the_kept_state_apart_every_change_flagged(kept):
    review = kept["record"]["review"]
    assert [item["path"] for item in review["changes"]] == ["main.py"] and review["flagged"] == []
    section = review["state"]["pi-sessions"]
    assert section["dir"] == str(kept["kept"]) and section["inside"] == "/home/agent/.pi/agent/sessions"
    assert [(item["path"], item["change"]) for item in section["changes"]] == [
        ("escape", "added"), ("gone.jsonl", "deleted"), ("keep.jsonl", "changed"), ("later", "added"),
        ("later/l.jsonl", "added")]
    assert all(item["flags"][0] == KEPT_FLAG for item in section["changes"])
    assert section["changes"][0]["flags"][1] == "a symbolic link pointing out of the kept state (/etc/passwd)"
    assert section["flagged"] == ["escape", "gone.jsonl", "keep.jsonl", "later", "later/l.jsonl"]
    assert section["tree_paths"] == 2 and section["error"] is None and section["manifest_error"] is None


def test_show_lists_the_kept_state_by_name(kept):
    result = execute(params("show"), kept["environ"], fake_run(), False)
    assert result["summary"][0] == "changed  main.py"
    assert "added    kept state pi-sessions: later/l.jsonl  (flagged: %s)" % KEPT_FLAG in result["summary"]
    assert "--- a/pi-sessions/keep.jsonl\n+++ b/pi-sessions/keep.jsonl\n" in result["diff"]
    assert result["state"]["pi-sessions"]["host_changed"] == []


def test_a_plain_apply_takes_none_of_the_kept_state(kept):
    before = tree(kept["kept"])
    result = review_apply(kept, apply_flagged=["escape", "keep.jsonl"])
    assert result["applied"] == ["main.py"] and result["unmatched"] == ["escape", "keep.jsonl"]
    assert tree(kept["kept"]) == before
    assert [h["path"] for h in result["state"]["pi-sessions"]["held"]] == [
        "escape", "gone.jsonl", "keep.jsonl", "later", "later/l.jsonl"]


def test_naming_a_path_of_the_kept_state_applies_it_alone(kept):
    result = review_apply(kept, apply_state=["pi-sessions/keep.jsonl", "pi-sessions/gone.jsonl", "pi-sessions/nope"])
    assert result["state"]["pi-sessions"]["applied"] == ["gone.jsonl", "keep.jsonl"]
    assert result["unmatched"] == ["pi-sessions/nope"]
    assert tree(kept["kept"]) == {"keep.jsonl": "old\nnew\n"}
    # The manifest follows the apply: the rest, named later, is not refused.
    result = review_apply(kept, apply_state=["pi-sessions"])
    assert result["state"]["pi-sessions"]["applied"] == ["escape", "later", "later/l.jsonl"]
    # The link is made as a link, never followed.
    assert tree(kept["kept"]) == {"keep.jsonl": "old\nnew\n", "escape": "-> /etc/passwd", "later": None,
                                  "later/l.jsonl": "later\n"}
    history = json.loads((kept["dir"] / "record.json").read_text())["review"]["history"]
    assert history[-1]["named_state"] == ["pi-sessions"]
    assert history[-1]["state"]["pi-sessions"]["applied"] == ["escape", "later", "later/l.jsonl"]


@pytest.mark.parametrize("named, message", [
    (["pi-session"], "apply_state names pi-session: the session kept pi-sessions; name a state, or NAME/PATH"),
    (["../pi-sessions"], "apply_state names ../pi-sessions: the session kept pi-sessions"),
])
def test_an_unknown_state_is_refused_before_anything_is_applied(kept, named, message):
    before = tree(kept["kept"])
    assert review_apply(kept, apply_state=named).startswith(message)
    assert tree(kept["kept"]) == before and (kept["project"] / "main.py").read_text() == "print(1)\n"


def test_apply_is_refused_once_the_kept_state_changed(kept):
    """Another session of the project wrote its kept state after this one ended."""
    (kept["kept"] / "other.jsonl").write_text("other\n")
    refused = review_apply(kept, apply_state=["pi-sessions"])
    assert refused.startswith("the kept state pi-sessions changed since the session started or the last apply "
                              "(1 paths: other.jsonl)")
    assert (kept["project"] / "main.py").read_text() == "print(1)\n" and "keep.jsonl" in tree(kept["kept"])
    assert (kept["kept"] / "keep.jsonl").read_text() == "old\n"


def test_apply_is_refused_while_a_session_of_the_project_writes_the_kept_state(kept):
    _harness_state.claim(kept["state_dir"], "20261201T000000-00000000")  # this process: a session running
    refused = review_apply(kept, apply_state=["pi-sessions"])
    assert refused.startswith("the kept state cannot be applied now: another session of this project "
                              "(20261201T000000-00000000)") and "aisb_harness_state=none" not in refused
    assert (kept["kept"] / "keep.jsonl").read_text() == "old\n"
    assert (kept["project"] / "main.py").read_text() == "print(1)\n"


def test_discard_takes_the_kept_states_upper_directory_with_it(kept, programs_as_named):
    ran = fake_run()
    execute(params("discard"), kept["environ"], ran, False)
    assert ran.commands == [["podman", "unshare", "rm", "-rf", "--one-file-system", "--", str(kept["dir"] / "review")]]
    assert kept["upper"].startswith(str(kept["dir"] / "review") + "/")


def test_a_link_in_the_kept_state_replaced_by_a_directory_is_never_written_through(kept, tmp_path):
    """An earlier session (direct mode) left a link to a directory of the host's in the kept
    state; this one replaced it by a directory with a file in it."""
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(str(victim), str(kept["kept"] / "linked"))
    os.makedirs(os.path.join(kept["upper"], "linked"))
    os.setxattr(os.path.join(kept["upper"], "linked"), "user.overlay.opaque", b"y")
    (tmp_path / kept["upper"] / "linked" / "f").write_text("planted\n")
    # The link was there when the session started.
    section = kept["record"]["review"]["state"]["pi-sessions"]
    _review_session.retake_manifest(section, section["dir"])
    result = review_apply(kept, apply_state=["pi-sessions/linked"])
    assert result["state"]["pi-sessions"]["applied"] == ["linked", "linked/f"]
    assert os.listdir(str(victim)) == [] and not os.path.islink(str(kept["kept"] / "linked"))
    assert (kept["kept"] / "linked" / "f").read_text() == "planted\n"


def test_a_kept_state_removed_since_is_said_and_the_project_still_applies(kept):
    shutil.rmtree(str(kept["kept"]))
    shown = execute(params("show"), kept["environ"], fake_run(), False)
    assert shown["state"]["pi-sessions"]["error"].startswith("the kept state pi-sessions: ")
    assert shown["state"]["pi-sessions"]["changes"] == [] and shown["summary"] == ["changed  main.py"]
    refused = review_apply(kept, apply_state=["pi-sessions"])
    assert refused.startswith("the kept state pi-sessions: ") and refused.endswith("; nothing is applied")
    assert not kept["kept"].exists() and (kept["project"] / "main.py").read_text() == "print(1)\n"
    assert review_apply(kept)["applied"] == ["main.py"]
