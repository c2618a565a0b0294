# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md's tree of the code names every module_utils package and file, and
only those; each package's __init__.py is empty and imports only the packages above it;
no action plugin imports another."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULE_UTILS = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections.aisb.sandbox.plugins.module_utils"


def drawn_tree():
    """[(package, [file, ...]), ...] in the order the tree draws them."""
    text = (REPO / "docs" / "architecture.md").read_text()
    tree = text.split("## The code, by stage", 1)[1].split("```")[1]
    packages = []
    for line in tree.splitlines():
        package = re.match(r"^  ([a-z_]+)/\s", line)
        if package:
            packages.append((package.group(1), []))
        module = re.match(r"^    (_[a-z_]+\.py)\s", line)
        if module:
            packages[-1][1].append(module.group(1))
    return packages


def imported_packages(path):
    """The module_utils packages the file at PATH imports from."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX + "."):
            found.add(node.module[len(PREFIX) + 1:].split(".")[0])
    return found


def test_the_architecture_tree_is_the_folder():
    named = set(package + "/" + name for package, names in drawn_tree() for name in names)
    files = set(str(path.relative_to(MODULE_UTILS)) for path in MODULE_UTILS.glob("*/_*.py")
                if path.name != "__init__.py")
    assert named == files, {"not in the tree": sorted(files - named), "no such file": sorted(named - files)}


def test_every_module_utils_file_is_in_a_package_with_an_empty_init():
    assert [path.name for path in MODULE_UTILS.glob("*.py")] == []
    for package, _names in drawn_tree():
        assert (MODULE_UTILS / package / "__init__.py").read_bytes() == b"", package


def test_a_package_imports_only_the_packages_above_it():
    order = [package for package, _names in drawn_tree()]
    upward = []
    for index, package in enumerate(order):
        for path in (MODULE_UTILS / package).glob("*.py"):
            for other in imported_packages(path) - {package}:
                if other not in order[:index]:
                    upward.append("%s/%s imports %s" % (package, path.name, other))
    assert upward == []


def test_no_action_plugin_imports_another():
    action = "ansible_collections.aisb.sandbox.plugins.action"
    importing = [path.name for path in (REPO / "plugins" / "action").glob("*.py")
                 if any(node.module and node.module.startswith(action)
                        for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom))]
    assert importing == []


def test_the_import_check_sees_an_import():
    assert imported_packages(MODULE_UTILS / "session" / "_session.py") >= {"common", "policy", "review"}
