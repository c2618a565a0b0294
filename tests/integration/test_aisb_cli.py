# SPDX-License-Identifier: GPL-3.0-or-later
"""The aisb command, as the developer types it in the project's directory: provision.yml
installs it; its exit code is the harness's; a headless session's answer reaches the
terminal; nothing the project holds (ansible.cfg and the plugins it names, collections/,
library/, an ansible-playbook early on PATH) takes part in the run; ls, show and review
read the sessions back; the developer's settings file reaches the session, and one
others could write is refused before anything starts."""

import json
import re
import subprocess
import time

from scenario import ANSIBLE_ENV, marking_callback, operator_vars
from sessions import record_of, run_agent, session_containers, session_dirs
from terminal import interrupt_a_foreground_command, open_terminal, type_keys, wait_for_screen
from workstation import PATH, USER_HOME, USER_UID

PROJECT = "/home/dev/src/aisb app"  # a space in the path: no JSON needed
PWNED = "/home/dev/pwned-aisb"
SETTINGS = f"{USER_HOME}/.config/aisb/settings.yml"
CALLBACK = marking_callback(f"{PWNED}/callback-imported")
# What an agent leaves in the project for the developer's next command there.
PLANT = f"""
set -e
mkdir -p callback_plugins library bin collections/ansible_collections/aisb/sandbox/playbooks
printf '[defaults]\\ncallback_plugins = ./callback_plugins\\nlibrary = ./library\\ncollections_path = ./collections\\n' \
  > ansible.cfg
cat > callback_plugins/agent.py <<'EOF'
{CALLBACK}
EOF
printf '#!/bin/sh\\ntouch {PWNED}/library-module\\necho {{}}\\n' > library/command.py
printf '#!/bin/sh\\ntouch {PWNED}/ansible-playbook-from-path\\nexit 0\\n' > bin/ansible-playbook
chmod +x bin/ansible-playbook
printf 'namespace: aisb\\nname: sandbox\\nversion: 9.9.9\\n' > collections/ansible_collections/aisb/sandbox/galaxy.yml
printf -- '- hosts: localhost\\n  tasks:\\n    - ansible.builtin.file: {{path: {PWNED}/collection-playbook, state: touch}}\\n' \
  > collections/ansible_collections/aisb/sandbox/playbooks/run_agent.yml
"""


def aisb(ws, *argv, path=PATH, timeout=600):
    """aisb ARGV as the developer types it in PROJECT, with the workstation's operator
    variables (its base image and CA anchors, what group_vars hold on a real one)."""
    argv = list(argv)
    if argv[0] == "run":
        at = argv.index("--") if "--" in argv else len(argv)
        argv[at:at] = ["-e", operator_vars(ws)]
    return ws.run(["aisb"] + argv, check=False, cwd=PROJECT, env={"PATH": path}, timeout=timeout)


def fresh_project(ws):
    ws.sh(f"rm -rf '{PROJECT}' {PWNED} && mkdir -p '{PROJECT}' {PWNED} && echo 'print(1)' > '{PROJECT}/main.py'")


def test_provision_installs_aisb_on_the_users_path(workstation):
    ws = workstation
    assert ws.run(["sh", "-c", "command -v aisb"]).stdout.strip() == "/usr/local/bin/aisb"
    assert ws.run(["stat", "-c", "%U %a", "/usr/local/bin/aisb"]).stdout.split() == ["root", "755"]
    usage = ws.run(["aisb", "run", "--help"]).stdout
    assert usage.startswith("usage: aisb run") and "-- COMMAND" in usage


def test_the_exit_code_is_the_harnesses_and_the_output_is_quiet(workstation):
    ws = workstation
    fresh_project(ws)
    done = aisb(ws, "run", "--", "true")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "TASK [" not in done.stdout + done.stderr and "PLAY RECAP" not in done.stdout
    assert "implicit localhost" not in done.stderr and "No inventory was parsed" not in done.stderr
    assert "· Run the session" in done.stderr, done.stderr[-3000:]
    record = record_of(ws, done.stderr)
    assert record["project"] == PROJECT and record["exit_code"] == 0
    assert record["ansible_origin"]["config_file"] is None, record["ansible_origin"]
    # The user's own configuration file is used, and recorded as it is.
    ws.sh(f"printf '[defaults]\\nforks = 3\\n' > {USER_HOME}/.ansible.cfg")
    try:
        own = aisb(ws, "run", "--", "true")
    finally:
        ws.sh(f"rm -f {USER_HOME}/.ansible.cfg")
    assert own.returncode == 0, own.stdout[-3000:] + own.stderr[-3000:]
    origin = record_of(ws, own.stderr)["ansible_origin"]
    assert origin["config_file"] == f"{USER_HOME}/.ansible.cfg" and "config_note" not in origin, origin
    failed = aisb(ws, "run", "--", "sh", "-c", "echo on-the-way-out; exit 3")
    assert failed.returncode == 3, failed.stdout[-3000:] + failed.stderr[-3000:]
    # Headless, the transcript is shown whatever the exit.
    assert "on-the-way-out" in failed.stdout, failed.stdout[-3000:]


def test_a_prompt_prints_the_answer_on_the_terminal_untemplated(workstation):
    ws = workstation
    fresh_project(ws)
    done = aisb(ws, "run", "-H", "shell", "-p", "echo 'the-answer-is-{{ 6 * 7 }}'")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # stdout is the harness's answer alone (aisb run -p ... > answer.txt): the record line,
    # the steps and an image build's progress are aisb's own words, on stderr.
    assert done.stdout == "the-answer-is-{{ 6 * 7 }}\n", done.stdout[-3000:]
    assert "session " in done.stderr and "the-answer-is" not in done.stderr, done.stderr[-3000:]
    # The playbook form ends with the same answer.
    played = run_agent(ws, "-e", json.dumps({"project": PROJECT}), command=["sh", "-c", "echo from-the-transcript"])
    assert played.returncode == 0, played.stdout[-3000:]
    assert "from-the-transcript" in played.stdout.split("Show the harness's answer", 1)[1], played.stdout[-3000:]


def test_a_headless_sessions_output_reaches_the_terminal_while_it_runs(workstation):
    ws = workstation
    fresh_project(ws)
    argv = ["aisb", "run", "-e", operator_vars(ws), "--", "sh", "-c", "echo early; sleep 8; echo late"]
    running = subprocess.Popen(ws.command(argv, cwd=PROJECT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        seen = []
        for line in running.stdout:
            seen.append(line)
            if line == "early\n":
                # The harness still sleeps: the line came as it was written, not at the end.
                assert running.poll() is None
                break
        rest = running.stdout.read()
    finally:
        running.wait(timeout=300)
    assert "early\n" in seen and "late\n" in rest, (seen, rest[-2000:])
    assert rest.count("early") == 0 and rest.count("late\n") == 1, rest[-2000:]
    assert running.returncode == 0


def test_an_image_build_shows_its_step_while_it_runs(workstation):
    """A recipe of the developer's own never built before: aisb says the build's step (read
    from its log) and its seconds on stderr while podman still builds; stdout stays the
    answer alone."""
    ws = workstation
    fresh_project(ws)
    nonce = "%x" % time.time_ns()
    recipe = {"packages": ["curl", "git"], "install": [f"echo {nonce} && sleep 12"], "command": ["bash"],
              "prompt": ["-c"], "allow": [], "env": []}
    argv = ["aisb", "run", "-e", operator_vars(ws), "-e", json.dumps({"aisb_recipes": {"slow": recipe}}),
            "-H", "slow", "-p", "echo built-and-ran"]
    running = subprocess.Popen(ws.command(argv, cwd=PROJECT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        seen, building = [], None
        for line in running.stderr:
            seen.append(line)
            if re.match(r"  STEP [0-9]+/[0-9]+: .* \([0-9]+ s\)$", line):
                # Shown while the build runs, not after it.
                building = ws.run(["pgrep", "-f", "[p]odman build --pull=never"], check=False).returncode == 0
                break
        rest = running.stderr.read()
        answer = running.stdout.read()
    finally:
        running.wait(timeout=900)
    assert building is True, "".join(seen)[-3000:]
    assert running.returncode == 0, ("".join(seen) + rest)[-3000:]
    shown = "".join(seen) + rest
    assert re.search(r"  STEP [0-9]+/[0-9]+: RUN echo %s && sleep 12 \([0-9]+ s\)\n" % nonce, shown), shown[-3000:]
    assert "built localhost/aisb-sandbox:" in rest and answer == "built-and-ran\n", (rest[-3000:], answer)
    # Built now: the next run builds nothing and shows no step.
    warm = aisb(ws, "run", "-e", json.dumps({"aisb_recipes": {"slow": recipe}}), "-H", "slow", "--", "true")
    assert warm.returncode == 0 and "STEP " not in warm.stderr and "Building" not in warm.stderr, warm.stderr[-3000:]


def test_aisb_run_in_a_real_terminal_is_interactive_and_exits_with_the_harness(workstation):
    ws = workstation
    fresh_project(ws)
    open_terminal(ws, "aisb", f"cd '{PROJECT}' && aisb run -e {operator_vars(ws)} -- bash --norc -i;"
                  " echo aisb-exited-$?; sleep 600")
    try:
        wait_for_screen(ws, "aisb", "· Run the session", timeout=120)
        type_keys(ws, "aisb", "echo typed-$((6*7)) in $PWD", "Enter")
        wait_for_screen(ws, "aisb", "typed-42 in /project")
        # A resize of the developer's terminal reaches the harness's TTY.
        ws.run(["tmux", "resize-window", "-t", "aisb", "-x", "120", "-y", "40"])
        time.sleep(1)
        type_keys(ws, "aisb", "echo size-$(stty size | tr ' ' x)", "Enter")
        wait_for_screen(ws, "aisb", "size-40x120")
        # Ctrl-C reaches the harness's foreground command; aisb and the session go on.
        interrupt_a_foreground_command(ws, "aisb")
        type_keys(ws, "aisb", "exit 5", "Enter")
        wait_for_screen(ws, "aisb", "aisb-exited-5", timeout=120)
        assert session_containers(ws) == []
    finally:
        ws.run(["tmux", "kill-server"], check=False)


def test_nothing_the_project_holds_takes_part_in_aisb_run(workstation):
    ws = workstation
    fresh_project(ws)
    ws.sh(f"cd '{PROJECT}' && " + PLANT)
    hostile_path = f"{PROJECT}/bin:.:bin:{PATH}"
    # The controls: from the project, Ansible does read its ansible.cfg and plugins, and
    # that PATH finds the project's ansible-playbook.
    control = ws.run(["ansible-playbook", "--version"], check=False, cwd=PROJECT, env={"PATH": hostile_path})
    assert ws.path(f"{PWNED}/ansible-playbook-from-path").exists(), control.stdout
    ws.run(["ansible", "localhost", "-m", "ansible.builtin.ping"], check=False, cwd=PROJECT, env=ANSIBLE_ENV)
    assert ws.path(f"{PWNED}/callback-imported").exists()
    ws.sh(f"rm -f {PWNED}/*")
    done = aisb(ws, "run", "--", "true", path=hostile_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in ws.path(PWNED).iterdir()) == []
    origin = record_of(ws, done.stderr)["ansible_origin"]
    # The user has no configuration file: the record says so, not a temporary file's name.
    assert origin["from_project"] == [] and origin["config_file"] is None, origin
    assert origin["config_note"].startswith("aisb: no configuration file"), origin
    assert "read its configuration from the project" not in done.stderr, done.stderr[-3000:]


def test_ls_show_logs_and_review_read_the_sessions_back(workstation):
    ws = workstation
    fresh_project(ws)
    done = aisb(ws, "run", "--review", "--", "sh", "-c", "echo by-the-agent > new.txt; echo logged")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    session_id = record_of(ws, done.stderr)["session_id"]
    assert session_dirs(ws)[-1] == session_id
    listed = aisb(ws, "ls").stdout.splitlines()
    assert re.match(re.escape(session_id) + r"  " + re.escape(PROJECT) + r"  pi  review  exit 0  ", listed[-1]), listed
    assert listed[-1].endswith("review pending"), listed
    shown = aisb(ws, "show", "last").stdout
    assert f"session  {session_id}" in shown and "review   pending" in shown, shown
    assert "logged" in aisb(ws, "logs", "last").stdout
    assert not ws.path(f"{PROJECT}/new.txt").exists()
    applied = aisb(ws, "review", "last", "apply")
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    assert ws.path(f"{PROJECT}/new.txt").read_text() == "by-the-agent\n"
    assert not aisb(ws, "ls").stdout.splitlines()[-1].endswith("review pending")
    assert "no session 'nope'" in aisb(ws, "show", "nope").stderr
    doctor = aisb(ws, "doctor")
    assert doctor.returncode == 0 and doctor.stdout.startswith("sessions can run here"), doctor.stdout


def write_settings(ws, text, mode):
    ws.sh(f"mkdir -p {USER_HOME}/.config/aisb && chmod 700 {USER_HOME}/.config/aisb && "
          f"cat > {SETTINGS} && chmod {mode:o} {SETTINGS}", input=text)


def test_the_settings_files_allow_entry_reaches_the_session_with_its_origin(workstation, internet):
    ws = workstation
    fresh_project(ws)
    write_settings(ws, "aisb_allow: [other.test]\n", 0o600)
    fetch = ["sh", "-c", 'for n in other.test allowed.test; do curl -s -o /dev/null -w "$n=%{http_code}\\n" http://$n/; '
                         'done']
    try:
        done = aisb(ws, "run", "--", *fetch)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # Real traffic through the gate: the file's entry is enforced, nothing else is let through.
        assert "other.test=200" in done.stdout.splitlines(), done.stdout[-3000:]
        assert "allowed.test=200" not in done.stdout, done.stdout[-3000:]
        # The record's allow is read from the policy directory the gate enforced.
        origins = dict((entry["entry"], entry["origin"]) for entry in record_of(ws, done.stderr)["allow"])
        assert origins == {"other.test": f"settings file {SETTINGS}"}, origins
        # A value given on the command line replaces the file's.
        given = aisb(ws, "run", "-e", '{"aisb_allow": ["allowed.test"]}', "--", *fetch)
        assert given.returncode == 0, given.stdout[-3000:] + given.stderr[-3000:]
        assert "allowed.test=200" in given.stdout.splitlines() and "other.test=200" not in given.stdout, given.stdout
        origins = dict((entry["entry"], entry["origin"]) for entry in record_of(ws, given.stderr)["allow"])
        assert origins == {"allowed.test": "user"}, origins
    finally:
        ws.sh(f"rm -f {SETTINGS}")


def test_a_settings_file_others_can_write_is_refused_before_anything_starts(workstation):
    ws = workstation
    fresh_project(ws)
    before = session_dirs(ws)
    write_settings(ws, "aisb_allow: [planted.test]\n", 0o664)
    try:
        refused = aisb(ws, "run", "--", "true")
    finally:
        ws.sh(f"rm -f {SETTINGS}")
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    sentence = (f"aisb: settings file {SETTINGS} belongs to uid {USER_UID} with mode 0664: it must be yours "
                f"(uid {USER_UID}) and writable by you alone")
    assert sentence in refused.stderr and f"chmod go-w {SETTINGS}" in refused.stderr, refused.stderr[-3000:]
    # Refused at the play's first step (session_prepare's first): no image, gate or session
    # work followed (the unit tests show its later steps, the host's facts among them, do not run).
    assert "· Run the session" not in refused.stderr and "· Ensure the sandbox image" not in refused.stderr
    assert session_dirs(ws) == before and session_containers(ws) == []


def test_aisb_run_where_provision_never_ran_says_what_to_run_in_one_sentence(workstation):
    """What provision.yml installs is missing (nft here): one sentence naming the playbook
    to run, a refusal's exit code, no traceback, nothing started."""
    ws = workstation
    fresh_project(ws)
    before = session_dirs(ws)
    ws.run(["mv", "/usr/sbin/nft", "/usr/sbin/nft.moved"], user="root")
    try:
        refused = aisb(ws, "run", "--", "echo", "harness-ran")
    finally:
        ws.run(["mv", "/usr/sbin/nft.moved", "/usr/sbin/nft"], user="root")
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    sentences = [line for line in refused.stderr.splitlines() if line.startswith("aisb: ")]
    assert len(sentences) == 1 and "ansible-playbook aisb.sandbox.provision" in sentences[0], refused.stderr[-3000:]
    assert "Traceback" not in refused.stdout + refused.stderr and refused.stdout == "", refused.stdout[-3000:]
    assert "· Ensure the sandbox image" not in refused.stderr, refused.stderr[-3000:]
    assert session_dirs(ws) == before and session_containers(ws) == []
