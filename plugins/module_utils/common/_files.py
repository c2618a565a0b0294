# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing a file whole: the one way the collection replaces a file a reader may open."""

import binascii
import os

# How many names write_whole tries beside its target before it gives up.
ATTEMPTS = 100


def _create_beside(path, create_mode):
    """A new file beside PATH, created with CREATE_MODE (the umask applies) and never
    through a link: (descriptor, its path)."""
    directory, name = os.path.split(path)
    for _attempt in range(ATTEMPTS):
        # A dot first: the directory's readers that skip hidden files skip it.
        temporary = os.path.join(directory, ".%s.%s" % (name, binascii.hexlify(os.urandom(6)).decode("ascii")))
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                           create_mode), temporary
        except FileExistsError:
            continue
    raise FileExistsError("no free name to write %s beside it after %d attempts" % (path, ATTEMPTS))


def write_whole(path, text, mode=None, owner=None):
    """Write TEXT (UTF-8) to PATH whole: into a new file in its directory, renamed over
    PATH, so a reader sees the old file or the new one, never part of one; a link at
    PATH is replaced, not followed. MODE: the file's permission bits exactly, or None
    for what open() gives (0666 less the umask). OWNER: (uid, gid) the file is given
    before it takes PATH's name, or None. When writing fails, the new file is removed
    and PATH is as it was."""
    # Never wider than its owner's while it is written: MODE is set once it is whole.
    descriptor, temporary = _create_beside(path, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if owner is not None:
                os.fchown(handle.fileno(), *owner)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        os.rename(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass  # The error that ended the write is the one to report.
        raise
