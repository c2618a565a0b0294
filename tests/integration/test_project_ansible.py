# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's configuration is never the project's: ansible-playbook reads ./ansible.cfg
and imports the plugins it names before the first task, so the defences are before and
beside the play. In direct mode an existing ansible.cfg and .ansible/ are read-only in
the sandbox, and a new or changed one, or a plugin directory Ansible loads beside a
playbook, is reported; review mode flags them; a session whose own ansible-playbook
read its configuration from the project says so.
"""

import json

from scenario import ANSIBLE_ENV, marking_callback, operator_vars
from sessions import record_of, run_agent

PROJECT = "/home/dev/src/ansible-app"
PWNED = "/home/dev/pwned-ansible"
CONFIG = "[defaults]\nforks = 5\n"
# The agent's callback plugin: importing it leaves the marker (the sandbox cannot reach PWNED).
CALLBACK = marking_callback(f"{PWNED}/callback-imported")
PLANT = f"""
set -e
printf '[defaults]\\ncallback_plugins = ./callback_plugins\\n' > ansible.cfg
mkdir -p callback_plugins group_vars .ansible
cat > callback_plugins/agent.py <<'EOF'
{CALLBACK}
EOF
echo 'ansible_python_interpreter: /project/evil' > group_vars/all.yml
echo 'print(1)' > library/evil.py
touch .ansible/x
echo planted
"""


def fresh_project(ws, setup=""):
    ws.sh(f"rm -rf {PROJECT} {PWNED} && mkdir -p {PROJECT} {PWNED} && cd {PROJECT} && echo 'print(1)' > main.py"
          + (" && " + setup if setup else ""))


def agent(ws, script, *extra, **kwargs):
    result = run_agent(ws, *extra, command=["bash", "-c", script], project=PROJECT, **kwargs)
    record = record_of(ws, result.stdout)
    return result, record, ws.path(record["transcript"]).read_text()


def test_an_existing_ansible_cfg_and_dot_ansible_cannot_be_changed(workstation):
    ws = workstation
    fresh_project(ws, f"printf '{CONFIG}' > ansible.cfg && mkdir .ansible && echo kept > .ansible/kept")
    attack = """
    echo 'callback_plugins = ./cb' >> ansible.cfg 2>/dev/null && echo CHANGED-appended
    mv ansible.cfg moved.cfg 2>/dev/null && echo CHANGED-moved
    rm -f ansible.cfg 2>/dev/null; [ -e ansible.cfg ] || echo CHANGED-removed
    touch .ansible/new 2>/dev/null && echo CHANGED-added
    echo x > .ansible/kept 2>/dev/null && echo CHANGED-written
    mv .ansible dot 2>/dev/null && echo CHANGED-dir-moved
    rm -rf .ansible 2>/dev/null; [ -d .ansible ] || echo CHANGED-dir-removed
    echo attack-done
    """
    result, record, transcript = agent(ws, attack)
    assert "attack-done" in transcript and "CHANGED" not in transcript, transcript
    assert ws.path(f"{PROJECT}/ansible.cfg").read_text() == CONFIG
    assert sorted(p.name for p in ws.path(f"{PROJECT}/.ansible").iterdir()) == ["kept"]
    assert ws.path(f"{PROJECT}/.ansible/kept").read_text() == "kept\n"
    assert {"ansible.cfg", ".ansible"} <= set(record["project_git"]["read_only"]), record["project_git"]
    assert record["project_git"]["ansible_findings"] == [], result.stdout[-3000:]


def test_a_planted_configuration_is_reported_and_the_next_session_says_it_read_it(workstation):
    ws = workstation
    fresh_project(ws, "mkdir library && echo 'print(0)' > library/ok.py")
    result, record, transcript = agent(ws, PLANT)
    assert "planted" in transcript, transcript
    found = dict((f["path"], f["what"]) for f in record["project_git"]["ansible_findings"])
    assert sorted(found) == [".ansible", "ansible.cfg", "callback_plugins", "group_vars", "library"], found
    # The play's warnings go to stderr.
    warned = result.stderr
    assert "what Ansible reads" in warned and f"{PROJECT}/callback_plugins" in warned, warned[-3000:]
    # The developer's next session, from the project's directory: ansible-playbook reads the
    # agent's ansible.cfg and imports its plugin before any task (the control: it can happen);
    # the session says so, and how to check.
    nxt = ws.run(["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws), "-e", f"project={PROJECT}",
                  "-e", json.dumps({"command": ["true"]})], check=False, cwd=PROJECT, env=ANSIBLE_ENV, timeout=600)
    assert ws.path(f"{PWNED}/callback-imported").exists(), nxt.stdout[-3000:]
    origin = record_of(ws, nxt.stdout)["ansible_origin"]
    assert origin["config_file"] == f"{PROJECT}/ansible.cfg", origin
    assert any(f"{PROJECT}/callback_plugins" in item for item in origin["from_project"]), origin
    assert "read its configuration from the project" in nxt.stderr, nxt.stderr[-3000:]
    assert "ansible-config dump --only-changed" in nxt.stderr, nxt.stderr[-3000:]
    # From elsewhere, the same session reads nothing of the project's.
    away = run_agent(ws, command=["true"], project=PROJECT)
    assert record_of(ws, away.stdout)["ansible_origin"]["from_project"] == [], away.stdout[-3000:]
    assert "read its configuration from the project" not in away.stderr, away.stderr[-3000:]


def test_review_flags_ansible_configuration_and_plugins(workstation):
    ws = workstation
    fresh_project(ws, "mkdir library && echo 'print(0)' > library/ok.py")
    _result, record, transcript = agent(ws, PLANT, "-e", "aisb_project_mode=review")
    assert "planted" in transcript, transcript
    flagged = dict((item["path"], item["flags"]) for item in record["review"]["changes"])
    for path in ("ansible.cfg", "callback_plugins/agent.py", "group_vars/all.yml", "library/evil.py", ".ansible/x"):
        assert any("Ansible" in why for why in flagged[path]), (path, flagged.get(path))
    assert not any("Ansible" in why for why in flagged.get("main.py", [])), flagged


def test_direct_mode_reports_ansible_files_at_any_depth(workstation):
    ws = workstation
    fresh_project(ws, "mkdir -p sub/dir app && echo 'print(0)' > sub/dir/main.py")
    deep = """
    set -e
    mkdir -p sub/dir/callback_plugins app/roles/r/tasks
    echo 'print(1)' > sub/dir/callback_plugins/x.py
    printf '[defaults]\\ncallback_plugins = ./cb\\n' > app/ansible.cfg
    echo '- debug: msg=x' > app/roles/r/tasks/main.yml
    echo planted-deep
    """
    result, record, transcript = agent(ws, deep)
    assert "planted-deep" in transcript, transcript
    found = dict((f["path"], f["what"]) for f in record["project_git"]["ansible_findings"])
    assert sorted(found) == ["app/ansible.cfg", "app/roles", "sub/dir/callback_plugins"], found
    assert found["sub/dir/callback_plugins"].startswith("new"), found
    assert f"{PROJECT}/sub/dir/callback_plugins" in result.stderr, result.stderr[-3000:]
