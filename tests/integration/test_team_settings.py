# SPDX-License-Identifier: GPL-3.0-or-later
"""The team's settings on a real workstation: provision.yml installs the team file
root's; run_agent.yml applies it with no inventory and no settings on the command line
(real gate, real traffic); a developer's value is added, with its origin in the record,
where the team file allows it and refused, before anything starts, where it does not;
neither the developer nor the sandbox can change the file."""

import hashlib
import json
import os
import re
import time

import pytest

from scenario import ANSIBLE_ENV, install_team, playbook, provision
from sessions import record_of, run_agent, session_dirs
from workstation import AISB_STATE, TRANSFER_DIR

TEAM_FILE = "/etc/aisb/team.json"
# Allows allowed.test, gives the harness one variable, lets developers add allow entries.
MODULE_TEAM = {"settings": {"allow": ["allowed.test"], "network": "allow",
                            "environment": {"AISB_TEAM_NOTE": "from-the-team"}},
               "user_may_add": ["allow"]}
FETCH = ("echo team-note=$AISB_TEAM_NOTE; for n in allowed.test other.test; do curl -s -o /dev/null -w \"$n=%{http_code}\\n\" http://$n/; done; "
         "ls -d /etc/aisb/team.json 2>&1; echo tampered > /etc/aisb/team.json 2>&1; true")


def digest(ws):
    return hashlib.sha256(ws.path(TEAM_FILE).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def team(workstation, internet):
    """The workstation provisioned again, now with a team that allows allowed.test and lets
    developers add allow entries only; the team file removed afterwards."""
    variables = f"{TRANSFER_DIR}/team-vars.json"
    workstation.path(variables).write_text(json.dumps({"aisb_team": MODULE_TEAM}))
    result = provision(workstation, "-e", "@" + variables)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Install the team's session settings" in result.stdout
    yield workstation
    workstation.run(["rm", "-f", TEAM_FILE], user="root")


def test_provision_installs_the_team_file_root_s_and_the_developer_cannot_change_it(team):
    stat = team.run(["stat", "-c", "%U:%G %a", TEAM_FILE, "/etc/aisb"]).stdout.split("\n")
    assert stat[:2] == ["root:root 644", "root:root 755"]
    assert json.loads(team.path(TEAM_FILE).read_text())["settings"] == MODULE_TEAM["settings"]
    before = digest(team)
    for attack in (f"echo '{{}}' > {TEAM_FILE}", f"rm -f {TEAM_FILE}", f"mv {TEAM_FILE} /tmp/t",
                   f"ln -sf /tmp/mine.json {TEAM_FILE}", "chmod 666 /etc/aisb/team.json",
                   f"cp {TEAM_FILE} /tmp/t.json && mv -f /tmp/t.json {TEAM_FILE}"):
        attempt = team.run(["sh", "-c", attack], check=False)
        assert attempt.returncode != 0, attack
    assert digest(team) == before


def test_a_session_applies_the_team_file_with_no_inventory_and_no_settings(team, project):
    before = digest(team)
    result = run_agent(team, command=["bash", "-c", FETCH])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(team, result.stdout)
    transcript = team.path(record["transcript"]).read_text()
    assert "allowed.test=200" in transcript and "other.test=403" in transcript, transcript
    # The team's environment reaches the harness, and its value is in no task's output.
    assert "team-note=from-the-team" in transcript and "from-the-team" not in result.stdout, transcript
    # The sandbox does not see the team file, and what it writes there is its own.
    assert "No such file or directory" in transcript, transcript
    assert digest(team) == before
    origins = dict((entry["entry"], entry["origin"]) for entry in record["allow"])
    assert origins.pop("allowed.test") == "team"
    # pi's recipe allows nothing of its own: its providers go through the injector.
    assert origins == {}, record["allow"]


def test_a_developer_addition_the_team_allows_is_applied_and_recorded_as_theirs(team, project):
    result = run_agent(team, "-e", json.dumps({"aisb_allow": ["other.test"]}), command=["bash", "-c", FETCH])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(team, result.stdout)
    transcript = team.path(record["transcript"]).read_text()
    assert "allowed.test=200" in transcript and "other.test=200" in transcript, transcript
    origins = dict((entry["entry"], entry["origin"]) for entry in record["allow"])
    assert origins["allowed.test"] == "team" and origins["other.test"] == "user"


@pytest.mark.parametrize("extra, needle", [
    ({"aisb_network": "none"}, "aisb_network is refused: the team file /etc/aisb/team.json sets network"),
    ({"aisb_allow_unenforced": True}, "aisb_allow_unenforced is refused: the team file /etc/aisb/team.json"),
    ({"aisb_project_harness_code": True}, "aisb_project_harness_code is refused: the team file /etc/aisb/team.json"),
    ({"aisb_limits": {"pids": 5}}, "aisb_limits is refused"),
])
def test_a_developer_value_the_team_forbids_is_refused_before_anything_starts(team, project, extra, needle):
    sessions = session_dirs(team)
    result = run_agent(team, "-e", json.dumps(extra), command=["true"])
    output = result.stdout + result.stderr
    assert result.returncode != 0 and needle in output, output[-3000:]
    assert "lets developers add to allow only" in output and "changed=0" in output, output[-3000:]
    assert session_dirs(team) == sessions


def test_a_team_that_lets_developers_add_nothing_refuses_an_allow_entry(team, project):
    install_team(team, {"settings": {"allow": ["allowed.test"]}})
    try:
        result = run_agent(team, "-e", json.dumps({"aisb_allow": ["other.test"]}), command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert "aisb_allow is refused: the team file /etc/aisb/team.json sets allow" in output, output[-3000:]
        assert "lets developers add to nothing" in output, output[-3000:]
        # Around run_agent.yml's own check: extra vars win over the play's and the roles'
        # variables, so the gate renders other.test; the session refuses that policy.
        sessions = session_dirs(team)
        result = run_agent(team, "-e", json.dumps({"gate_allow": ["other.test"]}), command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert "the session's own settings, checked again: aisb_allow is refused" in output, output[-3000:]
        assert session_dirs(team) == sessions
    finally:
        install_team(team, MODULE_TEAM)


# A recipe that would reach other.test, and one that pins the test internet's address.
WIDE = {"packages": ["curl"], "install": [], "command": ["bash"], "prompt": ["-c"], "allow": ["other.test"], "env": []}
SETTINGS = {"allow": ["allowed.test"], "connect_ports": [443], "pass_environment": [], "environment": {},
            "credentials": [], "limits": {}, "require_limits": False, "network": "allow", "harness": "pi",
            "recipes": {}, "harness_config": None, "project_mode": "direct", "allow_unenforced": False}


@pytest.mark.parametrize("extra, needle", [
    # The image role's variables: its recipe table is the collection's code now, and a
    # recipe set from outside is refused, not built.
    ({"image_recipes": {"pi": WIDE}}, "pi is a built-in recipe, which an operator's recipe cannot replace"),
    ({"image_recipe": WIDE}, "image_recipe is the image role's own"),
    ({"image_harness": WIDE}, "aisb_harness names a recipe"),
    ({"aisb_harness": WIDE}, "aisb_harness must name a recipe"),
    ({"aisb_recipes": {"wide": WIDE}}, "aisb_recipes is refused: the team file /etc/aisb/team.json"),
    # run_agent.yml's own settings replaced: the session resolves and checks again.
    ({"run_agent_settings": dict(SETTINGS, harness=WIDE)}, "aisb_harness names a recipe"),
    ({"run_agent_settings": dict(SETTINGS, harness="wide", recipes={"wide": WIDE})},
     "the session's own settings, checked again: aisb_harness is refused"),
    ({"run_agent_settings": dict(SETTINGS, recipes={"wide": WIDE})},
     "the session's own settings, checked again: aisb_recipes is refused"),
    ({"run_agent_settings": dict(SETTINGS, environment={"EXTRA": "1"})},
     "the session's own settings, checked again: aisb_environment is refused"),
    ({"run_agent_settings": dict(SETTINGS, harness_config="/home/dev/operator/empty-config")},
     "the session's own settings, checked again: aisb_harness_config is refused"),
    # The gate role's: a policy rendered for another recipe is checked against the session's.
    ({"gate_harness": "wide", "gate_recipes": {"wide": WIDE}},
     "the session's own settings, checked again: aisb_allow is refused"),
])
def test_no_role_or_play_variable_widens_what_the_team_allows(team, project, extra, needle):
    """A team that lets developers add nothing: each variable a developer could set from
    outside to change the session's recipe or settings is refused before the sandbox
    starts (issue 29's bypasses reached other.test: 200)."""
    install_team(team, {"settings": {"allow": ["allowed.test"]}})
    team.sh("mkdir -p /home/dev/operator/empty-config")
    try:
        sessions = session_dirs(team)
        result = run_agent(team, "-e", json.dumps(extra), command=["bash", "-c", FETCH])
        output = result.stdout + result.stderr
        assert result.returncode != 0 and needle in output, output[-3000:]
        assert session_dirs(team) == sessions
    finally:
        install_team(team, MODULE_TEAM)


@pytest.mark.parametrize("override, needle", [
    ({"network": "none"}, "aisb_network is refused"),
    ({"allow_unenforced": True}, "aisb_allow_unenforced is refused"),
    ({"project_harness_code": True}, "aisb_project_harness_code is refused"),
    ({"limits": {}}, "the session's limits leave out or change memory"),
])
def test_overriding_run_agent_s_own_settings_is_refused_by_the_session(team, project, override, needle):
    """-e run_agent_settings=... replaces what team_settings computed for every later task:
    the session reads the team file itself and refuses."""
    install_team(team, {"settings": {"allow": ["allowed.test"], "limits": {"memory": "2g"}}, "user_may_add": ["allow"]})
    try:
        settings = {"allow": ["allowed.test"], "connect_ports": [443], "pass_environment": [], "environment": {},
                    "credentials": [], "limits": {"memory": "2g"}, "require_limits": False, "network": "allow",
                    "harness": "pi", "harness_config": None, "project_mode": "direct", "allow_unenforced": False}
        sessions = session_dirs(team)
        result = run_agent(team, "-e", json.dumps({"run_agent_settings": dict(settings, **override)}),
                           command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert "the session's own settings, checked again" in output and needle in output, output[-3000:]
        assert session_dirs(team) == sessions
    finally:
        install_team(team, MODULE_TEAM)


def test_a_developer_chooses_a_harness_only_among_the_team_s(team, project):
    """A team that lets developers choose the harness, among pi and shell: codex is refused
    by the play, and by the session when run_agent.yml's own settings are overridden; shell
    runs (the control: a choice the team allows is taken)."""
    install_team(team, {"settings": {"allow": ["allowed.test"], "allowed_harnesses": ["pi", "shell"]},
                        "user_may_add": ["harness"]})
    try:
        sessions = session_dirs(team)
        for extra, needle in (({"aisb_harness": "codex"}, "aisb_harness (the team file /etc/aisb/team.json's "
                                                          "allowed_harnesses) 'codex' is not among the harnesses"),
                              ({"run_agent_settings": dict(SETTINGS, harness="codex")},
                               "the session's own settings, checked again: aisb_harness (the team file")):
            result = run_agent(team, "-e", json.dumps(extra), command=["true"])
            output = result.stdout + result.stderr
            assert result.returncode != 0 and needle in output and "pi, shell" in output, output[-3000:]
            assert session_dirs(team) == sessions
        result = run_agent(team, "-e", "aisb_harness=shell", command=["bash", "-c", "echo harness-$0", "shell"])
        assert result.returncode == 0, result.stdout[-3000:]
        record = record_of(team, result.stdout)
        assert record["harness"] == "shell" and "harness-shell" in team.path(record["transcript"]).read_text()
    finally:
        install_team(team, MODULE_TEAM)


def test_the_team_s_token_budget_is_the_default_and_the_ceiling(team, project):
    install_team(team, {"settings": {"allow": ["allowed.test"], "token_budget": 50000}, "user_may_add": ["allow"]})
    try:
        sessions = session_dirs(team)
        result = run_agent(team, "-e", json.dumps({"aisb_token_budget": 60000}), command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert ("aisb_token_budget 60000 is over the team file /etc/aisb/team.json's token_budget, 50000: give at "
                "most 50000, or leave it out for 50000") in output, output[-3000:]
        # Around run_agent.yml's own check: the session reads the team file itself.
        settings = {"allow": ["allowed.test"], "network": "allow", "harness": "pi", "project_mode": "direct",
                    "connect_ports": [443], "pass_environment": [], "environment": {}, "credentials": [],
                    "limits": {}, "require_limits": False, "harness_config": None, "allow_unenforced": False}
        result = run_agent(team, "-e", json.dumps({"run_agent_settings": settings}), command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-3000:]
        assert "the session has no token budget, which the team file /etc/aisb/team.json sets (token_budget 50000)" \
            in output, output[-3000:]
        assert session_dirs(team) == sessions
        # Without a value of their own, the developer's session has the team's (here
        # without a provider key through the injector: it says the budget bounds nothing).
        for extra, budget in (({"aisb_token_budget": 20000}, 20000), ({}, 50000)):
            result = run_agent(team, "-e", json.dumps(extra), command=["true"])
            warned = " ".join((result.stdout + result.stderr).split())  # a warning's lines wrapped, on stderr
            assert result.returncode == 0 and f"aisb_token_budget {budget} bounds nothing here" in warned, \
                result.stdout[-3000:]
    finally:
        install_team(team, MODULE_TEAM)


def test_a_team_file_the_developer_could_have_written_is_refused(team, project):
    team.run(["chown", "dev", TEAM_FILE], user="root")
    try:
        result = run_agent(team, command=["true"])
        output = result.stdout + result.stderr
        assert result.returncode != 0 and "team file /etc/aisb/team.json belongs to uid 1000" in output, output[-3000:]
    finally:
        team.run(["chown", "root", TEAM_FILE], user="root")


@pytest.mark.parametrize("replace, needle", [
    (f"mv {TEAM_FILE} {TEAM_FILE}.kept && mkdir {TEAM_FILE}", "team file /etc/aisb/team.json is a directory"),
    (f"mv {TEAM_FILE} {TEAM_FILE}.kept && mkfifo -m 644 {TEAM_FILE}", "team file /etc/aisb/team.json is a special file"),
    (f"cp {TEAM_FILE} {TEAM_FILE}.kept && printf '%s' '{{\"format\": 1, \"settings\": {{\"network\": \"none\", "
     f"\"network\": \"allow\"}}}}' > {TEAM_FILE}", "key 'network' given more than once"),
    (f"cp {TEAM_FILE} {TEAM_FILE}.kept && printf '%s' '{{\"format\": true}}' > {TEAM_FILE}", "format must be 1, got True"),
])
def test_a_team_file_not_strictly_one_is_refused_with_a_sentence(team, project, replace, needle):
    team.sh(replace, user="root")
    try:
        result = run_agent(team, command=["true"], timeout=120)
        output = result.stdout + result.stderr
        assert result.returncode != 0 and needle in output, output[-3000:]
        assert "Traceback" not in output and "Errno" not in output
    finally:
        team.sh(f"rm -rf {TEAM_FILE} && mv {TEAM_FILE}.kept {TEAM_FILE}", user="root")


def test_a_wrong_team_setting_fails_provisioning_naming_it_and_writes_nothing(team):
    before = digest(team)
    result = team.run(["ansible", "localhost", "-b", "-m", "aisb.sandbox.team_file", "-a",
                       json.dumps({"team": {"settings": {"network": "open"}}})], check=False, env=ANSIBLE_ENV)
    assert result.returncode != 0 and "settings.network 'open' is not one of allow, none, no-gate" in result.stdout
    assert digest(team) == before


def test_run_agent_without_a_project_says_what_it_is_and_how_to_pass_it(team):
    result = playbook(team, "run_agent", "-e", json.dumps({"command": ["true"]}))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "project is missing: it is the directory the agent works in" in output
    assert "-e project=~/src/app" in output and "missing required arguments" not in output


def test_prune_keeps_records_as_long_as_the_team_says(team):
    # A session that ended 60 days ago: the default 30 days would remove it.
    ended = time.time() - 60 * 86400
    session = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ended)) + "-0000beef"
    inside = f"{AISB_STATE}/sessions/{session}"
    directory = team.path(inside)
    # As the user: a sessions directory this made as root would refuse every later session.
    team.run(["mkdir", "-p", inside])
    (directory / "record.json").write_text("{}")
    os.utime(directory / "record.json", (ended, ended))
    team.run(["chown", "-R", "dev:dev", inside], user="root")
    gone = re.compile(r"^-" + session + "$", re.M)
    kept_by_team = dict(MODULE_TEAM, settings=dict(MODULE_TEAM["settings"], retention_days=400, retention_sessions=0))
    try:
        install_team(team, kept_by_team)
        planned = playbook(team, "prune", "--check", "--diff")
        assert planned.returncode == 0, planned.stdout[-3000:]
        assert "(retention 400 days, the newest 0 sessions, from the team file /etc/aisb/team.json)" in planned.stdout
        # Nothing goes, so no diff: the 60-day-old session is among those kept.
        assert re.search(r"would remove \d+ images, 0 session directories", planned.stdout), planned.stdout[-3000:]
        assert not gone.search(planned.stdout), planned.stdout[-3000:]
        # The developer cannot keep records for less time than the team says.
        shorter = playbook(team, "prune", "-e", "aisb_retention_days=1", "-e", "aisb_retention_sessions=0")
        assert shorter.returncode != 0, shorter.stdout[-3000:]
        assert "aisb_retention_days is refused: the team file /etc/aisb/team.json sets retention_days" in shorter.stdout
        assert directory.exists()
        # Control: the same session under the team's 30 days would go.
        install_team(team, dict(kept_by_team, settings=dict(kept_by_team["settings"], retention_days=30)))
        planned = playbook(team, "prune", "--check", "--diff")
        assert planned.returncode == 0 and gone.search(planned.stdout), planned.stdout[-3000:]
        assert directory.exists()
    finally:
        install_team(team, MODULE_TEAM)
        team.run(["rm", "-rf", inside], user="root")


def test_provision_installs_the_team_s_keys_the_user_s_alone_and_shows_none(workstation):
    """aisb_team_keys become the workstation user's key files, 0600 in a directory of
    0700, and no key appears in provision.yml's output."""
    key = "sk-team-" + hashlib.sha256(os.urandom(16)).hexdigest()
    keys = "/home/dev/.config/aisb/keys"
    variables = f"{TRANSFER_DIR}/team-keys.json"
    workstation.path(variables).write_text(json.dumps({"aisb_team_keys": {"team-openai.key": key}}))
    try:
        result = provision(workstation, "-e", "@" + variables)
        assert result.returncode == 0, result.stdout[-4000:]
        assert key not in result.stdout + result.stderr
        assert workstation.run(["stat", "-c", "%U %a", keys, f"{keys}/team-openai.key"]).stdout.split() == \
            ["dev", "700", "dev", "600"]
        assert workstation.path(f"{keys}/team-openai.key").read_text() == key + "\n"
    finally:
        workstation.run(["rm", "-rf", keys, variables], user="root")
