# SPDX-License-Identifier: GPL-3.0-or-later
"""podman command lines for images, the gate and the checks: the security flags are there."""

from ansible_collections.aisb.sandbox.plugins.module_utils import _podman


def test_build_uses_exactly_the_hashed_base_and_never_pulls():
    argv = _podman.build("podman", "localhost/x:1", "/ctx", "sha256:abc", {"b": "2", "a": "1"}, {"ARG": "v"})
    assert argv == ["podman", "build", "--pull=never", "--from", "sha256:abc", "--tag", "localhost/x:1",
                    "--build-arg", "ARG=v", "--label", "a=1", "--label", "b=2", "/ctx"]


def test_gate_runs_unprivileged_on_host_network_with_read_only_config():
    argv = _podman.gate_run("podman", "localhost/aisb-gate:1", "aisb-gate-s1", "/p", "/s.conf", extra=["--detach"])
    for flag in ["--network=host", "--user=proxy", "--cap-drop=ALL", "--security-opt=no-new-privileges",
                 "--read-only", "--detach"]:
        assert flag in argv
    assert "/p:%s:ro" % _podman.GATE_POLICY_DIR in argv and "/s.conf:%s:ro" % _podman.GATE_SESSION_CONF in argv
    assert argv[-4:] == ["squid", "-N", "-f", _podman.GATE_SESSION_CONF]
    assert _podman.GATE_POLICY_CONF.startswith(_podman.GATE_POLICY_DIR + "/")


def test_checks_run_without_network():
    squid = _podman.squid_parse("podman", "g", "/p", "/s.conf")
    assert "--network=none" in squid and squid[-5:] == ["squid", "-k", "parse", "-f", _podman.GATE_SESSION_CONF]
    nft = _podman.ruleset_check("podman", "s", "/policy")
    assert "--network=none" in nft and nft[-2:] == ["s", "--check"]
    assert "/policy:%s:ro" % _podman.SANDBOX_POLICY in nft
    for flag in _podman.SANDBOX_SECURITY:
        assert flag in nft


def test_only_localhost_images_count_as_local():
    assert _podman.is_local("localhost/aisb-base:trixie")
    assert not _podman.is_local("docker.io/library/ubuntu:24.04")


def test_a_stop_at_once_kills_without_a_grace_period():
    assert _podman.stop("podman", ["s"]) == ["podman", "stop", "--ignore", "--time", "2", "s"]
    assert _podman.stop("podman", ["s"], 0) == ["podman", "stop", "--ignore", "--time", "0", "s"]
