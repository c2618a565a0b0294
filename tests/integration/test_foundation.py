# SPDX-License-Identifier: GPL-3.0-or-later
"""The ground is real: provisioning from bare Debian 13, rootless podman with pasta,
and an nft default-drop table that an unprivileged process cannot remove."""

import re

import pytest

from scenario import provision, task_status
from spike_host import FACTS
from workstation import BASE_IMAGE, Workstation, install_checkout

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import DROP_ALL_PRIVILEGES, RULESET
from ansible_collections.aisb.sandbox.plugins.module_utils.common._podman import SANDBOX_SECURITY, pasta_network
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK

PROBE_IMAGE = f"""FROM {BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nftables curl \\
 && rm -rf /var/lib/apt/lists/*
"""
GATE_ADDR = MAPPED_LOOPBACK
# Two loopback listeners that log every request they serve, so a leak is seen. The
# kernel picks their ports as they bind: the workstation shares the build machine's
# network namespace with whatever else runs there (another test run, a benchmark).
LISTENERS = """
cd {logdir}
for name in allowed other; do
  setsid python3 -u -m http.server --bind 127.0.0.1 0 >serving.$name 2>log.$name &
  echo $! >>pids
done
for name in allowed other; do
  for _ in $(seq 50); do grep -q Serving serving.$name && break; sleep 0.1; done
done
"""
# Tasks with something to do on a bare Debian 13 (no podman, no facts, no policy yet).
BARE_HOST_CHANGES = ["Install podman, pasta and the rootless helpers (apt)",
                     "Measure what rootless podman gives this host",
                     "Create the local facts directory",
                     "Keep a copy as a local fact for fleet reporting",
                     "Validate the policy, render it and check it with squid and nft",
                     "Install the aisb command"]
# Tasks whose work a seeded container storage already holds: task -> its status then.
SEEDED = {"Import the base image from its root filesystem archive": "ok",
          "Build the sandbox image unless one with these inputs exists": "skipping",
          "Build the gate image unless one with these inputs exists": "skipping"}


@pytest.fixture
def listeners(workstation):
    """(allowed port, other port, log directory): LISTENERS, stopped afterwards."""
    logdir = "/home/dev/listeners"
    workstation.sh(f"rm -rf {logdir} && mkdir -p {logdir}\n" + LISTENERS.format(logdir=logdir))
    ports = [int(re.search(r" port (\d+) ", workstation.path(f"{logdir}/serving.{name}").read_text()).group(1))
             for name in ("allowed", "other")]
    yield ports[0], ports[1], logdir
    workstation.sh(f"kill $(cat {logdir}/pids)")


def probe_container(ws, image, script, gate_port=None):
    """Run SCRIPT in a sandbox-shaped container (the session's capabilities and user
    namespace); with a GATE_PORT, installs the host probes' model of the session's table
    for GATE_ADDR:GATE_PORT first, then drops every privilege as the entrypoint does."""
    setup = ""
    if gate_port:
        setup = (f"printf '%s' '{RULESET}' | nft -D gate_addr={GATE_ADDR} -D gate_port={gate_port} -f - "
                 f"&& exec {' '.join(DROP_ALL_PRIVILEGES)} ")
    return ws.run(["podman", "run", "--rm", "--network=" + pasta_network(map_host_loopback=[GATE_ADDR]),
                   *SANDBOX_SECURITY, image, "sh", "-c", setup + f"sh -c '{script}'"], check=False, timeout=120)


def curl(port):
    return f"curl -s -o /dev/null -w %{{http_code}} --max-time 3 http://{GATE_ADDR}:{port}/ ; echo"


def test_first_provision_changed_what_a_bare_host_lacks(workstation):
    """Each task with work to do on the bare workstation reported changed, the image tasks
    exactly when the seeded storage did not hold their images (they are tagged by content
    hash), and the packages check mode planned are the ones now installed."""
    output = workstation.first_provision.stdout
    assert {task: task_status(output, task) for task in BARE_HOST_CHANGES} == \
        dict.fromkeys(BARE_HOST_CHANGES, "changed"), output[-4000:]
    assert {task: task_status(output, task) for task in SEEDED} == \
        (SEEDED if workstation.seeded else dict.fromkeys(SEEDED, "changed")), output[-4000:]
    planned = re.search(r'"msg": "Would install: ([^"]+)"', workstation.check_mode_provision.stdout).group(1)
    planned = sorted(planned.split(", "))
    installed = workstation.run(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n",
                                 *planned]).stdout.splitlines()
    assert "podman" in planned and sorted(installed) == [f"{name} installed" for name in planned]
    assert workstation.path(FACTS).exists() and workstation.path("/etc/ansible/facts.d/aisb_host.fact").exists()


def test_second_provision_changes_nothing(workstation):
    """Provisioning twice in a row: the second run has nothing to do. The first settles
    whatever the tests before this one (on this worker) changed on the workstation."""
    settled = provision(workstation)
    assert settled.returncode == 0, settled.stdout[-3000:]
    second = provision(workstation)
    assert second.returncode == 0, second.stdout[-3000:]
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", second.stdout), \
        second.stdout[-3000:]


def test_provision_installed_podman_with_pasta(workstation):
    version = workstation.run(["podman", "--version"]).stdout
    major_minor = tuple(int(x) for x in re.search(r"(\d+)\.(\d+)", version).groups())
    assert major_minor >= (4, 4)
    assert workstation.run(["pasta", "--version"]).returncode == 0


def test_pasta_reaches_host_loopback_and_drop_table_holds(workstation, listeners):
    image = workstation.cached_image("probe", PROBE_IMAGE)
    allowed, other, logdir = listeners
    # Control: without the table, both ports are reachable (so the probe can see a leak).
    open_box = probe_container(workstation, image, f"{curl(allowed)}; {curl(other)}")
    assert open_box.stdout.split() == ["200", "200"], open_box.stdout + open_box.stderr
    assert "GET /" in workstation.path(f"{logdir}/log.other").read_text()
    workstation.sh(f": >{logdir}/log.allowed; : >{logdir}/log.other")

    # With the table, after every capability set is dropped.
    script = (f"{curl(allowed)}; {curl(other)}; "
              "nft flush ruleset 2>/dev/null && echo flushed || echo refused; "
              f"{curl(other)}; grep -E \"^(Cap(Eff|Bnd|Amb)|NoNewPrivs)\" /proc/self/status")
    boxed = probe_container(workstation, image, script, gate_port=allowed)
    shown = boxed.stdout + boxed.stderr
    lines = boxed.stdout.splitlines()
    assert lines[:4] == ["200", "000", "refused", "000"], shown
    status = dict(line.split(":\t") for line in lines[4:])
    assert status == {"CapEff": "0000000000000000", "CapBnd": "0000000000000000",
                      "CapAmb": "0000000000000000", "NoNewPrivs": "1"}, shown
    assert "GET /" in workstation.path(f"{logdir}/log.allowed").read_text()
    assert workstation.path(f"{logdir}/log.other").read_text() == ""


def test_check_mode_on_bare_debian_succeeds_and_changes_nothing(workstation):
    check = workstation.check_mode_provision
    assert check.returncode == 0, check.stdout[-3000:]
    assert re.search(r"changed=[1-9]", check.stdout), "check mode should report the changes it would make"
    assert not workstation.podman_after_check_mode, "check mode installed podman"


def test_check_mode_after_provisioning_reports_no_change(workstation):
    check = provision(workstation, "--check")
    assert check.returncode == 0, check.stdout[-3000:]
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", check.stdout), \
        check.stdout[-3000:]


def test_debian_12_is_refused_with_a_reason_naming_pasta():
    with Workstation("bookworm") as ws:
        install_checkout(ws)
        refused = provision(ws)
        assert refused.returncode != 0
        assert "has no pasta network mode" in refused.stdout, refused.stdout[-3000:]
        assert "podman 4.3.1" in refused.stdout, refused.stdout[-3000:]
        allowed = provision(ws, "-e", "host_require_pasta=false")
        assert allowed.returncode == 0, allowed.stdout[-3000:]
        assert "the networking model cannot hold on it" in allowed.stdout
