# SPDX-License-Identifier: GPL-3.0-or-later
"""The developer's settings file: what may write it, where it may point, what it may
hold, and how its values meet the play's and the team file's."""

import os
import stat
from types import SimpleNamespace

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import agent_trees
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import TeamError, check_team
from ansible_collections.aisb.sandbox.plugins.plugin_utils._settings_file import (
    MAX_BYTES, SettingsFileError, apply_settings, check_owner, parse_settings, read_settings_file, settings_path)

UID = os.getuid()
TEAM_FILE = "/etc/aisb/team.json"


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "aisb").mkdir(parents=True)
    for directory in (home, home / ".config", home / ".config" / "aisb"):
        directory.chmod(0o755)
    return home


def write(path, text, mode=0o600):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def read(home, trees=()):
    return read_settings_file(str(home), list(trees), UID)


def refusal(home, trees=()):
    with pytest.raises(SettingsFileError) as raised:
        read(home, trees)
    return str(raised.value)


def test_no_file_gives_no_settings(home):
    assert read(home) == (settings_path(str(home)), {})


def test_the_file_gives_the_settings_it_names_as_the_options_take_them(home):
    write(home / ".config/aisb/settings.yml", "aisb_allow: [pypi.org]\naisb_network: allow\n"
                                              "aisb_token_budget: '5000'\naisb_harness: pi\n", mode=0o644)
    assert read(home) == (settings_path(str(home)), {
        "allow": ["pypi.org"], "network": "allow", "token_budget": 5000, "harness": "pi"})


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_file_writable_by_group_or_others_is_refused_with_the_fix(home, mode):
    path = write(home / ".config/aisb/settings.yml", "aisb_allow: [pypi.org]\n", mode=mode)
    message = refusal(home)
    assert message.startswith("settings file %s belongs to uid %d with mode %04o" % (path, UID, mode))
    assert "chmod go-w %s" % path in message


@pytest.mark.parametrize("owner, mode, fix", [
    (4321, 0o600, "run chown 1000 /h/s.yml"),
    (4321, 0o666, "run chown 1000 /h/s.yml and chmod go-w /h/s.yml"),
    (1000, 0o640, None),
    (0, 0o644, None),
])
def test_another_users_file_is_refused_and_roots_is_not(owner, mode, fix):
    info = SimpleNamespace(st_uid=owner, st_mode=stat.S_IFREG | mode)
    if fix is None:
        check_owner("/h/s.yml", info, 1000)
        return
    with pytest.raises(SettingsFileError) as raised:
        check_owner("/h/s.yml", info, 1000)
    assert str(raised.value).startswith("settings file /h/s.yml belongs to uid %d with mode %04o" % (owner, mode))
    assert str(raised.value).endswith(fix)


def test_a_directory_on_the_way_writable_by_others_is_refused(home):
    write(home / ".config/aisb/settings.yml", "aisb_allow: [pypi.org]\n")
    (home / ".config").chmod(0o777)
    try:
        assert refusal(home).startswith("the settings file's directory %s belongs to uid %d with mode 0777"
                                        % (home / ".config", UID))
    finally:
        (home / ".config").chmod(0o755)


def test_a_link_out_of_the_home_directory_is_refused(home, tmp_path):
    outside = write(tmp_path / "elsewhere" / "settings.yml", "aisb_allow: [evil.test]\n")
    os.symlink(str(outside), str(home / ".config/aisb/settings.yml"))
    message = refusal(home)
    assert message.startswith("settings file %s is a link to %s, outside the home directory %s"
                              % (settings_path(str(home)), os.path.realpath(str(outside)), os.path.realpath(str(home))))


def test_a_link_to_a_file_in_the_home_directory_is_read(home):
    target = write(home / "dotfiles" / "aisb.yml", "aisb_allow: [pypi.org]\n")
    os.symlink(str(target), str(home / ".config/aisb/settings.yml"))
    assert read(home)[1] == {"allow": ["pypi.org"]}


@pytest.mark.parametrize("tree", ["project", "state"])
def test_a_link_into_a_tree_the_agent_writes_is_refused(home, tree):
    # The project an agent works on, or the state directory (kept harness state, overlays).
    project = home / "src" / "app"
    state = home / ".local" / "state"
    planted = write((project if tree == "project" else state / "aisb" / "harness-state") / "aisb.yml",
                    "aisb_allow: [evil.test]\n")
    os.symlink(str(planted), str(home / ".config/aisb/settings.yml"))
    trees = agent_trees(str(project), {"HOME": str(home), "XDG_STATE_HOME": str(state)})
    message = refusal(home, trees)
    assert message.startswith("settings file %r resolves to %s, inside" % (settings_path(str(home)), planted))
    assert "which sessions let the agent write" in message


def test_a_fifo_in_its_place_is_refused_without_hanging(home):
    os.mkfifo(str(home / ".config/aisb/settings.yml"), 0o600)
    assert "is not a regular file" in refusal(home)


@pytest.mark.parametrize("text, needle", [
    ("aisb_allow: [a.test]\nproject: /etc\n", "project is not a setting it may hold"),
    ("aisb_gate_path: tcp-forward\n", "aisb_gate_path is not a setting it may hold"),
    ("allow: [a.test]\n", "allow is not a setting it may hold"),
    ("1: x\n", "1 is not a setting it may hold"),
    ("- aisb_allow\n", "must hold a mapping of aisb_* settings, got list"),
    ("aisb_allow: &a [a.test]\naisb_connect_ports: *a\n", "uses a YAML anchor or alias"),
    ("aisb_network: !!python/name:os.system allow\n", "uses a YAML tag (tag:yaml.org,2002:python/name:os.system)"),
    ("aisb_harness: !!str pi\n", "uses a YAML tag"),
    ("aisb_allow: [" * 20 + "]" * 20 + "\n", "nests values deeper than 8 levels"),
    ("aisb_allow: [a.test\n", "is not YAML"),
    ("aisb_network: sideways\n", "settings file /s.yml: value of network must be one of"),
    ("aisb_limits: 12\n", "settings file /s.yml: argument 'limits' is of type"),
])
def test_what_is_not_a_plain_mapping_of_settings_is_refused_naming_the_file(text, needle):
    with pytest.raises(SettingsFileError) as raised:
        parse_settings(text.encode(), "/s.yml", False)
    assert str(raised.value).startswith("settings file /s.yml")
    assert needle in str(raised.value)


def test_a_key_given_twice_is_named():
    with pytest.raises(SettingsFileError, match="key 'aisb_allow' given more than once"):
        parse_settings(b"aisb_allow: [a.test]\naisb_allow: [b.test]\n", "/s.yml", False)


def test_a_billion_laughs_is_refused_before_it_is_built():
    laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        "%s: &%s [%s]\n" % (name, name, ", ".join(["*" + previous] * 9))
        for previous, name in zip("abcdefgh", "bcdefghi"))
    with pytest.raises(SettingsFileError, match="anchor or alias"):
        parse_settings(laughs.encode(), "/s.yml", False)


def test_a_file_over_the_size_bound_is_refused():
    with pytest.raises(SettingsFileError, match="larger than %d bytes" % MAX_BYTES):
        parse_settings(b"#" * (MAX_BYTES + 1), "/s.yml", False)


def test_an_empty_file_gives_nothing():
    assert parse_settings(b"", "/s.yml", False) == {}
    assert parse_settings(b"# nothing yet\naisb_allow:\n", "/s.yml", False) == {}


def test_a_key_value_is_refused_in_a_file_others_can_read():
    text = b'aisb_credentials: [{host: api.anthropic.com, header: x-api-key, variable: ANTHROPIC_API_KEY, value: sk-secret}]\n'
    with pytest.raises(SettingsFileError, match="other users can read it: run chmod 600 /s.yml"):
        parse_settings(text, "/s.yml", True)
    assert parse_settings(text, "/s.yml", False)["credentials"][0]["value"] == "sk-secret"
    from_environment = b'aisb_credentials: [{host: api.anthropic.com, header: x-api-key, variable: ANTHROPIC_API_KEY, from_environment: MY_KEY}]\n'
    assert parse_settings(from_environment, "/s.yml", True)["credentials"]


def test_a_git_token_value_is_refused_in_a_file_others_can_read():
    text = b"aisb_git_remotes: [{url: 'https://github.com/me/app', value: ghp_secret}]\n"
    with pytest.raises(SettingsFileError, match=r"holds a secret \(aisb_git_remotes value\) and other users can read"):
        parse_settings(text, "/s.yml", True)
    assert parse_settings(text, "/s.yml", False)["git_remotes"][0]["value"] == "ghp_secret"
    assert parse_settings(text.replace(b"value: ghp_secret", b"from_environment: GH"), "/s.yml", True)["git_remotes"]


def team(settings=None, may_add=()):
    return check_team({"format": 1, "settings": settings or {}, "user_may_add": list(may_add)})


def test_a_value_given_to_the_play_replaces_the_files_and_the_file_fills_the_rest():
    settings, origins = apply_settings(None, {"allow": ["cli.test"]}, {"allow": ["file.test"], "network": "none"},
                                       "/h/s.yml", TEAM_FILE)
    assert settings["allow"] == ["cli.test"] and settings["network"] == "none"
    assert origins == {"cli.test": "user"}


def test_the_files_allow_entries_have_its_origin_beside_the_teams():
    settings, origins = apply_settings(team({"allow": ["team.test"]}, ["allow"]), {}, {"allow": ["file.test"]},
                                       "/h/s.yml", TEAM_FILE)
    assert settings["allow"] == ["team.test", "file.test"]
    assert origins == {"team.test": "team", "file.test": "settings file /h/s.yml"}


def test_without_a_file_the_settings_are_the_teams_as_before():
    assert apply_settings(team({"network": "none"}), {}, {}, "/h/s.yml", TEAM_FILE)[0]["network"] == "none"


def test_a_file_value_the_team_forbids_is_refused_with_the_teams_sentence_naming_the_file():
    with pytest.raises(SettingsFileError) as raised:
        apply_settings(team({"allow": ["team.test"]}), {}, {"allow": ["file.test"]}, "/h/s.yml", TEAM_FILE)
    assert str(raised.value) == (
        "settings file /h/s.yml: aisb_allow is refused: the team file /etc/aisb/team.json sets allow and lets "
        "developers add to nothing only (user_may_add); change or remove it there (a value given to the play "
        "with -e replaces the file's)")


def test_a_value_the_team_forbids_given_to_the_play_is_refused_as_before():
    with pytest.raises(TeamError) as raised:
        apply_settings(team({"network": "none"}), {"network": "allow"}, {"allow": ["file.test"]}, "/h/s.yml",
                       TEAM_FILE)
    assert not isinstance(raised.value, SettingsFileError)
    assert str(raised.value).startswith("aisb_network is refused: the team file /etc/aisb/team.json sets network")


def test_a_forbidden_file_value_replaced_on_the_command_line_is_not_used():
    settings, _origins = apply_settings(team({"network": "none"}), {"network": "none"}, {"network": "allow"},
                                        "/h/s.yml", TEAM_FILE)
    assert settings["network"] == "none"
