# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's writers through write_whole: each file with the mode it always had
(the user's only, or what the umask gives), a link at its path replaced, nothing left
beside it."""

import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _files, _session_record
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _project_manifest
from ansible_collections.aisb.sandbox.plugins.modules import gate_service

from test_host_facts_cache import environment, podman_like


def session_record(tmp_path):
    return _session_record.write(str(tmp_path), {"schema_version": _session_record.SCHEMA_VERSION}, b"k" * 32)


def host_facts(tmp_path):
    _host_facts.save(str(tmp_path / "host_capabilities.json"), {"schema_version": 3})
    return str(tmp_path / "host_capabilities.json")


def fingerprint_cache(tmp_path):
    # Its programs made once: a second write reads the same ones.
    environ = environment(tmp_path) if not (tmp_path / "bin").is_dir() else \
        {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    _host_facts.cached_fingerprint(podman_like(["sha256:a"]), environ)
    return os.path.join(environ["XDG_STATE_HOME"], "aisb", "fingerprint-cache.json")


def image_record(tmp_path):
    _images.write_record(str(tmp_path), "used", "aisb-sandbox-0123", "localhost/aisb-sandbox:0123\n")
    return str(tmp_path / "used" / "aisb-sandbox-0123")


def project_manifest(tmp_path):
    _project_manifest.save(str(tmp_path / "manifest.json"), {"a": ["file", 0o644, 1, 2, 3, 4]})
    return str(tmp_path / "manifest.json")


def gate_service_file(tmp_path):
    gate_service.write(str(tmp_path / "gate" / "aisb-gate.container"), "[Container]\n")
    return str(tmp_path / "gate" / "aisb-gate.container")


# Each writer, what it writes, and its mode: an int, or None for what the umask gives.
WRITERS = [
    (session_record, 0o600),
    (host_facts, 0o600),
    (fingerprint_cache, None),
    (image_record, 0o600),
    (project_manifest, None),
    (gate_service_file, None),
]


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002])
@pytest.mark.parametrize("write, mode", WRITERS, ids=[write.__name__ for write, _mode in WRITERS])
def test_each_writer_keeps_its_mode(tmp_path, umask, mask, write, mode):
    umask(mask)
    path = write(tmp_path)
    assert stat.S_IMODE(os.lstat(path).st_mode) == (0o666 & ~mask if mode is None else mode)
    assert [name for name in os.listdir(os.path.dirname(path)) if name.startswith(".")] == []


@pytest.mark.parametrize("write", [write for write, _mode in WRITERS], ids=[write.__name__ for write, _mode in WRITERS])
def test_each_writer_replaces_a_link_at_its_path(tmp_path, write):
    (tmp_path / "state").mkdir()
    path = write(tmp_path / "state")
    written = open(path).read()
    elsewhere = str(tmp_path / "elsewhere")
    _files.write_whole(elsewhere, "not this one")
    os.unlink(path)
    os.symlink(elsewhere, path)
    assert write(tmp_path / "state") == path
    assert not os.path.islink(path) and open(path).read() == written
    assert open(elsewhere).read() == "not this one"
