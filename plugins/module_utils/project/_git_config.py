# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""git's configuration file syntax, read without git: the entries of a file and the
files its include and includeIf sections name.

Pure functions. The session reads the project's git configuration on the host, and
running git there would run whatever that configuration names (core.fsmonitor runs on
`git config --list` in a worktree): so this parser, never git.
"""

import os
import pwd
import re

ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}
SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\\n]|\\.)*)")?\s*\]')
NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
# git gives up on a file holding deeper include chains (a loop, usually).
MAX_INCLUDE_DEPTH = 10
# Where git's "%(prefix)/" leads: the prefix Debian's git is built with (git --exec-path
# is /usr/lib/git-core).
PREFIX = "/usr"
# The origin git gives entries from GIT_CONFIG_COUNT/KEY_n/VALUE_n and GIT_CONFIG_PARAMETERS.
COMMAND_LINE = "command line:"
KEY_N = re.compile(r"GIT_CONFIG_KEY_([0-9]+)\Z")


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


def include_target(value, source, home, user_home=None):
    """The file an include VALUE read from SOURCE names, or None when git reads none: a
    path as expand_path() reads it, a relative one relative to the including file's
    directory; git refuses a relative include from the command line (SOURCE COMMAND_LINE)
    (git-config(1), "Includes")."""
    path = expand_path(value, home, user_home)
    if path is None or os.path.isabs(path):
        return path
    if not os.path.isabs(source):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(source), path))


def expand_path(value, home, user_home=None):
    """A path value as git's interpolate_path() reads it: "~" and "~/" are HOME, "~user"
    and "~user/" that user's home directory (USER_HOME(name), the password database by
    default), "%(prefix)/" git's prefix; None for a user that does not exist (git refuses
    the value). Anything else is returned as written."""
    if value.startswith("%(prefix)/"):
        return os.path.join(PREFIX, value[len("%(prefix)/"):])
    if not value.startswith("~"):
        return value
    user, _slash, rest = value[1:].partition("/")
    directory = home if not user else (user_home or _password_home)(user)
    return None if directory is None else os.path.normpath(os.path.join(directory, rest))


def _password_home(user):
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None


def canonical_key(key):
    """KEY (section.name or section.subsection.name) as parse() keys it: section and name
    lower case, the subsection as written."""
    section, _dot, rest = key.partition(".")
    subsection, dot, name = rest.rpartition(".")
    return section.lower() + "." + (subsection + dot if dot else "") + name.lower()


def command_line(environ):
    """The entries git takes from ENVIRON besides files, in its order: GIT_CONFIG_COUNT's
    GIT_CONFIG_KEY_n/VALUE_n (every n below the count that has a key: git refuses a run
    missing one), then GIT_CONFIG_PARAMETERS (what `git -c` passes to its children).
    Keys as canonical_key() gives them; a value that cannot be read is left out (git
    refuses to run with it)."""
    try:
        count = int(environ.get("GIT_CONFIG_COUNT") or 0)
    except ValueError:
        count = 0
    numbered = sorted(int(match.group(1)) for match in (KEY_N.match(name) for name in environ) if match)
    entries = [(canonical_key(environ["GIT_CONFIG_KEY_%d" % n]), environ.get("GIT_CONFIG_VALUE_%d" % n, ""))
               for n in numbered if n < count]
    return entries + [(canonical_key(key), value) for key, value in _parameters(environ.get("GIT_CONFIG_PARAMETERS"))]


def _parameters(text):
    """GIT_CONFIG_PARAMETERS: single-quoted words ('a'\\''b' holds a quote), each
    'key=value' or 'key'='value' (git's config.c, parse_config_env_list)."""
    pairs, position, text = [], 0, text or ""
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        key, position = _quoted(text, position)
        if key is None:
            return pairs
        if text[position:position + 1] == "=":
            position += 1
            value, position = _quoted(text, position) if text[position:position + 1] == "'" else ("", position)
            if value is None:
                return pairs
            pairs.append((key, value))
        else:
            name, equals, value = key.partition("=")
            pairs.append((name, value if equals else None))
    return pairs


def _quoted(text, position):
    """(word, position after it) of the single-quoted word at POSITION, or (None, position)."""
    word = []
    while text[position:position + 1] == "'":
        end = text.find("'", position + 1)
        if end < 0:
            return None, position
        word.append(text[position + 1:end])
        position = end + 1
        if text[position:position + 2] in ("\\'", "\\!"):
            word.append(text[position + 1])
            position += 2
    return ("".join(word), position) if word else (None, position)
