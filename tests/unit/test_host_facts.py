# SPDX-License-Identifier: GPL-3.0-or-later
"""The fingerprint, the checks a consumer runs before trusting the facts, and the verdict."""

import json

from ansible_collections.aisb.sandbox.plugins.module_utils import _host_facts, _spike

INFO = {
    "version": {"Version": "5.4.2"},
    "host": {
        "kernel": "6.18.44",
        "distribution": {"distribution": "debian", "version": "13"},
        "ociRuntime": {"name": "crun", "version": "crun version 1.21\ncommit: abc"},
        "pasta": {"package": "passt_0.0~git20250503.587980c-2+deb13u1_amd64"},
    },
}


def fake_run(info="default", image_id="sha256:aaa", pasta=""):
    """A RUN that answers like podman; info=None: podman is missing."""
    info = INFO if info == "default" else info
    calls = []

    def run(argv, timeout=None):
        calls.append(argv)
        if argv[1:3] == ["info", "--format"]:
            return (0, json.dumps(info), "") if info is not None else (125, "", "no podman")
        if argv[1:3] == ["image", "inspect"]:
            return (0, image_id + "\n", "") if image_id else (125, "", "image not known")
        if argv[0] == "pasta":
            return 0, pasta, ""
        raise AssertionError(argv)

    run.calls = calls
    return run


def facts(**changes):
    fingerprint = _host_facts.current_fingerprint(fake_run())
    value = {"schema_version": _host_facts.SCHEMA_VERSION, "measured_at": "2026-11-30T09:00:00Z", "fingerprint": fingerprint,
             "verdict": {"model_holds": True, "reasons": []}}
    value.update(changes)
    return value


NOW = _host_facts.parse_time("2026-11-30T10:00:00Z")


def test_fingerprint_reads_versions_without_a_container():
    run = fake_run()
    fingerprint = _host_facts.current_fingerprint(run)
    assert fingerprint == dict(
        podman="5.4.2", passt="passt_0.0~git20250503.587980c-2+deb13u1_amd64", runtime="crun version 1.21",
        kernel="6.18.44", distro="debian 13", probe_image="sha256:aaa", hash=fingerprint["hash"])
    assert not any("run" in argv or "create" in argv for argv in run.calls)
    assert ["podman", "image", "inspect", "--format", "{{.Id}}", _host_facts.PROBE_IMAGE_ALIAS] in run.calls


def test_fingerprint_hash_follows_every_field():
    base = _host_facts.current_fingerprint(fake_run())
    other_info = json.loads(json.dumps(INFO))
    other_info["host"]["kernel"] = "6.19.0"
    assert _host_facts.current_fingerprint(fake_run(info=other_info))["hash"] != base["hash"]
    assert _host_facts.current_fingerprint(fake_run(image_id="sha256:bbb"))["hash"] != base["hash"]


def test_fingerprint_without_podman_or_pasta_package():
    info = json.loads(json.dumps(INFO))
    del info["host"]["pasta"]
    assert _host_facts.current_fingerprint(fake_run(info=info, pasta="pasta 2023_03_09\n"))["passt"] == \
        "pasta 2023_03_09"
    empty = _host_facts.current_fingerprint(fake_run(info=None, image_id=""))
    assert [empty[k] for k in _host_facts.FINGERPRINT_KEYS] == [""] * 6


def test_current_facts_pass():
    current = facts()
    assert _host_facts.check_host_facts(current, current["fingerprint"], NOW, 86400) == []


def test_missing_facts():
    [problem] = _host_facts.check_host_facts(None, facts()["fingerprint"], NOW, 86400)
    assert "missing" in problem and "provision.yml" in problem


def test_other_schema():
    [problem] = _host_facts.check_host_facts(facts(schema_version=0), facts()["fingerprint"], NOW, 86400)
    assert "schema_version" in problem and "0" in problem


def test_stale_fingerprint_names_what_changed():
    info = json.loads(json.dumps(INFO))
    info["version"]["Version"] = "5.5.0"
    now_fingerprint = _host_facts.current_fingerprint(fake_run(info=info))
    [problem] = _host_facts.check_host_facts(facts(), now_fingerprint, NOW, 86400)
    assert "fingerprint is stale" in problem and "podman '5.4.2' -> '5.5.0'" in problem
    assert "kernel" not in problem


def test_too_old():
    [problem] = _host_facts.check_host_facts(facts(), facts()["fingerprint"], NOW, 1800)
    assert "measured_at" in problem and "3600 s ago" in problem


def test_unreadable_time():
    [problem] = _host_facts.check_host_facts(facts(measured_at="yesterday"), facts()["fingerprint"], NOW, 1800)
    assert "'yesterday' is not a time" in problem


def test_model_does_not_hold_carries_reasons():
    current = facts(verdict={"model_holds": False, "reasons": ["pasta: missing. Install pasta."]})
    [problem] = _host_facts.check_host_facts(current, current["fingerprint"], NOW, 86400)
    assert "model_holds is false" in problem and "Install pasta." in problem
    assert _host_facts.stale_reasons(current, current["fingerprint"], NOW, 86400) == []


def test_facts_path_follows_xdg():
    assert _host_facts.facts_path({"HOME": "/home/u"}) == "/home/u/.local/state/aisb/host_capabilities.json"
    assert _host_facts.facts_path({"HOME": "/home/u", "XDG_STATE_HOME": "/s"}) == "/s/aisb/host_capabilities.json"


def probes(failed=(), **extra):
    entries = dict((name, {"ok": name not in failed, "detail": "d-" + name}) for name in _spike.ORDER)
    entries.update(extra)
    return entries


def test_verdict_holds_when_every_needed_probe_passes():
    verdict = _spike.verdict(probes(failed=("limits", "container_to_container")))
    assert verdict["model_holds"] is True and verdict["gate_path"] == "map-host-loopback"
    assert verdict["reasons"] == [] and not verdict["limits_enforceable"]
    assert [note.split(":")[0] for note in verdict["notes"]] == ["container_to_container", "limits"]


def test_verdict_names_each_failed_probe_and_its_fix():
    verdict = _spike.verdict(probes(failed=("tun", "udp_blocked")))
    assert verdict["model_holds"] is False
    assert verdict["reasons"] == ["tun: d-tun. " + _spike.FIXES["tun"],
                                  "udp_blocked: d-udp_blocked. " + _spike.FIXES["udp_blocked"]]


def test_verdict_gate_path_falls_back_to_tcp_forward():
    verdict = _spike.verdict(probes(failed=("host_loopback_reachable", "map_host_loopback")))
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is False
    assert any("gate_path is tcp-forward" in reason for reason in verdict["reasons"])
    assert _spike.verdict(probes(failed=("host_loopback_reachable", "tcp_forward")))["gate_path"] == "none"


def test_summary_ignores_time_evidence_and_wording():
    one = {"measured_at": "a", "fingerprint": {"hash": "h"}, "probe_source": "img",
           "verdict": {"model_holds": False, "reasons": ["port 1"]}, "probes": {"x": {"ok": False, "detail": "1"}}}
    two = {"measured_at": "b", "fingerprint": {"hash": "h"}, "probe_source": "img",
           "verdict": {"model_holds": False, "reasons": ["port 2"]}, "probes": {"x": {"ok": False, "detail": "2"}}}
    assert _spike.summary(one) == _spike.summary(two)
    two["probes"]["x"]["ok"] = True
    assert _spike.summary(one) != _spike.summary(two)


def test_every_needed_probe_has_a_fix_and_every_probe_is_classified():
    assert set(_spike.ORDER) == set(_spike.FIXES) | set(_spike.INFORMATIONAL)
    assert not set(_spike.FIXES) & set(_spike.INFORMATIONAL)


def test_probe_container_command_line():
    argv = _spike.run_argv("podman", "n", ["--network=none"], "img", "echo hi", [1, "a"])
    assert argv[:6] == ["podman", "run", "--rm", "--name", "n", "--network=none"]
    assert argv[6:9] == ["img", "bash", "-c"] and argv[9].endswith("echo hi") and argv[10:] == ["_", "1", "a"]


def test_verdict_groups_probes_that_could_not_run_by_cause():
    entries = probes(failed=("tun",))
    entries.update(_spike.unmeasured(("raw_tcp_blocked", "udp_blocked"), "pasta failed"))
    verdict = _spike.verdict(entries)
    assert verdict["reasons"] == ["tun: d-tun. " + _spike.FIXES["tun"],
                                  "raw_tcp_blocked, udp_blocked: not measured: pasta failed; fix what stops "
                                  "them and measure again."]


def test_facts_whose_values_were_edited_under_their_hash_are_stale():
    current = {"podman": "5.4.2", "passt": "p", "runtime": "crun", "kernel": "6", "distro": "debian 13",
               "probe_image": "sha256:x"}
    current["hash"] = _host_facts.fingerprint_hash(current)
    recorded = dict(current, podman="0.0.1")  # the old hash kept beside an edited value
    facts = {"schema_version": _host_facts.SCHEMA_VERSION, "fingerprint": recorded,
             "measured_at": _host_facts.format_time(1000), "verdict": {"model_holds": True}}
    problems = _host_facts.check_host_facts(facts, current, 1000, 60)
    assert problems and "podman '0.0.1' -> '5.4.2'" in problems[0]


def test_cached_mode_answers_from_the_file_without_a_container(tmp_path):
    path = tmp_path / "facts.json"
    stored = dict(facts(), probe_source="localhost/base:1")
    _spike.save(str(path), stored)
    run = fake_run()
    params = dict(executable="podman", path=str(path), probe_image=None, base_image="localhost/base:1",
                  cached=True, max_age=86400, probe_timeout=60)
    answer = _spike.host_capabilities(params, False, run, {"HOME": str(tmp_path)}, NOW)
    assert answer == {"changed": False, "cached": True, "path": str(path), "ansible_facts": {"aisb_host": stored}}
    assert all(argv[1] in ("info", "image") for argv in run.calls)
