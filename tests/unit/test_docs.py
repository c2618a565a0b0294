# SPDX-License-Identifier: GPL-3.0-or-later
"""The docs a user gets and the release tarball that carries them: its README.md is
README.galaxy.md and the checkout's stays as it was; no measurement history in the
shipped docs (the build machine, issue and session numbers belong in docs/dev/, which the
tarball leaves out); every relative link and anchor resolves, in the checkout and, for
the shipped docs, inside the tarball."""

import hashlib
import json
import re
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import build_release  # noqa: E402  pylint: disable=wrong-import-position

# What only a developer's page may say: where and when something was measured here, and
# which issue or session of the project's own history asked for it.
# Blanks may be a line break: a guide wraps its lines anywhere.
HISTORY = re.compile(r"build[\s-]+machine|\bissues?\s+#?\d+|\bsessions?\s+\d+\b|\bPR\s+#?\d+|\bpull\s+request\s+#?\d+", re.I)
REPOSITORY = "https://aisb-sandbox.invalid/"
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The release tarball, built from this checkout and unpacked: (tree, manifest,
    the checkout's README.md digest before the build)."""
    before = digest(REPO / "README.md")
    out = tmp_path_factory.mktemp("release")
    tarball = build_release.build(out, REPOSITORY)
    tree = out / "tree"
    with tarfile.open(tarball) as archive:
        # Extraction filters came with 3.11.4 (3.12 warns without one); Debian 12's is 3.11.2.
        archive.extractall(tree, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return tree, json.loads((tree / "MANIFEST.json").read_text()), before


def prose(path):
    """PATH's lines outside code fences, inline code blanked: (number, line)."""
    inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, re.sub(r"`[^`]*`", "``", line)


def anchors(path):
    """The anchors GitHub gives PATH's headings: lower case, punctuation but - and _ gone,
    blanks made -, a repeated one suffixed -1, -2, ..."""
    seen, found = {}, set()
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        heading = None if inside else HEADING.match(line)
        if heading:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(2))
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return found


def broken_links(path, root):
    """PATH's relative links (FILE, FILE#ANCHOR, #ANCHOR) that name no file under ROOT or
    no heading of a Markdown file."""
    broken = []
    for number, line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            name, _hash, anchor = target.partition("#")
            resolved = (path.parent / name).resolve() if name else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
                broken.append(where + " (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(where + " (no such heading)")
    return broken


def shipped_docs(tree):
    return sorted(path for path in tree.rglob("*") if path.suffix in (".md", ".rst", ".yaml", ".yml")
                  and (path.suffix in (".md", ".rst") or path.name == "changelog.yaml"))


def test_the_tarballs_readme_is_the_shipped_one_and_the_checkouts_is_unchanged(release):
    tree, manifest, before = release
    assert (tree / "README.md").read_bytes() == (REPO / "README.galaxy.md").read_bytes()
    assert digest(REPO / "README.md") == before
    assert (tree / "README.md").read_bytes() != (REPO / "README.md").read_bytes()
    assert not (tree / "README.galaxy.md").exists() and not (tree / "tools").exists()
    assert not (tree / "docs" / "dev").exists()
    assert manifest["collection_info"]["repository"] == REPOSITORY


def test_the_shipped_readme_starts_with_ansible_core_and_the_checkouts_with_its_two_commands():
    shipped = [line for _number, line in prose(REPO / "README.galaxy.md") if line.startswith("## ")]
    assert shipped[:4] == ["## 1. Install ansible-core (2.19, 2.20 or 2.21)", "## 2. Install the collection",
                           "## 3. Provision your workstation", "## 4. Run a first session"]
    version = re.search(r"^version: (\S+)$", (REPO / "galaxy.yml").read_text(), re.M).group(1)
    assert f"aisb-sandbox-{version}.tar.gz" in (REPO / "README.galaxy.md").read_text()
    block = re.search(r"^```\n(.*?)^```$", (REPO / "README.md").read_text(), re.M | re.S).group(1)
    assert [line.split()[0] for line in block.splitlines()] == ["./demo", "./tests/run"]


def test_the_release_build_fills_the_empty_repository_and_no_other():
    with pytest.raises(SystemExit, match="repository is not empty"):
        build_release.galaxy_yml("name: sandbox\nrepository: https://a.invalid/\n", REPOSITORY)
    empty = "name: sandbox\nrepository: ''\nversion: 1\n"
    assert build_release.galaxy_yml(empty, REPOSITORY) == f"name: sandbox\nrepository: {REPOSITORY}\nversion: 1\n"
    assert build_release.galaxy_yml(empty, None) == empty


def test_the_history_pattern_finds_what_it_is_for():
    for text in ("on the 2-core build machine", "the build\nmachine's", "issue 28 found", "(issue #34)", "session 13's main",
                 "PR 12"):
        assert HISTORY.search(text), text
    for text in ("a session's record", "the sessions' records", "issues a warning", "build the machine's images"):
        assert not HISTORY.search(text), text


def test_no_shipped_doc_carries_measurement_history(release):
    tree, _manifest, _before = release
    docs = shipped_docs(tree)
    assert len(docs) > 20, docs
    found = []
    for path in docs:
        text = path.read_text(encoding="utf-8")
        for match in HISTORY.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(tree)}:{line}: {match.group()!r}")
    assert not found, "move these to docs/dev/:\n" + "\n".join(found)


def test_the_anchors_are_githubs():
    page = REPO / "docs" / "sessions.md"
    assert {"provider-keys-aisb_credentials", "a-solo-developer-your-own-machine-no-inventory"} <= anchors(page)


def test_every_link_in_the_checkouts_docs_resolves():
    pages = [REPO / "README.md", REPO / "README.galaxy.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "docs" / "dev").glob("*.md"))]
    broken = [where for page in pages for where in broken_links(page, REPO)]
    assert not broken, "\n".join(broken)


def test_every_link_in_the_shipped_docs_resolves_inside_the_tarball(release):
    tree, _manifest, _before = release
    broken = [where for page in shipped_docs(tree) if page.suffix == ".md" for where in broken_links(page, tree)]
    assert not broken, "\n".join(broken)
