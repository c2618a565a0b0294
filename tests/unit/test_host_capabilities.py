# SPDX-License-Identifier: GPL-3.0-or-later
"""The host_capabilities module's work with a fake podman: stored facts while they
stand, else the probe image, every probe, the verdict, stored outside check mode."""

import json
from types import SimpleNamespace

from ansible_collections.aisb.sandbox.plugins.module_utils import _host_facts, _host_probes, _images
from ansible_collections.aisb.sandbox.plugins.module_utils._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.host_capabilities import argspec, execute

NOW = _host_facts.parse_time("2026-11-30T10:00:00Z")
INFO = {"version": {"Version": "5.4.2"},
        "host": {"security": {"rootless": True}, "kernel": "6.18.44",
                 "distribution": {"distribution": "debian", "version": "13"},
                 "ociRuntime": {"name": "crun", "version": "crun version 1.21"}, "pasta": {"package": "passt"}}}
# What a probe container prints on a host where everything holds (the listeners decide the rest).
SCRIPT_OUTPUT = ("started\npeer=10.0.0.1\ntarget=169.254.1.2\ntable=installed\nflush=1\nuid=1000\n"
                 "CapEff=0000000000000000\nCapBnd=0000000000000000\nCapAmb=0000000000000000\nNoNewPrivs=1\n"
                 "write=ok\npids.max=64\nmemory.max=268435456\ncpu.max=50000 100000\nnft=1\n")


def fake_podman(images=("localhost/base:1",)):
    """execute(argv, timeout) answering like podman; images: what it has."""
    images = set(images)

    def execute(argv, timeout=None):
        if argv[1:3] == ["info", "--format"]:
            return 0, json.dumps(INFO), ""
        if argv[1] == "unshare":
            return 0, "0 1000 1\n1 100000 65536\n0 1000 1\n1 100000 65536\n", ""
        if argv[1:3] == ["image", "exists"]:
            return (0 if argv[3] in images else 1), "", ""
        if argv[1:3] == ["image", "inspect"]:
            return (0, "sha256:" + argv[-1].replace("/", "-") + "\n", "") if argv[-1] in images else (125, "", "")
        if argv[1] == "build":
            images.add(argv[argv.index("--tag") + 1])
            return 0, "", ""
        if argv[1] == "tag":
            images.add(argv[3])
            return 0, "", ""
        if argv[1] in ("network", "rm"):
            return 0, "", ""
        if argv[1] == "inspect":
            return 0, "10.89.0.2\n", ""
        if argv[1] == "run":
            return 0, SCRIPT_OUTPUT, ""
        if argv[0] == "pasta":
            return 0, "", ""
        raise AssertionError(argv)

    return execute


def module(check_mode=False, **params):
    defaults = dict((name, spec.get("default")) for name, spec in argspec().items())
    return SimpleNamespace(params=dict(defaults, **params), check_mode=check_mode)


def stored_facts(probe_source):
    fingerprint = _host_facts.current_fingerprint(Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS})))
    return {"schema_version": _host_facts.SCHEMA_VERSION, "measured_at": "2026-11-30T09:00:00Z",
            "fingerprint": fingerprint, "probe_source": probe_source, "verdict": {"model_holds": True, "reasons": []}}


def test_cached_mode_answers_from_the_file_without_a_container(tmp_path):
    path = tmp_path / "facts.json"
    stored = stored_facts("localhost/base:1")
    _host_facts.save(str(path), stored)
    run = Runner(fake_podman({_host_facts.PROBE_IMAGE_ALIAS}))
    answer = execute(module(path=str(path), base_image="localhost/base:1", cached=True), run,
                     {"HOME": str(tmp_path)}, NOW)
    assert answer == {"changed": False, "cached": True, "path": str(path), "ansible_facts": {"aisb_host": stored}}
    assert run.commands and all(argv[1] in ("info", "image") for argv in run.commands)


def test_a_measurement_is_stored_and_names_its_probe_image(tmp_path):
    environ = {"HOME": str(tmp_path)}
    run = Runner(fake_podman())
    answer = execute(module(base_image="localhost/base:1"), run, environ, NOW)
    facts = answer["ansible_facts"]["aisb_host"]
    assert answer["changed"] is True and answer["cached"] is False
    assert answer["path"] == _host_facts.facts_path(environ)
    assert json.loads(open(answer["path"]).read()) == facts
    assert sorted(facts) == ["fingerprint", "measured_at", "probe_image", "probe_source", "probes",
                             "schema_version", "verdict"]
    assert list(facts["probes"]) == list(_host_probes.ORDER) and facts["measured_at"] == "2026-11-30T10:00:00Z"
    assert facts["probe_source"] == "localhost/base:1" and facts["probe_image"].startswith("localhost/aisb-probe:")
    assert facts["fingerprint"]["probe_image"] == "sha256:" + facts["probe_image"].replace("/", "-")
    assert ["podman", "tag", facts["probe_image"], _host_facts.PROBE_IMAGE_ALIAS] in run.commands
    # Every probe's commands are in the Runner's record too.
    assert all(entry["evidence"]["command"] in run.commands for name, entry in facts["probes"].items()
               if entry["evidence"] and name not in ("tun",))
    # Measured again with nothing changed on the host: not a change.
    again = execute(module(base_image="localhost/base:1"), Runner(fake_podman(
        {"localhost/base:1", facts["probe_image"]})), environ, NOW + 60)
    assert again["changed"] is False and again["ansible_facts"]["aisb_host"]["measured_at"] != facts["measured_at"]


def test_check_mode_measures_and_writes_nothing(tmp_path):
    run = Runner(fake_podman({"localhost/base:1", "localhost/aisb-probe:given"}))
    answer = execute(module(check_mode=True, probe_image="localhost/aisb-probe:given"), run,
                     {"HOME": str(tmp_path)}, NOW)
    assert answer["ansible_facts"]["aisb_host"]["probe_source"] == "localhost/aisb-probe:given"
    assert not list(tmp_path.iterdir())
    assert not [argv for argv in run.commands if argv[1] in ("tag", "build", "pull")]


def test_without_an_image_option_the_default_base_image_is_the_source(tmp_path):
    run = Runner(fake_podman())
    facts = execute(module(check_mode=True), run, {"HOME": str(tmp_path)}, NOW)["ansible_facts"]["aisb_host"]
    assert facts["probe_source"] == _images.DEFAULT_BASE_IMAGE and facts["probe_image"] == ""
    assert facts["probes"]["pasta"]["detail"] == ("not measured: the base image %s is not present (check mode "
                                                  "pulls nothing)" % _images.DEFAULT_BASE_IMAGE)
