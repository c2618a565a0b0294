# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md's tree of the code names every module_utils file, and only those."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_architecture_tree_is_the_folder():
    text = (REPO / "docs" / "architecture.md").read_text()
    tree = text.split("## The code, by stage", 1)[1].split("```")[1]
    named = set(re.findall(r"^  (_[a-z_]+\.py)\s", tree, re.M))
    files = set(path.name for path in (REPO / "plugins" / "module_utils").glob("_*.py"))
    assert named == files, {"not in the tree": sorted(files - named), "no such file": sorted(named - files)}
