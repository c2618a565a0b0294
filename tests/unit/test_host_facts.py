# SPDX-License-Identifier: GPL-3.0-or-later
"""The fingerprint, the checks a consumer runs before trusting the facts, and where
the facts are kept."""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts

from builders import NOW

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


def test_fingerprint_without_podman_or_pasta_package(programs_as_named):
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


def test_facts_whose_values_were_edited_under_their_hash_are_stale():
    current = {"podman": "5.4.2", "passt": "p", "runtime": "crun", "kernel": "6", "distro": "debian 13",
               "probe_image": "sha256:x"}
    current["hash"] = _host_facts.fingerprint_hash(current)
    recorded = dict(current, podman="0.0.1")  # the old hash kept beside an edited value
    facts = {"schema_version": _host_facts.SCHEMA_VERSION, "fingerprint": recorded,
             "measured_at": _host_facts.format_time(1000), "verdict": {"model_holds": True}}
    problems = _host_facts.check_host_facts(facts, current, 1000, 60)
    assert problems and "podman '0.0.1' -> '5.4.2'" in problems[0]


def test_change_key_ignores_time_evidence_and_wording():
    one = {"measured_at": "a", "fingerprint": {"hash": "h"}, "probe_source": "img",
           "verdict": {"model_holds": False, "reasons": ["port 1"]}, "probes": {"x": {"ok": False, "detail": "1"}}}
    two = {"measured_at": "b", "fingerprint": {"hash": "h"}, "probe_source": "img",
           "verdict": {"model_holds": False, "reasons": ["port 2"]}, "probes": {"x": {"ok": False, "detail": "2"}}}
    assert _host_facts.change_key(one) == _host_facts.change_key(two)
    two["probes"]["x"]["ok"] = True
    assert _host_facts.change_key(one) != _host_facts.change_key(two)
    assert _host_facts.change_key(None) is None


def test_facts_are_saved_for_the_user_only_and_read_back(tmp_path):
    path = tmp_path / "state" / "aisb" / "host_capabilities.json"
    assert _host_facts.load(str(path)) is None
    _host_facts.save(str(path), facts())
    assert _host_facts.load(str(path)) == facts()
    assert os.stat(path.parent).st_mode & 0o777 == 0o700 and os.stat(path).st_mode & 0o077 == 0
    assert path.read_text().endswith("}\n") and os.listdir(path.parent) == ["host_capabilities.json"]
    path.write_text("{not json")
    assert _host_facts.load(str(path)) is None
