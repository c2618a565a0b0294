# SPDX-License-Identifier: GPL-3.0-or-later
"""The verdict on the host probes: when the model holds, and the reasons with their fixes."""

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_probes, _host_verdict
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_results import unmeasured

FIXES = _host_verdict.FIXES


def probes(failed=(), **extra):
    entries = dict((name, {"ok": name not in failed, "detail": "d-" + name}) for name in _host_probes.ORDER)
    entries.update(extra)
    return entries


def test_verdict_holds_when_every_needed_probe_passes():
    verdict = _host_verdict.verdict(probes(failed=("limits", "container_to_container")))
    assert verdict["model_holds"] is True and verdict["gate_path"] == "map-host-loopback"
    assert verdict["reasons"] == [] and not verdict["limits_enforceable"]
    assert [note.split(":")[0] for note in verdict["notes"]] == ["container_to_container", "limits"]


def test_verdict_names_each_failed_probe_and_its_fix():
    verdict = _host_verdict.verdict(probes(failed=("tun", "udp_blocked")))
    assert verdict["model_holds"] is False
    assert verdict["reasons"] == ["tun: d-tun. " + FIXES["tun"], "udp_blocked: d-udp_blocked. " + FIXES["udp_blocked"]]


def test_verdict_holds_on_tcp_forward_when_its_sandbox_probes_pass():
    """An Ubuntu 24.04-class host: no --map-host-loopback, -T and its sandbox probes pass."""
    verdict = _host_verdict.verdict(probes(failed=("host_loopback_reachable", "map_host_loopback")))
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is True, verdict["reasons"]
    assert verdict["reasons"] == []
    assert [note.split(":")[0] for note in verdict["notes"]] == ["map_host_loopback"]
    assert _host_verdict.verdict(probes(failed=("host_loopback_reachable", "tcp_forward")))["gate_path"] == "none"


def test_verdict_refuses_tcp_forward_when_its_sandbox_probes_fail():
    leaked = {"ok": False, "detail": "raw_tcp_blocked: leak: TCP to the literal 127.0.0.1:9 reached the network check's "
                                     "listener"}
    verdict = _host_verdict.verdict(probes(failed=("host_loopback_reachable", "map_host_loopback"),
                                           tcp_forward_sandbox=leaked))
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is False
    assert verdict["reasons"] == ["tcp_forward_sandbox: %s. %s" % (leaked["detail"], _host_verdict.TCP_FORWARD_FIX)]
    unmeasured_probe = dict(probes(failed=("host_loopback_reachable", "map_host_loopback")))
    del unmeasured_probe["tcp_forward_sandbox"]
    assert _host_verdict.verdict(unmeasured_probe)["model_holds"] is False


def test_tcp_forward_sandbox_is_only_a_note_on_a_mapped_host():
    verdict = _host_verdict.verdict(probes(failed=("tcp_forward_sandbox",)))
    assert verdict["model_holds"] is True and verdict["gate_path"] == "map-host-loopback"
    assert [note.split(":")[0] for note in verdict["notes"]] == ["tcp_forward_sandbox"]


def test_tcp_forward_path_still_needs_the_table():
    verdict = _host_verdict.verdict(probes(failed=("host_loopback_reachable", "map_host_loopback", "udp_blocked")))
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is False
    assert verdict["reasons"] == ["udp_blocked: d-udp_blocked. " + FIXES["udp_blocked"]]


def test_every_needed_probe_has_a_fix_and_every_probe_is_classified():
    assert set(_host_probes.ORDER) == set(FIXES) | set(_host_verdict.INFORMATIONAL)
    assert not set(FIXES) & set(_host_verdict.INFORMATIONAL)


def test_every_reason_a_probe_gives_says_what_it_means():
    """docs/reference-refusals.md shows MEANS beside each fix: every reason's, no other."""
    assert set(_host_verdict.MEANS) == set(FIXES) | {"tcp_forward_sandbox"}


def test_verdict_groups_probes_that_could_not_run_by_cause():
    entries = probes(failed=("tun",))
    entries.update(unmeasured(("raw_tcp_blocked", "udp_blocked"), "pasta failed"))
    verdict = _host_verdict.verdict(entries)
    assert verdict["reasons"] == ["tun: d-tun. " + FIXES["tun"],
                                  "raw_tcp_blocked, udp_blocked: not measured: pasta failed; fix what stops "
                                  "them and measure again."]
