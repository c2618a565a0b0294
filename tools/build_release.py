# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the release tarball: the collection as `ansible-galaxy collection build` makes it
from this checkout, with README.galaxy.md as its README.md.

usage: python3 tools/build_release.py [--repository URL] OUTPUT_DIR

Why a copy: Galaxy and galaxy-importer show the README.md at the collection's root and
ignore galaxy.yml's `readme`, and the repository's own README.md is for working on the
checkout (it starts with ./demo and ./tests/run, which the tarball leaves out). So the
build runs on a copy of what git tracks or would track (nothing it ignores) whose
README.md is README.galaxy.md; the checkout is left as it was.

--repository URL: the public repository's address, written into the copy's galaxy.yml,
whose `repository` is empty because the project has none yet. galaxy-importer (and so
Galaxy) refuses a collection without one; `ansible-galaxy collection install` does not
need it. Prints the tarball's path.
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The ansible-galaxy of the Python running this (a venv's), else the one on PATH.
GALAXY = shutil.which("ansible-galaxy", path=str(Path(sys.executable).parent)) or "ansible-galaxy"
SHIPPED_README = "README.galaxy.md"


def shipped_files(repo):
    """What git tracks or would track in REPO (relative paths that exist)."""
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
    return [name for name in listing.split("\0") if name and (repo / name).is_file()]


def galaxy_yml(text, repository):
    """galaxy.yml's text with its empty `repository: ''` line given URL (refused when it
    names one already)."""
    if not repository:
        return text
    if "\nrepository: ''\n" not in text:
        raise SystemExit("galaxy.yml's repository is not empty (repository: ''): build without --repository")
    return text.replace("\nrepository: ''\n", f"\nrepository: {repository}\n", 1)


def build(output, repository=None, repo=REPO):
    """Build the release tarball into OUTPUT; return its path."""
    with tempfile.TemporaryDirectory(prefix="aisb-release-") as work:
        tree = Path(work) / "ansible_collections" / "aisb" / "sandbox"
        for name in shipped_files(repo):
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, tree / name)
        shutil.copy2(repo / SHIPPED_README, tree / "README.md")
        (tree / "galaxy.yml").write_text(galaxy_yml((repo / "galaxy.yml").read_text(), repository))
        Path(output).mkdir(parents=True, exist_ok=True)
        subprocess.run([GALAXY, "collection", "build", "--force", "--output-path",
                        str(Path(output).resolve()), str(tree)], check=True, stdout=subprocess.DEVNULL)
    version = re.search(r"^version: (\S+)$", (repo / "galaxy.yml").read_text(), re.M).group(1)
    return Path(output) / f"aisb-sandbox-{version}.tar.gz"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repository", help="the public repository's URL, for Galaxy")
    parser.add_argument("output", help="the directory the tarball goes to")
    args = parser.parse_args(argv)
    tarball = build(args.output, args.repository)
    if not args.repository:
        print("no --repository: the tarball installs, but Galaxy refuses it", file=sys.stderr)
    print(tarball)


if __name__ == "__main__":
    main(sys.argv[1:])
