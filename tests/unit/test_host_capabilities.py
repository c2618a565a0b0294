# SPDX-License-Identifier: GPL-3.0-or-later
"""The host_capabilities module's work with a fake podman: stored facts while they
stand, else the probe image, every probe, the verdict, stored outside check mode."""

import json

from fake_podman import fake_podman

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts, _host_probes
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _enforcement_watch
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.host_capabilities import argspec, measure

from builders import NOW


def given(check_mode=False, **params):
    """(params, check_mode) as the module's spec fills them."""
    defaults = dict((name, spec.get("default")) for name, spec in argspec().items())
    return dict(defaults, **params), check_mode


def stored_facts(probe_source):
    fingerprint = _host_facts.current_fingerprint(Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS})))
    return {"schema_version": _host_facts.SCHEMA_VERSION, "measured_at": "2026-11-30T09:00:00Z",
            "fingerprint": fingerprint, "probe_source": probe_source, "verdict": {"model_holds": True, "reasons": []}}


def test_cached_mode_answers_from_the_file_without_a_container(tmp_path):
    path = tmp_path / "facts.json"
    stored = stored_facts("localhost/base:1")
    _host_facts.save(str(path), stored)
    run = Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS}))
    answer = measure(*given(path=str(path), base_image="localhost/base:1", cached=True), run,
                     {"HOME": str(tmp_path)}, NOW)
    assert answer == {"changed": False, "cached": True, "path": str(path),
                      "state_dir": str(tmp_path / ".local/state/aisb"), "ansible_facts": {"aisb_host": stored}}
    assert run.commands and all(argv[1] in ("info", "image") for argv in run.commands)


def test_cached_mode_reads_podman_info_once_while_the_host_key_stands(tmp_path):
    """podman info cost a warm run_agent.yml 0.15 s a run: the fingerprint's podman part is
    kept (_host_facts.cached_fingerprint, as a session's admission reads it); only the
    probe image's ID is asked for again."""
    path = tmp_path / "facts.json"
    stored = stored_facts("localhost/base:1")
    _host_facts.save(str(path), stored)
    environ = {"HOME": str(tmp_path)}
    asked = []
    for _run in range(2):
        run = Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS}))
        answer = measure(*given(path=str(path), base_image="localhost/base:1", cached=True), run, environ, NOW)
        assert answer["cached"] is True and answer["ansible_facts"] == {"aisb_host": stored}
        asked.append(sorted(argv[1] for argv in run.commands))
    assert asked == [["image", "info"], ["image"]]


def test_a_measurement_is_stored_and_names_its_probe_image(tmp_path, programs_as_named):
    environ = {"HOME": str(tmp_path)}
    run = Runner(fake_podman())
    answer = measure(*given(base_image="localhost/base:1"), run, environ, NOW)
    facts = answer["ansible_facts"]["aisb_host"]
    assert answer["changed"] is True and answer["cached"] is False
    assert answer["path"] == _state_layout.facts_path(environ)
    assert answer["state_dir"] == str(tmp_path / ".local/state/aisb")
    assert json.loads(open(answer["path"]).read()) == facts
    assert sorted(facts) == ["fingerprint", "host_tools", "measured_at", "probe_image", "probe_source", "probes",
                             "schema_version", "verdict"]
    assert facts["host_tools"] == {"podman": "podman", "bash": "bash", "setpriv": "setpriv", "nsenter": "nsenter",
                                   "nft": "nft", "pasta": "pasta"}
    assert list(facts["probes"]) == list(_host_probes.ORDER) and facts["measured_at"] == "2026-11-30T10:00:00Z"
    assert facts["probe_source"] == "localhost/base:1" and facts["probe_image"].startswith("localhost/aisb-probe:")
    assert facts["fingerprint"]["probe_image"] == "sha256:" + facts["probe_image"].replace("/", "-")
    assert ["podman", "tag", facts["probe_image"], _host_facts.PROBE_IMAGE_ALIAS] in run.commands
    # Every probe's commands are in the Runner's record too.
    assert all(entry["evidence"]["command"] in run.commands for name, entry in facts["probes"].items()
               if entry["evidence"] and name not in ("tun",))
    # Measured again with nothing changed on the host: not a change.
    again = measure(*given(base_image="localhost/base:1"), Runner(fake_podman(
        {"localhost/base:1", facts["probe_image"]})), environ, NOW + 60)
    assert again["changed"] is False and again["ansible_facts"]["aisb_host"]["measured_at"] != facts["measured_at"]


def test_check_mode_measures_and_writes_nothing(tmp_path):
    run = Runner(fake_podman({"localhost/base:1", "localhost/aisb-probe:given"}))
    answer = measure(*given(check_mode=True, probe_image="localhost/aisb-probe:given"), run,
                     {"HOME": str(tmp_path)}, NOW)
    assert answer["ansible_facts"]["aisb_host"]["probe_source"] == "localhost/aisb-probe:given"
    assert not list(tmp_path.iterdir())
    assert not [argv for argv in run.commands if argv[1] in ("tag", "build", "pull")]


def test_without_an_image_option_the_default_base_image_is_the_source(tmp_path):
    run = Runner(fake_podman())
    facts = measure(*given(check_mode=True), run, {"HOME": str(tmp_path)}, NOW)["ansible_facts"]["aisb_host"]
    assert facts["probe_source"] == _images.DEFAULT_BASE_IMAGE and facts["probe_image"] == ""
    assert facts["probes"]["pasta"]["detail"] == ("not measured: the base image %s is not present (check mode "
                                                  "pulls nothing)" % _images.DEFAULT_BASE_IMAGE)


def test_an_unprovisioned_host_gets_one_sentence_naming_provision_and_no_probe(tmp_path):
    run = Runner(fake_podman())
    answer = measure(*given(require_provisioned=True, executable=str(tmp_path / "podman")), run,
                     {"HOME": str(tmp_path)}, NOW)
    assert answer["failed"] is True and answer["changed"] is False
    assert "podman" in answer["msg"] and "`ansible-playbook aisb.sandbox.provision`" in answer["msg"]
    assert run.commands == [] and not (tmp_path / ".local").exists()


def test_provisioned_means_podman_and_the_watch_tools_in_the_system_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(_host_tools, "SYSTEM_DIRS", (str(tmp_path),))
    monkeypatch.setattr(_host_tools, "not_root_alone", lambda path: None)
    for tool in ("podman", "nsenter", "setpriv", "python3"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    assert "(nft not installed in " in _enforcement_watch.unprovisioned("podman")
    (tmp_path / "nft").write_text("#!/bin/sh\n")
    (tmp_path / "nft").chmod(0o755)
    assert _enforcement_watch.unprovisioned("podman") is None


def test_the_local_fact_is_current_only_with_the_same_facts_and_mode_0644(tmp_path):
    facts = stored_facts("localhost/base:1")
    path = tmp_path / "aisb_host.fact"
    assert _host_facts.local_fact_current(str(path), facts) is False
    path.write_text(json.dumps(facts, indent=4) + "\n")
    path.chmod(0o644)
    assert _host_facts.local_fact_current(str(path), facts) is True
    assert _host_facts.local_fact_current(str(path), dict(facts, measured_at="2026-12-01T09:00:00Z")) is False
    path.chmod(0o600)
    assert _host_facts.local_fact_current(str(path), facts) is False
    path.chmod(0o644)
    path.write_text("{not json")
    assert _host_facts.local_fact_current(str(path), facts) is False
