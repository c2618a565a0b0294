# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's built-in recipes pass the checks a session makes of a recipe, and
use only the keys a recipe has; an operator's recipe is checked the same way and can
neither replace a built-in one nor claim an address."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils import _harness_config, _harness_state, _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils._input_checks import (
    harness_command, harness_credential_urls, harness_names, harness_values)

RECIPES = _recipes.BUILT_IN


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_builtin_recipe_passes_a_sessions_checks(name):
    recipe = RECIPES[name]
    assert set(_recipes.KEYS) <= set(recipe) <= set(_recipes.KEYS + _recipes.OPTIONAL_KEYS)
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


@pytest.mark.parametrize("name, recipe, needle", [
    ("pi", dict(RECIPES["shell"]), "pi is a built-in recipe, which an operator's recipe cannot replace"),
    ("Mine", dict(RECIPES["shell"]), "a recipe's name is lower-case letters"),
    ("mine", dict(RECIPES["shell"], allow=["198.18.0.7:80"]), "allow names an address or a private endpoint"),
    ("mine", dict(RECIPES["shell"], allow=["10.0.0.0/8"]), "allow names an address or a private endpoint"),
    ("mine", dict(RECIPES["shell"], allow=["models.lan:443=10.0.0.5"]), "allow names an address or a private"),
    ("mine", dict(RECIPES["shell"], extra=1), "unknown extra"),
    ("mine", {"command": ["x"]}, "missing packages, install, prompt, allow, env"),
    ("mine", dict(RECIPES["shell"], install="rm -rf /"), "install must be a list of strings"),
])
def test_an_operator_recipe_is_checked(name, recipe, needle):
    with pytest.raises(_recipes.RecipeError) as error:
        _recipes.recipe_for(name, {name: recipe})
    assert needle in str(error.value)


def test_a_harness_is_a_name():
    assert _recipes.recipe_for("pi") is RECIPES["pi"]
    mine = dict(RECIPES["shell"], allow=["tools.example.com"])
    assert _recipes.recipe_for("mine", {"mine": mine}) == mine
    for harness, needle in [(dict(RECIPES["pi"], allow=["other.test"]), "aisb_harness names a recipe"),
                            ("nope", "aisb_harness 'nope' is not a recipe; the recipes are pi, claude-code")]:
        with pytest.raises(_recipes.RecipeError, match=needle):
            _recipes.recipe_for(harness, {})
