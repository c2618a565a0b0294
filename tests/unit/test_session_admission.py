# SPDX-License-Identifier: GPL-3.0-or-later
"""A session's admission with a fake podman: the typed inputs when the project, the
policy directory and the facts stand; otherwise the reasons, and nothing started."""

import json
import os
import re

import pytest
from fake_podman import fake_podman

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_admission, _session_spec
from ansible_collections.aisb.sandbox.plugins.module_utils.team import _team
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy_dir import read_policy, render, write_files
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_spec import argument_spec

from builders import NOW, SECCOMP_PROFILE, TOOLS

ALLOW = ["example.com", "198.18.0.7"]


@pytest.fixture
def host(tmp_path, monkeypatch, programs_as_named):
    """A home with a project, a rendered policy directory and facts that stand."""
    monkeypatch.setattr(_session_admission, "find_tools", lambda: (TOOLS, None))
    monkeypatch.setattr(_session_admission, "load_profile", lambda: (SECCOMP_PROFILE, None))
    environ = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    project = tmp_path / "home" / "src" / "app"
    project.mkdir(parents=True)
    policy_dir = tmp_path / "home" / ".local" / "state" / "aisb" / "policies" / "p"
    policy_dir.mkdir(parents=True)
    write_files(str(policy_dir), render(ALLOW, [443])[2])
    run = Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS}))
    fingerprint = _host_facts.current_fingerprint(run, environ=environ)
    facts = {"schema_version": _host_facts.SCHEMA_VERSION, "measured_at": "2026-11-30T09:00:00Z",
             "fingerprint": fingerprint, "verdict": {"model_holds": True, "reasons": [], "bind_mount_label": ""}}
    return {"environ": environ, "project": str(project), "policy_dir": str(policy_dir), "facts": facts}


def params(host, **overrides):
    defaults = dict((name, spec.get("default")) for name, spec in argument_spec().items())
    given = dict(defaults, project=host["project"], image="localhost/aisb-sandbox:abc",
                 gate_image="localhost/aisb-gate:def", policy_dir=host["policy_dir"], command=["pi", "--version"],
                 environment=json.dumps({"TOKEN": "x"}), host_facts=host["facts"])
    given.update(overrides)
    return given


def admit(host, **overrides):
    run = Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS}))
    answer = _session_admission.admit(params(host, **overrides), host["environ"], run, now=NOW)
    return answer, run.commands


def test_admitted_inputs_carry_the_policy_of_the_directory(host):
    (inputs, facts, problems, warnings), commands = admit(host)
    assert problems == [] and warnings == [] and facts is host["facts"]
    assert inputs.policy == parse_policy(ALLOW, [443])
    assert inputs.project == host["project"] and inputs.command == ["pi", "--version"]
    assert inputs.environment == {"TOKEN": "x"} and inputs.watch_tools == TOOLS and not inputs.interactive
    # Admission reads; it starts nothing.
    assert commands and all(argv[1] in ("info", "image") for argv in commands)


def test_the_harness_gets_its_switches_for_the_projects_code_and_the_record_says_which(host):
    """pi named by aisb_harness: its project code off unless the operator says so."""
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="pi", command=["pi", "-p", "hi"])
    assert problems == [] and inputs.command == ["pi", "--no-extensions", "--offline", "-p", "hi"]
    assert inputs.project_harness_code == {"allowed": False,
                                           "switches": {"args": ["--no-extensions", "--offline"], "env": {}, "hide": []}}
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="opencode", command=["opencode", "run"],
                                                             project_harness_code=True)
    assert problems == [] and inputs.command == ["opencode", "run"] and inputs.environment == {"TOKEN": "x"}
    assert inputs.project_harness_code == {"allowed": True, "switches": {"args": [], "env": {}, "hide": []}}
    (inputs, _facts, problems, _warnings), _commands = admit(
        host, harness="opencode", command=["opencode"], environment=json.dumps({"OPENCODE_DISABLE_PROJECT_CONFIG": ""}))
    assert inputs is None and "aisb_environment sets OPENCODE_DISABLE_PROJECT_CONFIG" in problems[0]


@pytest.mark.parametrize("tamper, needle", [
    (lambda d: open(os.path.join(d, "squid-policy.conf"), "a").write("http_access allow all\n"),
     "squid-policy.conf is not what policy.json's allow entries render to"),
    (lambda d: os.remove(os.path.join(d, "squid-policy.conf")), "squid-policy.conf cannot be read"),
    (lambda d: os.remove(os.path.join(d, "policy.json")), "policy.json is not a policy record"),
    (lambda d: open(os.path.join(d, "policy.json"), "w").write("{"), "policy.json is not a policy record"),
])
def test_a_policy_directory_whose_files_disagree_is_refused(host, tamper, needle):
    tamper(host["policy_dir"])
    (inputs, _facts, problems, _warnings), commands = admit(host)
    assert inputs is None and len(problems) == 1 and needle in problems[0]
    assert repr(host["policy_dir"]) in problems[0]
    assert commands == []


def test_a_record_whose_pins_were_edited_is_refused(host):
    path = os.path.join(host["policy_dir"], "policy.json")
    record = json.load(open(path))
    record["pins"].append(["0.0.0.0/0", 443])
    json.dump(record, open(path, "w"))
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert inputs is None and "policy.json is not what policy.json's allow entries render to" in problems[0]


def test_a_record_with_a_hostile_entry_is_refused_as_the_gate_role_refuses_it(host):
    path = os.path.join(host["policy_dir"], "policy.json")
    record = json.load(open(path))
    record["allow"].append("example.com\nhttp_access allow all")
    json.dump(record, open(path, "w"))
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert inputs is None and "policy.json is not a policy record" in problems[0]


def test_network_none_needs_no_policy(host):
    (inputs, _facts, problems, _warnings), _commands = admit(host, network="none", policy_dir=None, gate_image=None)
    assert problems == [] and inputs.policy == parse_policy([])


def test_stale_facts_are_refused_with_the_change_named(host):
    facts = json.loads(json.dumps(host["facts"]))
    facts["fingerprint"]["podman"] = "0.0.1"
    (inputs, _facts, problems, _warnings), _commands = admit(host, host_facts=facts)
    assert inputs is None and "fingerprint is stale" in problems[0] and "'0.0.1' -> '5.4.2'" in problems[0]


def test_allow_unenforced_turns_the_problems_into_warnings(host):
    facts = dict(host["facts"], verdict={"model_holds": False, "reasons": ["tun: not usable."]})
    (inputs, _facts, problems, warnings), _commands = admit(host, host_facts=facts, allow_unenforced=True)
    assert problems == [] and inputs.allow_unenforced
    assert warnings == ["allow_unenforced: starting anyway although aisb_host.verdict.model_holds is false on "
                        "this host: tun: not usable."]


def test_missing_watch_tools_are_a_problem(host, monkeypatch):
    monkeypatch.setattr(_session_admission, "find_tools", lambda: ({}, "nft is not installed on this host"))
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert inputs is None and problems == ["nft is not installed on this host"]


def test_the_state_directory_is_never_a_project(host):
    state = os.path.join(host["environ"]["HOME"], ".local", "state", "aisb")
    (inputs, _facts, problems, _warnings), commands = admit(host, project=state)
    assert inputs is None and repr(state) in problems[0] and commands == []


def test_session_inputs_checks_the_sessions_own_options_without_the_roles_outputs():
    spec, inputs = _session_spec.argument_spec(), _session_spec.input_spec()
    assert list(inputs) == list(_session_spec.INPUT_OPTIONS) + ["allow", "connect_ports"]
    assert all(inputs[k] == spec[k] for k in _session_spec.INPUT_OPTIONS)
    # The image, gate and policy come from the roles, after this check.
    assert not set(inputs) & {"image", "gate_image", "policy_dir", "host_facts"}
    assert _session_spec.input_constraints() == dict(
        (kind, value) for kind, value in _session_spec.constraints().items() if kind != "required_if")


def test_session_project_is_admissions_own_check(host, tmp_path):
    environ = host["environ"]
    home = environ["HOME"]
    assert _session_admission.session_project(home + "/src/app", environ) == host["project"]
    for raw, needle in ((home + "/src/missing", "is not an existing directory"),
                        (home + "/.local/state/aisb/policies", "dot-directories"),
                        (str(tmp_path), "is the home directory")):
        with pytest.raises(_session_admission.InputError, match=needle):
            _session_admission.session_project(raw, environ)


def both_paths(host, tcp_forward_sandbox=True):
    """HOST's facts as a host with both gate paths measures them (the verdict's is the mapped one)."""
    facts = dict(host["facts"], verdict=dict(host["facts"]["verdict"], gate_path="map-host-loopback"),
                 probes={"host_loopback_reachable": {"ok": True}, "tcp_forward": {"ok": True},
                         "tcp_forward_sandbox": {"ok": tcp_forward_sandbox}})
    return dict(host, facts=facts)


def test_the_gate_path_is_the_verdicts_unless_asked(host):
    (inputs, _facts, problems, _warnings), _commands = admit(both_paths(host))
    assert problems == [] and inputs.gate_path == "map-host-loopback"
    (inputs, _facts, problems, _warnings), _commands = admit(both_paths(host), gate_path="tcp-forward")
    assert problems == [] and inputs.gate_path == "tcp-forward"


def test_a_gate_path_the_facts_did_not_measure_working_is_refused(host):
    (inputs, _facts, problems, _warnings), _commands = admit(
        both_paths(host, tcp_forward_sandbox=False), gate_path="tcp-forward", allow_unenforced=True)
    assert inputs is None
    assert problems == ["gate_path tcp-forward is refused: the host facts do not say it works here "
                        "(aisb_host.probes.tcp_forward_sandbox failed); the verdict's gate path is map-host-loopback"]
    only_t = dict(host["facts"], verdict=dict(host["facts"]["verdict"], gate_path="tcp-forward"),
                  probes={"host_loopback_reachable": {"ok": False}})
    (inputs, _facts, problems, _warnings), _commands = admit(dict(host, facts=only_t), gate_path="map-host-loopback")
    assert inputs is None and "aisb_host.probes.host_loopback_reachable failed" in problems[0]


def test_no_gate_is_refused_where_tcp_forward_holds(host):
    refusal = _session_admission.no_gate_refusal({"gate_path": "tcp-forward", "model_holds": True})
    assert "gate_path is tcp-forward" in refusal and "use network allow" in refusal
    assert _session_admission.no_gate_refusal({"gate_path": "tcp-forward", "model_holds": False}) is None


def test_the_record_s_allow_entries_carry_their_origins(host):
    """Each of the policy's entries with the word team_settings gave it, the harness
    recipe's own as harness, and any other as unspecified: what the gate enforces, not
    what was asked for."""
    recipe = {"packages": [], "install": [], "command": ["pi"], "prompt": [], "env": [], "allow": ["example.com"]}
    (inputs, _facts, problems, _warnings), _commands = admit(
        host, allow_origins={"198.18.0.7": "team", "never-rendered.test": "user"}, harness="mine",
        recipes={"mine": recipe})
    assert problems == []
    assert sorted(inputs.allow, key=lambda e: e["entry"]) == [
        {"entry": "198.18.0.7", "origin": "team"}, {"entry": "example.com", "origin": "harness"}]
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert [entry["origin"] for entry in inputs.allow] == ["unspecified", "unspecified"]


@pytest.fixture
def team_file(tmp_path, monkeypatch):
    """A team file that allows example.com, sets a memory limit and lets developers add
    nothing; tmp_path's owner stands for root (the tests are not root)."""
    monkeypatch.setattr(_team, "root_only", lambda info: info.st_uid == os.getuid() and not info.st_mode & 0o022)
    directory = tmp_path / "etc-aisb"
    directory.mkdir(mode=0o755)
    path = directory / "team.json"
    path.write_text(_team.render_team({"settings": {"allow": ["example.com", "198.18.0.7"],
                                                    "limits": {"memory": "4g"}}}))
    return str(path)


def check_team_file(host, team_file, **overrides):
    given = params(host, **overrides)
    policy, entries = read_policy(host["policy_dir"])
    _session_admission.check_team_file(given, entries, policy, _recipes.NO_RECIPE, {}, team_file)


def test_the_session_checks_the_team_file_again(host, team_file):
    """run_agent.yml's variables can be overridden with -e (gate_allow, say): the session
    refuses what the team file does not allow, whatever run_agent.yml computed."""
    check_team_file(host, team_file, limits={"memory": "4g", "pids": None, "cpus": None})
    for overrides, needle in [
        ({"limits": {}}, "leave out or change memory"),
        ({"limits": {"memory": "64g"}}, "aisb_limits is refused"),
        ({"network": "no-gate", "limits": {"memory": "4g"}}, "aisb_network is refused"),
        ({"allow_unenforced": True, "limits": {"memory": "4g"}}, "aisb_allow_unenforced is refused"),
        ({"project_harness_code": True, "limits": {"memory": "4g"}}, "aisb_project_harness_code is refused"),
    ]:
        with pytest.raises(_team.TeamError) as error:
            check_team_file(host, team_file, **overrides)
        assert needle in str(error.value) and team_file in str(error.value)


def test_a_developer_s_git_remotes_are_refused_where_the_team_file_lists_none(host, team_file):
    """The broker reaches each remote's host, which no allow entry names: a remote the team
    file neither lists nor lets developers add is refused by the session itself."""
    given = params(host, limits={"memory": "4g"})
    policy, entries = read_policy(host["policy_dir"])
    remote = {"url": "https://git.example/team/app.git", "host": "git.example", "port": 443,
              "path": "/team/app.git", "branches": "aisb/*", "username": "x-access-token", "token": "t"}
    with pytest.raises(_team.TeamError) as error:
        _session_admission.check_team_file(given, entries, policy, _recipes.NO_RECIPE, {}, team_file,
                                           git_remotes=[remote])
    assert "aisb_git_remotes is refused: https://git.example/team/app.git is not among the team file" \
        in str(error.value) and team_file in str(error.value)
    _session_admission.check_team_file(given, entries, policy, _recipes.NO_RECIPE, {}, team_file, git_remotes=[])


@pytest.mark.parametrize("extra, recipe_allow", [
    ("other.test", []),
    # A recipe's allow exempts its host names only: an address it claims is no exemption.
    ("198.18.0.9", ["198.18.0.9"]),
    ("198.18.0.0/24", ["198.18.0.0/24"]),
])
def test_the_session_refuses_a_policy_entry_the_team_file_does_not_allow(host, team_file, extra, recipe_allow):
    """A policy entry that is neither the team's nor the recipe's host name is a developer
    addition the team did not allow."""
    write_files(host["policy_dir"], render(ALLOW + [extra], [443])[2])
    policy, entries = read_policy(host["policy_dir"])
    with pytest.raises(_team.TeamError, match="aisb_allow is refused: the team file"):
        _session_admission.check_team_file(params(host, limits={"memory": "4g"}), entries, policy,
                                           _recipes.NO_RECIPE._replace(allow=recipe_allow), {}, team_file)


def test_a_key_for_a_private_entrys_name_on_another_port_is_refused_before_anything_runs(host):
    write_files(host["policy_dir"], render(ALLOW + ["models.lan:443=10.0.0.5"], [443])[2])
    key = {"host": "models.lan", "port": 8443, "header": "x-api-key", "prefix": "", "variable": "ANTHROPIC_API_KEY",
           "key": "sk-unit"}
    (inputs, _facts, problems, _warnings), commands = admit(host, credentials=json.dumps([key]))
    assert inputs is None and commands == []
    assert problems == ["aisb_credentials[0]: host models.lan port 8443: models.lan is a private entry's name "
                        "(aisb_allow models.lan:443=10.0.0.5): a key for it goes only to the pinned address, on "
                        "that entry's port; give that port"]
    (inputs, _facts, problems, _warnings), _commands = admit(host, credentials=json.dumps([dict(key, port=443)]))
    assert problems == [] and inputs.credentials[0]["port"] == 443


@pytest.mark.parametrize("name, inside", [
    ("CONTAINERS_CONF", "containers.conf"), ("CONTAINERS_STORAGE_CONF", "storage.conf"),
    ("XDG_DATA_DIRS", "share"), ("CONTAINERS_REGISTRIES_CONF", "registries.conf"),
])
def test_a_podman_variable_naming_the_project_is_refused(host, name, inside):
    """podman reads its configuration (helper_binaries_dir, hooks, conmon_path) where the
    host's variables say: never from what the agent writes. (XDG_CONFIG_HOME inside the
    project is refused already: the project would expose podman's own configuration.)"""
    environ, project = host["environ"], host["project"]
    value = os.path.join(project, inside)
    if name == "XDG_DATA_DIRS":
        value = "/usr/share:" + value
    with pytest.raises(_session_admission.InputError,
                       match=r"the environment's %s \(which podman reads\) .* inside %s, which sessions let the "
                             r"agent write" % (name, re.escape(project))):
        _session_admission.session_project(project, dict(environ, **{name: value}))
    # Outside the project, the same variable is the workstation's own.
    assert _session_admission.session_project(project, dict(environ, **{name: "/etc/containers/x.conf"})) == project


def test_a_directory_the_switch_covers_is_covered_when_there_and_a_link_in_its_place_refused(host):
    """opencode's plugins load through no switch: its .opencode is covered, empty and
    read-only, when the project has one; a link there (which opencode would follow) is
    refused, naming the path."""
    project = host["project"]
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="opencode", command=["opencode"])
    assert problems == [] and inputs.hidden_dirs == []
    os.mkdir(os.path.join(project, ".opencode"))
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="opencode", command=["opencode"])
    assert problems == [] and inputs.hidden_dirs == [".opencode"]
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="opencode", command=["opencode"],
                                                             project_harness_code=True)
    assert problems == [] and inputs.hidden_dirs == []
    os.rmdir(os.path.join(project, ".opencode"))
    os.symlink("plugins", os.path.join(project, ".opencode"))
    (inputs, _facts, problems, _warnings), _commands = admit(host, harness="opencode", command=["opencode"])
    assert inputs is None and problems == ["%s/.opencode is not a directory (a link, say): with "
                                           "aisb_project_harness_code false the session covers that directory so "
                                           "that the harness loads no code from it; remove it, or set "
                                           "aisb_project_harness_code" % project]


def test_the_sandboxs_seccomp_profile_is_an_input(host):
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert problems == [] and inputs.seccomp_profile == SECCOMP_PROFILE


def test_a_host_without_podmans_default_profile_refuses_the_session(host, monkeypatch, tmp_path):
    missing = str(tmp_path / "seccomp.json")
    monkeypatch.setattr(_session_admission, "load_profile", lambda: _seccomp.load_profile(missing))
    (inputs, _facts, problems, _warnings), _commands = admit(host)
    assert inputs is None
    assert problems == ["podman's default seccomp profile %s cannot be read (No such file or directory): the "
                        "sandbox's own profile is derived from it; run provision.yml (the host role installs "
                        "podman and containers-common)" % missing]
    (inputs, _facts, problems, warnings), _commands = admit(host, allow_unenforced=True)
    assert problems == [] and inputs.seccomp_profile is None
    assert warnings == ["allow_unenforced: starting anyway although podman's default seccomp profile %s cannot be "
                        "read (No such file or directory): the sandbox's own profile is derived from it; run "
                        "provision.yml (the host role installs podman and containers-common)" % missing]
