# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's built-in recipes pass the checks a session makes of a recipe, and
use only the keys a recipe has; an operator's recipe is checked the same way and can
neither replace a built-in one nor claim an address."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

RECIPES = _recipes.BUILT_IN


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_builtin_recipe_passes_a_sessions_checks(name):
    assert set(_recipes.KEYS) <= set(RECIPES[name]) <= set(_recipes.KEYS + _recipes.OPTIONAL_KEYS)
    recipe = _recipes.parse_recipe(name, RECIPES[name], "BUILT_IN")
    assert recipe == _recipes.BUILT_IN_RECIPES[name]
    assert _recipes.session_command(recipe, prompt="hi")[-1] == "hi"
    # A fixed value never stands where a credential's base URL goes.
    assert not set(recipe.env_values) & set(recipe.credential_urls.values())


def test_claude_code_runs_headless_without_prompts_and_reaches_the_injector_by_its_base_url():
    recipe = _recipes.recipe_for("claude-code")
    assert _recipes.session_command(recipe, prompt="hi") == [
        "claude", "--permission-mode", "bypassPermissions", "-p", "hi"]
    assert recipe.credential_urls == {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL",
                                      "ANTHROPIC_AUTH_TOKEN": "ANTHROPIC_BASE_URL"}
    assert recipe.env_values == {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    assert ".credentials.json" not in recipe.config.names


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
    # The built-in ones are parsed once, when the module loads.
    assert _recipes.recipe_for("pi") is _recipes.BUILT_IN_RECIPES["pi"]
    assert _recipes.recipe_for("pi").given == RECIPES["pi"]
    mine = dict(RECIPES["shell"], allow=["tools.example.com"])
    assert _recipes.recipe_for("mine", {"mine": mine}) == _recipes.parse_recipe("mine", mine)
    assert _recipes.recipe_for("mine", {"mine": mine}).given == mine
    for harness, needle in [(dict(RECIPES["pi"], allow=["other.test"]), "aisb_harness names a recipe"),
                            ("nope", "aisb_harness 'nope' is not a recipe; the recipes are pi, claude-code")]:
        with pytest.raises(_recipes.RecipeError, match=needle):
            _recipes.recipe_for(harness, {})


@pytest.mark.parametrize("mistyped, meant", [
    ("claude", "claude-code"), ("claud-code", "claude-code"), ("codx", "codex"), ("opencod", "opencode"), ("PI", None)])
def test_a_mistyped_harness_names_the_variable_and_the_closest_recipe(mistyped, meant):
    with pytest.raises(_recipes.RecipeError) as error:
        _recipes.recipe_for(mistyped, {})
    assert str(error.value).startswith("aisb_harness %r is not a recipe; the recipes are pi, " % mistyped)
    if meant:
        assert str(error.value).endswith("; did you mean %s? (aisb_harness=%s)" % (meant, meant))
    else:
        assert "did you mean" not in str(error.value)
    mine = dict(RECIPES["shell"])
    assert "did you mean my-shell?" in str(pytest.raises(_recipes.RecipeError, _recipes.recipe_for, "my-shel",
                                                         {"my-shell": mine}).value)


def test_a_session_command_is_its_own_or_the_recipes_with_the_prompt():
    shell = _recipes.recipe_for("shell")
    assert _recipes.session_command(shell) == ["bash"]
    assert _recipes.session_command(shell, prompt="echo hi") == ["bash", "-c", "echo hi"]
    assert _recipes.session_command(shell, ["true"], prompt="ignored") == ["true"]
    # A session without a harness runs its own command or nothing.
    with pytest.raises(InputError, match=r"harness must be a recipe with a command .* got \{\}"):
        _recipes.session_command(_recipes.NO_RECIPE, prompt="hi")
    with pytest.raises(InputError, match="command's first word"):
        _recipes.session_command(_recipes.NO_RECIPE, ["-x"])
