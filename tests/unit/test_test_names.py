# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest imports test files by basename (rootdir-relative packages are not used here): two
test files with one name in tests/unit and tests/integration stop the whole run at
collection, after the minutes tests/run spends before pytest."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name():
    names = {}
    for path in sorted(TESTS.glob("*/test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
