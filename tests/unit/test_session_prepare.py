# SPDX-License-Identifier: GPL-3.0-or-later
"""The session_prepare action: team_settings, session_inputs, host_capabilities and
session_images in one task, in that order, each refusal stopping it; the session's
inputs taken from the settings the team file gave, never from the task's own inputs; the
images' key computed with the task's result as the play's variables will see it."""

from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.aisb.sandbox.plugins.action import session_prepare

SETTINGS = {"network": "allow", "harness": "pi", "recipes": {}, "harness_config": None, "environment": {},
            "pass_environment": [], "credentials": [], "git_remotes": [], "token_budget": None,
            "upload_budget": None, "provider_upload_budget": 0, "project_mode": "direct",
            "allow": ["team.test"], "connect_ports": [443], "limits": {}, "require_limits": False}
FACTS = {"aisb_host": {"schema_version": 1}}


@pytest.fixture
def steps(monkeypatch):
    """Each step's fake, recording what it was given, in order."""
    calls = []

    def team(_action, _task_vars, values, project):
        # None is a value not given (team_settings' contract).
        calls.append(("team_settings", dict((k, v) for k, v in values.items() if v is not None), project))
        return dict(changed=False, settings=SETTINGS, allow_origins={"team.test": "team"},
                    team_file=None, settings_file=None)

    def inputs(_action, _task_vars, given):
        calls.append(("session_inputs", given))
        return dict(changed=False, project=given["project"])

    def module(_action, _task_vars, _spec, _execute, module_args=None, module_name=None, **_constraints):
        calls.append((module_name, module_args))
        if module_name == "aisb.sandbox.host_capabilities":
            return dict(changed=False, state_dir="/home/dev/.local/state/aisb", ansible_facts=FACTS, commands=[])
        return dict(changed=False, key=module_args["key"], found=True, commands=[["podman", "image", "inspect"]],
                    ansible_facts={"aisb_sandbox_image": "localhost/aisb-sandbox:abc"})

    def key(_action, _task_vars, registered=None):
        calls.append(("play_key", registered))
        return "k-" + ",".join(sorted(registered))

    monkeypatch.setattr(session_prepare, "team_settings", team)
    monkeypatch.setattr(session_prepare, "checked_inputs", inputs)
    monkeypatch.setattr(session_prepare, "module_result", module)
    monkeypatch.setattr(session_prepare, "play_key", key)
    return calls


def run(args, register="prepared"):
    plugin = session_prepare.ActionModule.__new__(session_prepare.ActionModule)
    plugin._task = SimpleNamespace(args=args, async_val=0, check_mode=False, environment=None, register=register,
                                   action="session_prepare", resolved_action="aisb.sandbox.session_prepare")
    plugin._connection = SimpleNamespace(transport="local", _shell=SimpleNamespace(tmpdir="/unused"))
    plugin._play_context = SimpleNamespace(become=False)
    return plugin.run(task_vars={})


def test_the_four_steps_run_in_order_and_their_results_come_back_whole(steps):
    result = run({"project": "/home/dev/app", "settings": {"allow": ["user.test"]}, "inputs": {"command": ["true"]}})
    assert [call[0] for call in steps] == ["team_settings", "session_inputs", "aisb.sandbox.host_capabilities",
                                           "play_key", "aisb.sandbox.session_images"]
    assert steps[0][1:] == ({"allow": ["user.test"]}, "/home/dev/app")
    assert steps[2][1] == {"base_image": None, "cached": True, "require_provisioned": True}
    assert result["settings"] == SETTINGS and result["state_dir"] == "/home/dev/.local/state/aisb"
    assert result["images"] == {"key": "k-prepared", "found": True}
    assert result["ansible_facts"] == dict(FACTS, aisb_sandbox_image="localhost/aisb-sandbox:abc")
    assert result["commands"] == [["podman", "image", "inspect"]] and not result.get("failed")


def test_the_session_s_inputs_are_the_settings_the_team_file_gave(steps):
    """The developer's own value (user.test) reaches team_settings only; the inputs are
    checked with what it returned, empties left out as run_agent.yml leaves them out."""
    run({"project": "/home/dev/app", "settings": {"allow": ["user.test"], "network": "none"},
         "inputs": {"prompt": "fix it"}})
    given = steps[1][1]
    assert given["allow"] == ["team.test"] and given["network"] == "allow" and given["prompt"] == "fix it"
    assert given["project"] == "/home/dev/app" and given["harness_state"] == "keep"
    assert not {"harness_config", "token_budget", "upload_budget", "provider_upload_budget"} & set(given)
    assert given["recipes"] == {} and given["git_remotes"] == []


@pytest.mark.parametrize("smuggled", [{"allow": ["agent.test"]}, {"network": "none"}, {"environment": {"A": "1"}},
                                      {"project": "/"}])
def test_a_setting_passed_as_an_input_is_refused_before_anything_runs(steps, smuggled):
    """inputs holds only what no setting gives: a setting there would reach the session's
    checks without passing the team file."""
    with pytest.raises(AnsibleActionFail, match="Unsupported parameters"):
        run({"project": "/home/dev/app", "inputs": dict({"command": ["true"]}, **smuggled)})
    assert steps == []


def test_a_setting_the_team_spec_does_not_know_is_refused_before_anything_runs(steps):
    with pytest.raises(AnsibleActionFail, match="Unsupported parameters"):
        run({"project": "/home/dev/app", "settings": {"allowed_harnesses": ["codex"]}})
    assert steps == []


@pytest.mark.parametrize("failing, ran", [
    ("team_settings", ["team_settings"]),
    ("session_inputs", ["team_settings", "session_inputs"]),
    ("aisb.sandbox.host_capabilities", ["team_settings", "session_inputs", "aisb.sandbox.host_capabilities"]),
])
def test_a_refusal_stops_the_task_where_it_happens(steps, monkeypatch, failing, ran):
    refused = {"failed": True, "status": "refused", "msg": failing + " refused"}

    def stop_at(name, step):
        def wrapped(*args, **kwargs):
            result = step(*args, **kwargs)
            return refused if steps[-1][0] == name else result
        return wrapped

    for attribute in ("team_settings", "checked_inputs", "module_result"):
        monkeypatch.setattr(session_prepare, attribute, stop_at(failing, getattr(session_prepare, attribute)))
    result = run({"project": "/home/dev/app", "inputs": {"command": ["true"]}})
    assert result["failed"] and result["msg"] == failing + " refused"
    assert [call[0] for call in steps] == ran


@pytest.mark.parametrize("register, names", [(None, []), ("prepared", ["prepared"]),
                                             ({"prepared": "result", "other": "result"}, ["other", "prepared"])])
def test_the_key_sees_the_result_under_every_name_the_task_registers(register, names):
    assert session_prepare.register_names(register) == names
