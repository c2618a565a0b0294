# SPDX-License-Identifier: GPL-3.0-or-later
"""Values the enforcement depends on that more than one file has to spell out: every copy
equals its source, so a change to one that misses another fails here.

- the session's table: roles/image/files/ruleset.nft plus the entrypoint's gate rule,
  and the host probes' model of it (_host_probe_sandbox.RULESET);
- the privilege drop: the entrypoint's setpriv line and _host_probe_sandbox.DROP_ALL_PRIVILEGES;
- pasta's --network values: _podman.pasta_network and the session's network plan;
- the wait for a gate: the entrypoint's GATE_WAIT and _gate_loopback.GATE_READY_TIMEOUT;
- the default base image: _images.DEFAULT_BASE_IMAGE and the roles' defaults, argument
  specs, module documentation and docs;
- the gate's peeking rules: _squid's certificate and SNI helper paths and the gate image.
"""

import re
import shlex
from pathlib import Path

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _squid
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.gate._gate_loopback import GATE_READY_TIMEOUT
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import DROP_ALL_PRIVILEGES, RULESET
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "roles" / "image" / "files" / "entrypoint.sh"


def nft_lines(text):
    """An nft script's statements, comments and layout dropped, spellings nft treats alike
    made one (priority filter is 0 in the inet filter table, "lo" is lo)."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line.split("#", 1)[0]).strip()
        if line:
            lines.append(line.replace("priority filter;", "priority 0;").replace('oif "lo"', "oif lo"))
    return lines


def test_the_probes_table_is_the_sessions():
    template = nft_lines((REPO / "roles" / "image" / "files" / "ruleset.nft").read_text())
    # The probe's gate has no budget: its rule accepts (a budget's is inserted, a jump to its chain).
    [rule] = re.findall(r'echo "add rule inet aisb output (.*)"', ENTRYPOINT.read_text())
    gate_rule = rule.replace("$family", "ip").replace("$address", "$gate_addr").replace("$port", "$gate_port")
    assert template[-2:] == ["}", "}"]
    # The entrypoint adds the gate's rule to chain output, after the template's own.
    assert nft_lines(RULESET) == template[:-2] + [gate_rule] + template[-2:]


def test_the_probes_privilege_drop_is_the_entrypoints():
    # The entrypoint names setpriv by its absolute path and execs harness-exec after it.
    [line] = re.findall(r"^exec (/usr/bin/setpriv .*)$", ENTRYPOINT.read_text().replace("\\\n", " "), re.M)
    argv = shlex.split(line)
    assert argv == ["/usr/bin/" + DROP_ALL_PRIVILEGES[0]] + DROP_ALL_PRIVILEGES[1:] + [
        "/bin/bash", "$HARNESS_EXEC", "$@"]


@pytest.mark.parametrize("gate_path, options", [
    ("map-host-loopback", dict(map_host_loopback=[MAPPED_LOOPBACK], no_map_gw=True)),
    ("tcp-forward", dict(forward_tcp=[41234], no_map_gw=True, ipv4_only=True)),
])
def test_the_sessions_pasta_networks_are_the_builders(gate_path, options):
    assert _session_plan.network_plan("allow", gate_path, 41234)[0] == _podman.pasta_network(**options)
    assert _session_plan.network_plan("no-gate", gate_path, 41234)[0] == _podman.NO_GATE_NETWORK == \
        _podman.pasta_network(no_map_gw=True)


def test_the_entrypoints_gate_wait_is_the_sessions():
    [wait] = re.findall(r"^readonly GATE_WAIT=(\d+)$", ENTRYPOINT.read_text(), re.M)
    assert int(wait) == GATE_READY_TIMEOUT


# Where the default base image is written out, and how: each pattern must match in each
# of its files (so a rewording cannot make this test pass by finding nothing).
BASE_IMAGE_COPIES = [
    (r"aisb_base_image \| default\('([^']*)'\)", [
        "roles/capabilities/defaults/main.yml", "roles/image/defaults/main.yml", "roles/gate/defaults/main.yml",
        "roles/capabilities/meta/argument_specs.yml", "roles/image/meta/argument_specs.yml",
        "roles/gate/meta/argument_specs.yml"]),
    (r"Defaults to C\(aisb_base_image\), else C\(([^)]*)\)", [
        "roles/capabilities/meta/argument_specs.yml", "roles/image/meta/argument_specs.yml",
        "roles/gate/meta/argument_specs.yml"]),
    (r"Defaults to C\(([^)]*)\) when O\(probe_image\) is not set", ["plugins/modules/host_capabilities.py"]),
    (r"`aisb_base_image` \(default `([^`]*)`\)", ["docs/architecture.md", "docs/fleet.md"]),
    (r"\| `aisb_base_image` \| `([^`]*)` \|", ["docs/fleet.md"]),
]


@pytest.mark.parametrize("pattern, paths", BASE_IMAGE_COPIES, ids=lambda value: str(value)[:40])
def test_every_copy_of_the_default_base_image_is_the_modules(pattern, paths):
    for path in paths:
        found = re.findall(pattern, (REPO / path).read_text())
        assert found and set(found) == {_images.DEFAULT_BASE_IMAGE}, path


def test_no_other_ubuntu_image_is_named_outside_the_tests():
    # Measured facts (docs/facts) name what they were measured with: not a default.
    named = {}
    for top in ("plugins", "roles", "playbooks", "docs", "README.md"):
        for path in [REPO / top] if (REPO / top).is_file() else (REPO / top).rglob("*"):
            if path.is_file() and "facts" not in path.parts:
                for image in re.findall(r"[\w.-]+/library/ubuntu:[\w.-]+", path.read_text(errors="replace")):
                    named.setdefault(image, []).append(str(path.relative_to(REPO)))
    assert set(named) == {_images.DEFAULT_BASE_IMAGE}, named


def test_the_gate_image_makes_what_the_peeking_rules_name():
    """The certificate and the SNI helper: _squid names their paths, the gate's
    Containerfile puts them there."""
    containerfile = (REPO / "roles" / "gate" / "templates" / "Containerfile.j2").read_text()
    assert "-keyout %s -out %s" % (_squid.PEEK_CERTIFICATE, _squid.PEEK_CERTIFICATE) in containerfile
    assert "COPY sni-is-connect-host %s\n" % _squid.SNI_HELPER in containerfile
