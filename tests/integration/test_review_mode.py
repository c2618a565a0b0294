# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode end to end: an agent works on an overlay of the project
(run_agent.yml -e aisb_project_mode=review), the host's tree stays as it was during and
after the session, the record lists every change with the flagged ones, and review.yml
applies the unflagged ones, refuses to apply over a project changed since, and discards.

The project's kept harness state (pi's sessions, the default recipe's `state`) is an
overlay as well: the agent's writes to it are listed beside the project's, every one
flagged, and applied only when named with apply_state.

The tests below share one session and run in file order: each one takes the project
where the one before left it.
"""

import hashlib
import json
import os
import stat
import time
import uuid

import pytest

from providers import NAME, PI_CONFIG_FILES, PORT, fake_provider, write_tree
from scenario import ANSIBLE_ENV, operator_vars
from sessions import record_of, run_agent, session_dirs, start_in_background

PROJECT = "/home/dev/src/review-app"
SESSIONS = "/home/dev/.local/state/aisb/sessions"
# The project's kept pi-sessions on the host (_harness_state.project_state_dir) and inside.
KEPT = "/home/dev/.local/state/aisb/harness-state/%s/pi-sessions" % hashlib.sha256(PROJECT.encode()).hexdigest()[:32]
KEPT_INSIDE = "/home/agent/.pi/agent/sessions"
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
echo '{"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}}}' > .mcp.json
cd /home/agent/.pi/agent/sessions
echo new >> keep.jsonl
rm gone.jsonl
echo planted > added.jsonl
ln -s /etc/passwd escape
mkdir later && echo later > later/l.jsonl
cd /project
echo written > .agent-done
sleep 4
"""
CHANGES = {
    ".agent-done": ("added", []),
    ".git/hooks/post-checkout": ("added", ["git runs hooks", "a new executable file"]),
    ".mcp.json": ("added", ["Claude Code and others start the MCP servers it names"]),
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
KEPT_FLAG = "the harness's kept state (pi-sessions): its next session in this project reads it"
KEPT_CHANGES = {
    "added.jsonl": ("added", [KEPT_FLAG]), "escape": ("added", [KEPT_FLAG, "a symbolic link pointing out"]),
    "gone.jsonl": ("deleted", [KEPT_FLAG]), "keep.jsonl": ("changed", [KEPT_FLAG]),
    "later": ("added", [KEPT_FLAG]), "later/l.jsonl": ("added", [KEPT_FLAG]),
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
    # The kept state as an earlier session of the project left it.
    ws.sh(f"mkdir -p {KEPT} && echo old > {KEPT}/keep.jsonl && echo gone > {KEPT}/gone.jsonl")
    before, kept_before = tree_hash(ws), tree_hash(ws, KEPT)
    # Later extra vars win: this project, not test_session's.
    running = start_in_background(ws, ["sh", "-c", AGENT], "-e", f"project={PROJECT}",
                                  "-e", "aisb_project_mode=review")
    during = kept_during = None
    deadline = time.monotonic() + 240
    while during is None and time.monotonic() < deadline and running.poll() is None:
        sessions = ws.path(SESSIONS)
        if sessions.exists() and any(p.joinpath("review/upper/.agent-done").exists() for p in sessions.iterdir()):
            during, kept_during = tree_hash(ws), tree_hash(ws, KEPT)
        time.sleep(0.2)
    output = running.communicate(timeout=300)[0]
    assert running.returncode == 0, output[-4000:]
    assert during is not None, "the agent's writes never reached the upper directory:\n" + output[-3000:]
    return {"record": record_of(ws, output), "before": before, "during": during, "after": tree_hash(ws),
            "kept_before": kept_before, "kept_during": kept_during, "kept_after": tree_hash(ws, KEPT)}


def test_the_host_tree_does_not_change_during_or_after_the_session(session):
    assert session["during"] == session["before"]
    assert session["after"] == session["before"]


def test_the_kept_state_does_not_change_during_or_after_the_session(session):
    assert session["kept_during"] == session["kept_before"]
    assert session["kept_after"] == session["kept_before"]


def assert_flags(found, expected):
    assert {path: item["change"] for path, item in found.items()} == {p: c for p, (c, _f) in expected.items()}
    for path, (_change, flags) in expected.items():
        assert len(found[path]["flags"]) == len(flags), (path, found[path]["flags"])
        for wanted, actual in zip(flags, found[path]["flags"]):
            assert wanted in actual, (path, actual)


def test_the_record_lists_the_kept_state_changes_apart_all_flagged(session):
    kept = session["record"]["review"]["state"]["pi-sessions"]
    assert kept["dir"] == KEPT and kept["inside"] == KEPT_INSIDE and kept["error"] is None
    assert_flags({item["path"]: item for item in kept["changes"]}, KEPT_CHANGES)
    assert kept["flagged"] == sorted(KEPT_CHANGES)
    # Never among the project's.
    assert not any(item["path"].endswith(".jsonl") for item in session["record"]["review"]["changes"])


def test_show_lists_the_kept_state_apart(workstation, session):
    result = review(workstation, session["record"]["session_id"])
    assert result.returncode == 0, result.stdout[-3000:]
    assert "kept state pi-sessions: added.jsonl" in result.stdout
    assert "b/pi-sessions/keep.jsonl" in result.stdout


def test_the_record_lists_every_change_with_its_flags(session):
    review_section = session["record"]["review"]
    assert session["record"]["project_mode"] == "review" and review_section["error"] is None
    found = {item["path"]: item for item in review_section["changes"]}
    assert_flags(found, CHANGES)
    assert found["became-dir"]["was"]["type"] == "file" and found["became-dir"]["type"] == "dir"
    assert found["became-file"]["was"]["type"] == "dir" and found["became-file"]["type"] == "file"
    assert found["out"]["target"] == "/etc/passwd"
    assert review_section["flagged"] == [".git/hooks/post-checkout", ".mcp.json", "out", "tool.sh"]


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
    # Neither the harness's project file nor its kept state.
    assert not (project / ".mcp.json").exists()
    assert tree_hash(ws, KEPT) == session["kept_before"]


def test_apply_state_names_an_unknown_state(workstation, session):
    result = review(workstation, session["record"]["session_id"], "-e", "action=apply",
                    "-e", json.dumps({"apply_state": ["pi-session"]}))
    assert result.returncode != 0 and "apply_state names pi-session: the session kept pi-sessions" in result.stdout
    assert tree_hash(workstation, KEPT) == session["kept_before"]


def test_naming_them_applies_them(workstation, session):
    ws = workstation
    named = ["pi-sessions/keep.jsonl", "pi-sessions/gone.jsonl", "pi-sessions/added.jsonl", "pi-sessions/escape"]
    result = review(ws, session["record"]["session_id"], "-e", "action=apply",
                    "-e", json.dumps({"apply_state": named, "apply_flagged": [".mcp.json"]}))
    assert result.returncode == 0, result.stdout[-3000:]
    kept = ws.path(KEPT)
    assert (kept / "keep.jsonl").read_text() == "old\nnew\n"
    assert (kept / "added.jsonl").read_text() == "planted\n"
    assert not (kept / "gone.jsonl").exists()
    # The link is made as a link, never followed: the host's /etc/passwd is not its content.
    assert os.readlink(kept / "escape") == "/etc/passwd"
    # Not named: held.
    assert not (kept / "later").exists()
    assert "mcpServers" in ws.path(f"{PROJECT}/.mcp.json").read_text()


def test_apply_state_is_refused_once_the_kept_state_changed(workstation, session):
    """Another session of the project wrote its kept state after this one ended."""
    ws = workstation
    ws.sh(f"echo other > {KEPT}/other-session.jsonl")
    changed = tree_hash(ws, KEPT)
    result = review(ws, session["record"]["session_id"], "-e", "action=apply",
                    "-e", json.dumps({"apply_state": ["pi-sessions"]}))
    assert result.returncode != 0
    assert "the kept state pi-sessions changed since the session started or the last apply (1 paths: " \
           "other-session.jsonl)" in result.stdout
    assert tree_hash(ws, KEPT) == changed


def test_apply_is_refused_once_the_host_tree_changed(workstation, session):
    ws = workstation
    ws.sh(f"echo 'print(3)' >> {PROJECT}/main.py")
    changed = tree_hash(ws)
    kept = tree_hash(ws, KEPT)
    result = review(ws, session["record"]["session_id"], "-e", "action=apply",
                    "-e", json.dumps({"apply_flagged": ["tool.sh"], "apply_state": ["pi-sessions/later"]}))
    assert result.returncode != 0
    assert "the project changed since the session started or the last apply (1 paths: main.py)" in result.stdout
    assert tree_hash(ws) == changed and tree_hash(ws, KEPT) == kept


def test_discard_removes_the_upper_directory(workstation, session):
    ws = workstation
    record = session["record"]
    result = review(ws, record["session_id"], "-e", "action=discard")
    assert result.returncode == 0, result.stdout[-3000:]
    assert not ws.path(os.path.dirname(record["review"]["upper"])).exists()
    # The kept state's upper directory went with it; the kept state itself stays.
    assert not ws.path(record["review"]["state"]["pi-sessions"]["upper"]).exists()
    assert ws.path(f"{KEPT}/keep.jsonl").read_text() == "old\nnew\n"
    history = json.loads(ws.path(record["record"]).read_text())["review"]["history"]
    assert [entry["action"] for entry in history] == ["apply", "apply", "discard"]
    shown = review(ws, record["session_id"])
    assert shown.returncode != 0 and "was discarded" in shown.stdout


def test_a_review_session_never_wipes_the_kept_state(workstation, session):
    ws = workstation
    kept, before = tree_hash(ws, KEPT), len(session_dirs(ws))
    result = run_agent(ws, "-e", "aisb_project_mode=review", "-e", "aisb_harness_state=fresh", command=["true"],
                       project=PROJECT)
    assert result.returncode != 0 and "aisb_harness_state=fresh wipes the project's kept harness state, which a " \
        "review-mode session never writes" in result.stdout, result.stdout[-3000:]
    assert tree_hash(ws, KEPT) == kept and len(session_dirs(ws)) == before


PI_PROJECT = "/home/dev/src/review-pi"
PI_CONFIG = "/home/dev/review-pi-config"
PI_KEPT = ("/home/dev/.local/state/aisb/harness-state/%s/pi-sessions"
           % hashlib.sha256(PI_PROJECT.encode()).hexdigest()[:32])
PI_ANSWER = "FAKE-REVIEW-ANSWER-" + uuid.uuid4().hex[:8]
PI_KEY = "sk-aisb-review-" + uuid.uuid4().hex
PI_VARIABLES = {
    "aisb_credentials": [{"host": NAME, "port": PORT, "header": "x-api-key", "variable": "FAKE_PROVIDER_KEY",
                          "value": PI_KEY}],
    "aisb_harness_config": PI_CONFIG}


def pi_session(ws, *extra):
    return run_agent(ws, "-e", json.dumps(PI_VARIABLES), *extra, project=PI_PROJECT, timeout=600)


def test_pis_conversation_in_review_mode_is_kept_only_when_applied(workstation, internet):
    """Real pi through the credential injector: its conversation of a review session goes
    to the session's upper directory, not to the kept state; applied by name, the next
    session's pi --continue carries it."""
    ws = workstation
    with fake_provider(ws, internet, PI_ANSWER) as provider:
        ws.sh(f"mkdir -p {PI_PROJECT}")
        write_tree(ws, PI_CONFIG, PI_CONFIG_FILES)
        result = pi_session(ws, "-e", "aisb_project_mode=review", "-e", json.dumps({"prompt": "First question."}))
        record = record_of(ws, result.stdout)
        assert result.returncode == 0 and PI_ANSWER in ws.path(record["transcript"]).read_text(), \
            result.stdout[-3000:]
        assert list(ws.path(PI_KEPT).rglob("*")) == [], "pi wrote its kept state in a review session"
        changes = record["review"]["state"]["pi-sessions"]["changes"]
        conversation = [item["path"] for item in changes if item["path"].endswith(".jsonl")]
        assert len(conversation) == 1 and all(item["flags"][0] == KEPT_FLAG for item in changes), changes

        applied = review(ws, record["session_id"], "-e", "action=apply", "-e",
                         json.dumps({"apply_state": ["pi-sessions"]}))
        assert applied.returncode == 0, applied.stdout[-3000:]
        assert PI_ANSWER in ws.path(f"{PI_KEPT}/{conversation[0]}").read_text()

        before = len(provider.requests())
        again = pi_session(ws, "-e", json.dumps({"command": ["pi", "--continue", "-p", "Again."]}))
        assert again.returncode == 0, again.stdout[-3000:]
        messages = json.dumps(json.loads(provider.requests()[before:][-1]["body"])["messages"])
        assert "First question." in messages and PI_ANSWER in messages and "Again." in messages, messages[-2000:]
