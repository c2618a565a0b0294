# SPDX-License-Identifier: GPL-3.0-or-later
"""The host probes' command lines and their bounds, with a fake podman."""

import json

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
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
