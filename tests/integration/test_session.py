# SPDX-License-Identifier: GPL-3.0-or-later
"""Sessions through run_agent.yml in the workstation: real gate, real sandbox, real traffic."""

import json
import re
import time

import pytest

from scenario import ANSIBLE_ENV, task_status
from sessions import (FACTS, PROJECT, allow, containers_left, image_recipes, images_and_policy, new_sandbox, processes,
                      record_of, run_agent, session_containers, session_dirs, session_module, start_in_background,
                      through)
from terminal import interactive_bash, interrupt_a_foreground_command, open_terminal, wait_for_screen
from workstation import AISB_STATE


def test_headless_command_reaches_the_allowlisted_host_and_not_the_other(workstation, internet, project):
    before = len(internet.requests())
    # The last request is origin-form (GET /path, Host: allowed.test) sent to the gate's port:
    # the gate answers it 400 itself, relaying nothing.
    script = ("curl -s http://allowed.test/; "
              "curl -s -o /dev/null -w 'other=%{http_code}\\n' http://other.test/; "
              "curl -sk https://allowed.test/ ; "
              "curl -s -o /dev/null -w 'origin=%{http_code}\\n' --request-target /path http://allowed.test/path; exit 7")
    result = run_agent(workstation, *allow("allowed.test"), command=["sh", "-c", script])
    assert result.returncode != 0  # the harness exited 7: the task fails with it
    record = record_of(workstation, result.stdout)
    assert record["exit_code"] == 7 and record["status"] == "exited"
    transcript = workstation.path(record["transcript"]).read_text()
    assert "hello from allowed.test port 80" in transcript
    assert "other=403" in transcript
    assert "hello from allowed.test port 443" in transcript  # TLS through CONNECT to 443 works
    seen = internet.requests()[before:]
    assert {(r["host"], r["port"]) for r in seen} == {("allowed.test", 80), ("allowed.test", 443)}
    assert "origin=400" in transcript
    assert len(record["gate"]["allowed"]) == 2 and len(record["gate"]["denied"]) == 1, record["gate"]
    assert all(entry["dst"] != "-" for entry in record["gate"]["allowed"]), record["gate"]
    [answered] = record["gate"]["answered"]
    # squid logs no method for a request it could not parse as one to relay.
    assert answered["status"].endswith("/400") and answered["dst"] == "-", answered
    assert answered["reason"].startswith("not a request the gate relays"), answered
    assert record["ruleset"]["nftables"], "the ruleset as installed is recorded"
    assert containers_left(workstation) == ""


def test_pi_runs_headless(workstation, project):
    result = run_agent(workstation, command=["pi", "--version"])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(workstation, result.stdout)
    assert record["exit_code"] == 0
    assert re.search(r"\d+\.\d+\.\d+", workstation.path(record["transcript"]).read_text())
    assert containers_left(workstation) == ""
    assert processes(workstation, "aisb-watchdog") == []  # the watchdog left with the session


def test_unnamed_caller_environment_stays_out(workstation, project):
    result = run_agent(workstation, "-e", json.dumps({"aisb_pass_environment": ["NAMED_VAR"],
                                                      "aisb_environment": {"GIVEN_VAR": "given"}}),
                       command=["sh", "-c", "env"], env={"NAMED_VAR": "named", "UNNAMED_SECRET": "leak"})
    assert result.returncode == 0, result.stdout[-3000:]
    inside = workstation.path(record_of(workstation, result.stdout)["transcript"]).read_text()
    assert "NAMED_VAR=named" in inside and "GIVEN_VAR=given" in inside
    assert "UNNAMED_SECRET" not in inside and "leak" not in inside


def test_short_environment_values_work_and_never_show(workstation, project):
    # no_log used to mask every "0" of the result, the exit code included, and fail the play.
    values = {"ZERO": "0", "ONE": "1", "YES": "true", "SECRET": "s3cr3t-v4lue-77"}
    result = run_agent(workstation, "-vvv", "-e", json.dumps({"aisb_environment": values}),
                       command=["sh", "-c", "env | grep -E '^(ZERO|ONE|YES|SECRET)=' | sort"])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(workstation, result.stdout)
    # With the recipe's fixed values (pi's switches for its version check and telemetry).
    names = sorted(list(values) + list(image_recipes()["pi"]["env_values"]))
    assert record["exit_code"] == 0 and record["environment_names"] == names
    inside = workstation.path(record["transcript"]).read_text().split()
    assert inside == ["ONE=1", "SECRET=s3cr3t-v4lue-77", "YES=true", "ZERO=0"]
    assert "s3cr3t-v4lue-77" not in result.stdout + result.stderr
    assert re.search(r"session \S+ exited \(exit 0\)", result.stdout), result.stdout[-2000:]


BAD_PROJECTS = ["/", "/etc", "/usr/lib", "/home", "/home/dev", "/home/dev/.ssh", "/home/dev/.local/state/aisb",
                "/run/user/1000", "/home/dev/missing", "/home/dev/src/a:b", "/home/dev/src/a,ro", "relative",
                "/proc/self", "/home/dev/.pi/agent", "/home/dev/.cache"]


@pytest.mark.parametrize("bad", BAD_PROJECTS)
def test_bad_project_paths_are_refused_before_anything_starts(workstation, bad):
    workstation.sh("mkdir -p '/home/dev/src/a:b' '/home/dev/src/a,ro' /home/dev/.ssh /home/dev/.pi/agent /home/dev/.cache")
    before = session_dirs(workstation)
    result = run_agent(workstation, command=["true"], project=bad)
    assert result.returncode != 0
    assert "project" in result.stdout and "refused" in result.stdout, result.stdout[-2000:]
    assert session_dirs(workstation) == before
    assert containers_left(workstation) == ""


def test_a_project_cut_at_a_space_is_explained(workstation):
    """-e project=DIR is key=value: a space ends the value, and the message says so."""
    workstation.sh("mkdir -p '/home/dev/src/with space'")
    before = session_dirs(workstation)
    result = run_agent(workstation, command=["true"], project="/home/dev/src/with space")
    assert result.returncode != 0
    assert "project '/home/dev/src/with' (resolved to '/home/dev/src/with') is not an existing directory" \
        in result.stdout, result.stdout[-2000:]
    assert "looks cut at a space" in result.stdout
    assert """-e '{\\"project\\": \\"/home/dev/src/with space\\"}'""" in result.stdout, result.stdout[-2000:]
    assert session_dirs(workstation) == before
    # The JSON form the message shows reaches the module whole.
    whole = run_agent(workstation, "-e", json.dumps({"project": "/home/dev/src/with space"}), command=["true"])
    assert whole.returncode == 0, whole.stdout[-2000:]


@pytest.mark.parametrize("name", ["1BAD", "BAD-NAME", "HTTPS_PROXY", "A B"])
def test_bad_environment_names_are_refused(workstation, project, name):
    result = run_agent(workstation, "-e", json.dumps({"aisb_environment": {name: "x"}}), command=["true"])
    assert result.returncode != 0
    assert repr(name) in result.stdout, result.stdout[-2000:]
    assert containers_left(workstation) == ""


def test_stale_facts_are_refused(workstation, project):
    facts_file = workstation.path(FACTS)
    original = facts_file.read_text()
    facts = json.loads(original)
    try:
        # What podman reports now differs from what was measured: the cached spike
        # measures again, so a stale file given to the session directly must be refused.
        facts["fingerprint"]["podman"] = "0.0.1"
        result = session_module(workstation, project=PROJECT, image="x", network="none", command=["true"],
                                host_facts=facts)
        assert result.returncode != 0
        assert "fingerprint is stale" in result.stdout and "podman" in result.stdout, result.stdout[-2000:]
    finally:
        facts_file.write_text(original)


def test_model_not_holding_is_refused(workstation, project):
    facts = json.loads(workstation.path(FACTS).read_text())
    facts["verdict"]["model_holds"] = False
    facts["verdict"]["reasons"] = ["tun: /dev/net/tun is not usable."]
    result = session_module(workstation, project=PROJECT, image="x", network="none", command=["true"],
                            host_facts=facts)
    assert result.returncode != 0
    assert "model_holds is false" in result.stdout and "tun" in result.stdout, result.stdout[-2000:]


def test_missing_facts_are_refused(workstation, project):
    result = session_module(workstation, project=PROJECT, image="x", network="none", command=["true"])
    assert result.returncode != 0
    assert "aisb_host is missing" in result.stdout, result.stdout[-2000:]


@pytest.mark.parametrize("signame", ["TERM", "INT"])
def test_signal_to_ansible_playbook_leaves_nothing_running(workstation, project, signame):
    running = session_containers(workstation)
    playbook = start_in_background(workstation, ["sleep", "300"])
    try:
        new_sandbox(workstation, running)
        workstation.run(["pkill", f"-{signame}", "-f", "^/opt/ansible/bin/python3 /usr/local/bin/ansible-playbook"])
        # A correctness bound, generous for a loaded machine: not a speed assertion.
        assert containers_left(workstation) == ""
    finally:
        playbook.kill()
        playbook.wait()


def test_sigkill_of_the_session_module_leaves_nothing_running(workstation, project):
    running = session_containers(workstation)
    playbook = start_in_background(workstation, ["sleep", "300"])
    try:
        sandbox = new_sandbox(workstation, running)
        # The sandbox's podman is the module's child: its parent is the module process.
        podman_run = processes(workstation, f"podman run --rm --name {sandbox}")
        assert len(podman_run) == 1, podman_run
        module = workstation.run(["ps", "-o", "ppid=", "-p", podman_run[0]]).stdout.strip()
        assert "python" in workstation.run(["ps", "-o", "args=", "-p", module]).stdout
        workstation.run(["kill", "-KILL", module])
        # A correctness bound, generous for a loaded machine: not a speed assertion.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (session_containers(workstation)
                                               or processes(workstation, "aisb-watchdog")):
            time.sleep(0.5)
        assert containers_left(workstation) == ""
        assert processes(workstation, "aisb-watchdog") == []
        output = playbook.communicate(timeout=120)[0]
        assert playbook.returncode != 0, output[-2000:]
        # The watchdog's record is sealed with the workstation's key, as the session's would be.
        path = f"{AISB_STATE}/sessions/{sandbox[len('aisb-sandbox-'):]}/record.json"
        assert json.loads(workstation.path(path).read_text())["status"] == "controller-lost"
        checked = workstation.run(["ansible", "localhost", "-m", "aisb.sandbox.session_records", "-a", "last=50"],
                                  check=False, env=ANSIBLE_ENV)
        assert checked.returncode == 0, checked.stdout[-3000:]
        result = json.loads(checked.stdout.split("=>", 1)[1])
        assert result["failed_records"] == [] and path not in result["unsigned_records"], result
    finally:
        playbook.kill()
        playbook.wait()


def test_gate_killed_mid_session_ends_it_with_a_clear_status(workstation, internet, project):
    script = ("curl -s http://allowed.test/; touch /project/.first-done; sleep 2; "
              "curl -s -m 5 -o /dev/null -w 'after=%{http_code}\\n' http://allowed.test/; sleep 300")
    workstation.sh(f"rm -f {PROJECT}/.first-done")
    running = session_containers(workstation)
    playbook = start_in_background(workstation, ["sh", "-c", script], *allow("allowed.test"))
    try:
        sandbox = new_sandbox(workstation, running)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not workstation.path(f"{PROJECT}/.first-done").exists():
            time.sleep(0.2)
        workstation.run(["podman", "kill", sandbox.replace("aisb-sandbox-", "aisb-gate-")])
        output = playbook.communicate(timeout=60)[0]
    finally:
        playbook.kill()
    record = record_of(workstation, output)
    assert record["status"] == "gate-died", record
    assert "gate exited" in record["reason"]
    assert containers_left(workstation) == ""


def test_a_gate_that_cannot_start_fails_closed(workstation, project):
    """The gate starts beside the sandbox: when it cannot start, the harness never runs."""
    result = session_module(workstation, **{**images_and_policy(workstation), "project": PROJECT,
                                            "gate_image": "localhost/aisb-no-such-gate:0",
                                            "command": ["sh", "-c", "echo harness-ran"]})
    assert result.returncode != 0
    assert "the gate did not start" in result.stdout, result.stdout[-3000:]
    transcript = re.search(r'"transcript": "([^"]+)"', result.stdout).group(1)
    assert "harness-ran" not in workstation.path(transcript).read_text()
    assert containers_left(workstation) == ""


def test_concurrent_sessions_each_see_only_their_own_allowlist(workstation, internet, project, gate_path):
    """Five sessions at once, each allowed one name; each also tries the others' gates at
    their ports (on tcp-forward, another session's port on its own loopback; mapped, on
    the mapped address): no answer from any, and no gate records another's request."""
    names = [f"site{i}.test" for i in range(5)]
    ports = f"{PROJECT}/.gate-ports"
    workstation.sh(f"rm -rf {ports} && mkdir -p {ports}")
    script = "; ".join(f"curl -s -o /dev/null -w '{n}=%{{http_code}}\\n' http://{n}/" for n in names) + (
        # Every session's port, then each of the others' tried as a proxy for this one's own name.
        "; echo ${HTTP_PROXY##*:} >/project/.gate-ports/$AISB_SESSION"
        "; for _ in $(seq 300); do [ $(ls /project/.gate-ports | wc -l) -ge 5 ] && break; sleep 0.2; done"
        "; for f in /project/.gate-ports/*; do [ $f = /project/.gate-ports/$AISB_SESSION ] && continue"
        "; echo cross-$(cat $f)=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -x ${HTTP_PROXY%:*}:$(cat $f) "
        "http://$MINE/c-cross); done")
    # Nothing kept: five sessions of one project never share the harness's kept state (one writer).
    playbooks = [start_in_background(workstation, ["sh", "-c", script], *allow(name), *through(gate_path),
                                     "-e", json.dumps({"aisb_environment": {"MINE": name}}),
                                     "-e", "aisb_harness_state=none") for name in names]
    outputs = [p.communicate(timeout=300)[0] for p in playbooks]
    for mine, output in zip(names, outputs):
        record = record_of(workstation, output)
        transcript = workstation.path(record["transcript"]).read_text()
        codes = dict(line.split("=") for line in transcript.split() if "=" in line)
        cross = dict((key, value) for key, value in codes.items() if key.startswith("cross-"))
        assert dict((key, value) for key, value in codes.items() if key not in cross) == {
            n: ("200" if n == mine else "403") for n in names}, (mine, transcript)
        assert len(cross) == 4 and set(cross.values()) == {"000"}, (mine, transcript)
        # Its gate saw its own five requests only: never another session's c-cross.
        gate = record["gate"]
        assert len(gate["allowed"]) == 1 and len(gate["denied"]) == 4, gate
    assert [r for r in internet.requests() if r["path"] == "/c-cross"] == []
    assert containers_left(workstation) == ""


def test_a_warm_session_takes_what_the_roles_gave_only_for_its_own_inputs(workstation, internet, project):
    """A warm run includes neither the image nor the gate role: what they gave for the same
    inputs is found (session_images). The attacker's case: right after sessions allowed
    site1.test, a session whose inputs allow only site2.test (and other.test) must run
    under its own policy, site1.test refused by its gate (real traffic), and its next run
    finds that one."""
    script = ["sh", "-c", "; ".join("curl -s -o /dev/null -w '%s=%%{http_code}\\n' http://%s/" % (name, name)
                                    for name in ("site1.test", "site2.test"))]

    def session(*entries):
        result = run_agent(workstation, *allow(*entries), command=script)
        assert result.returncode == 0, result.stdout[-3000:]
        record = record_of(workstation, result.stdout)
        codes = dict(line.split("=") for line in workstation.path(record["transcript"]).read_text().split())
        return result.stdout, record, codes

    run_agent(workstation, *allow("site1.test", "site2.test"), command=["true"])  # remembered, if it was not
    output, wide, codes = session("site1.test", "site2.test")
    assert task_status(output, "Ensure the gate image and this policy") == "skipping", output[-3000:]
    assert codes == {"site1.test": "200", "site2.test": "200"}
    output, narrow, codes = session("site2.test", "other.test")
    # Other inputs: the gate role ran and rendered this allow list's policy.
    assert task_status(output, "Validate the policy, render it") == "changed", output[-3000:]
    assert codes == {"site1.test": "403", "site2.test": "200"}, codes
    assert narrow["policy_dir"] != wide["policy_dir"] and narrow["image"]["tag"] == wide["image"]["tag"]
    output, again, codes = session("site2.test", "other.test")
    assert task_status(output, "Ensure the gate image and this policy") == "skipping", output[-3000:]
    assert again["policy_dir"] == narrow["policy_dir"] and codes == {"site1.test": "403", "site2.test": "200"}


def test_interactive_session_in_a_real_terminal(workstation, project):
    log = "/home/dev/interactive.log"
    open_terminal(workstation, "agent", f"{interactive_bash(workstation)} 2>&1 | tee {log}")
    try:
        wait_for_screen(workstation, "agent", "bash", timeout=120)
        # Keys reach the harness.
        workstation.run(["tmux", "send-keys", "-t", "agent", "echo typed-$((6*7))", "Enter"])
        wait_for_screen(workstation, "agent", "typed-42")
        # A resize reaches the harness's TTY.
        workstation.run(["tmux", "resize-window", "-t", "agent", "-x", "120", "-y", "40"])
        time.sleep(1)
        workstation.run(["tmux", "send-keys", "-t", "agent", "echo size-$(stty size | tr ' ' x)", "Enter"])
        wait_for_screen(workstation, "agent", "size-40x120")
        # Ctrl-C interrupts the harness's foreground command, not ansible-playbook.
        interrupt_a_foreground_command(workstation, "agent")
        # Leaving the harness ends the playbook with the harness's exit code.
        workstation.run(["tmux", "send-keys", "-t", "agent", "exit 3", "Enter"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "PLAY RECAP" not in workstation.path(log).read_text():
            time.sleep(0.2)
        output = workstation.path(log).read_text()
        record = record_of(workstation, output)
        assert record["exit_code"] == 3 and record["status"] == "exited", output[-2000:]
        assert containers_left(workstation) == ""
    finally:
        workstation.run(["tmux", "kill-server"], check=False)


def test_check_mode_plans_and_starts_nothing(workstation, project):
    before = session_dirs(workstation)
    result = run_agent(workstation, "--check", command=["true"])
    assert result.returncode == 0, result.stdout[-3000:]
    assert re.search(r"TASK \[Run the session\] \*+\nok: \[localhost\]", result.stdout), result.stdout[-3000:]
    assert session_dirs(workstation) == before
    assert containers_left(workstation) == ""
