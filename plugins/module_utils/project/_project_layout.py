# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's git layout as read from the host's filesystem: every git directory,
every .git file or link in the project, and the text of every configuration file git
would read for them. Nothing from the project is run (git itself would run what the
configuration names); _project_guard decides from what this returns.
"""

import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _git_config

# At most this much of a .git file or a config file is read: a pointer is one line, and
# a configuration git reads is small; a huge one is refused by the guard as unreadable.
MAX_READ = 1 << 20
# The walk's bounds: a project deeper or larger than this is refused (naming where the
# walk stopped), never walked in part. Far beyond real trees (node_modules nests a few
# dozen levels); an agent's 1,100-level directory stops here instead of in a traceback.
MAX_DEPTH = 256
MAX_ENTRIES = 2000000
# Debian's git's system configuration (git's ETC_GITCONFIG).
SYSTEM_CONFIG = "/etc/gitconfig"


def read(project, home, environ):
    """The layout of PROJECT (an absolute, resolved directory) for _project_guard:

    root, home; gitdirs {relative path: {"entries": [names], "commondir": text or None,
    "head": kind of its HEAD}}; gitfiles {relative path of a .git file: its text}; links
    [relative paths of .git symbolic links]; unreadable [(relative path, why)] of the
    directories that could not be listed; bound None, or (relative path, what) when the
    walk stopped at MAX_DEPTH or MAX_ENTRIES; global_configs [the system and global files
    git reads first, in its order]; command_line [(key, value) git takes from the
    environment]; config_refusals [sentences: the environment names a configuration git
    would look for in whatever directory it runs in]; configs {absolute path: text or
    None if unreadable} for every configuration file those name or include, each
    repository's own included.
    """
    files, refusals = global_configs(home, environ)
    layout = {"root": project, "home": home, "gitdirs": {}, "gitfiles": {}, "links": [], "unreadable": [],
              "bound": None, "global_configs": files, "command_line": _git_config.command_line(environ),
              "config_refusals": refusals, "configs": {}}
    _walk(project, layout)
    _read_configs(layout, _on_host)
    return layout


def _read_configs(layout, locate):
    """Every configuration file of LAYOUT and what it includes into layout["configs"],
    each read where LOCATE(path) says it is (None: absent)."""
    for relative in layout["gitdirs"]:
        for name in ("config", "config.worktree"):
            _read_config(os.path.normpath(os.path.join(layout["root"], relative, name)), layout, locate, 0)
    for path in layout["global_configs"]:
        _read_config(path, layout, locate, 0)
    for key, value in layout["command_line"]:
        if _git_config.is_include(key) and value:
            _read_config(_git_config.include_target(value, _git_config.COMMAND_LINE, layout["home"]), layout,
                         locate, 0)


def _on_host(path):
    return path


def overlaid(layout, upper):
    """(layout, kind) of the project as it would be with a review session's UPPER
    directory applied over it: the same repositories (with the entries UPPER adds to
    them, config.worktree say), each configuration file and each path's kind taken
    from UPPER where it holds one (a whiteout: absent)."""
    root = layout["root"]

    def locate(path):
        relative = os.path.relpath(path, root)
        if relative == ".." or relative.startswith("../"):
            return path
        above = os.path.join(upper, relative)
        try:
            info = os.lstat(above)
        except OSError:
            return path
        return None if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0 else above

    def merged_kind(path):
        where = locate(path)
        return None if where is None else kind(where)

    gitdirs = {}
    for relative, info in layout["gitdirs"].items():
        names = [name for name in _names(os.path.join(upper, relative))
                 if merged_kind(os.path.join(root, relative, name)) is not None]
        gitdirs[relative] = dict(info, entries=sorted(set(info["entries"]) | set(names)))
    merged = dict(layout, gitdirs=gitdirs, configs={})
    _read_configs(merged, locate)
    return merged, merged_kind


def _names(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def global_configs(home, environ):
    """([files], refusals): the files git reads before a repository's own, as git reads
    ENVIRON (git-config(1), FILES and ENVIRONMENT): the system file unless
    GIT_CONFIG_NOSYSTEM is true, GIT_CONFIG_SYSTEM in place of /etc/gitconfig;
    GIT_CONFIG_GLOBAL in place of both global files, else $XDG_CONFIG_HOME/git/config
    and ~/.gitconfig. A relative one is read by git from wherever it runs: refused."""
    files = []
    if (environ.get("GIT_CONFIG_NOSYSTEM") or "").strip().lower() not in ("true", "yes", "on", "1"):
        files.append(environ.get("GIT_CONFIG_SYSTEM", SYSTEM_CONFIG))
    if "GIT_CONFIG_GLOBAL" in environ:
        files.append(environ["GIT_CONFIG_GLOBAL"])
    else:
        xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]
    refusals = ["%s names %r, a relative path: git reads it relative to whatever directory it runs in, so "
                "the file cannot be known; make it absolute" % (name, environ[name])
                for name in ("GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME")
                if environ.get(name) and not os.path.isabs(environ[name])]
    return [os.path.normpath(path) for path in files if os.path.isabs(path)], refusals


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


def _read_config(path, layout, locate, depth):
    """Read PATH and, recursively, the files its includes name into layout["configs"]."""
    configs = layout["configs"]
    if path is None or path in configs or depth > _git_config.MAX_INCLUDE_DEPTH:
        return
    where = locate(path)
    if where is None or kind(where) != "file":
        return
    configs[path] = text = _read_text(where)
    try:
        entries = _git_config.parse(text or "")
    except _git_config.ConfigSyntaxError:
        return
    for key, value in entries:
        if _git_config.is_include(key) and value:
            _read_config(_git_config.include_target(value, path, layout["home"]), layout, locate, depth + 1)
