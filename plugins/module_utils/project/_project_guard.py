# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Keeps what the host's git runs out of the agent's reach: from the project's git
layout (_project_layout.read), the git directories the sandbox sees whole through an
overlay, the paths it sees read-only and the ones that cannot be protected (a refusal);
after the session, the repositories the agent created, which the host's git would take
commands from.

Pure: the filesystem is seen only through the layout and KIND(path) ("file", "dir",
"link", "other" or None). docs/security.md ("The project's git") says why each vector
is protected, refused or reported.
"""

import os
import re
import shlex

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _git_config

# Keys whose value is a command git runs by itself during everyday use (status, diff,
# log, add, commit, checkout, fetch, pull, push), from git-config(1); "*" is any
# subsection or name. A path inside the project in such a value is protected too.
# Not here: commands run only when the developer names them (alias.*, difftool,
# mergetool, sendemail, imap, web.browser, man, guitool): like a Makefile, on purpose.
COMMAND_KEYS = frozenset([
    ("core", None, "fsmonitor"), ("core", None, "pager"), ("core", None, "editor"),
    ("core", None, "sshcommand"), ("core", None, "askpass"), ("core", None, "gitproxy"),
    ("sequence", None, "editor"), ("pager", None, "*"), ("interactive", None, "difffilter"),
    ("diff", None, "external"), ("diff", "*", "command"), ("diff", "*", "textconv"),
    ("merge", "*", "driver"), ("filter", "*", "clean"), ("filter", "*", "smudge"), ("filter", "*", "process"),
    ("credential", None, "helper"), ("credential", "*", "helper"),
    ("core", None, "alternaterefscommand"), ("uploadpack", None, "packobjectshook"),
    ("gpg", None, "program"), ("gpg", "*", "program"), ("gpg", "ssh", "defaultkeycommand"),
    ("remote", "*", "uploadpack"), ("remote", "*", "receivepack"), ("submodule", "*", "update"),
    ("trailer", "*", "command"), ("trailer", "*", "cmd"),
    # git-lfs: custom transfer agents and extensions (lfs.customtransfer.<name>.path).
    ("lfs", "*", "path"), ("lfs", "*", "clean"), ("lfs", "*", "smudge"),
])
# Keys whose value is a path: a directory git runs files from or copies them from, or
# a file that selects the filter and diff drivers git runs.
HOOKS_PATH = ("core", None, "hookspath")
_KIND_NAMES = {"link": "symbolic link", "dir": "directory", "other": "special file"}
PATH_KEYS = frozenset([HOOKS_PATH, ("init", None, "templatedir"), ("core", None, "attributesfile")])
# What the shell does to a command's text before a word reaches a program: quoting
# characters go (c'o'nv.sh is conv.sh) and words split at blanks and operators; '=', ':'
# and ',' split too, for --option=FILE and lists of paths.
QUOTING = re.compile(r"[\"'\\]")
SEPARATORS = re.compile(r"([\s;&|<>()`=:,{}$]+)")
# Separators after which a word is a program's name (looked up in PATH), not its argument.
OPERATORS = re.compile(r"[;&|()`]")
VARIABLE = re.compile(r"\$(\{)?([A-Za-z_][A-Za-z0-9_]*)(?(1)\})")
# $PWD is where git runs the command (BASE), $HOME the developer's home; any other
# variable is an unknown directory (UNKNOWN), whose word may still name a project file.
KNOWN_VARIABLES = {"PWD": ".", "HOME": "~"}
UNKNOWN = "\0"
GLOB = re.compile(r"[*?]|\[.*\]")
# A bare word ending so names a script an interpreter opens (sh conv.sh): one that does
# not exist yet is refused like a path. Other bare words (less -R, git-lfs clean) are
# protected when they name a file.
SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".py", ".pl", ".rb", ".js", ".mjs", ".cjs", ".ts", ".php", ".lua",
                   ".tcl", ".awk", ".sed", ".jar")
# How a named path counts: NAMED must exist (else refused), IF_FILE is protected when it
# is a file, PATTERN (a shell glob) is refused: what it matches changes with the agent's files.
NAMED, IF_FILE, PATTERN = "named", "if-file", "pattern"
# podman's --volume splits at these; a path holding one cannot be mounted on its own.
UNMOUNTABLE = (":", ",", "\n")


def plan(layout, kind):
    """{"gitdirs": [...], "read_only": [...], "pinned": [...], "refusals": [...]}: paths
    relative to the project. GITDIRS are the git directories the sandbox sees whole
    through an overlay (the host's directory its lower layer, never written): every one
    not inside another. READ_ONLY are mounted read-only over themselves (.git files, what
    a configuration names in the worktree); PINNED are directories on the way to both,
    each bound over itself (writable) so that it cannot be renamed or removed: renaming a
    directory that holds a mount point is allowed, renaming a mount point is not (EBUSY).
    REFUSALS: one sentence each; the session must not start."""
    root = layout["root"]
    protect, refusals = set(), layout_refusals(layout)
    for link in layout["links"]:
        refusals.append("%s is a symbolic link: the agent could replace it with a git directory of its own, "
                        "which the host's git would use; make it a directory or a .git file" % link)
    for path, text in sorted(layout["gitfiles"].items()):
        protect.add(path)
        refusals += _gitfile_refusals(layout, path, text)
    for gitdir, info in sorted(layout["gitdirs"].items()):
        refusals += _gitdir_refusals(layout, gitdir, info, kind)
    named, named_refusals = git_reads(layout, kind)
    protect.update(named)
    refusals += named_refusals
    gitdirs = set(layout["gitdirs"]) - {"."}
    outermost, pinned = _mount_points(protect | gitdirs)
    for path in outermost + pinned:
        refusals += _mount_refusals(root, path, kind)
    if "." in layout["gitdirs"]:
        refusals.append("the project is itself a git directory (a bare repository): the agent would write to it "
                        "directly; start the session on a worktree of it instead")
    return {"gitdirs": [p for p in outermost if p in gitdirs], "read_only": [p for p in outermost if p not in gitdirs],
            "pinned": pinned, "refusals": _unique(refusals)}


def layout_refusals(layout):
    """What kept the walk from seeing the whole project, one sentence each."""
    refusals = ["%s cannot be read (%s): whether it holds a git repository is not known; make it readable "
                "(chmod u+rx) or remove it" % (path, why) for path, why in layout["unreadable"]]
    if layout["bound"]:
        path, what = layout["bound"]
        refusals.append("%s: %s, so the project is not read whole; remove or flatten that directory" % (path, what))
    return refusals


def git_reads(layout, kind):
    """(paths, refusals): every path inside the project (relative to it) that the host's
    git reads as configuration or runs because a configuration names it (an included
    file, a hooks or template directory, a file a command's words name), for every
    repository of LAYOUT with the developer's system, global and environment
    configuration; a named path that does not exist is refused. The one rule of both
    modes: direct mode mounts these read-only, review mode flags a change to them."""
    host, refusals = _entries(layout, layout["global_configs"], layout.get("command_line", ()))
    refusals = list(layout.get("config_refusals", ())) + refusals
    paths = set()
    # The developer's own file inside the project (GIT_CONFIG_GLOBAL=$PWD/.gitconfig).
    for path in layout["global_configs"]:
        inside = _inside(layout["root"], path)
        if inside is not None and kind(path) is None:
            refusals.append("the developer's git configuration %s is inside the project and does not exist: the "
                            "agent could create it and the host's git would read it; create it or point "
                            "GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM or XDG_CONFIG_HOME outside the project" % path)
        elif inside is not None:
            paths.add(inside)
    for gitdir, info in sorted(layout["gitdirs"].items()):
        entries, entry_refusals = _repository_entries(layout, gitdir, info)
        named, named_refusals = _named_in_project(layout, host + entries,
                                                  _worktree(layout["root"], gitdir, entries), kind)
        paths.update(named)
        refusals += entry_refusals + named_refusals
    return paths, refusals


def _repository_entries(layout, gitdir, info):
    """([(key, value, file)], refusals) of GITDIR's own configuration: config, its
    includes and, with extensions.worktreeConfig, config.worktree."""
    files = [os.path.normpath(os.path.join(layout["root"], gitdir, "config"))]
    entries, refusals = _entries(layout, files)
    if not _worktree_config(entries) or "config.worktree" not in info["entries"]:
        return entries, refusals
    return _entries(layout, files + [os.path.normpath(os.path.join(layout["root"], gitdir, "config.worktree"))])


def _named_in_project(layout, entries, base, kind):
    """(paths, refusals): what ENTRIES make git read or run inside the project (BASE:
    where git runs for this repository); a named path that does not exist is refused."""
    paths, refusals = set(), []
    for key, value, source in entries:
        for path, how in _named_paths(key, value, source, base, layout["home"]):
            inside = _inside(layout["root"], path)
            if inside is None or (how == IF_FILE and kind(path) != "file"):
                continue
            if how == PATTERN:
                refusals.append("%s (in %s) names files inside the project by a pattern (%s): what it matches "
                                "changes with the agent's files, and the host's git would run them; name the "
                                "files or point %s outside the project" % (key, source, inside, key))
                continue
            if kind(path) is None:
                refusals.append("%s (in %s) names %s inside the project, which does not exist: the agent could "
                                "create it and the host's git would run it; create it or point %s outside the "
                                "project" % (key, source, inside, key))
                continue
            paths.add(inside)
            if _is_key(key, [HOOKS_PATH]) and os.path.basename(inside) == "_":
                # husky's layout: the hooks in .husky/_ run the scripts in .husky/.
                paths.add(os.path.dirname(inside))
    return paths, refusals


def _gitfile_refusals(layout, path, text):
    """A .git file points at the git directory (gitdir: DIR). One inside the project that
    is not a git directory could be created by the agent."""
    if not (text or "").startswith("gitdir: "):
        return ["%s is a .git file that does not start with 'gitdir: ': git would refuse it" % path]
    target = os.path.join(layout["root"], os.path.dirname(path), text[len("gitdir: "):].strip())
    inside = _inside(layout["root"], os.path.normpath(target))
    if inside is not None and inside not in layout["gitdirs"]:
        return ["%s points at %s inside the project, which is not a git directory: the agent could make one "
                "there and the host's git would use it" % (path, inside)]
    return []


def _gitdir_refusals(layout, gitdir, info, kind):
    refusals = []
    if info["head"] not in (None, "file"):
        refusals.append("%s/HEAD is a %s, not the file git writes: the host's git would still use this repository "
                        "but the session would not read it as git does; replace it with a file (echo 'ref: "
                        "refs/heads/main' > %s/HEAD)" % (gitdir, _KIND_NAMES.get(info["head"], info["head"]), gitdir))
    for name in ("modules", "worktrees"):
        if name in info["entries"] and kind(os.path.join(layout["root"], gitdir, name)) == "link":
            refusals.append("%s/%s is a symbolic link: the host's git would use the git directories where it "
                            "points; replace it with the directory it points at" % (gitdir, name))
    if info["commondir"] is not None and not _is_worktree_gitdir(layout, gitdir):
        refusals.append("%s/commondir exists: git would take this repository's configuration from %r, and git "
                        "writes a commondir only for a linked worktree (under .git/worktrees/); remove it"
                        % (gitdir, info["commondir"].strip()))
    return refusals


def _is_worktree_gitdir(layout, gitdir):
    parent = os.path.dirname(gitdir)
    return os.path.basename(parent) == "worktrees" and os.path.dirname(parent) in layout["gitdirs"]


def _worktree_config(entries):
    values = [value for key, value, _source in entries if key == "extensions.worktreeconfig"]
    return bool(values) and (values[-1] is None or values[-1].lower() in ("true", "yes", "on", "1"))


def _entries(layout, files, command_line=()):
    """([(key, value, source)], refusals) of FILES and the files they include, in git's
    order, then COMMAND_LINE's entries (source: _git_config.COMMAND_LINE) and what they
    include; a missing file has no entries."""
    entries, refusals = [], []

    def add(key, value, source, depth):
        entries.append((key, value, source))
        if _git_config.is_include(key) and value:
            read(_git_config.include_target(value, source, layout["home"]), depth + 1)

    def read(path, depth):
        if path not in layout["configs"] or depth > _git_config.MAX_INCLUDE_DEPTH:
            return
        try:
            parsed = _git_config.parse(layout["configs"][path] or "")
        except _git_config.ConfigSyntaxError as error:
            refusals.append("%s cannot be read as a git configuration (%s), so what it makes git run is not "
                            "known" % (path, error))
            return
        for key, value in parsed:
            add(key, value, path, depth)

    for path in files:
        read(path, 0)
    for key, value in command_line:
        add(key, value, _git_config.COMMAND_LINE, 0)
    return entries, refusals


def _worktree(root, gitdir, entries):
    """Where git runs for the repository in GITDIR: the directory holding .git, the
    configured core.worktree, or (bare) the git directory itself."""
    if os.path.basename(gitdir) == ".git":
        return os.path.normpath(os.path.join(root, os.path.dirname(gitdir)))
    worktrees = [value for key, value, _source in entries if key == "core.worktree" and value]
    return os.path.normpath(os.path.join(root, gitdir, worktrees[-1] if worktrees else ""))


def _section_name(key):
    """(section, subsection or None, name) of a parsed KEY."""
    section, _dot, rest = key.partition(".")
    subsection, _dot, name = rest.rpartition(".")
    return section, subsection or None, name


def _is_key(key, patterns):
    section, subsection, name = _section_name(key)
    return any(section == p_section and (subsection is None) == (p_subsection is None)
               and p_subsection in ("*", subsection) and p_name in ("*", name)
               for p_section, p_subsection, p_name in patterns)


def _named_paths(key, value, source, base, home):
    """[(absolute path, how)]: what an entry makes git read or run (how: NAMED, IF_FILE
    or PATTERN): an include's file, a hooks or template directory, and every word of a
    command (command_words; a relative one taken from BASE, where git runs it)."""
    if value is None:
        return []
    if _git_config.is_include(key):
        target = _git_config.include_target(value, source, home)
        return [(target, NAMED)] if target else []
    if _is_key(key, PATH_KEYS):
        words = [(value, NAMED)]
    elif _is_key(key, COMMAND_KEYS):
        words = command_words(value.lstrip("!"))
    else:
        return []
    resolved = [(_resolve(word, base, home), how) for word, how in words]
    return [(path, how) for path, how in resolved if path is not None]


def command_words(command):
    """[(word, how)]: every word of COMMAND that may name a file, as the shell would
    see it at any depth (sh -c 'sh conv.sh', --file=conv.sh, "$(cat ./x)", `./x`): the
    text with every quote dropped and every operator a separator, and a quoted word
    holding blanks ("my conv.sh") as a whole. $PWD is where the command runs; a word
    after another variable names a file relative to an unknown directory. A word with
    '/' or a leading '.' or '~' is NAMED, and so is a script's name (SCRIPT_SUFFIXES)
    given to a program (not the program itself, which is looked up in PATH); a glob is
    a PATTERN; any other word is protected when it is a project's file (IF_FILE).
    Options (-x) are not words here."""
    text = VARIABLE.sub(lambda match: KNOWN_VARIABLES.get(match.group(2), UNKNOWN), command)
    try:
        quoted = [(word, IF_FILE) for word in shlex.split(text) if len(word.split()) > 1 and UNKNOWN not in word]
    except ValueError:
        quoted = []
    parts = SEPARATORS.split(QUOTING.sub("", " " + text))
    found = []
    # PARTS alternates separator and word: a word starts a command after an operator or -c.
    for index in range(2, len(parts), 2):
        word = parts[index]
        starts = index == 2 or bool(OPERATORS.search(parts[index - 1])) or parts[index - 2] == "-c"
        if UNKNOWN in word:
            word, how = word.rsplit(UNKNOWN, 1)[1].lstrip("/"), IF_FILE
        elif GLOB.search(word):
            how = PATTERN
        elif "/" in word or word.startswith((".", "~")) or (word.endswith(SCRIPT_SUFFIXES) and not starts):
            how = NAMED
        else:
            how = IF_FILE
        # Options are not files; ".", ".." and "/" name directories, not a file to run.
        if word.strip("./") and not word.startswith("-") and (word, how) not in found:
            found.append((word, how))
    return found + [item for item in quoted if item not in found]


def _resolve(value, base, home):
    """The absolute path a path VALUE names where git runs in BASE, or None (an unknown ~user)."""
    path = _git_config.expand_path(value, home)
    return None if path is None else os.path.normpath(os.path.join(base, path))


def _inside(root, path):
    """PATH relative to ROOT when it is strictly inside it, else None."""
    relative = os.path.relpath(path, root)
    if relative == "." or relative == ".." or relative.startswith("../"):
        return None
    return relative


def _mount_points(protect):
    """(read_only, pinned): PROTECT without paths already under a protected directory,
    and every directory on the way to them that is not protected itself."""
    read_only = sorted(p for p in protect if not any(p.startswith(other + "/") for other in protect))
    pinned = set()
    for path in read_only:
        parent = os.path.dirname(path)
        while parent and parent not in protect:
            pinned.add(parent)
            parent = os.path.dirname(parent)
    return read_only, sorted(pinned)


def _mount_refusals(root, path, kind):
    if any(char in path for char in UNMOUNTABLE):
        return ["%r holds ':', ',' or a newline, so podman cannot mount it read-only; rename it" % path]
    if kind(os.path.join(root, path)) == "link":
        return ["%s is a symbolic link: a mount would protect where it points, and the agent could point it "
                "elsewhere; replace it with what it points at" % path]
    return []


def _unique(items):
    return sorted(set(items), key=items.index)


def snapshot(layout):
    """What findings() compares: the git directories, .git files and links, and where
    the walk could not see."""
    unseen = [(path, "cannot be read (%s): repositories in it are not known" % why)
              for path, why in layout["unreadable"]]
    if layout["bound"]:
        path, what = layout["bound"]
        unseen.append((path, "%s: repositories beyond it are not known" % what))
    return {"gitdirs": sorted(layout["gitdirs"]), "gitfiles": sorted(layout["gitfiles"]),
            "links": sorted(layout["links"]), "unseen": unseen}


def findings(before, after):
    """The repositories the agent made, which the host's git would take configuration and
    commands from when run in or below them, and where the walk could not see after the
    session: [{"path", "what"}], sorted by path. BEFORE and AFTER are snapshot()s."""
    found = [{"path": path, "what": "a new git directory: git run in or below its worktree takes its "
                                    "configuration and hooks from it"}
             for path in sorted(set(after["gitdirs"]) - set(before["gitdirs"]))]
    found += [{"path": path, "what": "a new .git file: git run below it uses the git directory it names"}
              for path in sorted(set(after["gitfiles"]) - set(before["gitfiles"]))]
    found += [{"path": path, "what": "a new .git link: git run below it uses the directory it points at"}
              for path in sorted(set(after["links"]) - set(before["links"]))]
    found += [{"path": path, "what": what} for path, what in after["unseen"]]
    return sorted(found, key=lambda finding: finding["path"])
