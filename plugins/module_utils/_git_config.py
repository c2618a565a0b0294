# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""git's configuration file syntax, read without git: the entries of a file and the
files its include and includeIf sections name.

Pure functions. The session reads the project's git configuration on the host, and
running git there would run whatever that configuration names (core.fsmonitor runs on
`git config --list` in a worktree): so this parser, never git.
"""

import os
import re

ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}
SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\\n]|\\.)*)")?\s*\]')
NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
# git gives up on a file holding deeper include chains (a loop, usually).
MAX_INCLUDE_DEPTH = 10


class ConfigSyntaxError(ValueError):
    """A configuration file git itself would refuse; the message says where."""


def parse(text):
    """The entries of a configuration file's TEXT in order: (key, value) pairs, the key
    as git compares it (section and name lower case, the subsection as written:
    "includeif.gitdir:~/src/.path"), the value unquoted and unescaped (None for a name
    without "=", which git reads as true)."""
    entries = []
    section = None
    # git skips a UTF-8 byte order mark at the start.
    position = 1 if text.startswith("\ufeff") else 0
    while position < len(text):
        char = text[position]
        if char in " \t\r\n":
            position += 1
        elif char in "#;":
            position = _line_end(text, position)
        elif char == "[":
            match = SECTION.match(text, position)
            if not match:
                raise ConfigSyntaxError("bad section header at line %d" % _line(text, position))
            section = _section(match.group(1), match.group(2))
            position = match.end()
        else:
            match = NAME.match(text, position)
            if not match or section is None:
                raise ConfigSyntaxError("bad entry at line %d" % _line(text, position))
            key = section + "." + match.group(0).lower()
            value, position = _value(text, match.end())
            entries.append((key, value))
    return entries


def _section(name, subsection):
    if subsection is None:
        # [section.subsection], the old spelling: the subsection is lower case too.
        head, _dot, rest = name.partition(".")
        return head.lower() + ("." + rest.lower() if rest else "")
    return name.lower() + "." + re.sub(r"\\(.)", r"\1", subsection)


def _value(text, position):
    """(value or None, position after the entry's line) from just after a name."""
    while position < len(text) and text[position] in " \t":
        position += 1
    if position >= len(text) or text[position] in "\r\n#;":
        return None, _line_end(text, position)
    if text[position] != "=":
        raise ConfigSyntaxError("bad entry at line %d" % _line(text, position))
    position += 1
    value, pending_space, quoted = [], "", False
    while position < len(text):
        char = text[position]
        position += 1
        if char == "\n" and not quoted:
            break
        if char == "\n":
            raise ConfigSyntaxError("unfinished quote at line %d" % _line(text, position - 1))
        if char in " \t" and not quoted:
            # Inner whitespace is kept, leading and trailing whitespace dropped.
            pending_space += char if value else ""
            continue
        if char in "#;" and not quoted:
            position = _line_end(text, position)
            break
        if char == "\\":
            escaped = text[position:position + 1]
            position += 1
            if escaped == "\n":
                continue
            if escaped == "\r" and text[position:position + 1] == "\n":
                position += 1
                continue
            if escaped not in ESCAPES:
                raise ConfigSyntaxError("bad escape at line %d" % _line(text, position - 1))
            char = ESCAPES[escaped]
        elif char == '"':
            quoted = not quoted
            value.append(pending_space)
            pending_space = ""
            continue
        elif char == "\r" and text[position:position + 1] == "\n" and not quoted:
            continue
        value.append(pending_space + char)
        pending_space = ""
    if quoted:
        raise ConfigSyntaxError("unfinished quote at line %d" % _line(text, position - 1))
    return "".join(value), position


def _line_end(text, position):
    end = text.find("\n", position)
    return len(text) if end < 0 else end + 1


def _line(text, position):
    return text.count("\n", 0, position) + 1


def is_include(key):
    """True for include.path and includeIf.<condition>.path: each names another file."""
    return key == "include.path" or (key.startswith("includeif.") and key.endswith(".path"))


def include_target(value, including_file, home):
    """The file an include VALUE in INCLUDING_FILE names: ~/ is HOME, a relative path is
    relative to the including file's directory (git-config(1), "Includes")."""
    if value.startswith("~/") or value == "~":
        return os.path.normpath(os.path.join(home, value[2:]))
    return os.path.normpath(os.path.join(os.path.dirname(including_file), value))
