# SPDX-License-Identifier: GPL-3.0-or-later
"""The docs a user gets: no measurement history in them (the build machine, issue and
session numbers belong in docs/dev/, which the tarball leaves out)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What only a developer's page may say: where and when something was measured here, and
# which issue or session of the project's own history asked for it.
HISTORY = re.compile(r"build[ -]machine|\bissues? #?\d+|\bsessions? \d+\b|\bPR #?\d+|\bpull request #?\d+", re.I)


def shipped_docs():
    """The Markdown, RST and changelog a user reads, as the tarball carries them."""
    patterns = ["README.md", "docs/*.md", "docs/docsite/rst/*.rst", "roles/*/README.md", "examples/*/README.md"]
    return sorted({path for pattern in patterns for path in REPO.glob(pattern)})


def history(path):
    return [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]


def test_the_pattern_finds_what_it_is_for():
    for text in ("on the 2-core build machine", "issue 28 found", "(issue #34)", "session 13's main", "PR 12"):
        assert HISTORY.search(text), text
    for text in ("a session's record", "the sessions' records", "issues a warning", "build the machine's images"):
        assert not HISTORY.search(text), text


@pytest.mark.parametrize("path", shipped_docs(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_shipped_doc_carries_measurement_history(path):
    assert not history(path), "move these to docs/dev/:\n" + "\n".join(history(path))
