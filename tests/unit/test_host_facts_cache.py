# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's fingerprint cache: podman info runs again whenever a file it stands on changes."""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts

from fake_podman import INFO


def podman_like(image_ids, info=None, meanwhile=None):
    """A RUN answering podman info (INFO unless given) and image inspect; IMAGE_IDS is
    consumed one per inspect, each after MEANWHILE() when given."""
    calls = []

    def run(argv, timeout=None):
        calls.append(argv[1])
        if argv[1] == "info":
            return 0, json.dumps(info or INFO), ""
        if meanwhile:
            meanwhile()
        return 0, image_ids.pop(0) + "\n", ""

    run.calls = calls
    return run


def environment(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("podman", "pasta", "crun"):
        (bin_dir / name).write_text("v1")
        os.chmod(bin_dir / name, 0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}


def test_the_second_check_skips_podman_info_and_still_reads_the_probe_image(tmp_path):
    environ = environment(tmp_path)
    run = podman_like(["sha256:a", "sha256:a", "sha256:b"])
    first = _host_facts.cached_fingerprint(run, environ)
    second = _host_facts.cached_fingerprint(run, environ)
    assert sorted(run.calls[:2]) == ["image", "info"] and run.calls[2:] == ["image"]
    assert second == first == _host_facts.current_fingerprint(podman_like(["sha256:a"]))
    assert _host_facts.cached_fingerprint(run, environ)["probe_image"] == "sha256:b"


def test_an_upgraded_program_runs_podman_info_again(tmp_path):
    environ = environment(tmp_path)
    run = podman_like(["sha256:a"] * 3)
    _host_facts.cached_fingerprint(run, environ)
    pasta = tmp_path / "bin" / "pasta"
    os.replace(str(pasta), str(tmp_path / "old-pasta"))
    pasta.write_text("v2, as a package upgrade installs it")
    _host_facts.cached_fingerprint(run, environ)
    assert run.calls.count("info") == 2


def test_an_unreadable_cache_is_measured_again(tmp_path):
    environ = environment(tmp_path)
    run = podman_like(["sha256:a"] * 2)
    _host_facts.cached_fingerprint(run, environ)
    cache = tmp_path / "state" / "aisb" / _state_layout.FINGERPRINT_CACHE
    cache.write_text("{not json")
    assert _host_facts.cached_fingerprint(run, environ)["podman"] == "5.4.2"
    assert run.calls.count("info") == 2


def test_an_executable_podman_runs_from_outside_path_is_watched_too(tmp_path):
    # helper_binaries_dir: podman runs a pasta that PATH does not lead to.
    helper = tmp_path / "libexec" / "pasta"
    helper.parent.mkdir()
    helper.write_text("v1")
    INFO["host"]["pasta"]["executable"] = str(helper)
    try:
        environ = environment(tmp_path)
        run = podman_like(["sha256:a"] * 3)
        _host_facts.cached_fingerprint(run, environ)
        _host_facts.cached_fingerprint(run, environ)
        assert run.calls.count("info") == 1
        os.replace(str(helper), str(tmp_path / "old-pasta"))
        helper.write_text("v2, as a package upgrade installs it")
        _host_facts.cached_fingerprint(run, environ)
        assert run.calls.count("info") == 2
    finally:
        del INFO["host"]["pasta"]["executable"]


def test_a_fresh_measurement_replaces_the_cached_fingerprint(tmp_path):
    # The spike measures afresh (say after an upgrade the cache key cannot see): the
    # sessions that follow use what it measured, not the older cache.
    environ = environment(tmp_path)
    _host_facts.cached_fingerprint(podman_like(["sha256:a"]), environ)
    INFO["version"]["Version"] = "5.6.0"
    try:
        fresh = _host_facts.current_fingerprint(podman_like(["sha256:a"]), environ=environ)
        run = podman_like(["sha256:a"])
        assert _host_facts.cached_fingerprint(run, environ) == fresh and run.calls == ["image"]
        assert fresh["podman"] == "5.6.0"
    finally:
        INFO["version"]["Version"] = "5.4.2"


def image_store(tmp_path, names):
    """podman info with its image store under TMP_PATH, whose images.json lists NAMES
    ({image ID: [names]}), as containers/storage writes it (a new file each time)."""
    graph_root = tmp_path / "storage"
    store = graph_root / "overlay-images" / "images.json"
    store.parent.mkdir(parents=True, exist_ok=True)
    replacement = store.with_suffix(".new")
    replacement.write_text(json.dumps([{"id": image, "names": list(listed)} for image, listed in names.items()]))
    os.replace(str(replacement), str(store))
    return dict(INFO, store={"graphRoot": str(graph_root), "graphDriverName": "overlay"})


def test_the_probe_image_is_kept_until_the_image_store_changes(tmp_path):
    environ = environment(tmp_path)
    info = image_store(tmp_path, {"a1": [_host_facts.PROBE_IMAGE_ALIAS]})
    run = podman_like(["a1", "a1", "b2"], info)
    first = _host_facts.cached_fingerprint(run, environ)
    # The first session after a measurement reads the ID and keeps it; the next read nothing.
    assert _host_facts.cached_fingerprint(run, environ) == first
    assert _host_facts.cached_fingerprint(run, environ) == first
    assert sorted(run.calls) == ["image", "image", "info"]
    # provision.yml built a new probe image: the store file is new, so the ID is read again.
    image_store(tmp_path, {"a1": [], "b2": [_host_facts.PROBE_IMAGE_ALIAS]})
    assert _host_facts.cached_fingerprint(run, environ)["probe_image"] == "b2"
    assert run.calls.count("image") == 3


def test_a_probe_image_the_store_file_does_not_name_is_read_every_time(tmp_path):
    # An image from an additional (read-only) store: its changes never touch this file.
    environ = environment(tmp_path)
    info = image_store(tmp_path, {"a1": ["localhost/other:1"]})
    run = podman_like(["a1"] * 4, info)
    for _check in range(4):
        assert _host_facts.cached_fingerprint(run, environ)["probe_image"] == "a1"
    assert run.calls.count("image") == 4


def test_a_store_changed_while_the_id_was_read_is_read_again(tmp_path):
    # The store file's stat is taken before podman answers: an ID read across a change is
    # kept under the older stat, which the next check no longer finds.
    environ = environment(tmp_path)
    info = image_store(tmp_path, {"a1": [_host_facts.PROBE_IMAGE_ALIAS]})
    _host_facts.current_fingerprint(podman_like(["a1"], info), environ=environ)

    def pulled():
        image_store(tmp_path, {"a1": [_host_facts.PROBE_IMAGE_ALIAS], "c3": ["localhost/other:1"]})

    assert _host_facts.cached_fingerprint(podman_like(["a1"], info, meanwhile=pulled), environ)["probe_image"] == "a1"
    run = podman_like(["a1"], info)
    for _check in range(3):
        assert _host_facts.cached_fingerprint(run, environ)["probe_image"] == "a1"
    assert run.calls == ["image"]


def test_a_cache_that_names_no_image_store_is_measured_again(tmp_path):
    # A cache an older collection wrote: measured once more, so the probe image's ID can be kept.
    environ = environment(tmp_path)
    info = image_store(tmp_path, {"a1": [_host_facts.PROBE_IMAGE_ALIAS]})
    _host_facts.cached_fingerprint(podman_like(["a1"], info), environ)
    cache_path = tmp_path / "state" / "aisb" / _state_layout.FINGERPRINT_CACHE
    cache = json.loads(cache_path.read_text())
    del cache["image_store"]
    cache_path.write_text(json.dumps(cache))
    run = podman_like(["a1"], info)
    _host_facts.cached_fingerprint(run, environ)
    assert "info" in run.calls and "image_store" in json.loads(cache_path.read_text())


def test_podman_told_to_keep_its_images_elsewhere_runs_podman_info_again(tmp_path):
    # The image store's place comes from podman info: a storage.conf written (or
    # XDG_DATA_HOME changed) must not leave the old store's unchanged file standing for it.
    environ = environment(tmp_path)
    info = image_store(tmp_path, {"a1": [_host_facts.PROBE_IMAGE_ALIAS]})
    run = podman_like(["a1"] * 4, info)
    _host_facts.cached_fingerprint(run, environ)
    _host_facts.cached_fingerprint(run, environ)
    assert run.calls.count("info") == 1
    storage_conf = tmp_path / ".config" / "containers" / "storage.conf"
    storage_conf.parent.mkdir(parents=True)
    storage_conf.write_text('[storage]\ndriver = "overlay"\ngraphroot = "/srv/elsewhere"\n')
    _host_facts.cached_fingerprint(run, environ)
    assert run.calls.count("info") == 2
    _host_facts.cached_fingerprint(run, dict(environ, XDG_DATA_HOME=str(tmp_path / "data")))
    assert run.calls.count("info") == 3
