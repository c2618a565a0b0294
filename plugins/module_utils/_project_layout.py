# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's git layout as read from the host's filesystem: every git directory,
every .git file or link in the project, and the text of every configuration file git
would read for them. Nothing from the project is run (git itself would run what the
configuration names); _project_guard decides from what this returns.
"""

import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils import _git_config

# At most this much of a .git file or a config file is read: a pointer is one line, and
# a configuration git reads is small; a huge one is refused by the guard as unreadable.
MAX_READ = 1 << 20
# The walk's bounds: a project deeper or larger than this is refused (naming where the
# walk stopped), never walked in part. Far beyond real trees (node_modules nests a few
# dozen levels); an agent's 1,100-level directory stops here instead of in a traceback.
MAX_DEPTH = 256
MAX_ENTRIES = 2000000


def read(project, home, environ):
    """The layout of PROJECT (an absolute, resolved directory) for _project_guard:

    root, home; gitdirs {relative path: {"entries": [names], "commondir": text or None,
    "head": kind of its HEAD}}; gitfiles {relative path of a .git file: its text}; links
    [relative paths of .git symbolic links]; unreadable [(relative path, why)] of the
    directories that could not be listed; bound None, or (relative path, what) when the
    walk stopped at MAX_DEPTH or MAX_ENTRIES; global_configs [the system and global files
    git reads first, in its order]; configs {absolute path: text or None if unreadable}
    for every configuration file those name or include, each repository's own included.
    """
    layout = {"root": project, "home": home, "gitdirs": {}, "gitfiles": {}, "links": [], "unreadable": [],
              "bound": None, "global_configs": global_configs(home, environ), "configs": {}}
    _walk(project, layout)
    for relative in layout["gitdirs"]:
        for name in ("config", "config.worktree"):
            _read_config(os.path.normpath(os.path.join(project, relative, name)), home, layout["configs"], 0)
    for path in layout["global_configs"]:
        _read_config(path, home, layout["configs"], 0)
    return layout


def global_configs(home, environ):
    """The files git reads before a repository's own (git-config(1), FILES)."""
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return ["/etc/gitconfig", os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]


def kind(path):
    """"file", "dir", "link", "other" or None (absent) for PATH, without following a link."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"


def _walk(top, layout):
    """Record git directories and .git entries under TOP, depth first without recursion.
    In a git directory only modules/ and worktrees/ can hold others: its objects are not
    walked. Stops (LAYOUT's bound) past MAX_DEPTH levels or MAX_ENTRIES entries."""
    pending, seen = [("", False, 0)], 0
    while pending:
        relative, inside_gitdir, depth = pending.pop()
        if depth > MAX_DEPTH:
            layout["bound"] = (relative, "more than %d directories deep" % MAX_DEPTH)
            return
        try:
            with os.scandir(os.path.join(top, relative)) as listing:
                entries = list(listing)
        except OSError as error:
            layout["unreadable"].append((relative or ".", error.strerror or str(error)))
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            layout["bound"] = (relative or ".", "the walk passed %d entries here" % MAX_ENTRIES)
            return
        names = dict((entry.name, entry) for entry in entries)
        if looks_like_gitdir(relative, names):
            layout["gitdirs"][relative or "."] = {
                "entries": sorted(names), "head": kind(names["HEAD"].path) if "HEAD" in names else None,
                "commondir": _read_text(os.path.join(top, relative, "commondir")) if "commondir" in names else None}
            pending += [(os.path.join(relative, name), True, depth + 1) for name in ("modules", "worktrees")
                        if name in names and names[name].is_dir(follow_symlinks=False)]
            continue
        dot_git = names.get(".git")
        if dot_git is not None and not inside_gitdir:
            if dot_git.is_symlink():
                layout["links"].append(os.path.join(relative, ".git"))
            elif dot_git.is_file(follow_symlinks=False):
                layout["gitfiles"][os.path.join(relative, ".git")] = _read_text(dot_git.path)
        pending += [(os.path.join(relative, entry.name), inside_gitdir, depth + 1) for entry in entries
                    if entry.is_dir(follow_symlinks=False)]


def looks_like_gitdir(relative, names):
    """A directory named .git, or what git's is_git_directory() asks of one: a HEAD
    (of any kind: git follows a symbolic link) and objects and refs here, or a
    commondir file naming where they are."""
    if os.path.basename(relative) == ".git":
        return True
    return "HEAD" in names and ("commondir" in names or ("objects" in names and "refs" in names))


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_READ).decode("utf-8", "replace")
    except OSError:
        return None


def _read_config(path, home, configs, depth):
    """Read PATH and, recursively, the files its includes name into CONFIGS."""
    if path in configs or depth > _git_config.MAX_INCLUDE_DEPTH or kind(path) != "file":
        return
    configs[path] = text = _read_text(path)
    try:
        entries = _git_config.parse(text or "")
    except _git_config.ConfigSyntaxError:
        return
    for key, value in entries:
        if _git_config.is_include(key) and value:
            _read_config(_git_config.include_target(value, path, home), home, configs, depth + 1)
