# SPDX-License-Identifier: GPL-3.0-or-later
"""The ground is real: provisioning from bare Debian 13, rootless podman with pasta,
and an nft default-drop table that an unprivileged process cannot remove."""

import re

from scenario import free_port, provision
from workstation import BASE_IMAGE, Workstation, install_checkout

from ansible_collections.aisb.sandbox.plugins.module_utils._host_probe_sandbox import DROP_ALL_PRIVILEGES, RULESET
from ansible_collections.aisb.sandbox.plugins.module_utils._podman import SANDBOX_SECURITY, pasta_network
from ansible_collections.aisb.sandbox.plugins.module_utils._policy import MAPPED_LOOPBACK

PROBE_IMAGE = f"""FROM {BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nftables curl \\
 && rm -rf /var/lib/apt/lists/*
"""
GATE_ADDR = MAPPED_LOOPBACK
# Ports picked free at run time: the workstation shares the build machine's network
# namespace with whatever else runs there (another test run, a benchmark).
ALLOWED_PORT = free_port()
OTHER_PORT = next(port for port in iter(free_port, None) if port != ALLOWED_PORT)

# Two loopback listeners that log every request they serve, so a leak is seen.
LISTENERS = f"""
cd {{logdir}}
for port in {ALLOWED_PORT} {OTHER_PORT}; do
  setsid python3 -m http.server --bind 127.0.0.1 $port >/dev/null 2>log.$port &
  echo $! >>pids
done
for port in {ALLOWED_PORT} {OTHER_PORT}; do
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done
: >log.{ALLOWED_PORT}; : >log.{OTHER_PORT}
"""


def probe_container(ws, image, script, with_table):
    """Run SCRIPT in a sandbox-shaped container (the session's capabilities and user
    namespace); with_table installs the host probes' model of the session's table for
    GATE_ADDR:ALLOWED_PORT first, then drops every privilege as the entrypoint does."""
    setup = ""
    if with_table:
        setup = (f"printf '%s' '{RULESET}' | nft -D gate_addr={GATE_ADDR} -D gate_port={ALLOWED_PORT} -f - "
                 f"&& exec {' '.join(DROP_ALL_PRIVILEGES)} ")
    return ws.run(["podman", "run", "--rm", "--network=" + pasta_network(map_host_loopback=[GATE_ADDR]),
                   *SANDBOX_SECURITY, image, "sh", "-c", setup + f"sh -c '{script}'"], check=False, timeout=120)


def curl(port):
    return f"curl -s -o /dev/null -w %{{http_code}} --max-time 3 http://{GATE_ADDR}:{port}/ ; echo"


def test_first_provision_changed_something(workstation):
    recap = re.search(r"changed=(\d+)", workstation.first_provision.stdout)
    assert recap and int(recap.group(1)) > 0


def test_second_provision_changes_nothing(workstation):
    second = provision(workstation)
    assert second.returncode == 0, second.stdout[-3000:]
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", second.stdout), \
        second.stdout[-3000:]


def test_provision_installed_podman_with_pasta(workstation):
    version = workstation.run(["podman", "--version"]).stdout
    major_minor = tuple(int(x) for x in re.search(r"(\d+)\.(\d+)", version).groups())
    assert major_minor >= (4, 4)
    assert workstation.run(["pasta", "--version"]).returncode == 0


def test_pasta_reaches_host_loopback_and_drop_table_holds(workstation, tmp_path):
    image = workstation.cached_image("probe", PROBE_IMAGE)
    logdir = "/home/dev/listeners"
    workstation.sh(f"mkdir -p {logdir}\n" + LISTENERS.format(logdir=logdir))
    try:
        # Control: without the table, both ports are reachable (so the probe can see a leak).
        open_box = probe_container(workstation, image, f"{curl(ALLOWED_PORT)}; {curl(OTHER_PORT)}", False)
        assert open_box.stdout.split() == ["200", "200"], open_box.stdout + open_box.stderr
        assert "GET /" in workstation.path(f"{logdir}/log.{OTHER_PORT}").read_text()
        workstation.sh(f": >{logdir}/log.{ALLOWED_PORT}; : >{logdir}/log.{OTHER_PORT}")

        # With the table, after every capability set is dropped.
        script = (f"{curl(ALLOWED_PORT)}; {curl(OTHER_PORT)}; "
                  "nft flush ruleset 2>/dev/null && echo flushed || echo refused; "
                  f"{curl(OTHER_PORT)}; grep -E \"^(Cap(Eff|Bnd|Amb)|NoNewPrivs)\" /proc/self/status")
        boxed = probe_container(workstation, image, script, True)
        shown = boxed.stdout + boxed.stderr
        lines = boxed.stdout.splitlines()
        assert lines[:4] == ["200", "000", "refused", "000"], shown
        status = dict(line.split(":\t") for line in lines[4:])
        assert status == {"CapEff": "0000000000000000", "CapBnd": "0000000000000000",
                          "CapAmb": "0000000000000000", "NoNewPrivs": "1"}, shown
        assert "GET /" in workstation.path(f"{logdir}/log.{ALLOWED_PORT}").read_text()
        assert workstation.path(f"{logdir}/log.{OTHER_PORT}").read_text() == ""
    finally:
        workstation.sh(f"kill $(cat {logdir}/pids)")


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
