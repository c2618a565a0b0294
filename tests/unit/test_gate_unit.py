# SPDX-License-Identifier: GPL-3.0-or-later
"""The long-lived gate's quadlet: the session gate's own options, words systemd cannot
misread, started at boot only when started."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.gate import _gate_unit

POLICY = "/home/dev/.local/state/aisb/policies/0123abcd"
CONF = "/home/dev/.local/state/aisb/gates/0123abcd/gate-session.conf"


def unit(at_boot=True, policy=POLICY, extra=()):
    return _gate_unit.render_unit("aisb-gate-policy-0123abcd", "localhost/aisb-gate:feed",
                                  _podman.gate_options(policy, CONF, extra), _podman.GATE_COMMAND, "0123abcd",
                                  31280, at_boot)


def test_the_unit_runs_the_session_gates_options_and_command():
    text = unit()
    lines = text.splitlines()
    args = [line for line in lines if line.startswith("PodmanArgs=")][0][len("PodmanArgs="):].split(" ")
    assert args == _podman.gate_options(POLICY, CONF) + ["--label", "aisb.policy=0123abcd",
                                                         "--label", "aisb.port=31280"]
    assert "--network=host" in args and "--cap-drop=ALL" in args and "--read-only" in args
    assert "Exec=" + " ".join(_podman.GATE_COMMAND) in lines
    assert "ContainerName=aisb-gate-policy-0123abcd" in lines and "Image=localhost/aisb-gate:feed" in lines
    assert "DefaultDependencies=false" in lines and "Restart=on-failure" in lines
    assert lines[-2:] == ["[Install]", "WantedBy=default.target"]
    assert (_gate_unit.unit_port(text), _gate_unit.unit_image(text)) == (31280, "localhost/aisb-gate:feed")


def test_a_stopped_gate_is_not_started_at_boot():
    assert "[Install]" not in unit(at_boot=False) and "WantedBy" not in unit(at_boot=False)


def test_cgroups_v1_options_go_into_the_podman_args():
    args = unit(extra=_gate_unit.CGROUPS_V1_OPTIONS)
    assert "--cgroups=enabled" in args


@pytest.mark.parametrize("policy", ["/home/d ev/p/0123abcd", "/home/%h/p/0123abcd", "/home/$USER/p/0123abcd",
                                    '/home/"x"/p/0123abcd', "/home/x\\y/p/0123abcd", "/home/x\ny/p/0123abcd"])
def test_words_systemd_or_quadlet_would_read_otherwise_are_refused(policy):
    with pytest.raises(ValueError, match="cannot go into a systemd unit"):
        unit(policy=policy)


def test_the_unit_directory_follows_xdg_config_home(tmp_path):
    assert _gate_unit.unit_dir({"XDG_CONFIG_HOME": str(tmp_path)}) == str(tmp_path / "containers" / "systemd")
    assert _gate_unit.cgroups_v1(str(tmp_path)) is True
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    assert _gate_unit.cgroups_v1(str(tmp_path)) is False
