# SPDX-License-Identifier: GPL-3.0-or-later
"""The tests' file names. pytest imports test files, and the helpers beside them, by
basename (rootdir-relative packages are not used here): two files with one name in the
folders on the tests' path stop the whole run at collection, after the minutes tests/run
spends before pytest. And a unit test file's name begins with the module it tests
(test_X.py, or test_X_ASPECT.py where tests/integration holds test_X.py or X has several
test files), so that a module's tests are found by its name."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
# Where a run imports files from by basename: the conftests put tests/, and
# tests/workstation for the integration tests, on the path; pytest each test's folder.
ON_THE_PATH = ["", "unit", "integration", "workstation"]

# Unit test files of no one module, with what they test instead.
NOT_OF_ONE_MODULE = {
    "test_architecture_tree.py": "docs/architecture.md's tree against the module_utils folder",
    "test_docs.py": "the shipped docs, the release tarball built from them, their links",
    "test_enforcement_copies.py": "values spelled out alike in the roles, the entrypoint and several module_utils",
    "test_no_gate_plan.py": "network no-gate across _policy, _host_verdict, _session_admission and _session_plan",
    "test_packaging.py": "the ansible-core the collection claims against the series it is tested on",
    "test_role_argument_specs.py": "every role's meta/argument_specs.yml against its defaults",
    "test_sni_helper.py": "the gate role's SNI helper, a perl script",
    "test_spdx.py": "every file of the repository",
    "test_test_names.py": "the tests' own file names",
}


def plugin_names():
    """Each plugin's name (a module_utils file's without its leading underscore) and the
    dotted paths a test imports it by."""
    names = {}
    for path in sorted((REPO / "plugins").rglob("*.py")):
        if path.name != "__init__.py":
            dotted = ".".join(("ansible_collections", "aisb", "sandbox") + path.relative_to(REPO).with_suffix("").parts)
            names.setdefault(path.stem.lstrip("_"), set()).add(dotted)
    return names


def imported(path):
    """The dotted names PATH imports: the modules, and the names it takes from them."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(node.module + "." + alias.name for alias in node.names)
    return names


def named_and_imported(path, names):
    """The plugins PATH's name begins with (test_X.py or test_X_ASPECT.py) that it imports."""
    subject = path.stem[len("test_"):]
    return sorted(name for name, dotted in names.items()
                  if (subject == name or subject.startswith(name + "_")) and dotted & imported(path))


def test_no_two_importable_files_share_a_name():
    files = {}
    for folder in ON_THE_PATH:
        for path in sorted((TESTS / folder).glob("*.py")):
            if path.name != "conftest.py":  # pytest imports each conftest by its path
                files.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in files.items() if len(paths) > 1} == {}


def test_each_unit_test_file_is_named_after_a_module_it_imports():
    names = plugin_names()
    unnamed = [path.name for path in sorted((TESTS / "unit").glob("test_*.py"))
               if path.name not in NOT_OF_ONE_MODULE and not named_and_imported(path, names)]
    assert unnamed == []


def test_the_files_of_no_one_module_are_there_and_name_none():
    names = plugin_names()
    assert {name: named_and_imported(TESTS / "unit" / name, names) if (TESTS / "unit" / name).exists() else "missing"
            for name in NOT_OF_ONE_MODULE} == dict.fromkeys(NOT_OF_ONE_MODULE, [])
