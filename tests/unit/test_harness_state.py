# SPDX-License-Identifier: GPL-3.0-or-later
"""A harness's state kept per project: one directory per resolved project path, mounted
read-write into that project's sessions only; fresh wipes it without following a link."""

import os
import subprocess

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_state, _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

from builders import FACTS, in_a_session, inputs

RECIPE = _recipes.parse_recipe("unit", dict(_recipes.BUILT_IN["shell"],
                                            state={"pi-sessions": "/home/agent/.pi/agent/sessions"}))


def run_unshared(argv):
    """podman unshare ARGV, run here without podman (these files are the test's own)."""
    assert argv[:2] == ["podman", "unshare"]
    done = subprocess.run(argv[2:], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def test_each_project_has_its_own_directory():
    one = _harness_state.plan("/state", "/home/dev/src/a", RECIPE, "keep")
    other = _harness_state.plan("/state", "/home/dev/src/b", RECIPE, "keep")
    assert one["dir"].startswith("/state/harness-state/") and one["dir"] != other["dir"]
    assert one == _harness_state.plan("/state", "/home/dev/src/a", RECIPE, "keep")
    assert one["mounts"] == [(one["dir"] + "/pi-sessions", "/home/agent/.pi/agent/sessions")]
    assert _harness_state.plan("/state", "/home/dev/src/a", _recipes.recipe_for("shell"), "keep") is None


def test_a_review_session_never_wipes_the_kept_state():
    with pytest.raises(InputError, match="aisb_harness_state=fresh wipes the project's kept harness state, "
                                         "which a review-mode session never writes"):
        _harness_state.plan("/state", "/p", RECIPE, "fresh", review=True)
    assert _harness_state.plan("/state", "/p", RECIPE, "keep", review=True)["mode"] == "keep"


def test_bad_input_is_refused_by_name():
    with pytest.raises(InputError, match="aisb_harness_state must be one of keep, fresh"):
        _harness_state.plan("/state", "/p", RECIPE, "wipe")
    with pytest.raises(InputError, match="under /home/agent"):
        _harness_state.recipe_state({"state": {"x": "/etc"}})
    with pytest.raises(InputError, match="lower-case"):
        _harness_state.recipe_state({"state": {"../x": "/home/agent/x"}})


def test_the_state_is_mounted_read_write_with_the_projects_label():
    kept = _harness_state.plan("/state", "/home/dev/src/a", RECIPE, "keep")
    plan = _session_plan.plan_session("sid", "/s", inputs(harness_state=kept, project_label="z"), FACTS, 40001)
    argv = _podman.sandbox_run("podman", plan.sandbox_options)
    assert "%s/pi-sessions:/home/agent/.pi/agent/sessions:rw,z" % kept["dir"] in argv
    assert argv.index("--tmpfs") < argv.index("%s/pi-sessions:/home/agent/.pi/agent/sessions:rw,z" % kept["dir"])
    assert plan.sandbox_options.writable_dirs == ["/home/agent/.pi/agent"]


def test_keep_keeps_and_fresh_wipes_without_following_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("kept")
    kept = _harness_state.plan(str(tmp_path / "state"), "/home/dev/src/a", RECIPE, "keep")
    section = in_a_session(_harness_state.prepare, kept, "/home/dev/src/a", run_unshared, "podman", "s1")
    assert section["wiped"] is False and (tmp_path / "state").exists()
    sessions = kept["mounts"][0][0]
    # What an agent leaves: a conversation, links out, a directory nobody may enter.
    open(os.path.join(sessions, "conversation.jsonl"), "w").close()
    os.symlink(str(victim), os.path.join(sessions, "evil"))
    os.makedirs(os.path.join(sessions, "locked", "deeper"))
    os.chmod(os.path.join(sessions, "locked"), 0)
    in_a_session(_harness_state.prepare, kept, "/home/dev/src/a", run_unshared, "podman", "s2")
    assert "conversation.jsonl" in os.listdir(sessions)
    os.chmod(os.path.join(sessions, "locked"), 0o700)  # plain rm here: not podman's namespace
    section = in_a_session(_harness_state.prepare, dict(kept, mode="fresh"), "/home/dev/src/a", run_unshared,
                           "podman", "s3")
    assert section["wiped"] is True and os.listdir(sessions) == []
    assert (victim / "file").read_text() == "kept"
    assert sorted(os.listdir(kept["dir"])) == ["pi-sessions", "project"]
    assert [n for n in os.listdir(os.path.dirname(kept["dir"])) if ".wiping-" in n] == []


def test_one_session_of_a_project_writes_its_state_at_a_time(tmp_path):
    kept = _harness_state.plan(str(tmp_path / "state"), "/home/dev/src/a", RECIPE, "keep")
    _harness_state.claim(kept["dir"], "first-session")  # this process: a session still running
    refused = in_a_session(_harness_state.prepare, dict(kept, mode="fresh"), "/home/dev/src/a", run_unshared,
                           "podman", "second-session")
    assert "another session of this project (first-session) is running" in refused
    assert "aisb_harness_state=none" in refused
    # Refused before the wipe: the first session's state is still there.
    assert not os.path.exists(kept["dir"]) or not any(".wiping-" in n for n in os.listdir(tmp_path / "state"))
    other = _harness_state.plan(str(tmp_path / "state"), "/home/dev/src/b", RECIPE, "keep")
    assert in_a_session(_harness_state.prepare, other, "/home/dev/src/b", run_unshared, "podman", "b")["wiped"] is False
    assert _harness_state.plan(str(tmp_path / "state"), "/home/dev/src/a", RECIPE, "none") is None
