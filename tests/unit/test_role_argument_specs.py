# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role's meta/argument_specs.yml documents exactly its defaults, with the same values."""

import re
from pathlib import Path

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_match_defaults(role):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(options) == sorted(defaults)
    for name, value in defaults.items():
        assert options[name].get("default") == value, name


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_role_variables_carry_the_role_prefix(role):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    assert all(name.startswith(f"{role.name}_") for name in defaults)


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_readme_names_every_option_and_has_an_example(role):
    # galaxy-importer refuses a role without README.md; a README that misses an option
    # (or one that no longer exists) tells users the wrong interface.
    readme = (role / "README.md").read_text()
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    named = set(re.findall(r"^\| `(%s_[a-z_]+)` \|" % role.name, readme, re.MULTILINE))
    assert named == set(options)
    assert "name: aisb.sandbox.%s" % role.name in readme
