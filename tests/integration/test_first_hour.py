# SPDX-License-Identifier: GPL-3.0-or-later
"""An operator's first mistakes get one clear sentence each: run_agent.yml on a
workstation provision.yml never ran on or with a wrong input (both before any image
work), and verify.yml with an inventory that matches no host."""

import json

import pytest

from fleet import run_verify
from scenario import playbook
from sessions import PROJECT
from workstation import Workstation, install_checkout


@pytest.fixture(scope="module")
def bare():
    """A bare Debian 13 workstation with the collection installed and nothing provisioned."""
    with Workstation("trixie") as ws:
        install_checkout(ws)
        ws.sh(f"mkdir -p {PROJECT} /home/dev/.ssh")
        yield ws


def test_run_agent_on_an_unprovisioned_host_says_to_provision_before_any_work(bare):
    result = playbook(bare, "run_agent", "-e", json.dumps({"project": PROJECT, "command": ["true"]}), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    assert "run `ansible-playbook aisb.sandbox.provision` on it first" in output, output[-3000:]
    assert "podman" in output and "Failed to find required executable" not in output, output[-3000:]
    # Nothing measured, stored or built: the first task refused.
    assert "changed=0" in output and "Ensure the sandbox image" not in output, output[-3000:]
    assert not list(bare.path("/home").glob("*/.local/state/aisb/host_capabilities.json"))


@pytest.mark.parametrize("inputs, refusal", [
    ({"project": PROJECT + "-missing", "command": ["true"]}, "is not an existing directory"),
    ({"project": "/home/dev/.ssh", "command": ["true"]}, "dot-directories directly in the home directory"),
    ({"project": PROJECT, "command": ["true"], "prompt": "hello"}, "mutually exclusive: command|prompt|prompt_file"),
    ({"project": PROJECT, "command": ["--allow-unenforced"]}, "must name a program"),
    ({"project": PROJECT, "aisb_pass_environment": ["AISB_NOT_SET_HERE"]}, "is not set in the controller's environment"),
    ({"project": PROJECT, "command": ["true"], "aisb_allow": ["exa mple.com"]}, "exa mple.com"),
])
def test_run_agent_refuses_a_wrong_input_before_anything_else(bare, inputs, refusal):
    """The session's own checks run first, even before the provisioning check: on this
    bare host a wrong input is named, not the missing podman."""
    result = playbook(bare, "run_agent", "-e", json.dumps(inputs), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and refusal in output, output[-3000:]
    assert "aisb.sandbox.provision" not in output and "changed=0" in output, output[-3000:]


@pytest.mark.parametrize("inventory, extra", [("[workstations]\n", ()),
                                              ("[workstations]\nws1\n", ("-e", "aisb_hosts=no-such-group"))])
def test_verify_fails_when_no_host_matches(tmp_path, inventory, extra):
    (tmp_path / "fleet.ini").write_text(inventory)
    result = run_verify(tmp_path, tmp_path / "fleet.ini", *extra, timeout=300)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "no host matches" in result.stdout and "nothing would be verified" in result.stdout, result.stdout[-3000:]
    assert not (tmp_path / "aisb-fleet-report").exists()
