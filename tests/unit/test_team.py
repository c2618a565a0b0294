# SPDX-License-Identifier: GPL-3.0-or-later
"""The team file: checked as the sessions check each setting, refused when anybody but
root could have written it, and the developer's values applied only where it says."""

import json
import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.team import _team
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import (
    DEFAULTS, TeamError, apply_team, check_team, read_team_file, render_team)

TEAM = {"format": 1, "settings": {"allow": ["github.com", ".npmjs.org"], "network": "allow",
                                  "limits": {"memory": "4g"}, "environment": {"CI": "1"}},
        "user_may_add": ["allow", "environment"]}


@pytest.mark.parametrize("change, needle", [
    ({"format": 2}, "format must be 1, got 2"),
    ({"extra": 1}, "unknown keys extra"),
    ({"settings": {"allow": ["exa mple.com"]}}, "settings.allow: allow entry 'exa mple.com'"),
    ({"settings": {"allow": "github.com"}}, "settings.allow must be a list, got str"),
    ({"settings": {"connect_ports": [0]}}, "settings.connect_ports"),
    ({"settings": {"network": "open"}}, "settings.network 'open' is not one of allow, none, no-gate"),
    ({"settings": {"project_mode": "yolo"}}, "settings.project_mode 'yolo' is not one of direct, review"),
    ({"settings": {"allow_unenforced": "yes"}}, "settings.allow_unenforced must be true or false"),
    ({"settings": {"limits": {"disk": "1g"}}}, "unknown limit 'disk'; the limits are cpus, memory, pids"),
    ({"settings": {"limits": {"pids": "many"}}}, "pids must be int, got 'many'"),
    ({"settings": {"pass_environment": ["HTTP_PROXY"]}}, "set by the session itself"),
    ({"settings": {"environment": {"1X": "v"}}}, "not a valid environment variable name"),
    ({"settings": {"harness_config": "relative/dir"}}, "settings.harness_config must be an absolute path"),
    ({"settings": {"network_mode": "allow"}}, "settings.network_mode is not a setting; the settings are allow,"),
    ({"settings": {"credentials": [{"host": "api.example.com", "header": "x-api-key", "variable": "K",
                                    "value": "secret"}]}}, "never goes in it"),
    ({"settings": {"retention_days": -1}}, "settings.retention_days must be a whole number, 0 or more, got -1"),
    ({"settings": {"retention_sessions": "20"}}, "settings.retention_sessions must be a whole number, 0 or more"),
    ({"settings": {"retention_days": True}}, "settings.retention_days must be a whole number, 0 or more, got True"),
    ({"settings": {"token_budget": 0}}, "settings.token_budget must be a whole number of tokens, 1 or more, got 0"),
    ({"settings": {"token_budget": "1M"}}, "settings.token_budget must be a whole number of tokens, 1 or more"),
    ({"user_may_add": ["network", "everything"]}, "user_may_add names 'everything', which is not a setting"),
    ({"user_may_add": "allow"}, "user_may_add must be a list of setting names"),
    ({"user_may_add": ["allow", "allow"]}, "names a setting twice"),
    ({"settings": {"allowed_harnesses": "pi"}}, "settings.allowed_harnesses must be a list, got str"),
    ({"settings": {"allowed_harnesses": []}}, "allowed_harnesses must be a list of recipe names, each once, at least"),
    ({"settings": {"allowed_harnesses": ["pi", "pi"]}}, "must be a list of recipe names, each once"),
    ({"settings": {"allowed_harnesses": ["pi", "nano"]}}, "aisb_harness 'nano' is not a recipe"),
    ({"settings": {"allowed_harnesses": ["codex"]}}, "settings.harness 'pi' is not among the harnesses the team "
                                                     "allows: codex"),
    ({"user_may_add": ["harness", "allowed_harnesses"]}, "user_may_add names allowed_harnesses, which is the team's"),
])
def test_a_wrong_team_setting_is_named_with_what_is_allowed(change, needle):
    data = dict(TEAM, **change)
    with pytest.raises(TeamError) as error:
        check_team(data, "/etc/aisb/team.json")
    assert needle in str(error.value) and "/etc/aisb/team.json" in str(error.value)


def test_render_checks_and_keeps_only_what_the_sessions_read():
    text = render_team({"settings": {"connect_ports": [443, 8443]}, "user_may_add": ["allow"]})
    assert json.loads(text) == {"format": 1, "settings": {"connect_ports": [443, 8443]}, "user_may_add": ["allow"]}
    with pytest.raises(TeamError, match="aisb_team: unknown keys usr_may_add"):
        render_team({"usr_may_add": ["allow"]})
    with pytest.raises(TeamError, match="aisb_team must be a dict"):
        render_team(["allow"])


def test_no_team_file_lets_every_developer_value_apply():
    settings, origins = apply_team(None, {"allow": ["pypi.org"], "network": "none", "limits": {"pids": 10}})
    assert settings == dict(DEFAULTS, allow=["pypi.org"], network="none", limits={"pids": 10})
    assert origins == {"pypi.org": "user"}


def test_the_team_s_settings_apply_with_no_developer_value():
    settings, origins = apply_team(check_team(TEAM), {})
    assert settings["allow"] == ["github.com", ".npmjs.org"] and settings["limits"] == {"memory": "4g"}
    assert settings["network"] == "allow" and settings["harness"] == "pi"
    assert origins == {"github.com": "team", ".npmjs.org": "team"}


def test_a_developer_adds_where_the_team_lets_them_and_each_entry_keeps_its_origin():
    settings, origins = apply_team(check_team(TEAM), {"allow": ["pypi.org", "github.com"], "environment": {"X": "1"}})
    assert settings["allow"] == ["github.com", ".npmjs.org", "pypi.org"]
    assert settings["environment"] == {"CI": "1", "X": "1"}
    assert origins == {"github.com": "team", ".npmjs.org": "team", "pypi.org": "user"}


@pytest.mark.parametrize("user, needle", [
    ({"network": "no-gate"}, "aisb_network is refused: the team file /etc/aisb/team.json sets network"),
    ({"limits": {"memory": "64g"}}, "aisb_limits is refused"),
    ({"allow_unenforced": True}, "leaves allow_unenforced at false"),
    ({"project_harness_code": True}, "leaves project_harness_code at false"),
    ({"connect_ports": [443, 22]}, "aisb_connect_ports is refused"),
    ({"harness": "shell"}, "aisb_harness is refused"),
    ({"environment": {"CI": "0"}}, "aisb_environment changes CI, which the team file /etc/aisb/team.json sets"),
    ({"allow": ["exa mple.com"]}, "aisb_allow: allow entry 'exa mple.com'"),
])
def test_a_developer_value_the_team_forbids_is_refused_naming_the_team_file(user, needle):
    with pytest.raises(TeamError) as error:
        apply_team(check_team(TEAM), user)
    assert needle in str(error.value)
    if "refused" in needle:
        assert "lets developers add to allow, environment only" in str(error.value)


def test_json_text_is_taken_as_the_session_takes_it():
    settings, _origins = apply_team(check_team(TEAM), {"environment": json.dumps({"X": "1"})})
    assert settings["environment"] == {"CI": "1", "X": "1"}
    settings, _origins = apply_team(None, {"credentials": json.dumps([{
        "host": "api.example.com", "header": "x-api-key", "variable": "K", "from_environment": "K"}])})
    assert settings["credentials"] == [{"host": "api.example.com", "port": 443, "header": "x-api-key", "prefix": "",
                                        "variable": "K", "from_environment": "K"}]


def test_a_developer_value_that_changes_nothing_is_no_refusal():
    settings, _origins = apply_team(check_team(TEAM), {"network": "allow", "connect_ports": [443],
                                                       "limits": {"memory": "4g"}, "allow_unenforced": False})
    assert settings["network"] == "allow" and settings["connect_ports"] == [443]


def test_retention_is_the_team_s_unless_it_lets_developers_set_it():
    assert apply_team(None, {})[0]["retention_days"] == 30 and apply_team(None, {})[0]["retention_sessions"] == 20
    team = check_team({"format": 1, "settings": {"retention_days": 365, "retention_sessions": 100}})
    assert apply_team(team, {})[0]["retention_days"] == 365
    # Records are kept as long as the team says: not shorter (nor longer) from the developer.
    for value in (1, 400):
        with pytest.raises(TeamError, match="aisb_retention_days is refused: the team file /etc/aisb/team.json "
                                            "sets retention_days"):
            apply_team(team, {"retention_days": value})
    assert apply_team(team, {"retention_days": 365})[0]["retention_days"] == 365
    loose = check_team({"format": 1, "settings": {"retention_days": 365}, "user_may_add": ["retention_sessions"]})
    assert apply_team(loose, {"retention_sessions": 5})[0]["retention_sessions"] == 5
    with pytest.raises(TeamError, match="leaves retention_days at 30"):
        apply_team(check_team({"format": 1}), {"retention_days": 2})
    with pytest.raises(TeamError, match="aisb_retention_sessions must be a whole number, 0 or more, got -3"):
        apply_team(None, {"retention_sessions": -3})


def test_the_team_s_token_budget_is_the_default_and_the_ceiling():
    assert apply_team(None, {})[0]["token_budget"] is None
    assert apply_team(None, {"token_budget": 10 ** 9})[0]["token_budget"] == 10 ** 9
    team = check_team({"format": 1, "settings": {"token_budget": 200000}})
    assert apply_team(team, {})[0]["token_budget"] == 200000
    # Tighter is always allowed; looser only where the team lets developers set it.
    assert apply_team(team, {"token_budget": 50000})[0]["token_budget"] == 50000
    with pytest.raises(TeamError, match=r"^aisb_token_budget 200001 is over the team file /etc/aisb/team.json's "
                                        r"token_budget, 200000: give at most 200000, or leave it out for 200000$"):
        apply_team(team, {"token_budget": 200001})
    loose = check_team({"format": 1, "settings": {"token_budget": 200000}, "user_may_add": ["token_budget"]})
    assert apply_team(loose, {"token_budget": 10 ** 7})[0]["token_budget"] == 10 ** 7
    # Without a team budget a developer's own only tightens.
    assert apply_team(check_team({"format": 1}), {"token_budget": 5})[0]["token_budget"] == 5
    with pytest.raises(TeamError, match="aisb_token_budget must be a whole number of tokens, 1 or more, got -1"):
        apply_team(None, {"token_budget": -1})


def test_a_session_without_the_team_s_token_budget_is_refused():
    team = check_team({"format": 1, "settings": {"token_budget": 200000}})
    given = {"network": "allow", "connect_ports": [443], "allow": [], "limits": {}}
    _team.check_session(team, dict(given, token_budget=200000))
    _team.check_session(team, dict(given, token_budget=1000))
    with pytest.raises(TeamError, match="the session has no token budget, which the team file /etc/aisb/team.json "
                                        "sets \\(token_budget 200000\\)"):
        _team.check_session(team, dict(given, token_budget=None))
    with pytest.raises(TeamError, match="aisb_token_budget 300000 is over"):
        _team.check_session(team, dict(given, token_budget=300000))


def test_an_empty_user_may_add_refuses_every_addition():
    team = check_team({"format": 1, "settings": {"allow": ["github.com"]}})
    with pytest.raises(TeamError, match="lets developers add to nothing"):
        apply_team(team, {"allow": ["pypi.org"]})


@pytest.fixture
def team_dir(tmp_path, monkeypatch):
    """A team file's directory; tmp_path's owner stands for root (the tests are not root)."""
    directory = tmp_path / "aisb"
    directory.mkdir(mode=0o755)
    monkeypatch.setattr(_team, "root_only", lambda info: info.st_uid == os.getuid() and not info.st_mode & 0o022)
    return directory


def test_no_team_file_reads_as_none(team_dir):
    assert read_team_file(str(team_dir / "team.json")) is None
    assert read_team_file(str(team_dir / "missing" / "team.json")) is None


def test_a_team_file_reads_back_as_checked(team_dir):
    path = team_dir / "team.json"
    path.write_text(render_team({"settings": TEAM["settings"], "user_may_add": TEAM["user_may_add"]}))
    path.chmod(0o644)
    assert read_team_file(str(path)) == check_team(TEAM)


@pytest.mark.parametrize("tamper, needle", [
    (lambda d: (d / "team.json").chmod(0o666), "mode 0666: it must be root's and writable by root alone"),
    (lambda d: d.chmod(0o777), "the team file's directory"),
    (lambda d: ((d / "team.json").unlink(), (d / "team.json").symlink_to(d / "elsewhere.json")),
     "a link: the team file must be the file itself"),
    (lambda d: (d / "team.json").write_text("{"), "is not JSON"),
    (lambda d: (d / "team.json").write_text(json.dumps(dict(TEAM, settings={"network": "open"}))),
     "settings.network 'open' is not one of"),
    (lambda d: ((d / "team.json").unlink(), (d / "team.json").mkdir()), "is a directory, not a regular file"),
    (lambda d: ((d / "team.json").unlink(), os.mkfifo(d / "team.json")), "is a special file, not a regular file"),
    (lambda d: (d / "team.json").write_text('{"format": 1, "settings": {"network": "none", "network": "allow"}}'),
     "key 'network' given more than once"),
    (lambda d: (d / "team.json").write_text('{"format": 1, "format": 1}'), "key 'format' given more than once"),
    (lambda d: (d / "team.json").write_text('{"format": true}'), "format must be 1, got True"),
])
def test_a_team_file_anybody_but_root_could_have_written_is_refused(team_dir, tamper, needle):
    path = team_dir / "team.json"
    (team_dir / "elsewhere.json").write_text(json.dumps(TEAM))
    path.write_text(json.dumps(TEAM))
    path.chmod(0o644)
    tamper(team_dir)
    with pytest.raises(TeamError) as error:
        read_team_file(str(path))
    assert needle in str(error.value) and str(team_dir) in str(error.value)


def test_a_team_file_of_another_owner_is_refused(tmp_path):
    """The real check: this file is the test user's, not root's."""
    path = tmp_path / "team.json"
    path.write_text(json.dumps(TEAM))
    path.chmod(0o644)
    if os.getuid() == 0:
        os.chown(path, 1000, 1000)
    with pytest.raises(TeamError, match="belongs to uid"):
        read_team_file(str(path))


def test_a_session_without_the_team_s_environment_or_configuration_is_refused():
    team = check_team({"format": 1, "settings": {"environment": {"NOTE": "team"}, "harness_config": "/etc/pi"}})
    given = {"network": "allow", "connect_ports": [443], "allow": [], "limits": {}}
    _team.check_session(team, dict(given, environment={"NOTE": "team"}, harness_config="/etc/pi"))
    with pytest.raises(TeamError, match="the session's environment leaves out or changes NOTE"):
        _team.check_session(team, dict(given, environment={}, harness_config="/etc/pi"))
    with pytest.raises(TeamError, match="the session has no harness configuration, which the team file"):
        _team.check_session(team, dict(given, environment={"NOTE": "team"}, harness_config=None))
    with pytest.raises(TeamError, match="aisb_harness_config is refused"):
        _team.check_session(team, dict(given, environment={"NOTE": "team"}, harness_config="/home/dev/mine"))


def test_a_harness_configuration_the_team_lets_developers_give_is_not_refused_by_the_session():
    team = check_team({"format": 1, "user_may_add": ["harness_config"]})
    _team.check_session(team, {"network": "allow", "connect_ports": [443], "allow": [], "limits": {},
                               "harness_config": "/home/dev/pi-config"})


def test_a_developer_chooses_only_among_the_team_s_harnesses_and_the_session_checks_again():
    recipe = {"packages": [], "install": [], "command": ["mine"], "prompt": [], "allow": [], "env": []}
    team = check_team({"format": 1, "settings": {"allowed_harnesses": ["pi", "claude-code"]},
                       "user_may_add": ["harness", "recipes"]})
    assert apply_team(team, {"harness": "claude-code"})[0]["harness"] == "claude-code"
    for harness, recipes in (("codex", None), ("mine", {"mine": recipe})):
        user = {"harness": harness, "recipes": recipes} if recipes else {"harness": harness}
        with pytest.raises(TeamError, match="aisb_harness .the team file /t.json's allowed_harnesses. %r is not among "
                                            "the harnesses the team allows: pi, claude-code" % harness):
            apply_team(team, user, "/t.json")
        with pytest.raises(TeamError, match="is not among the harnesses the team allows"):
            _team.check_session(team, dict(user, network="allow", connect_ports=[443], allow=[], limits={}))
    anyone = check_team({"format": 1, "user_may_add": ["harness"]})
    assert apply_team(anyone, {"harness": "codex"})[0]["harness"] == "codex"


GH = {"url": "https://github.com/org/app.git", "branches": "aisb/*", "from_environment": "GH_TOKEN"}
GL = {"url": "https://gitlab.example/g/tool", "username": "oauth2", "from_file": "/home/dev/.gl-token"}


def remotes_team(*may_add):
    return check_team({"format": 1, "settings": {"git_remotes": [GH]}, "user_may_add": list(may_add)})


def test_the_team_s_git_remotes_are_checked_and_kept_as_written():
    team = check_team({"format": 1, "settings": {"git_remotes": [dict(GH, url="https://GitHub.com/org/app.git/")]}})
    assert team["settings"]["git_remotes"] == [dict(GH, username="x-access-token")]
    assert apply_team(team, {})[0]["git_remotes"] == team["settings"]["git_remotes"]
    assert DEFAULTS["git_remotes"] == [] and apply_team(None, {})[0]["git_remotes"] == []


@pytest.mark.parametrize("remotes, needle", [
    ([dict(GH, from_environment=None, value="ghp_secret")],
     "settings.git_remotes[0] must take its token from from_environment or from_file"),
    ([{"url": "http://github.com/org/app", "from_environment": "T"}], "settings.git_remotes: aisb_git_remotes[0]: url"),
    ([dict(GH, branches="refs/heads/*")], "aisb_git_remotes[0] branches 'refs/heads/*'"),
    ([GH, dict(GH, url="https://github.com/Org/App", branches="x/*")], "names the repository of an earlier entry"),
    ("https://github.com/org/app", "settings.git_remotes"),
])
def test_a_wrong_team_git_remote_is_named(remotes, needle):
    remotes = [dict((k, v) for k, v in entry.items() if v is not None) for entry in remotes] \
        if isinstance(remotes, list) else remotes
    with pytest.raises(TeamError) as error:
        check_team({"format": 1, "settings": {"git_remotes": remotes}}, "/etc/aisb/team.json")
    assert needle in str(error.value) and "/etc/aisb/team.json" in str(error.value)


def test_a_developer_adds_git_remotes_only_where_the_team_lets_them():
    mine = {"url": "https://github.com/me/fork", "value": "ghp_mine"}
    with pytest.raises(TeamError, match=r"aisb_git_remotes is refused: the team file /t sets git_remotes and lets "
                                        r"developers add to nothing only \(user_may_add\)"):
        apply_team(remotes_team(), {"git_remotes": [mine]}, "/t")
    # The team's own entries given again change nothing.
    assert apply_team(remotes_team(), {"git_remotes": [GH]})[0]["git_remotes"] == [dict(GH, username="x-access-token")]
    added = apply_team(remotes_team("git_remotes"), {"git_remotes": [mine]})[0]["git_remotes"]
    assert [entry["url"] for entry in added] == [GH["url"], mine["url"]] and added[1]["branches"] == "aisb/{session}/*"


@pytest.mark.parametrize("change", [{"branches": "*"}, {"branches": "main"}, {"username": "oauth2"},
                                    {"from_environment": "MY_TOKEN"},
                                    # The same repository as forges read it, with a wider pattern.
                                    {"url": "https://github.com/org/app", "branches": "*"},
                                    {"url": "https://github.com/ORG/app.git", "branches": "*"}])
def test_a_developer_never_widens_or_changes_a_team_remote(change):
    """Even where developers may add remotes, the team's remote keeps its branches, user
    name and token source: a developer's entry for its url is refused, not added beside it."""
    for team in (remotes_team(), remotes_team("git_remotes")):
        with pytest.raises(TeamError) as error:
            apply_team(team, {"git_remotes": [dict(GH, **change)]}, "/t")
        assert "aisb_git_remotes" in str(error.value) and "/t" in str(error.value)


def session_remote(url, branches, username="x-access-token"):
    """A remote as the session holds it: checked, token read, source gone."""
    return {"url": url, "host": "h", "port": 443, "path": "/p", "branches": branches, "username": username,
            "token": "t"}


def test_the_session_checks_its_git_remotes_against_the_team_again():
    """run_agent_settings (or the session's option) given with -e must not widen the team's
    remotes: the session's remotes are the team's in all the broker does with them."""
    team = remotes_team()
    _team.check_session(team, {"git_remotes": [session_remote(GH["url"], "aisb/*")]}, "/t")
    _team.check_session(team, {"git_remotes": []}, "/t")
    for remote, needle in [
        (session_remote(GH["url"], "*"), "aisb_git_remotes changes https://github.com/org/app.git, which the team "
                                         "file /t lists"),
        (session_remote(GH["url"], "aisb/*", "oauth2"), "changes https://github.com/org/app.git"),
        (session_remote("https://github.com/Org/App", "*"), "aisb_git_remotes changes https://github.com/Org/App"),
        (session_remote("https://github.com/me/fork", "aisb/*"), "aisb_git_remotes is refused: "
                                                                 "https://github.com/me/fork is not among the team "
                                                                 "file /t's git_remotes"),
    ]:
        with pytest.raises(TeamError) as error:
            _team.check_session(team, {"git_remotes": [remote]}, "/t")
        assert needle in str(error.value)
    _team.check_session(remotes_team("git_remotes"), {"git_remotes": [session_remote("https://h.org/x", "a/*")]}, "/t")
    with pytest.raises(TeamError, match="changes https://github.com/org/app.git"):
        _team.check_session(remotes_team("git_remotes"), {"git_remotes": [session_remote(GH["url"], "*")]}, "/t")


@pytest.mark.parametrize("key", ["upload_budget", "provider_upload_budget"])
def test_the_team_s_upload_budgets_are_the_default_and_the_ceiling(key):
    assert apply_team(None, {})[0][key] is None
    team = check_team({"format": 1, "settings": {key: 8 * 2 ** 20}})
    assert apply_team(team, {})[0][key] == 8 * 2 ** 20
    assert apply_team(team, {key: 2 ** 20})[0][key] == 2 ** 20
    with pytest.raises(TeamError, match=r"^aisb_%s 8388609 is over the team file" % key):
        apply_team(team, {key: 8 * 2 ** 20 + 1})
    with pytest.raises(TeamError, match="aisb_%s must be a whole number of bytes, 1 to 1125899906842624, got 0" % key):
        apply_team(None, {key: 0})
