# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugin reads provider keys on the controller, and a recipe's variable that
a credential fills with a placeholder is never passed through with its real value."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.plugin_utils._controller_options import resolve_controller_options
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _input_checks
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

KEY = "sk-controller-secret"
RECIPE = {"command": ["pi"], "prompt": ["-p"], "env": ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]}


def args(**overrides):
    """The action's arguments; a harness given as a recipe becomes the operator's recipe
    "test-recipe" (the action takes a harness by its name)."""
    base = {"harness": RECIPE, "prompt": "hi", "prompt_file": None, "command": None, "interactive": None,
            "pass_environment": [], "environment": {}, "project": "/p", "credentials": [
                {"host": "api.anthropic.com", "header": "x-api-key", "variable": "ANTHROPIC_API_KEY",
                 "from_environment": "ANTHROPIC_API_KEY"}]}
    base.update(overrides)
    if isinstance(base["harness"], dict):
        recipe = dict({"packages": [], "install": [], "prompt": [], "allow": [], "env": []}, **base["harness"])
        base.update(harness="test-recipe", recipes={"test-recipe": recipe})
    return base


def test_the_key_goes_to_credentials_and_never_to_the_environment():
    module_args, _interactive = resolve_controller_options(args(), {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": "o"})
    assert json.loads(module_args["environment"]) == {}
    # The exported OPENAI_API_KEY has no entry: injected all the same (implicit_entries).
    assert [(entry["variable"], entry["key"]) for entry in json.loads(module_args["credentials"])] == [
        ("ANTHROPIC_API_KEY", KEY), ("OPENAI_API_KEY", "o")]


@pytest.mark.parametrize("given", [{"pass_environment": ["ANTHROPIC_API_KEY"]},
                                   {"environment": {"ANTHROPIC_API_KEY": "x"}}, {"network": "none"}])
def test_a_session_that_cannot_honour_a_credential_is_refused_on_the_controller(given):
    with pytest.raises(InputError, match=r"aisb_credentials(\[0\]: variable ANTHROPIC_API_KEY| need)|"
                                         r"pass_environment name ANTHROPIC_API_KEY is the source"):
        resolve_controller_options(args(**given), {"ANTHROPIC_API_KEY": KEY})


def test_a_missing_source_is_refused_on_the_controller():
    with pytest.raises(InputError, match=r"aisb_credentials\[0\]: from_environment ANTHROPIC_API_KEY"):
        resolve_controller_options(args(), {})


def test_options_left_unset_are_not_sent_to_the_module():
    """validate_argument_spec fills an unset option with None, which the module would
    refuse for an option with choices (gate_path): the module gets no such key."""
    module_args, _interactive = resolve_controller_options(
        args(credentials=[], gate_path=None, gate_image=None), {})
    assert "gate_path" not in module_args and "gate_image" not in module_args
    module_args, _interactive = resolve_controller_options(args(credentials=[], gate_path="tcp-forward"), {})
    assert module_args["gate_path"] == "tcp-forward"


CLAUDE = {"command": ["claude"], "prompt": ["-p"], "env": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "DISABLE_X"],
          "env_values": {"DISABLE_X": "1", "QUIET": "1"}, "credential_urls": {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL"}}


def test_the_recipes_fixed_values_reach_the_harness_unless_the_operator_sets_them():
    module_args, _interactive = resolve_controller_options(args(harness=CLAUDE, credentials=[]), {})
    assert json.loads(module_args["environment"]) == {"DISABLE_X": "1", "QUIET": "1"}
    module_args, _interactive = resolve_controller_options(
        args(harness=CLAUDE, credentials=[], environment={"QUIET": "0"}), {"DISABLE_X": "0"})
    assert json.loads(module_args["environment"]) == {"DISABLE_X": "0", "QUIET": "0"}


def test_a_base_url_a_credential_fills_is_not_passed_through_from_the_controller():
    module_args, _interactive = resolve_controller_options(
        args(harness=CLAUDE), {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "https://elsewhere.example"})
    assert "ANTHROPIC_BASE_URL" not in json.loads(module_args["environment"])


@pytest.mark.parametrize("url", ["https://elsewhere.example", "http://api.anthropic.com", "https://api.anthropic.com:8443"])
def test_an_operators_base_url_away_from_the_credentials_host_is_refused(url):
    with pytest.raises(InputError, match=r"aisb_credentials\[0\]: environment ANTHROPIC_BASE_URL=%s is not an "
                                         r"https:// URL on api.anthropic.com port 443" % url):
        resolve_controller_options(args(harness=CLAUDE, environment={"ANTHROPIC_BASE_URL": url}),
                                   {"ANTHROPIC_API_KEY": KEY})


def test_an_operators_base_url_on_the_credentials_host_is_kept():
    module_args, _interactive = resolve_controller_options(
        args(harness=CLAUDE, environment={"ANTHROPIC_BASE_URL": "https://api.anthropic.com/proxy"}),
        {"ANTHROPIC_API_KEY": KEY})
    assert json.loads(module_args["environment"])["ANTHROPIC_BASE_URL"] == "https://api.anthropic.com/proxy"


def test_two_credentials_for_one_base_url_are_refused():
    recipe = dict(CLAUDE, credential_urls={"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL", "TOKEN": "ANTHROPIC_BASE_URL"})
    credentials = args()["credentials"] + [{"host": "other.example", "header": "authorization", "variable": "TOKEN",
                                            "value": "t"}]
    with pytest.raises(InputError, match=r"aisb_credentials\[1\]: the harness reads one base URL from "
                                         r"ANTHROPIC_BASE_URL, which aisb_credentials\[0\] already"):
        resolve_controller_options(args(harness=recipe, credentials=credentials), {"ANTHROPIC_API_KEY": KEY})


@pytest.mark.parametrize("recipe, message", [
    ({"env_values": ["X"]}, "harness env_values must be a dict"),
    ({"env_values": {"HTTPS_PROXY": "x"}}, "harness env_values name 'HTTPS_PROXY' is set by the session itself"),
    ({"env_values": {"X": 1}}, "harness env_values X must be a string"),
    ({"env_values": {"bad name": "1"}}, "harness env_values name 'bad name' is not a valid"),
    ({"credential_urls": ["X"]}, "harness credential_urls must be a dict"),
    ({"credential_urls": {"K": "NO_PROXY"}}, "harness credential_urls K name 'NO_PROXY' is set by the session"),
])
def test_a_bad_recipe_value_is_refused_naming_it(recipe, message):
    with pytest.raises(InputError, match=message):
        resolve_controller_options(args(harness=dict(CLAUDE, **recipe), credentials=[]), {})


def test_a_recipes_fixed_values_yield_to_the_operators_and_to_a_placeholder():
    recipe = dict(RECIPE, env_values={"OPENCODE_DISABLE_MODELS_FETCH": "1", "TUNED": "recipe",
                                      "ANTHROPIC_API_KEY": "recipe"})
    module_args, _interactive = resolve_controller_options(
        args(harness=recipe, environment={"TUNED": "operator"}), {"ANTHROPIC_API_KEY": KEY})
    assert json.loads(module_args["environment"]) == {"OPENCODE_DISABLE_MODELS_FETCH": "1", "TUNED": "operator"}


PI = {"command": ["pi"], "prompt": ["-p"], "env": ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"]}
EXPORTED = {"ANTHROPIC_API_KEY": "sk-ant-exported", "OPENAI_API_KEY": "sk-oai-exported", "GEMINI_API_KEY": "g-exported",
            "ANTHROPIC_AUTH_TOKEN": "tok-exported"}


def resolved(environ, **overrides):
    module_args, _interactive = resolve_controller_options(args(**dict({"harness": PI, "credentials": []},
                                                                       **overrides)), environ)
    return json.loads(module_args["environment"]), json.loads(module_args["credentials"])


def test_exported_provider_keys_are_injected_without_any_entry():
    environment, credentials = resolved(EXPORTED)
    assert environment == {}
    assert [(c["host"], c["header"], c["prefix"], c["variable"], c["key"]) for c in credentials] == [
        ("api.anthropic.com", "x-api-key", "", "ANTHROPIC_API_KEY", "sk-ant-exported"),
        ("api.openai.com", "Authorization", "Bearer ", "OPENAI_API_KEY", "sk-oai-exported"),
        ("generativelanguage.googleapis.com", "x-goog-api-key", "", "GEMINI_API_KEY", "g-exported")]
    assert all(c["paths"] for c in credentials), "a built-in provider's entry relays only its rules"


def test_a_key_reaches_the_sandbox_only_when_the_operator_names_it():
    environment, credentials = resolved(EXPORTED, pass_environment=["OPENAI_API_KEY"])
    assert environment == {"OPENAI_API_KEY": "sk-oai-exported"}
    assert [c["variable"] for c in credentials] == ["ANTHROPIC_API_KEY", "GEMINI_API_KEY"]


def test_without_a_network_no_key_is_injected_nor_passed():
    environment, credentials = resolved(EXPORTED, network="none")
    assert environment == {} and credentials == []


def test_one_key_per_provider_the_first_name_wins_and_the_other_stays_out():
    claude = {"command": ["claude"], "env": ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
              "credential_urls": {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN": "ANTHROPIC_BASE_URL"}}
    environment, credentials = resolved(EXPORTED, harness=claude)
    assert [c["variable"] for c in credentials] == ["ANTHROPIC_API_KEY"]
    assert "ANTHROPIC_AUTH_TOKEN" not in environment and "tok-exported" not in json.dumps(environment)


def test_an_entrys_source_is_never_passed_under_its_own_name():
    """An entry reading ANTHROPIC_API_KEY for another variable: that variable is no
    pass-through, and no implicit entry reads it a second time."""
    entry = {"host": "api.openai.com", "header": "Authorization", "prefix": "Bearer ", "variable": "OPENAI_API_KEY",
             "from_environment": "ANTHROPIC_API_KEY"}
    environment, credentials = resolved({"ANTHROPIC_API_KEY": KEY}, credentials=[entry])
    assert environment == {} and [c["variable"] for c in credentials] == ["OPENAI_API_KEY"]
    source = dict(entry, variable="MY_KEY", from_environment="MY_SOURCE", host="models.example")
    with pytest.raises(InputError, match="pass_environment name MY_SOURCE is the source"):
        resolved({"MY_SOURCE": KEY}, credentials=[source], pass_environment=["MY_SOURCE"])


def test_an_operators_entry_for_the_provider_wins_over_the_exported_key():
    entry = {"host": "api.anthropic.com", "header": "x-api-key", "variable": "ANTHROPIC_API_KEY", "value": "vaulted"}
    _environment, credentials = resolved(EXPORTED, credentials=[entry])
    assert [(c["variable"], c["key"]) for c in credentials][0] == ("ANTHROPIC_API_KEY", "vaulted")
    assert "sk-ant-exported" not in json.dumps(credentials)


@pytest.mark.parametrize("given", [{"environment": {"ANTHROPIC_BASE_URL": "https://gateway.corp.example/anthropic"}},
                                   {"pass_environment": ["ANTHROPIC_BASE_URL"]}, {}])
def test_an_exported_key_meant_for_another_server_is_refused_not_sent_to_the_provider(given):
    claude = {"command": ["claude"], "env": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
              "credential_urls": {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL"}}
    environ = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "https://gateway.corp.example/anthropic"}
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY is exported, and ANTHROPIC_BASE_URL=https://gateway"):
        resolved(environ, harness=claude, **given)
    # On the provider's own host it is kept behind the injector.
    environ["ANTHROPIC_BASE_URL"] = "https://api.anthropic.com"
    environment, credentials = resolved(environ, harness=claude)
    assert [c["variable"] for c in credentials] == ["ANTHROPIC_API_KEY"] and KEY not in json.dumps(environment)


@pytest.fixture
def project_and_state(tmp_path):
    """A project, the collection's state and an operator's directory beside them; a link
    from the operator's directory into the project."""
    project, state, operator = tmp_path / "src" / "app", tmp_path / "state", tmp_path / "operator"
    for directory in (project / ".aisb" / "pi-config", state / "aisb" / "harness-state", operator):
        directory.mkdir(parents=True)
    (project / "task.md").write_text("do it")
    (project / "key").write_text("sk-planted")
    (operator / "into-project").symlink_to(project / ".aisb" / "pi-config")
    return project, {"XDG_STATE_HOME": str(state), "HOME": str(tmp_path), "ANTHROPIC_API_KEY": KEY}


@pytest.mark.parametrize("option, value, named", [
    ("prompt_file", "task.md", "prompt_file"),
    ("harness_config", ".aisb/pi-config", "harness_config"),
    ("harness_config", "LINK", "harness_config"),
    ("harness_config", "STATE", "harness_config"),
    ("credentials", [{"host": "api.anthropic.com", "header": "x-api-key", "variable": "ANTHROPIC_API_KEY",
                      "from_file": "key"}], "aisb_credentials[0] from_file"),
])
def test_an_operator_input_inside_what_the_agent_writes_is_refused(project_and_state, option, value, named):
    project, environ = project_and_state
    tree = project if value != "STATE" else project.parent.parent / "state" / "aisb"
    if isinstance(value, list):
        value = [dict(entry, from_file=str(project / entry["from_file"])) for entry in value]
    elif value == "LINK":
        value = str(project.parent.parent / "operator" / "into-project")
    elif value == "STATE":
        value = str(tree / "harness-state")
    else:
        value = str(project / value)
    writable = _input_checks.agent_trees(str(project), environ)
    with pytest.raises(InputError) as error:
        resolve_controller_options(args(project=str(project), **{option: value}), environ, writable)
    assert str(error.value).startswith(named + " ") and "inside %s" % tree in str(error.value)


def test_an_operator_input_outside_is_read(project_and_state):
    project, environ = project_and_state
    prompt = project.parent.parent / "operator" / "task.md"
    prompt.write_text("the operator's task")
    writable = _input_checks.agent_trees(str(project), environ)
    module_args, _interactive = resolve_controller_options(args(project=str(project), prompt_file=str(prompt),
                                                                prompt=None), environ, writable)
    assert module_args["command"][-1] == "the operator's task"


def test_git_remotes_tokens_are_read_here_and_sent_resolved():
    remotes = [{"url": "https://github.com/org/repo.git", "from_environment": "GH_TOKEN"}]
    module_args, _interactive = resolve_controller_options(args(git_remotes=remotes),
                                                           {"ANTHROPIC_API_KEY": KEY, "GH_TOKEN": "ghp_x"})
    sent = json.loads(module_args["git_remotes"])
    assert [(entry["url"], entry["token"]) for entry in sent] == [("https://github.com/org/repo.git", "ghp_x")]
    assert "ghp_x" not in module_args["environment"]
    with pytest.raises(InputError, match="aisb_git_remotes need network allow"):
        resolve_controller_options(args(git_remotes=remotes, network="none", credentials=[]), {"GH_TOKEN": "t"})
    with pytest.raises(InputError, match=r"aisb_git_remotes\[0\]: from_environment GH_TOKEN is not set"):
        resolve_controller_options(args(git_remotes=remotes), {"ANTHROPIC_API_KEY": KEY})
