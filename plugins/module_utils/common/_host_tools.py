# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The programs the collection runs on the host: each one resolved to an absolute path
in the system's directories, never through a PATH the developer's shell or the project
shapes (direnv's PATH_add bin, node_modules/.bin), and refused with a sentence when it
is not there.

SYSTEM_DIRS are the distribution's: root's, written by the package manager alone.
/usr/local/* is left out: nothing of the distribution's lives there, Debian historically
makes it writable by the staff group, and an install there (make install, sudo pip) is
no package the distribution vouches for. A program found is still checked: its real file
and every directory above it must be root's and writable by root alone, so nobody but
root could have put it there or can replace it.
"""

from __future__ import annotations

import os
import shutil

SYSTEM_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
SYSTEM_PATH = ":".join(SYSTEM_DIRS)
# Group and others' write bits: a file or directory with either is not root's alone.
SHARED_WRITE = 0o022
# podman searches this directory before helper_binaries_dir for conmon, pasta, netavark,
# ... (containers.conf(5); go.podman.io/common's FindHelperBinary): never passed on.
HELPER_DIR_VARIABLE = "CONTAINERS_HELPER_BINARY_DIR"
# What the host facts record (besides podman): what a session runs on the host (the
# shell that hands podman the sandbox's pipes, setpriv, the enforcement watch's nsenter
# and nft) and pasta, whose version the facts' fingerprint reads.
RECORDED = ("bash", "setpriv", "nsenter", "nft", "pasta")


def not_root_alone(path):
    """Why PATH's real file, or a directory above it, could be changed by someone other
    than root (a sentence), or None when every one of them is root's alone."""
    current = os.path.realpath(path)
    while True:
        info = os.stat(current)
        if info.st_uid != 0:
            return "%s is owned by uid %d, not root" % (current, info.st_uid)
        if info.st_mode & SHARED_WRITE:
            return "%s is writable by its group or others (mode %o)" % (current, info.st_mode & 0o7777)
        if current == "/":
            return None
        current = os.path.dirname(current)


def _candidates(name):
    if os.path.isabs(name):
        return [name] if os.path.dirname(os.path.normpath(name)) in SYSTEM_DIRS else []
    return [] if "/" in name else [os.path.join(directory, name) for directory in SYSTEM_DIRS]


def resolve(name):
    """(absolute path, None) for the program NAME (a name, or an absolute path in one of
    SYSTEM_DIRS) found in SYSTEM_DIRS and root's alone; else (None, one sentence)."""
    for candidate in _candidates(name):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            why = not_root_alone(candidate)
            if why:
                return None, ("%s at %s is refused: %s; the session runs only programs nobody but root can change"
                              % (name, candidate, why))
            return candidate, None
    elsewhere = shutil.which(name)
    return None, ("%s is not installed in the system's directories (%s)%s: the session runs only the system's own "
                  "programs, never one found through PATH, which the project can shape (direnv's PATH_add bin); "
                  "install it from the distribution's packages (provision.yml does)"
                  % (name, SYSTEM_PATH, "; the one at %s is not used" % elsewhere if elsewhere else ""))


def resolve_all(programs):
    """({key: absolute path} of those found, [sentence for each refused]) for PROGRAMS,
    {key: name or path}."""
    found, problems = {}, []
    for key, name in programs.items():
        path, problem = resolve(name)
        if path:
            found[key] = path
        else:
            problems.append(problem)
    return found, problems


def module_program(module, name):
    """resolve(NAME) for a module: the path, or fail_json with the sentence."""
    path, problem = resolve(name)
    if problem:
        module.fail_json(msg=problem)
    return path
