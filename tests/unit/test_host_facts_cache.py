# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's fingerprint cache: podman info runs again whenever a file it stands on changes."""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts

from fake_podman import INFO


def podman_like(image_ids):
    """A RUN answering podman info and image inspect; IMAGE_IDS is consumed one per inspect."""
    calls = []

    def run(argv, timeout=None):
        calls.append(argv[1])
        if argv[1] == "info":
            return 0, json.dumps(INFO), ""
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
