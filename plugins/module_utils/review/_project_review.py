# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A review session's changes: what the agent added, changed and deleted, read from the
overlay's upper directory against the project (or against a kept harness state, which
review mode mounts as an overlay too), each with its flags (_review_flags), and a text
diff of one. _review_apply applies them.

The upper directory is what the sandbox wrote through podman's overlay mount of the
project. Measured (podman 5.4.2 rootless, kernel overlayfs with userxattr): a deleted
path is a character device 0/0 of the same name, and a directory that replaced the
project's (removed and made again, or a file replaced by a directory) carries
user.overlay.opaque=y. The other opaque markers (trusted.overlay.opaque,
user.fuseoverlayfs.opaque, a .wh..wh..opq file) are read too; a file named .wh.NAME is
not taken for a deletion (kernel overlay writes none, and the agent may name a file
so): it is listed, and flagged.

Nothing here follows a symbolic link: the upper directory and the project are walked
with lstat.
"""

from __future__ import annotations

import difflib
import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.project._project_layout import looks_like_gitdir
from ansible_collections.aisb.sandbox.plugins.module_utils.review._project_manifest import kind
from ansible_collections.aisb.sandbox.plugins.module_utils.review._review_flags import flags, git_reads

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque", "user.fuseoverlayfs.opaque")
OPAQUE_FILE = ".wh..wh..opq"
# An upper file the kernel fills from the lower one on read: its own data is not the file.
METACOPY_XATTRS = ("user.overlay.metacopy", "trusted.overlay.metacopy")


class ReviewError(Exception):
    """The upper directory or the project cannot be reviewed or applied as asked."""


def in_git_directory(path):
    """True for PATH (relative) in or at a .git: never applied (the agent's commits come
    back as refs, _project_commits), and not a change of the project an apply checks for."""
    return ".git" in path.split("/")


def _xattr(path, name):
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _is_whiteout(info):
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _is_opaque(path):
    return (os.path.lexists(os.path.join(path, OPAQUE_FILE)) or
            any(_xattr(path, name) == b"y" for name in OPAQUE_XATTRS))


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _same_content(upper_path, lower_path, size):
    """True when both regular files hold the same bytes; False when either cannot be read
    (the agent may leave a file it cannot read itself: applying it then says why). Neither
    is opened through a link: a kept state may change under a review (another session)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        if os.lstat(lower_path).st_size != size:
            return False
        with os.fdopen(os.open(upper_path, flags), "rb") as upper, os.fdopen(os.open(lower_path, flags), "rb") as lower:
            while True:
                block = upper.read(1 << 20)
                if block != lower.read(1 << 20):
                    return False
                if not block:
                    return True
    except OSError:
        return False


def _entry(path, change, info, was=None):
    """One change: PATH relative to the project, CHANGE added, changed or deleted, the
    new file's type and mode (the old one's for a deletion), WAS the old type and mode."""
    item = {"path": path, "change": change, "type": kind(info.st_mode),
            "mode": "%04o" % stat.S_IMODE(info.st_mode), "flags": []}
    if was is not None:
        item["was"] = {"type": kind(was.st_mode), "mode": "%04o" % stat.S_IMODE(was.st_mode)}
    return item


def _deleted(lower_path, path, out):
    """PATH and, for a directory, everything under it, as deletions (children first)."""
    info = os.lstat(lower_path)
    if stat.S_ISDIR(info.st_mode):
        for name in sorted(os.listdir(lower_path)):
            _deleted(os.path.join(lower_path, name), path + "/" + name, out)
    out.append(_entry(path, "deleted", info))


def _walk(upper_dir, lower_dir, prefix, out, links, hidden):
    """Changes under one upper directory. LOWER_DIR: the project's directory of the same
    path when it is a real directory there, or None. HIDDEN: the agent's view did not show
    what LOWER_DIR holds (this directory, or one above it in the upper directory, is opaque)."""
    try:
        names = sorted(os.listdir(upper_dir))
    except OSError as error:
        raise ReviewError("%s in the upper directory cannot be read (%s)" % (prefix or ".", error.strerror))
    for name in names:
        if name == OPAQUE_FILE:
            continue
        path, upper_path = prefix + name, os.path.join(upper_dir, name)
        lower_path = os.path.join(lower_dir, name) if lower_dir is not None else None
        info = os.lstat(upper_path)
        was = _lstat(lower_path) if lower_path is not None else None
        if _is_whiteout(info):
            if was is not None:
                _deleted(lower_path, path, out)
            continue
        if was is not None and stat.S_ISDIR(was.st_mode) and not stat.S_ISDIR(info.st_mode):
            # A directory replaced by a file or link: what it held is gone.
            for child in sorted(os.listdir(lower_path)):
                _deleted(os.path.join(lower_path, child), path + "/" + child, out)
        if stat.S_ISDIR(info.st_mode):
            merged = was is not None and stat.S_ISDIR(was.st_mode)
            if not merged:
                out.append(_entry(path, "changed" if was else "added", info, was))
            elif stat.S_IMODE(info.st_mode) != stat.S_IMODE(was.st_mode):
                out.append(_entry(path, "changed", info, was))
            _walk(upper_path, lower_path if merged else None, path + "/", out, links,
                  merged and (hidden or _is_opaque(upper_path)))
            continue
        if stat.S_ISREG(info.st_mode):
            if any(_xattr(upper_path, attribute) is not None for attribute in METACOPY_XATTRS):
                raise ReviewError("%s in the upper directory is a metadata-only copy (overlay metacopy): "
                                  "its data is not there; review mode needs overlay without metacopy" % path)
            links.setdefault(info.st_ino, []).append((path, info.st_nlink))
            if (was is not None and stat.S_ISREG(was.st_mode) and stat.S_IMODE(was.st_mode) ==
                    stat.S_IMODE(info.st_mode) and _same_content(upper_path, lower_path, info.st_size)):
                continue
        elif stat.S_ISLNK(info.st_mode):
            target = os.readlink(upper_path)
            if was is not None and stat.S_ISLNK(was.st_mode) and os.readlink(lower_path) == target:
                continue
        item = _entry(path, "changed" if was else "added", info, was)
        if stat.S_ISLNK(info.st_mode):
            item["target"] = target
        out.append(item)
    if hidden:
        # The agent's view hid the project's directory: whatever the upper one lacks is gone.
        for name in sorted(set(os.listdir(lower_dir)) - set(names)):
            _deleted(os.path.join(lower_dir, name), prefix + name, out)


def changes(upper, project, environ, flag=None):
    """Every path the upper directory adds, changes or deletes in PROJECT, in path order,
    each with its flags (ENVIRON: the developer's, for the git configuration the host
    reads). A file copied up but left as it was is no change. FLAG: the flags of a
    change for a tree that is not the project (_review_flags.state_flags)."""
    out, links = [], {}
    _walk(upper, project, "", out, links, False)
    # A hard link to a file outside the upper directory: its data is someone else's file.
    foreign = set(path for paths in links.values() for path, count in paths if count > len(paths))
    repositories = new_repositories(out, upper)
    if flag is None:
        read_by_git = git_reads(upper, project, environ)

        def flag(item):
            return flags(item, upper, project, read_by_git)
    for item in out:
        item["flags"] = flag(item)
        if item["path"] in foreign:
            item["flags"].append("a hard link to a file outside the session's upper directory")
        item["flags"] += ["in a repository the agent made (%s): git run inside it takes its configuration and "
                          "hooks from it" % top for top in repositories
                          if item["path"] == top or item["path"].startswith(top + "/")]
    return sorted(out, key=lambda item: item["path"].split("/"))


def new_repositories(items, upper):
    """The directories ITEMS add that git would take for a git directory (a bare
    repository the agent made; one at a .git is flagged as such already)."""
    return [item["path"] for item in items if item["type"] == "dir" and item["change"] == "added"
            and not in_git_directory(item["path"])
            and looks_like_gitdir(item["path"], set(os.listdir(os.path.join(upper, item["path"]))))]


def _text(path, limit):
    """PATH's lines when it is a regular UTF-8 file of at most LIMIT bytes, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(limit + 1)
    try:
        return None if len(data) > limit else data.decode("utf-8").splitlines(True)
    except UnicodeDecodeError:
        return None


def text_diff(upper, project, item, limit=1 << 18, prefix=""):
    """A unified diff of ITEM (a regular file added, changed or deleted), or one line
    saying why there is none (binary, larger than LIMIT bytes, not a file). PREFIX goes
    before the path in what the diff shows (a kept state's name)."""
    path = item["path"]
    if item["type"] != "file":
        return "%s %s %s\n" % (item["change"], item["type"], prefix + path)
    was_file = item["change"] == "deleted" or (item.get("was") or {}).get("type") == "file"
    old = _text(os.path.join(project, path), limit) if was_file else []
    new = _text(os.path.join(upper, path), limit) if item["change"] != "deleted" else []
    if old is None or new is None:
        return "%s %s: binary, unreadable or over %d bytes\n" % (item["change"], prefix + path, limit)
    return "".join(difflib.unified_diff(old, new, "a/" + prefix + path, "b/" + prefix + path))
