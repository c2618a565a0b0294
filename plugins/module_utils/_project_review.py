# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A review session's changes: what the agent added, changed and deleted (read from the
overlay's upper directory against the project), which of them the host may run or that
change how its tools behave (flagged), and applying them to the project without writing
anywhere else.

The upper directory is what the sandbox wrote through podman's overlay mount of the
project. Measured (podman 5.4.2 rootless, kernel overlayfs with userxattr): a deleted
path is a character device 0/0 of the same name, and a directory that replaced the
project's (removed and made again, or a file replaced by a directory) carries
user.overlay.opaque=y. The other opaque markers (trusted.overlay.opaque,
user.fuseoverlayfs.opaque, a .wh..wh..opq file) are read too; a file named .wh.NAME is
not taken for a deletion (kernel overlay writes none, and the agent may name a file
so): it is listed, and flagged.

Nothing here follows a symbolic link: the upper directory and the project are walked
with lstat, and applying opens every directory with O_NOFOLLOW relative to its parent,
writes each file under a new name and renames it into place (never through an existing
file or hard link), and never makes a device, fifo or socket.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import stat
import uuid

from ansible_collections.aisb.sandbox.plugins.module_utils._project_manifest import kind

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque", "user.fuseoverlayfs.opaque")
OPAQUE_FILE = ".wh..wh..opq"
WHITEOUT_PREFIX = ".wh."
# An upper file the kernel fills from the lower one on read: its own data is not the file.
METACOPY_XATTRS = ("user.overlay.metacopy", "trusted.overlay.metacopy")
PERMISSIONS = 0o777
EXECUTE = 0o111
SET_ID = 0o7000
APPLYING_PREFIX = ".aisb-apply-"

# Why a path is flagged, by the name of any directory on its way (at any depth: a nested
# repository's .git runs hooks as well).
FLAGGED_DIRECTORIES = {
    ".git": "git runs hooks and commands named in its configuration",
    ".husky": "git hooks (husky)",
    ".vscode": "VS Code runs tasks and reads settings from it when the folder opens",
    ".idea": "JetBrains IDEs run configurations and tools named in it",
    ".devcontainer": "dev container definitions run on the host's container engine",
    ".cargo": "cargo's configuration names runners and compiler wrappers",
    ".mvn": "Maven's wrapper and JVM options",
}
# ... by a directory pair on its way.
FLAGGED_SUBDIRECTORIES = {
    (".github", "workflows"): "CI workflows run with the repository's secrets when pushed",
    (".github", "actions"): "CI actions run with the repository's secrets when pushed",
}
# ... by its own name, in any directory.
FLAGGED_NAMES = {
    ".envrc": "direnv runs it on cd",
    ".env": "direnv, docker compose and others load it into the environment",
    "Makefile": "make runs it", "makefile": "make runs it", "GNUmakefile": "make runs it",
    "justfile": "just runs it", "Justfile": "just runs it", "Rakefile": "rake runs it",
    ".gitattributes": "selects git's filter and diff drivers",
    ".gitmodules": "submodule URLs and update commands",
    ".lfsconfig": "git-lfs configuration",
    ".pre-commit-config.yaml": "pre-commit runs its hooks on git commit",
    "pyproject.toml": "Python build backends and tool configuration run on install and test",
    "setup.py": "runs on install", "setup.cfg": "Python build configuration",
    "conftest.py": "pytest imports it", "tox.ini": "tox runs its commands",
    "noxfile.py": "nox runs it",
    ".npmrc": "npm configuration (script-shell, node-options)",
    ".yarnrc": "yarn configuration", ".yarnrc.yml": "yarnPath runs a file on every yarn command",
    ".pnpmfile.cjs": "pnpm runs it on install",
    ".tool-versions": "version managers pick the tools run here",
    ".mise.toml": "mise runs its hooks and sets the environment on cd",
    "mise.toml": "mise runs its hooks and sets the environment on cd",
    ".nvmrc": "picks the node run here", ".python-version": "picks the python run here",
    "build.rs": "cargo runs it on build", "gradlew": "the Gradle wrapper runs it",
    "mvnw": "the Maven wrapper runs it", "build.gradle": "Gradle runs it",
    "build.gradle.kts": "Gradle runs it", "settings.gradle": "Gradle runs it",
    "settings.gradle.kts": "Gradle runs it", "gradle-wrapper.properties": "names the Gradle the wrapper downloads",
    ".gitlab-ci.yml": "CI jobs run with the repository's secrets when pushed",
}
FLAGGED_SUFFIXES = {
    ".desktop": "a desktop entry runs its command when opened",
    ".mk": "make includes it",
}


class ReviewError(Exception):
    """The upper directory or the project cannot be reviewed or applied as asked."""


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
    (the agent may leave a file it cannot read itself: applying it then says why)."""
    try:
        if os.lstat(lower_path).st_size != size:
            return False
        with open(upper_path, "rb") as upper, open(lower_path, "rb") as lower:
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


def _scripts(path):
    """package.json's scripts, or None when it is not a JSON object."""
    try:
        with open(path, "rb") as handle:
            document = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return document.get("scripts") if isinstance(document, dict) else None


def _link_escapes(path, target):
    """True when a link at PATH to TARGET may lead out of the project: TARGET is absolute,
    climbs above the project, or goes down and back up ("x/.."), where it lands depends on
    whether x is a link itself. Climbing first ("../lib") passes only through the link's
    own parent directories, which are real directories of the project."""
    if target.startswith("/"):
        return True
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        return True
    parts = [part for part in target.split("/") if part not in ("", ".")]
    return any(part == ".." and any(before != ".." for before in parts[:index]) for index, part in enumerate(parts))


def flags(item, upper, project):
    """Why ITEM needs the user's explicit word before it reaches the project (a list of
    reasons; empty when it does not)."""
    path = item["path"]
    parts = path.split("/")
    reasons = [FLAGGED_DIRECTORIES[part] + " (%s)" % part for part in parts if part in FLAGGED_DIRECTORIES]
    reasons += [why for pair, why in FLAGGED_SUBDIRECTORIES.items()
                if any(tuple(parts[i:i + 2]) == pair for i in range(len(parts) - 1))]
    if parts[-1] in FLAGGED_NAMES:
        reasons.append(FLAGGED_NAMES[parts[-1]])
    reasons += [why for suffix, why in FLAGGED_SUFFIXES.items() if parts[-1].endswith(suffix)]
    if item["change"] == "deleted":
        return reasons
    if parts[-1].startswith(WHITEOUT_PREFIX):
        reasons.append("named like an overlay whiteout (.wh.NAME): fuse-overlayfs marks a deletion of NAME so")
    mode = int(item["mode"], 8)
    was = item.get("was") or {}
    if item["type"] == "special":
        reasons.append("a device, fifo or socket: never applied")
    if item["type"] == "file":
        if was.get("type") != "file" and mode & EXECUTE:
            reasons.append("a new executable file")
        elif was.get("type") == "file" and (int(was["mode"], 8) ^ mode) & EXECUTE:
            reasons.append("its exec bit changed")
        if parts[-1] == "package.json":
            new = _scripts(os.path.join(upper, path))
            old = _scripts(os.path.join(project, path)) if was.get("type") == "file" else None
            if new != old:
                reasons.append("package.json scripts changed (npm runs them on install)")
    if mode & SET_ID and item["type"] != "symlink":
        reasons.append("setuid, setgid or sticky bit (applied without it)")
    if item["type"] == "symlink" and _link_escapes(path, item["target"]):
        reasons.append("a symbolic link pointing out of the project (%s)" % item["target"])
    return reasons


def changes(upper, project):
    """Every path the upper directory adds, changes or deletes in PROJECT, in path order,
    each with its flags. A file copied up but left as it was is no change."""
    out, links = [], {}
    _walk(upper, project, "", out, links, False)
    # A hard link to a file outside the upper directory: its data is someone else's file.
    foreign = set(path for paths in links.values() for path, count in paths if count > len(paths))
    for item in out:
        item["flags"] = flags(item, upper, project)
        if item["path"] in foreign:
            item["flags"].append("a hard link to a file outside the session's upper directory")
    return sorted(out, key=lambda item: item["path"].split("/"))


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
    or a directory above it is NAMED; devices, fifos and sockets never.

    Removals go first, deepest first; then files, links and directories, parents first.
    A path that cannot be applied (its directory held back, a directory not empty because
    something under it was held back, a symbolic link where a directory was) is held with
    the reason; the rest goes on. Returns {"applied": [paths], "held": [{path, why}]}.
    """
    chosen, held = [], []
    for item in items:
        if item["type"] == "special" and item["change"] != "deleted":
            held.append({"path": item["path"], "why": "a device, fifo or socket is never applied"})
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


def text_diff(upper, project, item, limit=1 << 18):
    """A unified diff of ITEM (a regular file added, changed or deleted), or one line
    saying why there is none (binary, larger than LIMIT bytes, not a file)."""
    path = item["path"]
    if item["type"] != "file":
        return "%s %s %s\n" % (item["change"], item["type"], path)
    was_file = item["change"] == "deleted" or (item.get("was") or {}).get("type") == "file"
    old = _text(os.path.join(project, path), limit) if was_file else []
    new = _text(os.path.join(upper, path), limit) if item["change"] != "deleted" else []
    if old is None or new is None:
        return "%s %s: binary, unreadable or over %d bytes\n" % (item["change"], path, limit)
    return "".join(difflib.unified_diff(old, new, "a/" + path, "b/" + path))
