# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the reference pages made from code (gen_reference.py: docs/reference-*.md), then
the guides in docs/*.md as the docs site's extra docs, docs/docsite/rst/*.rst.

usage: python3 docs/docsite/gen_rst.py [--check]
  --check  write nothing; exit 1 naming each file that is not what its source makes

The Markdown guides are the source (they read well on a forge and in a checkout);
antsibull-docs takes extra docs only as RST, each opening with a label under the
collection's prefix. pandoc (pypandoc-binary, in tests/requirements.txt) converts;
links between guides become links between their pages on the site.
"""

import re
import sys
from pathlib import Path

import pypandoc

import gen_reference

DOCS = Path(__file__).resolve().parents[1]
RST = DOCS / "docsite" / "rst"
LABEL = "ansible_collections.aisb.sandbox.docsite."
HEADER = ".. SPDX-License-Identifier: GPL-3.0-or-later\n.. Made by docs/docsite/gen_rst.py from docs/%s: edit that, then run it.\n\n"
COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)
# A link to another guide (name.md, name.md#anchor): on the site, its page.
GUIDE_LINK = re.compile(r"\]\(([a-z0-9-]+)\.md\b")


def label_fences(text):
    """Unlabelled code fences as text: Sphinx would read them as the site's default
    language (YAML+Jinja), which shell commands are not."""
    lines, inside = [], False
    for line in text.split("\n"):
        fence = line.lstrip().startswith("```")
        if fence and not inside and line.strip() == "```":
            line += "text"
        inside ^= fence
        lines.append(line)
    return "\n".join(lines)


def guides():
    return sorted(DOCS.glob("*.md"))


def rst(guide):
    text = label_fences(GUIDE_LINK.sub(r"](\1.html", COMMENT.sub("", guide.read_text(encoding="utf-8"))))
    # No generated section labels: antsibull-docs wants every label under LABEL, and
    # Sphinx gives each section an anchor of its own.
    body = pypandoc.convert_text(text, "rst", format="gfm-gfm_auto_identifiers", extra_args=["--wrap=preserve"])
    return HEADER % guide.name + ".. _%s%s:\n\n" % (LABEL, guide.stem) + body


def update(wanted, check):
    """The files of WANTED ({path: text}) that do not hold their text, written unless CHECK."""
    stale = []
    for target, text in wanted.items():
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(str(target.relative_to(DOCS.parent)))
        if not check:
            target.write_text(text, encoding="utf-8")
    return stale


def main(argv):
    check = argv[1:] == ["--check"]
    # The reference pages first: their RST is made from them.
    stale = update(gen_reference.pages(), check)
    stale += update(dict((RST / (guide.stem + ".rst"), rst(guide)) for guide in guides()), check)
    known = set(guide.stem + ".rst" for guide in guides())
    stale += [str(path.relative_to(DOCS.parent)) for path in sorted(RST.glob("*.rst")) if path.name not in known]
    if check and stale:
        print("not what docs/docsite/gen_rst.py makes from its sources: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
