# SPDX-License-Identifier: GPL-3.0-or-later
"""Make this checkout importable as ansible_collections.aisb.sandbox for unit tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
