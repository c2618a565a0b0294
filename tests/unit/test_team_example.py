# SPDX-License-Identifier: GPL-3.0-or-later
"""examples/team is what docs/teams.md says: an inventory ansible-inventory parses with
three workstations, a secret the example password decrypts, and team settings the
collection's own parser accepts."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from ansible.parsing.vault import VaultLib, VaultSecret

from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import apply_team, check_team, render_team

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team"
PASSWORD = EXAMPLE / "vault-password-EXAMPLE-ONLY"
WORKSTATIONS = ["ws1.example.internal", "ws2.example.internal", "ws3.example.internal"]


def inventory():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(EXAMPLE / "inventory.ini"),
         "--vault-password-file", str(PASSWORD), "--list"],
        check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "ANSIBLE_NOCOLOR": "1"})
    return json.loads(result.stdout)


class VarsLoader(yaml.SafeLoader):
    """YAML as group_vars hold it: a !vault value is its ciphertext."""


VarsLoader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))


def group_vars(name):
    return yaml.load((EXAMPLE / "group_vars" / "workstations" / name).read_text(), Loader=VarsLoader)


def test_the_inventory_names_three_workstations_with_the_team_s_settings():
    found = inventory()
    assert sorted(found["workstations"]["hosts"]) == WORKSTATIONS
    for host in WORKSTATIONS:
        hostvars = found["_meta"]["hostvars"][host]
        assert hostvars["ansible_user"] and "aisb_team" in hostvars and "vault_provider_key" in hostvars


def test_the_example_password_decrypts_the_provider_key():
    ciphertext = group_vars("vault.yml")["vault_provider_key"]
    assert ciphertext.startswith("$ANSIBLE_VAULT;1.1;AES256")
    vault = VaultLib([("default", VaultSecret(PASSWORD.read_bytes().strip()))])
    assert vault.decrypt(ciphertext) == b"sk-EXAMPLE-ONLY-not-a-real-key"


def test_the_team_settings_pass_the_collection_s_own_checks():
    team = group_vars("team.yml")
    text = render_team(team["aisb_team"])
    checked = check_team(json.loads(text))
    settings, origins = apply_team(checked, {"allow": ["deb.debian.org"]})
    assert settings["network"] == "allow" and origins["github.com"] == "team" and origins["deb.debian.org"] == "user"
    # Each credential's key file is one provision.yml writes from aisb_team_keys.
    files = [entry["from_file"] for entry in settings["credentials"]]
    assert files == ["~/.config/aisb/keys/" + name for name in team["aisb_team_keys"]]
