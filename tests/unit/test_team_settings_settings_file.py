# SPDX-License-Identifier: GPL-3.0-or-later
"""The team_settings action with a settings file: the file read from the controller
user's home, under the task's values, refused inside the project only when the session
is on this machine, and named in the result."""

import json
import os
from types import SimpleNamespace

import pytest

from ansible_collections.aisb.sandbox.plugins.action import team_settings
from ansible_collections.aisb.sandbox.plugins.modules import team_settings as team_settings_module
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import TEAM_FILE


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".config" / "aisb").mkdir(parents=True)
    (home / "src" / "app").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    # No team file: this machine's own /etc/aisb is not the test's.
    monkeypatch.setattr(team_settings_module, "execute", lambda *args: {"changed": False, "team": None, "path": TEAM_FILE})
    return home


def run(args, transport="local"):
    plugin = team_settings.ActionModule.__new__(team_settings.ActionModule)
    plugin._task = SimpleNamespace(args=args, async_val=0, check_mode=False, environment=None, action="team_settings",
                                   resolved_action="aisb.sandbox.team_settings")
    plugin._connection = SimpleNamespace(transport=transport, _shell=SimpleNamespace(tmpdir="/unused"))
    plugin._play_context = SimpleNamespace(become=False)
    # Over SSH the module reads the workstation's team file: none there either.
    plugin._execute_module = lambda **kwargs: {"changed": False, "team": None, "path": TEAM_FILE}
    return plugin.run(task_vars={})


def test_the_files_values_fill_what_the_task_leaves_out_and_are_named(home):
    settings = home / ".config/aisb/settings.yml"
    settings.write_text("aisb_allow: [file.test]\naisb_network: none\n")
    settings.chmod(0o600)
    result = run({"project": str(home / "src/app")})
    assert not result.get("failed"), result
    assert result["settings"]["allow"] == ["file.test"] and result["settings"]["network"] == "none"
    assert result["allow_origins"] == {"file.test": "settings file %s" % settings}
    assert result["settings_file"] == str(settings)
    given = run({"project": str(home / "src/app"), "allow": ["cli.test"]})
    assert given["settings"]["allow"] == ["cli.test"] and given["allow_origins"] == {"cli.test": "user"}
    assert given["settings"]["network"] == "none"


def test_without_a_file_nothing_changes(home):
    result = run({"project": str(home / "src/app"), "network": "none"})
    assert result["settings"]["network"] == "none" and result["settings_file"] is None


def test_a_group_writable_file_is_a_refusal_naming_it(home):
    settings = home / ".config/aisb/settings.yml"
    settings.write_text("aisb_allow: [file.test]\n")
    settings.chmod(0o660)
    result = run({"project": str(home / "src/app")})
    assert result["failed"] and result["status"] == "refused"
    assert result["msg"].startswith("settings file %s belongs to uid" % settings), result["msg"]


@pytest.mark.parametrize("transport, refused", [("local", True), ("ssh", False)])
def test_a_link_into_the_project_is_refused_when_the_project_is_on_this_machine(home, transport, refused):
    planted = home / "src/app/aisb.yml"
    planted.write_text("aisb_allow: [agent.test]\n")
    planted.chmod(0o600)
    os.symlink(str(planted), str(home / ".config/aisb/settings.yml"))
    result = run({"project": str(home / "src/app")}, transport)
    # Over SSH the project is the workstation's directory, not this machine's.
    assert bool(result.get("failed")) is refused, json.dumps(result)
    if refused:
        assert "which sessions let the agent write" in result["msg"]


def test_a_link_into_the_state_directory_is_refused_whatever_the_connection(home):
    planted = home / ".local/state/aisb/harness-state/x/aisb.yml"
    planted.parent.mkdir(parents=True)
    planted.write_text("aisb_allow: [agent.test]\n")
    planted.chmod(0o600)
    os.symlink(str(planted), str(home / ".config/aisb/settings.yml"))
    assert "which sessions let the agent write" in run({"project": None}, "ssh")["msg"]
