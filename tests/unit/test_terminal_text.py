# SPDX-License-Identifier: GPL-3.0-or-later
"""Text from a build or an agent as the developer's terminal may show it: nothing in it
drives the terminal, whatever chunks it arrives in."""

from ansible_collections.aisb.sandbox.plugins.plugin_utils._terminal_text import TerminalText, printable

# A title change (OSC), a clipboard write (OSC 52), a screen clear (CSI), C1 CSI, a bidi
# override, a bell, a backspace and a bare carriage return (a line overwritten).
HOSTILE = ("plain \u2713\n\x1b]0;owned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\u009b31m\u202eevil\b\r"
           "hidden\r\nend\tok\n")
SHOWN = "plain \u2713\n?]0;owned??]52;c;ZWNobyBwd25lZA==??[2J?31m?evil??hidden\nend\tok\n"


def test_every_character_that_drives_a_terminal_is_shown_as_a_question_mark():
    assert printable(HOSTILE, keep="\n\t\r").replace("\r\n", "\n") == SHOWN.replace("??hidden", "?\rhidden")
    assert printable("a\nb\tc") == "a?b?c"
    assert TerminalText().feed(HOSTILE.encode(), final=True).decode() == SHOWN


def test_chunks_cut_anywhere_give_the_same_text():
    data = HOSTILE.encode()
    for cut in range(1, len(data)):
        text = TerminalText()
        assert (text.feed(data[:cut]) + text.feed(data[cut:], final=True)).decode() == SHOWN, cut
    # A final carriage return, and bytes that are not UTF-8.
    assert TerminalText().feed(b"done\r", final=True) == b"done?"
    assert TerminalText().feed(b"caf\xe9\n", final=True).decode() == "caf\ufffd\n"
