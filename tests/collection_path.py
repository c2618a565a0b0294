# SPDX-License-Identifier: GPL-3.0-or-later
"""Make this checkout importable as ansible_collections.aisb.sandbox (imported for its
effect by the unit and integration conftests); the import root goes when Python exits."""

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_root = Path(tempfile.mkdtemp(prefix="aisb-unit-"))
atexit.register(shutil.rmtree, _root, True)
(_root / "ansible_collections" / "aisb").mkdir(parents=True)
(_root / "ansible_collections" / "aisb" / "sandbox").symlink_to(REPO)
sys.path.insert(0, str(_root))
# What ANSIBLE_COLLECTIONS_PATH names for an ansible-playbook a test runs on this checkout.
IMPORT_ROOT = _root
