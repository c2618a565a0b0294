# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/_role_inputs: the key of aisb.sandbox.session_images names every variable
the image and gate roles name (found by parsing them, none by hand), this collection's
files and the files the roles read from a variable's paths; any of them changing changes it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.aisb.sandbox.plugins.plugin_utils import _role_inputs
from collection_path import IMPORT_ROOT

REPO = Path(__file__).resolve().parents[2]


def synthetic_roles(root):
    """Two roles naming variables in each place a role can."""
    image = root / "roles" / "image"
    (image / "defaults").mkdir(parents=True)
    (image / "defaults" / "main.yml").write_text("---\nimage_x: \"{{ aisb_x | default(omit) }}\"\n")
    (image / "tasks").mkdir()
    (image / "tasks" / "main.yml").write_text(
        "---\n- name: A task\n  ansible.builtin.assert:\n    that:\n      - bare_that == 1\n"
        "  when: bare_when and not ansible_check_mode\n"
        "- name: Another\n  ansible.builtin.debug:\n    msg: \"{{ lookup('ansible.builtin.file', in_lookup) }}\"\n"
        "  vars:\n    local_var: \"{{ ansible_facts['x'] }}\"\n")
    (image / "templates").mkdir()
    (image / "templates" / "Containerfile.j2").write_text(
        "FROM {{ in_template }}\n{% for step in in_loop %}RUN {{ step }}\n{% endfor %}\n")
    gate = root / "roles" / "gate" / "meta"
    gate.mkdir(parents=True)
    (gate / "argument_specs.yml").write_text(
        "---\nargument_specs:\n  main:\n    options:\n      gate_y:\n        default: \"{{ aisb_y }}\"\n")
    return root


def test_every_variable_a_role_names_is_found_but_facts_and_omit(tmp_path):
    names = _role_inputs.role_variables(str(synthetic_roles(tmp_path)))
    assert set(names) >= {"aisb_x", "bare_that", "bare_when", "ansible_check_mode", "in_lookup", "in_template",
                          "in_loop", "aisb_y"}
    assert "ansible_facts" not in names and "omit" not in names and "step" not in names


def test_the_real_roles_name_their_whole_interface_and_the_aisb_variables_behind_it():
    names = set(_role_inputs.role_variables(str(REPO)))
    for role in _role_inputs.ROLES:
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
        assert set(specs["argument_specs"]["main"]["options"]) <= names, role
    assert {"aisb_base_image", "aisb_harness", "aisb_recipes", "aisb_extra_ca_certificates", "aisb_refresh",
            "aisb_allow", "aisb_connect_ports"} <= names
    assert set(_role_inputs.REFRESH) <= names and set(_role_inputs.FILE_LISTS) <= names


def test_the_only_files_the_roles_read_from_a_variable_are_the_file_lists():
    """A lookup of a path a variable gives reads a file the key must cover: each one the
    roles make names a role file (in the collection's digest) or a FILE_LISTS variable."""
    lookups = re.compile(r"(?:lookup|query)\(\s*'ansible\.builtin\.(?:file|template)',\s*([^,)]+)")
    found = []
    for path in sorted((REPO / "roles").rglob("*")):
        if path.is_file() and path.suffix in (".yml", ".j2"):
            found += [argument.strip().lstrip("*") for argument in lookups.findall(path.read_text())]
    variables = set(argument for argument in found if not argument.startswith(("'", '"')))
    assert found and variables == {"image_extra_ca_certificates"}
    assert variables <= set(_role_inputs.FILE_LISTS)


def test_the_digest_covers_the_roles_and_plugins_bytes_but_not_python_byte_code(tmp_path):
    root = synthetic_roles(tmp_path)
    (root / "plugins" / "lookup").mkdir(parents=True)
    (root / "plugins" / "lookup" / "recipe.py").write_text("RECIPES = {}\n")
    first = _role_inputs.collection_digest(str(root))
    (root / "plugins" / "lookup" / "__pycache__").mkdir()
    (root / "plugins" / "lookup" / "__pycache__" / "recipe.cpython-313.pyc").write_bytes(b"\0")
    (root / "docs").mkdir()
    (root / "docs" / "x.md").write_text("not an input\n")
    assert _role_inputs.collection_digest(str(root)) == first
    (root / "plugins" / "lookup" / "recipe.py").write_text("RECIPES = {'x': {}}\n")
    assert _role_inputs.collection_digest(str(root)) != first
    (root / "plugins" / "lookup" / "recipe.py").write_text("RECIPES = {}\n")
    (root / "roles" / "image" / "templates" / "Containerfile.j2").write_text("FROM x\n")
    assert _role_inputs.collection_digest(str(root)) != first


def test_the_key_changes_with_each_input_and_only_with_them():
    key = _role_inputs.inputs_key("d1", {"gate_allow": ["a.test"], "image_harness": "pi"}, {"/ca.crt": "f1"})
    assert key == _role_inputs.inputs_key("d1", {"image_harness": "pi", "gate_allow": ["a.test"]}, {"/ca.crt": "f1"})
    assert len({key,
                _role_inputs.inputs_key("d2", {"gate_allow": ["a.test"], "image_harness": "pi"}, {"/ca.crt": "f1"}),
                _role_inputs.inputs_key("d1", {"gate_allow": ["b.test"], "image_harness": "pi"}, {"/ca.crt": "f1"}),
                _role_inputs.inputs_key("d1", {"gate_allow": ["a.test"]}, {"/ca.crt": "f1"}),
                _role_inputs.inputs_key("d1", {"gate_allow": ["a.test"], "image_harness": "pi"}, {"/ca.crt": "f2"}),
                _role_inputs.inputs_key("d1", {"gate_allow": ["a.test"], "image_harness": "pi"}, {"/ca.crt": None}),
                }) == 6


@pytest.mark.parametrize("values, asked", [
    ({}, False), ({"aisb_refresh": False}, False), ({"aisb_refresh": "no"}, False),
    ({"aisb_refresh": True}, True), ({"image_refresh": "yes"}, True), ({"gate_refresh": "True"}, True),
])
def test_a_refresh_is_asked_for_by_any_of_its_variables(values, asked):
    assert _role_inputs.refresh_asked(values) is asked


def test_the_listed_files_come_from_both_lists_once_each():
    assert _role_inputs.listed_files({"image_extra_ca_certificates": ["/a.crt", "/b.crt"],
                                      "aisb_extra_ca_certificates": ["/b.crt", "/c.crt"], "other": ["/d"]}) == \
        ["/a.crt", "/b.crt", "/c.crt"]
    assert _role_inputs.listed_files({"aisb_extra_ca_certificates": "/a.crt"}) == []


PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    settings: {allow: [a.test], harness: pi}
    gate_allow: "{{ settings.allow }}"
    image_harness: "{{ settings.harness }}"
  tasks:
    - aisb.sandbox.session_images:
        images_dir: %s
      register: found
    - ansible.builtin.debug:
        msg: "key={{ found.key }} found={{ found.found }}"
"""


def test_the_action_keys_the_values_play_variables_have_not_their_text(tmp_path):
    """The roles' variables are templates of the play's settings (run_agent.yml's
    gate_allow: "{{ run_agent_settings.allow }}"): a key over their text would find the
    images and policy of other settings. This ansible-core's own templating, for real."""
    play = tmp_path / "play.yml"
    play.write_text(PLAY % (tmp_path / "images"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(IMPORT_ROOT), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1")
    playbook = str(Path(sys.executable).parent / "ansible-playbook")

    def key(*extra):
        done = subprocess.run([playbook, str(play), *extra], env=env, capture_output=True, text=True, check=False)
        found = re.search(r'"msg": "key=(\S*) found=False"', done.stdout)
        assert done.returncode == 0 and found, done.stdout[-3000:] + done.stderr[-2000:]
        return found.group(1)

    first = key()
    assert len(first) == 64 and key() == first
    assert key("-e", json.dumps({"settings": {"allow": ["b.test"], "harness": "pi"}})) != first
    assert key("-e", json.dumps({"settings": {"allow": ["a.test"], "harness": "shell"}})) != first
    assert key("-e", "aisb_refresh=true") == ""  # none: a refresh looks nothing up
