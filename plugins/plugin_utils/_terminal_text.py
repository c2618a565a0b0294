# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Text from a build or an agent, made safe for the developer's terminal: every character
that could drive it (escape sequences, C0 and C1 controls, bidi overrides and other format
characters) shown as '?'. The image build's progress line (_build_progress) and aisb's
answer on a terminal (_aisb_command) go through it; an answer written to a file does not."""

from __future__ import annotations

import codecs
import unicodedata

SHOWN_INSTEAD = "?"


def printable(text, keep=""):
    """TEXT with every character that is not printable, other than those in KEEP, as '?'."""
    return "".join(SHOWN_INSTEAD if unicodedata.category(char).startswith("C") and char not in keep else char
                   for char in text)


class TerminalText(object):
    """An output stream's bytes as the terminal may show them: feed(DATA) -> bytes, in
    order, line ends and tabs kept ("\\r\\n" as "\\n"), a character cut between two chunks
    decoded whole, bytes that are not UTF-8 shown as U+FFFD."""

    KEEP = "\n\t"

    def __init__(self):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.carriage_return = False

    def feed(self, data, final=False):
        text = self.decoder.decode(data, final)
        if self.carriage_return:
            text = "\r" + text
        # A "\r" at a chunk's end may start a "\r\n": decided with the next chunk.
        self.carriage_return = text.endswith("\r") and not final
        if self.carriage_return:
            text = text[:-1]
        return printable(text.replace("\r\n", "\n"), self.KEEP).encode("utf-8")
