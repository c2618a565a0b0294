# SPDX-License-Identifier: GPL-3.0-or-later
"""A Debian 13 workstation with Debian 12's passt (2023-03-09, old_passt.py): a real
passt without --map-host-loopback, older than Ubuntu 24.04's (2024-02-20). podman 5.4
runs with it; the spike's verdict holds on the tcp-forward gate path, a session's real
traffic goes through its gate on the sandbox's own loopback, and the whole bypass
battery runs there over tcp-forward (test_battery's cases, imported: in this module the
`workstation` is the old-passt one). docs/networking.md says what else differs from a
real Ubuntu 24.04."""

import json

import pytest

from old_passt import FINGERPRINT, install_old_passt
from scenario import Internet, provisioned_variant
from sessions import PROJECT, allow, clock, containers_created, record_of, run_agent, sandbox_network, through
from spike_host import FACTS, run_leak_control
# The battery, run on this module's workstation (pytest collects imported tests and
# fixtures as this module's own).
from test_battery import (  # noqa: F401  pylint: disable=unused-import
    battery, test_case, test_gate_decisions_match_the_cases, test_ipv6_has_no_route_out_on_tcp_forward,
    test_no_listener_saw_anything_unexplained, test_nothing_outside_the_project_and_no_privilege,
    test_residual_risks_are_what_the_docs_say, test_the_gateway_case_aimed_at_a_gateway,
    test_the_session_left_nothing_running, test_unlisted_name_is_never_resolved, tripwires)
from workstation import BASE_IMAGE

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import SANDBOX_PROBES
from ansible_collections.aisb.sandbox.plugins.module_utils.common._podman import GATEWAY_NETWORK

SCRIPT = ("echo proxy=$HTTP_PROXY; curl -s -o /dev/null -w 'allowed=%{http_code}\\n' http://allowed.test/c-old-allowed; "
          "curl -s -o /dev/null -w 'other=%{http_code}\\n' http://other.test/c-old-other; "
          "curl -s -m 5 -o /dev/null --noproxy '*' http://allowed.test/c-old-direct && echo direct=open "
          "|| echo direct=blocked")


@pytest.fixture(scope="module")
def workstation():
    """A Debian 13 workstation provisioned (harness pi, as the battery needs node) with
    bookworm's passt installed first."""
    with provisioned_variant(install_old_passt) as ws:
        ws.sh(f"mkdir -p {PROJECT}")
        yield ws


@pytest.fixture(scope="module")
def internet(workstation):
    with Internet(workstation) as net:
        yield net


@pytest.fixture(scope="module")
def gate_path():
    """The only gate path there."""
    return "tcp-forward"


@pytest.fixture(scope="module")
def profile():
    return "Debian 13 with passt 2023-03-09"


def test_the_old_passt_is_the_one_measured(workstation):
    facts = json.loads(workstation.path(FACTS).read_text())
    assert facts["fingerprint"]["passt"] == FINGERPRINT, facts["fingerprint"]
    assert workstation.run(["dpkg-query", "-W", "-f", "${Version}", "passt"]).stdout == "0.0~git20230309.7c7625d-1"


def test_podman_runs_with_it_without_map_guest_addr(workstation):
    """This passt has neither --map-host-loopback (2024-08-21) nor --map-guest-addr
    (2024-10). podman 5.4 passes the latter: the container starts all the same (podman
    runs pasta again without it), and its host.containers.internal is not the address
    --map-guest-addr would give (169.254.1.2): podman names some other address of the
    host, or none (on this build machine, another test's 198.18 veth address)."""
    for option, value in (("--map-host-loopback", "100.64.0.1"), ("--map-guest-addr", "169.254.1.2")):
        refused = workstation.run(["pasta", option, value, "--", "true"], check=False)
        assert refused.returncode != 0 and f"unrecognized option '{option}'" in refused.stderr, refused.stderr[:500]
    hosts = workstation.run(["podman", "run", "--rm", "--network=pasta", BASE_IMAGE, "cat", "/etc/hosts"])
    entry = [line.split()[0] for line in hosts.stdout.splitlines() if "host.containers.internal" in line.split()]
    assert "localhost" in hosts.stdout and "169.254.1.2" not in entry, hosts.stdout


def test_the_verdict_holds_on_tcp_forward(workstation):
    facts = json.loads(workstation.path(FACTS).read_text())
    verdict, probes = facts["verdict"], facts["probes"]
    # podman's error, then pasta's usage text (the evidence keeps stderr's end).
    assert probes["map_host_loopback"]["ok"] is False and probes["map_host_loopback"]["evidence"]["rc"] == 126
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is True, verdict["reasons"]
    # The table measured where this passt maps the host's loopback: at the gateway.
    assert {probes[name]["network"] for name in SANDBOX_PROBES} == {GATEWAY_NETWORK}, probes["raw_tcp_blocked"]
    sandbox = probes["tcp_forward_sandbox"]
    assert sandbox["ok"] is True and sandbox["network"].startswith("pasta:-4,-T,") and \
        sandbox["network"].endswith(",--no-map-gw"), sandbox
    assert all(entry["ok"] for entry in sandbox["probes"].values()), sandbox["probes"]


def test_the_gateway_probes_see_a_leak_without_the_table(workstation):
    """The leak control on this host: the same probes without the table and setpriv, on
    the same gateway network, see root's TCP, raw TCP, UDP and IPv6 arrive."""
    leaks = run_leak_control(workstation, json.loads(workstation.path(FACTS).read_text())["probe_image"])
    for name in ("nft_default_drop", "raw_tcp_blocked", "udp_blocked", "ipv6_blocked"):
        assert leaks[name]["network"] == GATEWAY_NETWORK
        assert leaks[name]["ok"] is False and leaks[name]["detail"].startswith("leak: "), leaks[name]
    assert "flush rc 0" in leaks["setpriv_locks_table"]["detail"]


def test_a_session_reaches_its_gate_over_tcp_forward(workstation, internet):
    before = len(internet.requests())
    result = run_agent(workstation, *allow("allowed.test"), command=["sh", "-c", SCRIPT])
    assert result.returncode == 0, result.stdout[-4000:]
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    values = dict(line.split("=", 1) for line in transcript.split() if "=" in line)
    port = values["proxy"].rsplit(":", 1)[1]
    # The gate on the sandbox's own loopback, its port forwarded; IPv4 only.
    assert values["proxy"] == f"http://127.0.0.1:{port}", values
    assert sandbox_network(record) == f"pasta:-4,-T,{port},--no-map-gw", record["commands"]
    assert (values["allowed"], values["other"], values["direct"]) == ("200", "403", "blocked"), transcript
    assert [r["path"] for r in internet.requests()[before:]] == ["/c-old-allowed"]


def test_the_mapped_gate_path_and_no_gate_are_refused_there(workstation):
    since = clock(workstation)
    mapped = run_agent(workstation, *through("map-host-loopback"), command=["true"])
    assert mapped.returncode != 0
    assert "gate_path map-host-loopback is refused" in mapped.stdout, mapped.stdout[-3000:]
    assert "aisb_host.probes.host_loopback_reachable failed" in mapped.stdout
    no_gate = run_agent(workstation, "-e", "aisb_network=no-gate", *allow("allowed.test"), command=["true"])
    assert no_gate.returncode != 0
    assert "network no-gate is refused: aisb_host.verdict.gate_path is tcp-forward" in no_gate.stdout
    assert [n for n in containers_created(workstation, since) if n.startswith(("aisb-sandbox-", "aisb-gate-"))] == []
