# SPDX-License-Identifier: GPL-3.0-or-later
"""Make this checkout importable as ansible_collections.aisb.sandbox for unit tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

import pytest  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.aisb.sandbox.plugins.module_utils.common import (  # noqa: E402  pylint: disable=C0413
    _host_tools)


@pytest.fixture
def programs_as_named(monkeypatch):
    """Every program resolves to what it is called (a fake podman's "podman"): for tests
    of what runs around the lookup, not of the lookup (test_host_tools_resolve)."""
    monkeypatch.setattr(_host_tools, "resolve", lambda name: (name, None))
