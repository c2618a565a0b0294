# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's harness code off by default: a recipe's project_code switches checked,
and put in the session's command (after the harness's own command, never into a shell's)
and environment; the operator's environment cannot undo a switch."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.harness import _recipes
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_code import apply_switches, recipe_switches
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError

RECIPES = _recipes.BUILT_IN_RECIPES


@pytest.mark.parametrize("name", ["pi", "claude-code", "opencode"])
def test_every_harness_that_loads_project_code_has_a_switch_to_turn_it_off(name):
    off = recipe_switches(_recipes.BUILT_IN[name])["off"]
    assert RECIPES[name].project_code["off"] == off
    assert off["args"] or off["env"]


def test_the_switch_follows_the_harnesss_command_and_stays_out_of_a_shell():
    pi = RECIPES["pi"]
    command, environment, record = apply_switches(pi, ["pi", "-p", "hi"], {"A": "1"}, False)
    assert command == ["pi", "--no-extensions", "--offline", "-p", "hi"]
    assert environment == {"A": "1"} and record == {"args": ["--no-extensions", "--offline"], "env": {}, "hide": []}
    # The operator's own command running pi gets them too; a shell's does not (the record says so).
    assert apply_switches(pi, ["pi", "--continue"], {}, False)[0] == ["pi", "--no-extensions", "--offline",
                                                                      "--continue"]
    command, _environment, record = apply_switches(pi, ["bash", "-c", "pi"], {}, False)
    assert command == ["bash", "-c", "pi"] and record["args"] == []
    # Allowed: pi has no switch to turn it on; nothing is added.
    assert apply_switches(pi, ["pi", "-p", "hi"], {}, True) == (["pi", "-p", "hi"], {}, {"args": [], "env": {}, "hide": []})


def test_opencode_is_told_by_its_environment_whatever_runs_it():
    command, environment, record = apply_switches(RECIPES["opencode"], ["bash"], {"A": "1"}, False)
    assert command == ["bash"] and environment == {"A": "1", "OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
    assert record == {"args": [], "env": {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}, "hide": [".opencode"]}
    assert apply_switches(RECIPES["opencode"], ["opencode"], {}, True)[1] == {}


def test_the_operators_environment_cannot_undo_a_switch():
    with pytest.raises(InputError, match="aisb_environment sets OPENCODE_DISABLE_PROJECT_CONFIG, which"):
        apply_switches(RECIPES["opencode"], ["opencode"], {"OPENCODE_DISABLE_PROJECT_CONFIG": "0"}, False)
    # The same value is no clash.
    apply_switches(RECIPES["opencode"], ["opencode"], {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}, False)


def test_a_harness_without_a_switch_gets_nothing_and_the_record_says_it_has_none():
    assert apply_switches(RECIPES["shell"], ["bash"], {}, False) == (["bash"], {}, None)
    # codex: its own default (an untrusted project's configuration is not loaded).
    assert apply_switches(RECIPES["codex"], ["codex", "exec"], {"A": "1"}, False) == (["codex", "exec"], {"A": "1"},
                                                                                      None)
    assert apply_switches(_recipes.NO_RECIPE, ["true"], {}, False) == (["true"], {}, None)


@pytest.mark.parametrize("project_code, needle", [
    ("off", "project_code must be a dict with off and/or on"),
    ({"never": {}}, "project_code must be a dict with off and/or on"),
    ({"off": {"argv": []}}, "project_code off must be a dict with args, env and/or hide"),
    ({"off": {"hide": ".opencode"}}, "project_code off hide must be a list of names of directories at the project"),
    ({"off": {"hide": ["a/b"]}}, "project_code off hide must be a list of names"),
    ({"off": {"hide": [".."]}}, "project_code off hide must be a list of names"),
    ({"off": {"hide": ["x:/etc"]}}, "project_code off hide must be a list of names"),
    ({"off": {"args": "--no"}}, "project_code off args must be a list of non-empty strings"),
    ({"on": {"args": [""]}}, "project_code on args must be a list of non-empty strings"),
    ({"off": {"env": ["X"]}}, "project_code off env must be a dict"),
    ({"off": {"env": {"1X": "1"}}}, "project_code off env"),
])
def test_an_operator_recipes_switches_are_checked(project_code, needle):
    with pytest.raises(_recipes.RecipeError) as error:
        _recipes.recipe_for("mine", {"mine": dict(_recipes.BUILT_IN["shell"], project_code=project_code)})
    assert needle in str(error.value) and "recipes mine" in str(error.value)
