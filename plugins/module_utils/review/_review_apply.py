# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Applying a review session's changes (_project_review.changes) to the project without
writing anywhere else.

Every directory is opened with O_NOFOLLOW relative to its parent, each file is written
under a new name and renamed into place (never through an existing file or hard link),
no device, fifo or socket is ever made, and set-id bits are dropped.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid

from ansible_collections.aisb.sandbox.plugins.module_utils.review._project_review import ReviewError, in_git_directory

PERMISSIONS = 0o777
APPLYING_PREFIX = ".aisb-apply-"


def is_named(path, named):
    """True when PATH, or a directory above it, is among NAMED (the user's explicit list)."""
    return any(path == name.strip("/") or path.startswith(name.strip("/") + "/") for name in named)


def _parts(path):
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ReviewError("refusing path %r: not a plain relative path" % path)
    return parts


def _open_directory(root_fd, parts):
    """A descriptor on the directory PARTS under ROOT_FD, every step refused when it is a
    symbolic link or not a directory."""
    fd = os.dup(root_fd)
    for part in parts:
        try:
            following = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ReviewError("%s is a symbolic link or not a directory" % "/".join(parts))
            raise
        os.close(fd)
        fd = following
    return fd


def _remove(root_fd, path):
    parts = _parts(path)
    parent = _open_directory(root_fd, parts[:-1])
    try:
        info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(parts[-1], dir_fd=parent)
        else:
            os.unlink(parts[-1], dir_fd=parent)
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


def _copy_in(upper_fd, root_fd, item):
    """Write ITEM (a file, a link or a directory) from the upper directory into the project."""
    parts = _parts(item["path"])
    mode = int(item["mode"], 8) & PERMISSIONS
    parent = _open_directory(root_fd, parts[:-1])
    try:
        if item["type"] == "dir":
            try:
                os.mkdir(parts[-1], mode, dir_fd=parent)
            except FileExistsError:
                pass
            made = _open_directory(parent, parts[-1:])
            os.fchmod(made, mode)
            os.close(made)
            return
        temporary = APPLYING_PREFIX + uuid.uuid4().hex
        if item["type"] == "symlink":
            os.symlink(item["target"], temporary, dir_fd=parent)
        else:
            source_dir = _open_directory(upper_fd, parts[:-1])
            try:
                source = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                 dir_fd=source_dir)
            finally:
                os.close(source_dir)
            try:
                if not stat.S_ISREG(os.fstat(source).st_mode):
                    raise ReviewError("%s is no longer a regular file in the upper directory" % item["path"])
                target = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 0o600, dir_fd=parent)
                with os.fdopen(target, "wb") as output, os.fdopen(os.dup(source), "rb") as data:
                    while True:
                        block = data.read(1 << 20)
                        if not block:
                            break
                        output.write(block)
                    os.fchmod(output.fileno(), mode)
            finally:
                os.close(source)
        # rename replaces the name only: an existing file, link or hard link is not written.
        os.rename(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
    finally:
        os.close(parent)


def _replaces(item):
    """True when applying ITEM must first remove what the project has at its path."""
    return item["change"] == "deleted" or (item.get("was") or {}).get("type") not in (None, item["type"])


def apply(upper, project, items, named=()):
    """Apply ITEMS (from changes()) to PROJECT: unflagged ones, and flagged ones whose path
    or a directory above it is NAMED; devices, fifos, sockets and anything in or at a
    .git never.

    Removals go first, deepest first; then files, links and directories, parents first.
    A path that cannot be applied (its directory held back, a directory not empty because
    something under it was held back, a symbolic link where a directory was) is held with
    the reason; the rest goes on. Returns {"applied": [paths], "held": [{path, why}]}.
    """
    chosen, held = [], []
    for item in items:
        if item["type"] == "special" and item["change"] != "deleted":
            held.append({"path": item["path"], "why": "a device, fifo or socket is never applied"})
        elif in_git_directory(item["path"]):
            held.append({"path": item["path"], "why": "a git directory's content or pointer is never applied: the "
                                                      "agent's commits are under refs/aisb/<session id>/"})
        elif item["flags"] and not is_named(item["path"], named):
            held.append({"path": item["path"], "why": "flagged (%s): name it to apply it" % "; ".join(item["flags"])})
        else:
            chosen.append(item)
    failed = set()
    root_fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    upper_fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for item in sorted((i for i in chosen if _replaces(i)), key=lambda i: -i["path"].count("/")):
            try:
                _remove(root_fd, item["path"])
            except (OSError, ReviewError) as error:
                failed.add(item["path"])
                held.append({"path": item["path"], "why": _why(error)})
        for item in sorted((i for i in chosen if i["change"] != "deleted"), key=lambda i: i["path"].count("/")):
            if item["path"] in failed:
                continue
            try:
                _copy_in(upper_fd, root_fd, item)
            except (OSError, ReviewError) as error:
                failed.add(item["path"])
                held.append({"path": item["path"], "why": _why(error)})
    finally:
        os.close(root_fd)
        os.close(upper_fd)
    applied = [item["path"] for item in chosen if item["path"] not in failed]
    return {"applied": applied, "held": sorted(held, key=lambda h: h["path"])}


def _why(error):
    if isinstance(error, ReviewError):
        return str(error)
    if error.errno == errno.ENOTEMPTY:
        return "the directory is not empty: something under it was held back"
    if error.errno == errno.ENOENT:
        return "its directory is not in the project: it was held back"
    return os.strerror(error.errno)
