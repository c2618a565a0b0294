# SPDX-License-Identifier: GPL-3.0-or-later
"""The image role's built-in recipes pass the checks a session makes of a recipe, and
use only the keys the role accepts."""

from pathlib import Path

import pytest
import yaml

from ansible_collections.aisb.sandbox.plugins.module_utils import _harness_config, _harness_state
from ansible_collections.aisb.sandbox.plugins.module_utils._session_inputs import (
    harness_command, harness_credential_urls, harness_names, harness_values)

VARS = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles" / "image" / "vars" / "main.yml").read_text())
RECIPES = VARS["image_recipes"]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_builtin_recipe_passes_a_sessions_checks(name):
    recipe = RECIPES[name]
    assert set(VARS["image_recipe_keys"]) <= set(recipe) <= set(VARS["image_recipe_keys"] + VARS["image_recipe_optional_keys"])
    assert harness_command(recipe, prompt="hi")[-1] == "hi"
    harness_names(recipe)
    values, urls = harness_values(recipe), harness_credential_urls(recipe)
    # A fixed value never stands where a credential's base URL goes.
    assert not set(values) & set(urls.values())
    _harness_config.recipe_config(recipe)
    _harness_state.recipe_state(recipe)


def test_claude_code_runs_headless_without_prompts_and_reaches_the_injector_by_its_base_url():
    recipe = RECIPES["claude-code"]
    assert harness_command(recipe, prompt="hi") == ["claude", "--permission-mode", "bypassPermissions", "-p", "hi"]
    assert harness_credential_urls(recipe) == {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL",
                                               "ANTHROPIC_AUTH_TOKEN": "ANTHROPIC_BASE_URL"}
    assert harness_values(recipe) == {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    assert ".credentials.json" not in recipe["config"]["names"]
