# SPDX-License-Identifier: GPL-3.0-or-later
"""podman command lines for images, the gate, the checks and the host probes: the security flags are there."""

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman


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


def test_pasta_network_values():
    assert _podman.pasta_network() == "pasta"
    assert _podman.pasta_network(map_host_loopback=["100.64.0.1", "fd00::1"]) == \
        "pasta:--map-host-loopback,100.64.0.1,--map-host-loopback,fd00::1"
    assert _podman.pasta_network(forward_tcp=[41234], no_map_gw=True) == "pasta:-T,41234,--no-map-gw"
    # -4: -T listens on the sandbox's ::1 too, and would forward it to the host's ::1.
    assert _podman.tcp_forward_network([41234, 41235]) == "pasta:-4,-T,41234,-T,41235,--no-map-gw"
    assert _podman.pasta_network(no_map_gw=True) == _podman.NO_GATE_NETWORK


def test_the_probes_command_lines():
    assert _podman.run_script("podman", "n", ["--network=none"], "img", "echo hi", [1]) == \
        ["podman", "run", "--rm", "--name", "n", "--network=none", "img", "bash", "-c", "echo hi", "_", "1"]
    assert _podman.unshare("podman", ["cat", "/proc/self/uid_map"]) == ["podman", "unshare", "cat", "/proc/self/uid_map"]
    assert _podman.network("podman", "create", "n", internal=True) == ["podman", "network", "create", "--internal", "n"]
    assert _podman.container_address("podman", "c", "n")[-2:] == ['{{(index .NetworkSettings.Networks "n").IPAddress}}',
                                                                  "c"]
    assert _podman.info("podman") == ["podman", "info", "--format", "json"]
    assert _podman.tag("podman", "a:1", "a:current") == ["podman", "tag", "a:1", "a:current"]


def test_error_line_is_podmans_own_message():
    assert _podman.error_line("Trying to pull...\nError: no such host\nmore") == "Error: no such host"
    assert _podman.error_line("just this\nlast") == "last" and _podman.error_line(None) == ""


def test_stop_gives_a_grace_period_unless_told_not_to():
    assert _podman.stop("podman", ["a"]) == ["podman", "stop", "--ignore", "--time", "2", "a"]
    assert _podman.stop("podman", ["a"], grace=0) == ["podman", "stop", "--ignore", "--time", "0", "a"]


def test_a_covered_directory_is_an_empty_read_only_tmpfs_after_the_project():
    # Empty: without notmpcopyup podman copies the project's directory into the tmpfs.
    argv = _podman.sandbox_run("podman", _podman.SandboxOptions(
        "n", "img", "/home/dev/app", "", "/s/policy", "pasta", {}, {}, [], False, 0, ["opencode"],
        hidden_dirs=["/project/.opencode"]))
    assert "--pidfile" not in argv
    covered = argv.index("/project/.opencode:ro,nosuid,nodev,noexec,mode=0555,notmpcopyup")
    assert argv[covered - 1] == "--tmpfs" and argv.index("/home/dev/app:/project") < covered
