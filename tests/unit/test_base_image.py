# SPDX-License-Identifier: GPL-3.0-or-later
"""The base_image module: the archive imported when the image is missing or a refresh
asks, nothing otherwise; check mode only looks."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.base_image import argspec, execute

IMAGE, ARCHIVE = "localhost/aisb-base:trixie", "/opt/aisb/rootfs.tar"


def given(**params):
    defaults = dict((name, spec.get("default")) for name, spec in argspec().items())
    return dict(defaults, image=IMAGE, archive=ARCHIVE, **params)


def podman(exists_rc, import_rc=0):
    """A Runner whose podman answers `image exists` with EXISTS_RC and `import` with IMPORT_RC."""
    def execute(argv, timeout=None):
        if argv[1:3] == ["image", "exists"]:
            return exists_rc, "", "Error: storage is locked" if exists_rc > 1 else ""
        return import_rc, "sha256:abc\n" if import_rc == 0 else "", "" if import_rc == 0 else "Error: no such file"
    return Runner(execute)


@pytest.mark.parametrize("exists_rc, refresh, check_mode, imported", [
    (0, False, False, False),
    (1, False, False, True),
    (0, True, False, True),
    (1, False, True, True),
])
def test_imports_only_when_missing_or_refreshed(programs_as_named, exists_rc, refresh, check_mode, imported):
    run = podman(exists_rc)
    result = execute(given(refresh=refresh), check_mode, run, {})
    assert result["imported"] is imported and result["changed"] is imported and "failed" not in result
    imports = [argv for argv in run.commands if argv[1] == "import"]
    assert imports == ([[run.commands[0][0], "import", ARCHIVE, IMAGE]] if imported and not check_mode else [])


@pytest.mark.parametrize("exists_rc, import_rc, words", [
    (125, 0, "podman image exists localhost/aisb-base:trixie failed (rc=125): Error: storage is locked"),
    (1, 125, "podman import of /opt/aisb/rootfs.tar as localhost/aisb-base:trixie failed (rc=125): Error: no such file"),
])
def test_a_podman_failure_is_said_with_podmans_words(programs_as_named, exists_rc, import_rc, words):
    result = execute(given(), False, podman(exists_rc, import_rc), {})
    assert result["failed"] is True and result["msg"] == words
