# SPDX-License-Identifier: GPL-3.0-or-later
"""The operator's harness configuration: read on the controller without following a
link, only what the recipe names, never a key; mounted read-only where pi reads it,
and merged with the credentials' models.json."""

import json
import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials import _credential_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _harness_config, _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

from builders import FACTS, inputs


def recipe(command, config):
    """A recipe with COMMAND and CONFIG, parsed as a session has it."""
    return _recipes.parse_recipe("unit", dict(_recipes.BUILT_IN["shell"], command=command, config=config))


RECIPE = recipe(["pi"], {"dir": "/home/agent/.pi/agent",
                         "names": ["settings.json", "models.json", "AGENTS.md", "prompts/", "skills/"]})
SHELL = _recipes.recipe_for("shell")
KEY = "sk-unit-secret"
ENTRY = {"host": "models.test", "port": 9443, "header": "x-api-key", "prefix": "", "variable": "FAKE_KEY", "key": KEY}


def write(root, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as handle:
            handle.write(text)


def test_the_directory_is_read_as_the_recipe_names_it(tmp_path):
    write(tmp_path, {"AGENTS.md": "rules", "prompts/review.md": "review", "skills/a/SKILL.md": "skill",
                     "settings.json": "{}"})
    files = _harness_config.read_config(str(tmp_path), RECIPE)
    assert files == [{"path": "AGENTS.md", "text": "rules"}, {"path": "prompts/review.md", "text": "review"},
                     {"path": "settings.json", "text": "{}"}, {"path": "skills/a/SKILL.md", "text": "skill"}]
    assert _harness_config.mounts(files, RECIPE) == [
        ("harness-config/AGENTS.md", "/home/agent/.pi/agent/AGENTS.md"),
        ("harness-config/prompts", "/home/agent/.pi/agent/prompts"),
        ("harness-config/settings.json", "/home/agent/.pi/agent/settings.json"),
        ("harness-config/skills", "/home/agent/.pi/agent/skills")]
    # What the module gets is checked again, as the action sent it.
    assert _harness_config.check_config(json.dumps(files), RECIPE) == files


@pytest.mark.parametrize("files, message", [
    ({"auth.json": "{}"}, "auth.json is refused: keys go in aisb_credentials"),
    ({".credentials.json": "{}"}, r"\.credentials\.json is refused: keys go in aisb_credentials"),
    ({"notes.txt": "x"}, "notes.txt is not something this harness reads; allowed: AGENTS.md, models.json, "
                         "prompts/, settings.json, skills/"),
    ({"AGENTS.md/x": "x"}, "AGENTS.md/x is not something this harness reads"),
    ({"settings.json": "[1]"}, "settings.json must hold a JSON object"),
    ({"settings.json": "{"}, "settings.json is not JSON"),
    ({"models.json": json.dumps({"providers": {"p": {"apiKey": "sk-live-123"}}})},
     "models.json providers.p.apiKey must name an environment variable"),
    ({"models.json": json.dumps({"providers": {"p": {"models": [{"id": "m", "apiKey": "!cat /k"}]}}})},
     r"providers.p.models\[0\].apiKey must name"),
    ({"models.json": json.dumps({"providers": []})}, "providers must be an object of provider objects"),
    ({"prompts/.hidden": "x"}, "is not a relative path of plain names"),
])
def test_what_the_harness_does_not_read_or_a_key_is_refused_by_name(tmp_path, files, message):
    write(tmp_path, files)
    with pytest.raises(InputError, match="aisb_harness_config.*" + message):
        _harness_config.read_config(str(tmp_path), RECIPE)


def test_a_link_anywhere_is_refused(tmp_path):
    write(tmp_path, {"prompts/a.md": "a"})
    os.symlink("/etc/passwd", str(tmp_path / "prompts" / "b.md"))
    with pytest.raises(InputError, match="prompts/b.md is a symbolic link"):
        _harness_config.read_config(str(tmp_path), RECIPE)


def test_too_much_is_refused(tmp_path):
    write(tmp_path, {"prompts/a.md": "a" * (_harness_config.MAX_BYTES // 2 + 1),
                     "prompts/b.md": "b" * (_harness_config.MAX_BYTES // 2 + 1)})
    with pytest.raises(InputError, match="more than"):
        _harness_config.read_config(str(tmp_path), RECIPE)


def test_a_recipe_without_config_reads_none(tmp_path):
    assert _harness_config.read_config(None, SHELL) == []
    with pytest.raises(InputError, match="the harness recipe has no config"):
        _harness_config.read_config(str(tmp_path), SHELL)
    with pytest.raises(InputError, match="not a directory"):
        _harness_config.read_config(str(tmp_path / "missing"), RECIPE)


def test_a_recipe_may_only_name_the_harness_users_paths():
    with pytest.raises(InputError, match="under /home/agent"):
        _harness_config.recipe_config({"config": {"dir": "/etc", "names": ["passwd"]}})
    with pytest.raises(InputError, match="plain file names"):
        _harness_config.recipe_config({"config": {"dir": "/home/agent/x", "names": ["../y"]}})


def planned(files, credentials=()):
    mounts = _harness_config.mounts(files, RECIPE) if files else []
    return _session_plan.plan_session(
        "sid", "/s", inputs(harness_files=files, harness_mounts=mounts, credentials=list(credentials)), FACTS, 40001,
        ({"FAKE_KEY": "aisb-placeholder-a"}, 40002) if credentials else None)


def test_the_configuration_is_mounted_read_only_in_a_writable_agent_directory():
    plan = planned([{"path": "AGENTS.md", "text": "rules"}, {"path": "prompts/r.md", "text": "r"}])
    assert plan.session_files == [("harness-config/AGENTS.md", "rules"), ("harness-config/prompts/r.md", "r")]
    assert plan.read_only_mounts == [("harness-config/AGENTS.md", "/home/agent/.pi/agent/AGENTS.md"),
                                     ("harness-config/prompts", "/home/agent/.pi/agent/prompts")]
    assert plan.sandbox_options.writable_dirs == ["/home/agent/.pi/agent"]


def test_the_operators_models_json_is_merged_with_the_credentials():
    operator = {"providers": {
        "fake": {"baseUrl": "https://models.test:9443/api/", "api": "anthropic-messages", "apiKey": "FAKE_KEY",
                 "models": [{"id": "m"}, {"id": "n", "baseUrl": "https://models.test:9443/n"}]},
        "local": {"baseUrl": "https://other.test/v1", "apiKey": "ollama"}}}
    plan = planned([{"path": "models.json", "text": json.dumps(operator)}], [ENTRY])
    files = dict(plan.session_files)
    assert list(files) == ["harness-config/models.json"]  # one file, at the operator's path
    merged = json.loads(files["harness-config/models.json"])
    assert merged["providers"]["fake"]["baseUrl"] == "http://100.64.0.1:40002/models.test:9443/api"
    assert merged["providers"]["fake"]["models"][1]["baseUrl"] == "http://100.64.0.1:40002/models.test:9443/n"
    assert merged["providers"]["local"] == operator["providers"]["local"]  # another host: as it was
    assert KEY not in json.dumps(plan)


def test_a_built_in_provider_goes_where_its_credential_says():
    operator = {"providers": {"anthropic": {"baseUrl": "https://elsewhere.test"}}}
    entry = dict(ENTRY, variable="ANTHROPIC_API_KEY")
    plan = _session_plan.plan_session(
        "sid", "/s", inputs(harness_files=[{"path": "models.json", "text": json.dumps(operator)}],
                            harness_mounts=_harness_config.mounts([{"path": "models.json", "text": "{}"}], RECIPE),
                            credentials=[entry]), FACTS, 40001, ({"ANTHROPIC_API_KEY": "aisb-placeholder-a"}, 40002))
    merged = json.loads(dict(plan.session_files)["harness-config/models.json"])
    assert merged["providers"]["anthropic"]["baseUrl"] == "http://100.64.0.1:40002/models.test:9443"


CODEX = recipe(["codex"], {"dir": "/home/agent/.codex", "names": ["config.toml", "AGENTS.md"],
                           "endpoints": ["config.toml"]})
CONFIG_TOML = """model_provider = "fake"
[model_providers.fake]
base_url = "https://models.test:9443/v1"
[model_providers.near]
base_url = "https://models.test:9444/v1"
[model_providers.longer]
base_url = "https://models.test.evil:9443/v1"
[model_providers.plain]
base_url = "http://models.test:9443/v1"
"""


def codex_plan(files, credentials):
    return _session_plan.plan_session(
        "sid", "/s", inputs(harness_files=files, harness_mounts=_harness_config.mounts(files, CODEX),
                            harness_endpoints=_harness_config.endpoint_paths(files, CODEX), credentials=credentials),
        FACTS, 40001, ({"FAKE_KEY": "aisb-placeholder-a"}, 40002))


def test_an_endpoint_files_provider_urls_go_behind_the_injector_and_nothing_else():
    files = [{"path": "AGENTS.md", "text": "see https://models.test:9443/v1"},
             {"path": "config.toml", "text": CONFIG_TOML}]
    written = dict(codex_plan(files, [ENTRY]).session_files)
    assert written["harness-config/config.toml"] == CONFIG_TOML.replace(
        '"https://models.test:9443/v1"', '"http://100.64.0.1:40002/models.test:9443/v1"')
    # Not an endpoint file: as the operator wrote it.
    assert written["harness-config/AGENTS.md"] == "see https://models.test:9443/v1"


@pytest.mark.parametrize("url, moved", [
    ("https://api.openai.com/v1", "http://100.64.0.1:40002/api.openai.com/v1"),
    ("https://API.openai.com:443/v1", "http://100.64.0.1:40002/api.openai.com/v1"),
    ("https://api.openai.com", "http://100.64.0.1:40002/api.openai.com"),
    ("https://api.openai.com:8443/v1", None), ("https://api.openai.com.evil/v1", None),
    ("https://xapi.openai.com/v1", None), ("http://api.openai.com/v1", None)])
def test_only_https_on_the_entrys_own_host_and_port_moves(url, moved):
    entry = dict(ENTRY, host="api.openai.com", port=443)
    text = 'base_url = "%s"\n' % url
    assert _credential_plan.moved_urls(text, [entry], "http://100.64.0.1:40002") == (
        'base_url = "%s"\n' % moved if moved else text)


def test_endpoints_must_be_files_the_recipe_names():
    for endpoints in (["auth.json"], ["prompts/"], "config.toml"):
        config = {"config": {"dir": "/home/agent/.codex", "names": ["config.toml", "prompts/"],
                             "endpoints": endpoints}}
        with pytest.raises(InputError, match="endpoints must be file names among its names"):
            _harness_config.recipe_config(config)
    with pytest.raises(InputError, match="optionally endpoints"):
        _harness_config.recipe_config({"config": {"dir": "/home/agent/.codex", "names": [], "extra": 1}})


OPENCODE = recipe(["opencode"], {"dir": "/home/agent/.config/opencode", "names": ["opencode.json"]})


@pytest.mark.parametrize("harness, files, message", [
    (CODEX, {"config.toml": '[model_providers.p]\nexperimental_bearer_token = "sk-live"\n'},
     "config.toml sets experimental_bearer_token"),
    (OPENCODE, {"opencode.json": json.dumps({"provider": {"p": {"options": {"apiKey": "sk-live-123"}}}})},
     r"provider.p.options.apiKey must be \{env:NAME\}"),
    (OPENCODE, {"opencode.json": json.dumps({"provider": {"p": {"options": {"apiKey": "{env:A} sk-live"}}}})},
     r"provider.p.options.apiKey must be"),
])
def test_a_key_in_codex_or_opencode_configuration_is_refused_by_name(tmp_path, harness, files, message):
    write(tmp_path, files)
    with pytest.raises(InputError, match="aisb_harness_config.*" + message):
        _harness_config.read_config(str(tmp_path), harness)
    write(tmp_path, {"opencode.json": json.dumps({"provider": {"p": {"options": {"apiKey": "{env:P_KEY}"}}}}),
                     "config.toml": 'env_key = "P_KEY"\n'})
    assert _harness_config.check_config([{"path": p, "text": (tmp_path / p).read_text()} for p in files], harness)
