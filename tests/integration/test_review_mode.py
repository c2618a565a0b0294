# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode end to end: an agent works on an overlay of the project
(run_agent.yml -e aisb_project_mode=review), the host's tree stays as it was during and
after the session, the record lists every change with the flagged ones, and review.yml
applies the unflagged ones, refuses to apply over a project changed since, and discards.

The tests below share one session and run in file order: each one takes the project
where the one before left it.
"""

import hashlib
import json
import os
import stat
import time

import pytest

from scenario import ANSIBLE_ENV, operator_vars
from sessions import record_of, start_in_background

PROJECT = "/home/dev/src/review-app"
SESSIONS = "/home/dev/.local/state/aisb/sessions"
# What the agent does: write, delete, chmod, rename, replace a file by a directory, plant
# a link out of the project and a git hook; then it says it is done and waits, so the test
# can look at the host's tree while the sandbox still runs.
AGENT = """
set -e
echo 'print(2)' >> main.py
mkdir -p lib && echo 'new' > lib/new.py
rm old.txt
rm -rf data
chmod +x tool.sh
mv name.txt renamed.txt
rm became-dir && mkdir became-dir && echo inside > became-dir/file
rm -rf became-file && echo now-a-file > became-file
mv movedir moved
ln -s /etc/passwd out
printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout
echo written > .agent-done
sleep 4
"""
CHANGES = {
    ".agent-done": ("added", []),
    ".git/hooks/post-checkout": ("added", ["git runs hooks", "a new executable file"]),
    "became-dir": ("changed", []), "became-dir/file": ("added", []),
    "became-file": ("changed", []), "became-file/z": ("deleted", []),
    "moved": ("added", []), "moved/sub": ("added", []), "moved/sub/m": ("added", []),
    "movedir": ("deleted", []), "movedir/sub": ("deleted", []), "movedir/sub/m": ("deleted", []),
    "data": ("deleted", []), "data/a": ("deleted", []), "data/b": ("deleted", []),
    "lib": ("added", []), "lib/new.py": ("added", []),
    "main.py": ("changed", []), "name.txt": ("deleted", []), "old.txt": ("deleted", []),
    "out": ("added", ["a symbolic link pointing out of the project"]),
    "renamed.txt": ("added", []),
    "tool.sh": ("changed", ["its exec bit changed"]),
}


def tree_hash(ws, root=PROJECT):
    """sha256 over every path under ROOT with its type, mode, and content or link target."""
    digest = hashlib.sha256()
    top = ws.path(root)
    for directory, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(directory, name)
            info = os.lstat(path)
            digest.update(("%s\0%o\0" % (os.path.relpath(path, top), info.st_mode)).encode())
            if stat.S_ISLNK(info.st_mode):
                digest.update(os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def review(ws, session_id, *extra):
    return ws.run(["ansible-playbook", "aisb.sandbox.review", "-e", operator_vars(ws), "-e", f"session={session_id}",
                   *extra], check=False, env=ANSIBLE_ENV)


@pytest.fixture(scope="module")
def session(workstation):
    """The review session, run while the test watches the host's tree; its record and
    the project's tree hash before, during and after."""
    ws = workstation
    ws.run(["mkdir", "-p", f"{PROJECT}/.git/hooks", f"{PROJECT}/data", f"{PROJECT}/became-file",
            f"{PROJECT}/movedir/sub"])
    ws.sh(f"cd {PROJECT} && echo 'print(1)' > main.py && echo old > old.txt && echo a > data/a && echo b > data/b"
          " && echo 'echo hi' > tool.sh && echo name > name.txt && echo file > became-dir && echo z > became-file/z"
          " && echo m > movedir/sub/m")
    before = tree_hash(ws)
    # Later extra vars win: this project, not test_session's.
    running = start_in_background(ws, ["sh", "-c", AGENT], "-e", f"project={PROJECT}",
                                  "-e", "aisb_project_mode=review")
    during = None
    deadline = time.monotonic() + 240
    while during is None and time.monotonic() < deadline and running.poll() is None:
        sessions = ws.path(SESSIONS)
        if sessions.exists() and any(p.joinpath("review/upper/.agent-done").exists() for p in sessions.iterdir()):
            during = tree_hash(ws)
        time.sleep(0.2)
    output = running.communicate(timeout=300)[0]
    assert running.returncode == 0, output[-4000:]
    assert during is not None, "the agent's writes never reached the upper directory:\n" + output[-3000:]
    return {"record": record_of(ws, output), "before": before, "during": during, "after": tree_hash(ws)}


def test_the_host_tree_does_not_change_during_or_after_the_session(session):
    assert session["during"] == session["before"]
    assert session["after"] == session["before"]


def test_the_record_lists_every_change_with_its_flags(session):
    review_section = session["record"]["review"]
    assert session["record"]["project_mode"] == "review" and review_section["error"] is None
    found = {item["path"]: item for item in review_section["changes"]}
    assert {path: item["change"] for path, item in found.items()} == {p: c for p, (c, _f) in CHANGES.items()}
    for path, (_change, flags) in CHANGES.items():
        assert len(found[path]["flags"]) == len(flags), (path, found[path]["flags"])
        for expected, actual in zip(flags, found[path]["flags"]):
            assert expected in actual, (path, actual)
    assert found["became-dir"]["was"]["type"] == "file" and found["became-dir"]["type"] == "dir"
    assert found["became-file"]["was"]["type"] == "dir" and found["became-file"]["type"] == "file"
    assert found["out"]["target"] == "/etc/passwd"
    assert review_section["flagged"] == [".git/hooks/post-checkout", "out", "tool.sh"]


def test_apply_applies_the_unflagged_changes_only(workstation, session):
    ws = workstation
    result = review(ws, session["record"]["session_id"], "-e", "action=apply")
    assert result.returncode == 0, result.stdout[-3000:]
    project = ws.path(PROJECT)
    assert (project / "main.py").read_text() == "print(1)\nprint(2)\n"
    assert (project / "lib/new.py").read_text() == "new\n"
    assert (project / "became-dir/file").read_text() == "inside\n"
    assert (project / "became-file").read_text() == "now-a-file\n"
    assert (project / "moved/sub/m").read_text() == "m\n" and not (project / "movedir").exists()
    assert (project / "renamed.txt").exists() and not (project / "name.txt").exists()
    assert not (project / "old.txt").exists() and not (project / "data").exists()
    # Held: the hook, the link out, the exec bit.
    assert not (project / ".git/hooks/post-checkout").exists()
    assert not os.path.lexists(project / "out")
    assert not os.stat(project / "tool.sh").st_mode & 0o111
    assert "held" in result.stdout and "post-checkout" in result.stdout


def test_apply_is_refused_once_the_host_tree_changed(workstation, session):
    ws = workstation
    ws.sh(f"echo 'print(3)' >> {PROJECT}/main.py")
    changed = tree_hash(ws)
    result = review(ws, session["record"]["session_id"], "-e", "action=apply",
                    "-e", json.dumps({"apply_flagged": ["tool.sh"]}))
    assert result.returncode != 0
    assert "the project changed since the session started or the last apply (1 paths: main.py)" in result.stdout
    assert tree_hash(ws) == changed


def test_discard_removes_the_upper_directory(workstation, session):
    ws = workstation
    record = session["record"]
    result = review(ws, record["session_id"], "-e", "action=discard")
    assert result.returncode == 0, result.stdout[-3000:]
    assert not ws.path(os.path.dirname(record["review"]["upper"])).exists()
    history = json.loads(ws.path(record["record"]).read_text())["review"]["history"]
    assert [entry["action"] for entry in history] == ["apply", "discard"]
    shown = review(ws, record["session_id"])
    assert shown.returncode != 0 and "was discarded" in shown.stdout
