# SPDX-License-Identifier: GPL-3.0-or-later
"""Network no-gate's pure parts: which entries it can pin, the pins and hosts it makes,
when the facts let it run, and the plan it gives the sandbox."""

import ipaddress
import re
import socket

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import (
    _host_facts, _host_probe_sandbox, _host_probes, _host_verdict)
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import (
    PolicyError, no_gate_names, parse_policy, pin_resolved, render_sandbox_policy)
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_admission import no_gate_refusal, resolve_names
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_inputs import SessionInputs


def test_names_are_pinned_and_a_wildcard_is_refused_by_name():
    assert no_gate_names(parse_policy(["b.test", "a.test:8443", "198.18.0.9"])) == ("a.test", "b.test")
    with pytest.raises(PolicyError, match=r"allow entry '\.pkg\.test': network no-gate cannot pin a wildcard"):
        no_gate_names(parse_policy(["a.test", ".pkg.test"]))


def test_each_address_is_pinned_on_http_the_connect_ports_and_its_own_ports():
    policy = parse_policy(["a.test", "b.test:8443", "198.18.5.0/24"], [443, 8080])
    pinned = pin_resolved(policy, {"a.test": ["198.18.0.2", "2001:db8::2"], "b.test": ["198.18.0.3"]})
    assert set(pinned.pins) == {
        ("198.18.5.0/24", 443), ("198.18.5.0/24", 8080),  # the operator's CIDR, as given
        ("198.18.0.2", 80), ("198.18.0.2", 443), ("198.18.0.2", 8080),
        ("2001:db8::2", 80), ("2001:db8::2", 443), ("2001:db8::2", 8080),
        ("198.18.0.3", 80), ("198.18.0.3", 443), ("198.18.0.3", 8080), ("198.18.0.3", 8443)}
    text = render_sandbox_policy(pinned)
    assert "gate none" in text and "pin 2001:db8::2 443" in text and "pin 198.18.0.3 8443" in text


@pytest.mark.parametrize("address", ["10.1.2.3", "127.0.0.1", "169.254.169.254", "::1", "fd00:ec2::254",
                                     # IPv6 carrying a metadata IPv4: v4-mapped, NAT64, 6to4
                                     "::ffff:a9fe:a9fe", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1"])
def test_a_name_resolving_to_a_local_or_private_address_is_refused(address):
    # The address as this Python prints it: 3.13 writes an IPv4-mapped one dotted (::ffff:169.254.169.254).
    shown = str(ipaddress.ip_address(address))
    with pytest.raises(PolicyError, match="allow entry 'a.test': resolves to %s" % re.escape(shown)):
        pin_resolved(parse_policy(["a.test"]), {"a.test": [address]})


def test_names_resolve_on_the_host_and_an_unresolvable_one_is_named():
    def getaddrinfo(name, _port, _family, _type):
        if name == "missing.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("198.18.0.2", 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("198.18.0.2", 0)),
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2001:db8::2", 0, 0, 0))]

    assert resolve_names(["a.test"], getaddrinfo) == {"a.test": ["198.18.0.2", "2001:db8::2"]}
    with pytest.raises(InputError, match="allow entry 'missing.test' does not resolve on this host "
                                         r"\(Name or service not known\)"):
        resolve_names(["a.test", "missing.test"], getaddrinfo)


def test_no_gate_is_refused_where_the_gate_path_exists():
    assert "use network allow" in no_gate_refusal({"gate_path": "map-host-loopback"})
    assert no_gate_refusal({"gate_path": "none"}) is None
    assert no_gate_refusal({"gate_path": "tcp-forward"}) is None


def facts(**verdict):
    fingerprint = {key: "x" for key in _host_facts.FINGERPRINT_KEYS}
    fingerprint["hash"] = _host_facts.fingerprint_hash(fingerprint)
    return {"schema_version": _host_facts.SCHEMA_VERSION, "measured_at": _host_facts.format_time(1000),
            "fingerprint": fingerprint, "verdict": dict({"reasons": ["r1"]}, **verdict)}


def test_no_gate_reads_no_gate_holds_and_allow_reads_model_holds():
    current = facts(model_holds=False, no_gate_holds=True)
    fingerprint = current["fingerprint"]
    assert _host_facts.check_host_facts(current, fingerprint, 1000, 60, network="no-gate") == []
    [problem] = _host_facts.check_host_facts(current, fingerprint, 1000, 60)
    assert problem.startswith("aisb_host.verdict.model_holds is false")
    [problem] = _host_facts.check_host_facts(facts(model_holds=True, no_gate_holds=False), fingerprint, 1000, 60,
                                             network="no-gate")
    assert problem == "aisb_host.verdict.no_gate_holds is false on this host: r1"


def probes(network, failed=()):
    entries = dict((name, {"ok": name not in failed, "detail": "d-" + name}) for name in _host_probes.ORDER)
    for name in _host_probe_sandbox.SANDBOX_PROBES:
        entries[name]["network"] = network
    return entries


def test_no_gate_holds_only_when_the_table_held_on_plain_pasta():
    no_loopback = ("map_host_loopback", "host_loopback_reachable", "tcp_forward")
    verdict = _host_verdict.verdict(probes(_podman.NO_GATE_NETWORK, no_loopback))
    assert verdict["no_gate_holds"] is True and verdict["model_holds"] is False
    assert verdict["gate_path"] == "none" and "verdict.no_gate_holds" in verdict["reasons"][-1]
    assert _host_verdict.verdict(probes(_podman.NO_GATE_NETWORK, no_loopback + ("udp_blocked",)))["no_gate_holds"] is False
    # Measured on the mapped loopback (a host with a gate path): not measured for no-gate.
    mapped = _host_verdict.verdict(probes("pasta:--map-host-loopback,100.64.0.1"))
    assert mapped["model_holds"] is True and mapped["no_gate_holds"] is False


def test_a_gate_host_whose_sandbox_probes_fell_back_to_plain_pasta_does_not_hold():
    # The loopback probe reached the host, but the sandbox probes' mapped container did
    # not start: raw TCP, UDP and IPv6 through the mapping were never measured.
    fell_back = _host_verdict.verdict(probes(_podman.NO_GATE_NETWORK))
    assert fell_back["gate_path"] == "map-host-loopback"
    assert fell_back["model_holds"] is False and fell_back["no_gate_holds"] is True
    assert "measured on plain pasta only" in fell_back["reasons"][0]


def test_the_plan_has_no_gate_no_proxy_and_the_resolved_hosts():
    hosts = {"a.test": ["198.18.0.2"], "b.test": ["198.18.0.3", "2001:db8::3"]}
    inputs = SessionInputs(project="/home/dev/src/app", image="localhost/aisb-sandbox:abc", network="no-gate",
                           policy=pin_resolved(parse_policy(["a.test", "b.test"]), hosts), command=["true"],
                           hosts=hosts, watch_tools={"nft": "/usr/sbin/nft"})
    plan = _session_plan.plan_session("sid", "/s", inputs, {"verdict": {"gate_path": "none"}}, None)
    argv = _podman.sandbox_run("podman", plan.sandbox_options)
    assert plan.gate is None and "--network=pasta:--no-map-gw" in argv
    assert not [name for name in plan.environment if "proxy" in name.lower()]
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "--add-host"] == [
        "a.test:198.18.0.2", "b.test:198.18.0.3", "b.test:2001:db8::3"]
    lines = plan.policy_text.splitlines()
    assert lines[1] == "gate none" and "pin 198.18.0.2 443" in lines and "pin 2001:db8::3 80" in lines


def sandbox_prober(mapped_rc):
    """A prober whose mapped-loopback container exits MAPPED_RC before its script runs
    (None: it hung) and whose plain-pasta container runs; the podman argv it was given."""
    calls = []

    def run(argv, timeout=None):
        calls.append(argv)
        network = next((arg for arg in argv if arg.startswith("--network=")), "")
        if "--map-host-loopback" in network:
            return mapped_rc, "", "Error: pasta failed with exit code 1"
        return 0, "started\ntarget=169.254.1.2\ntable=installed\n", ""

    return _host_probes.Prober(run, "podman", "img", 60), calls


def test_the_sandbox_probes_run_on_plain_pasta_when_the_mapped_container_cannot_start():
    prober, calls = sandbox_prober(126)
    found = _host_probe_sandbox.probe_sandbox(prober)
    assert set(entry["network"] for entry in found.values()) == {_podman.NO_GATE_NETWORK}
    plain = calls[1]
    assert "--network=" + _podman.NO_GATE_NETWORK in plain and _host_probe_sandbox.HOST_ENTRY in plain
    # The fake reached no listener: the gateway was tried too, and plain pasta's result stands.
    assert "--network=" + _podman.GATEWAY_NETWORK in calls[2] and _host_probe_sandbox.GATEWAY in calls[2]


def test_a_hung_mapped_container_is_reported_not_retried():
    prober, calls = sandbox_prober(None)
    found = _host_probe_sandbox.probe_sandbox(prober)
    assert found["raw_tcp_blocked"]["detail"].startswith("not measured: hung")
    assert not [argv for argv in calls if "--network=" + _podman.NO_GATE_NETWORK in argv]


def test_the_tcp_forward_sandbox_probe_runs_on_the_sessions_own_network():
    """Its network is the session's tcp-forward network for the probe's gate port, and its
    blocked listeners are the host's other loopback ports, aimed at on the sandbox's 127.0.0.1 and ::1."""
    prober, calls = sandbox_prober(126)
    found = _host_probe_sandbox.probe_tcp_forward_sandbox(prober)["tcp_forward_sandbox"]
    network = next(arg for arg in calls[0] if arg.startswith("--network="))[len("--network="):]
    gate_port = int(calls[0][calls[0].index(_host_probe_sandbox.RULESET) + 1])
    assert network == _session_plan.network_plan("allow", "tcp-forward", gate_port)[0] == found["network"]
    script_args = calls[0][calls[0].index(_host_probe_sandbox.RULESET) - 1:]
    assert (script_args[3], script_args[7]) == ("127.0.0.1", "::1") and len(calls) == 1
    # The fake container reached no listener: the gate's two connections are missing.
    assert found["ok"] is False and found["probes"]["table_allows_gate"]["ok"] is False
    assert found["detail"].startswith("table_allows_gate: the gate ") and "reached 0 of 2 times" in found["detail"]


def test_an_old_passt_holds_on_tcp_forward_with_the_table_measured_through_the_gateway():
    # passt 2023-03: no --map-host-loopback, no --map-guest-addr (no host.containers.internal):
    # the table measured on pasta with the gateway mapped to the host's loopback.
    old = _host_verdict.verdict(probes(_podman.GATEWAY_NETWORK, ("map_host_loopback", "host_loopback_reachable")))
    assert (old["gate_path"], old["model_holds"], old["no_gate_holds"]) == ("tcp-forward", True, False), old
    missing = ("map_host_loopback", "host_loopback_reachable", "raw_tcp_blocked")
    failed = _host_verdict.verdict(probes(_podman.GATEWAY_NETWORK, missing))
    assert failed["model_holds"] is False and failed["reasons"][0].startswith("raw_tcp_blocked:")


def canned(ok, measured=True, rc=0):
    entry = {"ok": ok, "measured": measured, "evidence": {"rc": rc}}
    return dict((name, dict(entry)) for name in _host_probe_sandbox.SANDBOX_PROBES)


@pytest.mark.parametrize("outcomes, chosen", [
    # The mapped container ran: its result, whatever it says.
    ({"map-host-loopback": canned(False)}, "map-host-loopback"),
    # It did not start: plain pasta, when its pinned address was reached.
    ({"map-host-loopback": canned(False, False, 126), "none": canned(True)}, "none"),
    # A passt before --map-guest-addr: no entry, or another host address; the gateway's.
    ({"map-host-loopback": canned(False, False, 126), "none": canned(False, False), "gateway": canned(True)}, "gateway"),
    ({"map-host-loopback": canned(False, False, 126), "none": canned(False), "gateway": canned(True)}, "gateway"),
    # Neither reached its gate: plain pasta's result stands (no-gate's own network).
    ({"map-host-loopback": canned(False, False, 126), "none": canned(False), "gateway": canned(False)}, "none"),
])
def test_the_sandbox_probes_fall_back_to_plain_pasta_then_the_gateway(monkeypatch, outcomes, chosen):
    ran = []

    def fake(_prober, _enforce, path):
        ran.append(path)
        return outcomes[path]

    monkeypatch.setattr(_host_probe_sandbox, "sandbox_probes", fake)
    assert _host_probe_sandbox.probe_sandbox(None) is outcomes[chosen]
    assert ran == list(outcomes)
