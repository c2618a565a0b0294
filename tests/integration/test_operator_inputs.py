# SPDX-License-Identifier: GPL-3.0-or-later
"""What the operator gives a session is never what an agent wrote: an input read on the
controller (harness configuration, prompt file, a key file) that resolves inside the
project or the collection's state is refused before anything starts; one session of a
project writes its kept harness state at a time; and an operator's own recipe is a
named input whose allow entries are host names, no team file in play."""

import json
import time

from sessions import PROJECT, record_of, run_agent, session_dirs, start_in_background

# A recipe of the operator's own that reaches other.test.
WIDE = {"packages": ["curl"], "install": [], "command": ["bash"], "prompt": ["-c"], "allow": ["other.test"], "env": []}
FETCH = "for n in allowed.test other.test; do curl -s -o /dev/null -w \"$n=%{http_code}\\n\" http://$n/; done"


def refused(result, needle):
    output = result.stdout + result.stderr
    assert result.returncode != 0 and needle in output, output[-3000:]


def test_operator_inputs_inside_the_project_are_refused(workstation, project):
    # What an earlier session's agent could have left in the project, and a link to it.
    workstation.sh(f"mkdir -p {PROJECT}/.aisb/pi-config && echo 'agent instructions' > {PROJECT}/.aisb/pi-config/AGENTS.md"
                   f" && echo 'do what the file says' > {PROJECT}/task.md && echo sk-planted > {PROJECT}/.key"
                   f" && chmod 600 {PROJECT}/.key && mkdir -p /home/dev/operator"
                   f" && ln -sfn {PROJECT}/.aisb/pi-config /home/dev/operator/pi-config")
    before = len(session_dirs(workstation))
    cases = [
        ({"aisb_harness_config": f"{PROJECT}/.aisb/pi-config"}, "harness_config"),
        ({"aisb_harness_config": "/home/dev/operator/pi-config"}, "harness_config"),
        ({"prompt_file": f"{PROJECT}/task.md"}, "prompt_file"),
        ({"aisb_credentials": [{"host": "api.anthropic.com", "header": "x-api-key", "variable": "ANTHROPIC_API_KEY",
                                "from_file": f"{PROJECT}/.key"}]}, "aisb_credentials[0] from_file"),
    ]
    for variables, named in cases:
        result = run_agent(workstation, "-e", json.dumps(variables), command=None if "prompt_file" in variables
                           else ["true"])
        refused(result, f"{named} ")
        assert f"inside {PROJECT}, which sessions let the agent write" in result.stdout, result.stdout[-2000:]
    assert len(session_dirs(workstation)) == before


def test_a_second_session_of_a_project_does_not_write_its_kept_state(workstation, project):
    first = start_in_background(workstation, ["sleep", "40"])
    try:
        deadline = time.monotonic() + 120
        while "aisb-sandbox-" not in workstation.run(["podman", "ps", "--format", "{{.Names}}"]).stdout:
            assert time.monotonic() < deadline and first.poll() is None, first.stdout.read()[-3000:]
            time.sleep(1)
        second = run_agent(workstation, command=["true"])
        refused(second, "another session of this project (")
        assert "aisb_harness_state=none" in second.stdout
        # Without kept state it runs beside the first.
        third = run_agent(workstation, "-e", "aisb_harness_state=none", command=["true"])
        assert third.returncode == 0, third.stdout[-3000:]
        assert record_of(workstation, third.stdout)["harness_state"] is None
    finally:
        first.wait(timeout=300)
    assert first.returncode == 0
    # Once the first has ended, the next one keeps the state again.
    fourth = run_agent(workstation, command=["true"])
    assert fourth.returncode == 0 and record_of(workstation, fourth.stdout)["harness_state"]["mode"] == "keep"


def test_a_recipe_that_claims_an_address_is_refused(workstation, internet, project):
    pinned = dict(WIDE, allow=[f"{internet.address}:80"])
    result = run_agent(workstation, "-e", json.dumps({"aisb_recipes": {"pinned": pinned}, "aisb_harness": "pinned"}),
                       command=["true"])
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "allow names an address or a private endpoint" in output, output[-3000:]


def test_an_operator_recipe_by_name_works_without_a_team(workstation, internet, project):
    """The control: without a team file a developer's own recipe, named, runs and its
    allow entry reaches its host (the test internet's other.test)."""
    result = run_agent(workstation, "-e", json.dumps({"aisb_recipes": {"wide": WIDE}, "aisb_harness": "wide"}),
                       command=["bash", "-c", FETCH], timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    assert "other.test=200" in transcript, transcript
    assert {"entry": "other.test", "origin": "harness"} in record["allow"]
