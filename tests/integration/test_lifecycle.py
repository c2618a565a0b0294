# SPDX-License-Identifier: GPL-3.0-or-later
"""Image lifecycle for real: a refresh gives both images new tags (a rebuilt package
layer, not the cached one) that later sessions use, and retention removes this
collection's old images, session directories and policies and nothing else."""

import json
import os
import re
import time

import pytest

from scenario import playbook, task_status
from sessions import record_of, run_agent
from workstation import AISB_STATE, BASE_IMAGE, TRANSFER_DIR, USER_HOME

SHELL = ["-e", "aisb_harness=shell"]  # the light recipe: a refresh builds in a minute, not ten
REFRESHED = f"{AISB_STATE}/images/refreshed"
USED = f"{AISB_STATE}/images/used"
POLICIES = f"{AISB_STATE}/policies"
UNITS = f"{USER_HOME}/.config/containers/systemd"
DAY = 86400


def layers(ws, tag):
    return json.loads(ws.run(["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", tag]).stdout)


def inputs_of(ws, tag):
    labels = json.loads(ws.run(["podman", "image", "inspect", "--format", "{{json .Labels}}", tag]).stdout)
    return json.loads(labels["io.aisb.inputs"])


@pytest.fixture
def stamps_restored(workstation):
    """The refresh stamps as they were before the test: later tests find their images
    under the tags they had (a refresh is per repository, every harness's image too)."""
    stamps = workstation.path(REFRESHED)
    before = {p.name: p.read_text() for p in stamps.iterdir()} if stamps.is_dir() else {}
    yield
    for path in stamps.iterdir() if stamps.is_dir() else []:
        if path.name in before:
            path.write_text(before[path.name])
        else:
            path.unlink()


def test_a_refresh_gives_new_tags_that_later_sessions_use(workstation, project, stamps_restored):
    first = run_agent(workstation, *SHELL, command=["true"])
    assert first.returncode == 0, first.stdout[-3000:]
    old = record_of(workstation, first.stdout)
    old_sandbox, old_gate = old["image"]["tag"], old["gate_image"]

    refreshed = run_agent(workstation, *SHELL, "-e", "aisb_refresh=true", command=["true"], timeout=1800)
    assert refreshed.returncode == 0, refreshed.stdout[-3000:]
    assert task_status(refreshed.stdout, "Build the sandbox image unless one with these inputs exists") == "changed"
    assert task_status(refreshed.stdout, "Build the gate image unless one with these inputs exists") == "changed"
    new = record_of(workstation, refreshed.stdout)
    new_sandbox, new_gate = new["image"]["tag"], new["gate_image"]
    assert new_sandbox != old_sandbox and new_gate != old_gate
    # One stamp for the play, hashed into both images and stored for the next runs.
    stamp = inputs_of(workstation, new_sandbox)["refreshed"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp) and inputs_of(workstation, new_gate)["refreshed"] == stamp
    assert workstation.path(f"{REFRESHED}/aisb-sandbox").read_text().strip() == stamp
    # Same base, same context: only the stamp differs, and the package layer was built
    # again (the layer cache would have handed back yesterday's packages).
    old_inputs, new_inputs = inputs_of(workstation, old_sandbox), inputs_of(workstation, new_sandbox)
    assert {k: v for k, v in new_inputs.items() if k != "refreshed"} == \
        {k: v for k, v in old_inputs.items() if k != "refreshed"}
    base_layers = len(layers(workstation, BASE_IMAGE))
    assert layers(workstation, new_sandbox)[base_layers] != layers(workstation, old_sandbox)[base_layers]
    assert layers(workstation, new_gate)[base_layers] != layers(workstation, old_gate)[base_layers]

    later = run_agent(workstation, *SHELL, command=["true"])
    assert later.returncode == 0, later.stdout[-3000:]
    assert task_status(later.stdout, "Build the sandbox image unless one with these inputs exists") == "skipping"
    assert task_status(later.stdout, "Build the gate image unless one with these inputs exists") == "skipping"
    used = record_of(workstation, later.stdout)
    assert (used["image"]["tag"], used["gate_image"]) == (new_sandbox, new_gate)


def fake_image(ws, tag, label):
    """An image of its own (its own ID) tagged TAG, built from the base in seconds."""
    context = f"{TRANSFER_DIR}/fake-{label}"  # the workstation's /tmp is its own tmpfs
    ws.run(["mkdir", "-p", context])
    ws.path(f"{context}/Containerfile").write_text(f"FROM {BASE_IMAGE}\nLABEL aisb.test.fake={label}\n")
    ws.run(["podman", "build", "-q", "--pull=never", "--tag", tag, context])


def mark_used(ws, tag, days_ago):
    repository, digest = tag.rsplit(":", 1)
    path = ws.path(f"{USED}/{repository.rsplit('/', 1)[-1]}-{digest}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tag + "\n")
    when = time.time() - days_ago * DAY
    os.utime(path, (when, when))


def fake_session(ws, days_ago, suffix, record=True, review=False, policy=None):
    session_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - days_ago * DAY)) + "-" + suffix
    directory = ws.path(f"{AISB_STATE}/sessions/{session_id}")
    (directory / "review" if review else directory).mkdir(parents=True)
    if record:
        (directory / "record.json").write_text(json.dumps({"policy_dir": f"{POLICIES}/{policy}"} if policy else {}))
        when = time.time() - days_ago * DAY
        os.utime(directory / "record.json", (when, when))
    return session_id


def fake_policy(ws, name, days_ago):
    directory = ws.path(f"{POLICIES}/{name}")
    directory.mkdir(parents=True)
    (directory / "policy.json").write_text("{}")
    when = time.time() - days_ago * DAY
    os.utime(directory, (when, when))


def images(ws):
    return {name for image in json.loads(ws.run(["podman", "images", "--format", "json"]).stdout)
            for name in image.get("Names") or []}


def test_prune_removes_what_it_should_and_nothing_else(workstation, project):
    # The current tags: what a session used last (it marks them, even when nothing is built).
    started = time.time()
    current = record_of(workstation, run_agent(workstation, command=["true"]).stdout)
    for tag in (current["image"]["tag"], current["gate_image"]):
        mark = workstation.path(f"{USED}/{tag.rsplit('/', 1)[-1].replace(':', '-')}")
        assert mark.read_text() == tag + "\n" and mark.stat().st_mtime >= started - 1
    old_gate, old_running = "localhost/aisb-gate:00000000000000aa", "localhost/aisb-sandbox:00000000000000bb"
    others = ["localhost/aisb-test-other:1", "localhost/aisb-sandboxes:00000000000000cc"]
    for index, tag in enumerate([old_gate, old_running] + others):
        fake_image(workstation, tag, index)
        mark_used(workstation, tag, 40)
    # Policies: old and named by nothing (removed), named by a removed session's record
    # (removed), by a container's label, a long-lived gate's unit, a kept session's record.
    old_policy, dropped_policy, labelled, unit_named, recorded = ("00000000000000e%d" % n for n in range(5))
    for name in (old_policy, dropped_policy, labelled, unit_named, recorded):
        fake_policy(workstation, name, 40)
    staging, unit_file = f"{POLICIES}/.staging-prune-test", f"{UNITS}/aisb-gate-policy-{unit_named}.container"
    workstation.path(staging).mkdir()
    unit = workstation.path(unit_file)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("# not loaded: retention reads the name only\n")
    container = "aisb-prune-test-" + workstation.hostname
    workstation.run(["podman", "run", "-d", "--name", container, "--label", f"aisb.policy={labelled}",
                     "--network=none", old_running, "sleep", "600"])
    old_session = fake_session(workstation, 60, "0000000a", policy=dropped_policy)
    no_record = fake_session(workstation, 61, "0000000b", record=False)
    reviewed = fake_session(workstation, 62, "0000000c", review=True)
    recent = fake_session(workstation, 2, "0000000d", policy=recorded)
    workstation.run(["mkdir", "-p", f"{AISB_STATE}/sessions/notes"])
    old_log = workstation.path(f"{AISB_STATE}/images/logs/aisb-gate-00000000000000aa.log")
    old_log.write_text("an old build's log\n")
    # Written from outside: the workstation user owns its state, as when it wrote it.
    workstation.run(["chown", "-R", "dev:dev", AISB_STATE, f"{USER_HOME}/.config"], user="root")
    # An overlay's work directory left in the old session (the watchdog wrote its record):
    # the user namespace root's, which the user cannot remove.
    left = f"{AISB_STATE}/sessions/{old_session}/git/0/work"
    workstation.run(["podman", "unshare", "sh", "-c",
                     f"mkdir -p {left}/work && chown -R 1:1 {left} && chmod 0700 {left}"])
    assert workstation.run(["rm", "-rf", left], check=False).returncode != 0
    policies_before = {p.name for p in workstation.path(POLICIES).iterdir()}
    try:
        before = images(workstation)
        planned = playbook(workstation, "prune", "--check", "--diff", "-e", "aisb_retention_sessions=0")
        assert planned.returncode == 0, planned.stdout[-3000:]
        assert "would remove 1 images, 2 session directories and 2 policies" in planned.stdout, planned.stdout[-3000:]
        for gone in (old_gate, old_session, old_policy, dropped_policy):
            assert re.search(r"^-" + re.escape(gone) + "$", planned.stdout, re.M), planned.stdout[-3000:]
        assert images(workstation) == before and workstation.path(f"{AISB_STATE}/sessions/{old_session}").exists()
        assert {p.name for p in workstation.path(POLICIES).iterdir()} == policies_before

        pruned = playbook(workstation, "prune", "-e", "aisb_retention_sessions=0")
        assert pruned.returncode == 0, pruned.stdout[-3000:]
        assert "removed 1 images, 2 session directories and 2 policies" in pruned.stdout, pruned.stdout[-3000:]
        assert {p.name for p in workstation.path(POLICIES).iterdir()} == policies_before - {old_policy, dropped_policy}
        assert os.path.basename(current["policy_dir"]) in policies_before
        after = images(workstation)
        assert before - after == {old_gate}
        assert {old_running, current["image"]["tag"], current["gate_image"], *others} <= after
        assert "localhost/aisb-probe:current" in after
        sessions = {p.name for p in workstation.path(f"{AISB_STATE}/sessions").iterdir()}
        assert old_session not in sessions and no_record not in sessions
        assert {reviewed, recent, "notes", current["session_id"]} <= sessions
        assert not old_log.exists() and not workstation.path(f"{USED}/aisb-gate-00000000000000aa").exists()

        # Nothing left to remove: a second run changes nothing.
        again = playbook(workstation, "prune", "-e", "aisb_retention_sessions=0")
        assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0", again.stdout), again.stdout[-2000:]
    finally:
        workstation.run(["podman", "rm", "--force", "--time", "0", container], check=False)
        workstation.run(["podman", "rmi", "--force", old_running, *others], check=False)
        workstation.run(["rm", "-rf", f"{AISB_STATE}/sessions/{reviewed}", f"{AISB_STATE}/sessions/{recent}",
                         f"{AISB_STATE}/sessions/notes", staging, unit_file,
                         *(f"{POLICIES}/{name}" for name in (labelled, unit_named, recorded))], check=False)
