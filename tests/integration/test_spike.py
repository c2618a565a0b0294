# SPDX-License-Identifier: GPL-3.0-or-later
"""The network spike (aisb.sandbox.host_capabilities) with real containers: the verdict on
Debian 13 and Debian 12, the faults it must name, its cache, and proof that every
negative probe sees a leak when the protection is missing."""

import json

import pytest

from sessions import clock, containers_created
from spike_host import FACTS, provisioned, run_leak_control, run_spike as spike
from workstation import BASE_IMAGE

ALIAS = "localhost/aisb-probe:current"
# Needed for the model; the informational probes (limits, ...) may fail on a sound host.
NEEDED = ("rootless", "subids", "tun", "pasta", "host_loopback_reachable", "network_host",
          "nft_needs_net_admin", "nft_default_drop", "table_allows_gate", "setpriv_locks_table",
          "raw_tcp_blocked", "udp_blocked", "ipv6_blocked", "bind_mount", "keep_id_owner")
NEGATIVE = ("internal_network_blackout", "nft_needs_net_admin", "nft_default_drop", "setpriv_locks_table",
            "raw_tcp_blocked", "udp_blocked", "ipv6_blocked")
# A podman that logs every command line it is given, to prove what the module started.
LOGGING_PODMAN = """#!/bin/sh
printf '%s\\n' "$*" >>/home/dev/podman-calls.log
exec /usr/bin/podman "$@"
"""
# The limits probe's limits, and what the host's cgroup files show for a container given
# them when they hold, in cgroup v2 and in v1: {v2 file: (v1 controller, v1 file, value)}.
LIMITS = ["--pids-limit=64", "--memory=256m", "--cpus=0.5"]
HOLDING = {"pids.max": ("pids", "pids.max", "64"), "memory.max": ("memory", "memory.limit_in_bytes", "268435456"),
           "cpu.max": ("cpu", "cpu.cfs_quota_us", "50000")}


def facts_of(answer):
    return answer["ansible_facts"]["aisb_host"]


def reasons_of(answer):
    return " ".join(facts_of(answer)["verdict"]["reasons"])


def limits_seen_by_the_host(ws, pid):
    """For each limit of LIMITS, whether the host's own cgroup files show it on process
    PID's cgroup (read from outside the container, where the probe reads them inside)."""
    cgroup2 = ws.run(["stat", "-f", "-c", "%T", "/sys/fs/cgroup"]).stdout.strip() == "cgroup2fs"
    # /proc/PID/cgroup: "0::PATH" for v2, "ID:CONTROLLERS:PATH" per v1 hierarchy.
    paths = dict(line.split(":", 2)[1:] for line in ws.run(["cat", f"/proc/{pid}/cgroup"]).stdout.splitlines())
    seen = {}
    for v2_file, (controller, v1_file, value) in HOLDING.items():
        if cgroup2:
            path = f"/sys/fs/cgroup{paths['']}/{v2_file}"
        else:
            hierarchy = next(names for names in paths if controller in names.split(","))
            path = f"/sys/fs/cgroup/{hierarchy}{paths[hierarchy]}/{v1_file}"
        # The root cgroup has no limit files: no limit there.
        shown = ws.run(["cat", path], check=False).stdout.strip()
        seen[v2_file] = shown == value or (v2_file == "cpu.max" and shown.startswith(value + " "))
    return seen


@pytest.fixture(scope="module")
def measured(workstation):
    """A full spike on the Debian 13 workstation, probe image built from the base image."""
    return spike(workstation, base_image=BASE_IMAGE)


@pytest.fixture(scope="module")
def probe_image(measured):
    return facts_of(measured)["probe_image"]


def test_debian13_model_holds(workstation, measured):
    facts = facts_of(measured)
    failed = dict((name, facts["probes"][name]["detail"]) for name in NEEDED if not facts["probes"][name]["ok"])
    assert failed == {}
    assert facts["verdict"]["model_holds"] is True and facts["verdict"]["reasons"] == []
    assert facts["verdict"]["gate_path"] == "map-host-loopback"
    # The sandbox probes ran on the mapped loopback: network no-gate is not measured here.
    assert facts["probes"]["raw_tcp_blocked"]["network"].startswith("pasta:--map-host-loopback,")
    assert facts["verdict"]["no_gate_holds"] is False
    # The other gate path measured too, on the session's own -T network.
    forwarded = facts["probes"]["tcp_forward_sandbox"]
    assert forwarded["ok"] is True and forwarded["network"].startswith("pasta:-4,-T,"), forwarded
    assert all(entry["ok"] for entry in forwarded["probes"].values()), forwarded["probes"]
    assert facts["fingerprint"]["podman"] == workstation.run(
        ["podman", "version", "--format", "{{.Client.Version}}"]).stdout.strip()
    assert facts["probe_image"].startswith("localhost/aisb-probe:")
    assert json.loads(workstation.path(FACTS).read_text()) == facts


def test_limits_recorded_as_the_host_cgroups_show_them(workstation, measured, probe_image):
    """limits_enforceable agrees with the host's cgroup files for a container given the
    probe's limits: where they show all three, the verdict says the limits hold, and
    where they do not (cgroup v1 here, rootless podman ignores limits), that they do not."""
    container = workstation.run(["podman", "run", "--detach", "--rm", "--network=none", *LIMITS, probe_image,
                                 "sleep", "300"]).stdout.strip()
    try:
        pid = workstation.run(["podman", "inspect", "--format", "{{.State.Pid}}", container]).stdout.strip()
        seen = limits_seen_by_the_host(workstation, pid)
    finally:
        workstation.run(["podman", "rm", "--force", "--time", "0", container], check=False)
    assert facts_of(measured)["verdict"]["limits_enforceable"] is all(seen.values()), \
        (seen, facts_of(measured)["probes"]["limits"])


def test_every_probe_records_its_evidence(measured):
    for name, entry in facts_of(measured)["probes"].items():
        if name != "selinux":
            assert entry["evidence"]["command"], name
            assert "rc" in entry["evidence"] and "stderr" in entry["evidence"], name


def test_cached_mode_starts_no_container(workstation, measured):
    logged = workstation.install_program("podman-logged", LOGGING_PODMAN)
    workstation.run(["rm", "-f", "/home/dev/podman-calls.log"])
    since = clock(workstation)
    before = json.loads(workstation.path(FACTS).read_text())
    answer = spike(workstation, base_image=BASE_IMAGE, cached=True, executable=logged)
    calls = workstation.path("/home/dev/podman-calls.log").read_text().splitlines()
    assert answer["cached"] is True and answer["changed"] is False
    assert facts_of(answer) == before
    # The wrapper was used (the fingerprint asks podman), and nothing it ran starts a container.
    assert calls and all(call.split()[0] in ("info", "image") for call in calls), calls
    assert containers_created(workstation, since) == []


def test_changed_fingerprint_forces_a_new_probe(workstation, measured):
    before = json.loads(workstation.path(FACTS).read_text())
    # The probe image the facts were measured with is replaced: the host changed.
    workstation.run(["podman", "tag", BASE_IMAGE, ALIAS])
    since = clock(workstation)
    answer = spike(workstation, base_image=BASE_IMAGE, cached=True)
    assert answer["cached"] is False
    assert containers_created(workstation, since), "a new spike must start containers"
    assert facts_of(answer)["measured_at"] >= before["measured_at"]
    assert facts_of(answer)["fingerprint"]["probe_image"] == before["fingerprint"]["probe_image"]
    # ... and the alias names the probe image again, so the cache holds once more.
    assert spike(workstation, base_image=BASE_IMAGE, cached=True)["cached"] is True


def test_check_mode_returns_facts_and_writes_nothing(workstation, probe_image):
    answer = spike(workstation, check=True, probe_image=probe_image, path="/home/dev/check-mode.json")
    assert facts_of(answer)["verdict"]["model_holds"] is True
    assert not workstation.path("/home/dev/check-mode.json").exists()


def test_a_hung_probe_is_bounded_and_reported(workstation, probe_image):
    # The sandbox probe waits at least BLOCKED_WAIT_FLOOR_MS (1 s) on blocked connections
    # after its container started: 1 s is too short.
    answer = spike(workstation, probe_image=probe_image, probe_timeout=1, path="/home/dev/hung.json")
    detail = facts_of(answer)["probes"]["raw_tcp_blocked"]["detail"]
    assert detail.startswith("not measured: hung: no exit within 1 s"), detail
    assert facts_of(answer)["verdict"]["model_holds"] is False
    # Every probe container is named aisb-probe-*: none may be left behind.
    assert workstation.run(["podman", "ps", "--all", "--quiet", "--filter", "name=aisb-probe"]).stdout.strip() == ""


def test_tun_0600_is_named(workstation, probe_image):
    workstation.run(["chmod", "0600", "/dev/net/tun"], user="root")
    try:
        answer = spike(workstation, probe_image=probe_image, path="/home/dev/tun.json")
    finally:
        workstation.run(["chmod", "0666", "/dev/net/tun"], user="root")
    assert facts_of(answer)["verdict"]["model_holds"] is False
    assert facts_of(answer)["verdict"]["reasons"][0].startswith("tun: /dev/net/tun cannot be opened by this user")
    assert "0666" in reasons_of(answer)


def test_missing_subids_are_named(workstation, probe_image):
    save = "cp -p /etc/subuid /root/subuid.saved && cp -p /etc/subgid /root/subgid.saved"
    workstation.sh(save + " && sed -i '/^dev:/d' /etc/subuid /etc/subgid", user="root")
    try:
        workstation.run(["podman", "system", "migrate"])
        answer = spike(workstation, probe_image=probe_image, path="/home/dev/subids.json")
    finally:
        workstation.sh("cp -p /root/subuid.saved /etc/subuid && cp -p /root/subgid.saved /etc/subgid",
                       user="root")
        workstation.run(["podman", "system", "migrate"])
    assert facts_of(answer)["verdict"]["model_holds"] is False
    assert facts_of(answer)["verdict"]["reasons"][0].startswith("subids: the user namespace maps 1 uids")
    assert "subordinate uid" in reasons_of(answer)


@pytest.fixture(scope="module")
def leak_control(workstation, probe_image):
    """The negative probes against a sandbox without its protection."""
    return run_leak_control(workstation, probe_image)


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative_probe_sees_a_leak(leak_control, measured, name):
    held = facts_of(measured)["probes"][name]
    assert held["ok"] is True, held  # with the protection: held
    assert leak_control[name]["ok"] is False, leak_control[name]
    if name == "setpriv_locks_table":
        assert "flush rc 0" in leak_control[name]["detail"]
    else:
        assert leak_control[name]["detail"].startswith("leak: "), leak_control[name]["detail"]


def test_provision_kept_a_local_fact(workstation):
    local = json.loads(workstation.path("/etc/ansible/facts.d/aisb_host.fact").read_text())
    assert local["schema_version"] == 4 and "verdict" in local


def test_debian12_model_does_not_hold():
    with provisioned("bookworm", "-e", "host_require_pasta=false") as (ws, done):
        # provision.yml ran the spike and kept its verdict, whatever came after it.
        local = json.loads(ws.path("/etc/ansible/facts.d/aisb_host.fact").read_text())
        answer = spike(ws, base_image=BASE_IMAGE)
    assert local["verdict"]["model_holds"] is False, done.stdout[-3000:]
    facts = facts_of(answer)
    assert facts["fingerprint"]["distro"] == "debian 12"
    assert facts["verdict"]["model_holds"] is False
    # The first reason is the missing pasta network mode, podman's own words included.
    first = facts["verdict"]["reasons"][0]
    assert first.startswith("pasta: the container did not start"), first
    assert "network with name or ID pasta" in first and "pasta network mode" in first
    assert facts["verdict"]["gate_path"] == "none"
