# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role's meta/argument_specs.yml documents exactly its defaults, with the same values."""

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
