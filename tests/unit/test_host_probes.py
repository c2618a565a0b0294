# SPDX-License-Identifier: GPL-3.0-or-later
"""The host probes' command lines and their bounds, with a fake podman."""

import json

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_probes
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK


def recording(answer=(0, "started\n", "")):
    calls = []

    def run(argv, timeout=None):
        calls.append((argv, timeout))
        return answer

    return run, calls


def test_probe_container_command_line():
    argv = _host_probes.Prober(None, "podman", "img", 60).argv("n", ["--network=none"], "echo hi", [1, "a"])
    assert argv[:6] == ["podman", "run", "--rm", "--name", "n", "--network=none"]
    assert argv[6:9] == ["img", "bash", "-c"] and argv[9] == _host_probes.PRELUDE + "echo hi"
    assert argv[10:] == ["_", "1", "a"]


def test_a_hung_container_is_removed_not_left_behind():
    run, calls = recording((None, "started\n", ""))
    outcome = _host_probes.Prober(run, "podman", "img", 7).container(["--network=none"], "sleep 99")
    assert outcome.failure(7) == "hung: no exit within 7 s (container removed)"
    (probe, probe_timeout), (remove, remove_timeout) = calls
    name = probe[probe.index("--name") + 1]
    assert name.startswith("aisb-probe-") and probe_timeout == 7
    assert (remove, remove_timeout) == (_podman.remove("podman", [name]), 60)
    assert remove == ["podman", "rm", "--force", "--ignore", "--time", "0", name]


def test_the_pasta_probes_use_the_sessions_network_strings():
    run, calls = recording()
    prober = _host_probes.Prober(run, "podman", "img", 60)
    _host_probes.probe_pasta(prober)
    _host_probes.probe_host_loopback(prober)
    _host_probes.probe_tcp_forward(prober)
    networks = [next(arg for arg in argv if arg.startswith("--network=")) for argv, _timeout in calls]
    port = calls[2][0][-1]
    assert networks == ["--network=pasta", "--network=pasta:--map-host-loopback,%s" % MAPPED_LOOPBACK,
                        "--network=pasta:-T,%s" % port]


def test_without_an_image_every_container_probe_says_why_and_the_host_probes_run():
    info = json.dumps({"host": {"security": {"rootless": True}}})
    run, calls = recording((0, info, ""))
    found = _host_probes.run_probes(_host_probes.Prober(run, "podman", None, 60, "the base image x is not present"))
    assert list(found) == list(_host_probes.ORDER)
    for name in _host_probes.CONTAINER_PROBE_NAMES:
        assert found[name]["detail"] == "not measured: the base image x is not present" and not found[name]["ok"]
    assert found["rootless"]["ok"] is True
    assert not [argv for argv, _timeout in calls if argv[1] == "run"]


def seccomp_probe(monkeypatch, out, profile=("{}", None), enforce=True):
    monkeypatch.setattr(_seccomp, "load_profile", lambda: profile)
    run, calls = recording((0, "started\n" + out, ""))
    return _host_probes.probe_seccomp_profile(_host_probes.Prober(run, "podman", "img", 60), enforce)["seccomp_profile"], \
        [argv for argv, _timeout in calls]


def test_the_seccomp_probe_runs_the_sandbox_shape_under_the_profile(monkeypatch):
    entry, calls = seccomp_probe(monkeypatch, "nft=0\nSeccomp=2\nSeccomp_filters=1\nunshare=1\n")
    assert entry["ok"] is True and "unshare -Urn is refused (exit 1)" in entry["detail"]
    argv = calls[0]
    assert argv[argv.index("--network=none") + 1:][:len(_podman.SANDBOX_SECURITY)] == _podman.SANDBOX_SECURITY
    assert [arg for arg in argv if arg.startswith("--security-opt=seccomp=")][0].endswith("/seccomp.json")
    # The leak control leaves the profile out.
    _entry, calls = seccomp_probe(monkeypatch, "nft=0\nSeccomp=2\nunshare=0\n", enforce=False)
    assert not [arg for arg in calls[0] if arg.startswith("--security-opt=seccomp=")]


def test_the_seccomp_probe_names_each_failure(monkeypatch):
    entry, _calls = seccomp_probe(monkeypatch, "nft=1\nSeccomp=0\nunshare=0\n")
    assert entry["ok"] is False
    assert entry["detail"] == ("nft failed as root in the privileged stage (exit 1); leak: the agent made a user "
                               "namespace (unshare -Urn true exited 0); the container is not under a seccomp filter "
                               "(Seccomp: 0)")
    entry, calls = seccomp_probe(monkeypatch, "", profile=(None, "podman's default seccomp profile is missing"))
    assert entry == {"ok": False, "detail": "podman's default seccomp profile is missing", "evidence": {}}
    assert calls == []
