# SPDX-License-Identifier: GPL-3.0-or-later
"""Every file of the repository says its license (SPDX), in its first lines or, for a
file that cannot hold a comment (JSON) or is rewritten by a tool (changelog.yaml, the
bench's results), in a FILE.license beside it (the REUSE convention). An empty file
(a package's __init__.py, which ansible-test's empty-init wants empty) holds nothing to license."""

import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# The license text itself.
EXEMPT = {"COPYING"}
HEAD_LINES = 5


def repository_files():
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
    return sorted(name for name in listed if name and (REPO / name).is_file())


def test_every_file_says_its_license():
    (license_,) = yaml.safe_load((REPO / "galaxy.yml").read_text())["license"]
    tag = "SPDX-License-Identifier: " + license_
    files = repository_files()
    missing = []
    for name in files:
        if name in EXEMPT or name + ".license" in files or not (REPO / name).stat().st_size:
            continue
        with open(REPO / name, encoding="utf-8", errors="replace") as handle:
            head = [handle.readline() for _line in range(HEAD_LINES)]
        if not any(tag in line for line in head):
            missing.append(name)
    assert missing == []


def test_the_check_sees_the_files_it_must():
    files = repository_files()
    assert {"galaxy.yml", "plugins/modules/session.py", "roles/image/templates/Containerfile.j2", "tests/run"} <= set(files)
