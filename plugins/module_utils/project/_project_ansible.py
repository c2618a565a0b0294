# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's configuration is never the project's: what of the project ansible-playbook
would read on the host, kept from the agent or reported.

ansible-playbook reads ./ansible.cfg (in a directory not writable by all) and imports
the plugins it names before the first task, so no check inside a play can undo it. It
also loads plugins, collections, roles and variables from directories beside a playbook
or an inventory (ADJACENT). So, in direct mode: an existing ansible.cfg and .ansible/ at
the project's top are bound read-only over themselves (read_only); a new or changed one
of CONFIGURATION or ADJACENT at any depth is a finding (snapshot, findings: a playbook
or ansible.cfg may be in any directory); review mode flags them at any depth
(review_flags). A session whose own ansible-playbook read its
configuration or plugins from the project says so (origin, origin_warning).
"""

from __future__ import annotations

import hashlib
import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_layout

CONFIGURATION = {
    "ansible.cfg": "ansible-playbook run in this directory reads it and imports the plugins it names before any task",
    ".ansible": "Ansible's tools (ansible-galaxy, ansible-lint, ansible-navigator) keep and load collections and "
                "roles here",
}
# ansible-core's directories beside a playbook (plugins/loader.py's subdirs), its
# collections/ansible_collections and roles/, and the variables beside a playbook or an
# inventory (host_group_vars: ansible_python_interpreter, ansible_connection, ...).
PLUGINS = ("action_plugins", "become_plugins", "cache_plugins", "callback_plugins", "cliconf_plugins",
           "connection_plugins", "doc_fragments", "filter_plugins", "httpapi_plugins", "inventory_plugins", "library",
           "lookup_plugins", "module_utils", "netconf_plugins", "shell_plugins", "strategy_plugins",
           "terminal_plugins", "test_plugins", "vars_plugins")
ADJACENT = dict([(name, "Ansible loads plugins from it for a playbook beside it") for name in PLUGINS] + [
    ("collections", "Ansible loads collections from it for a playbook beside it"),
    ("roles", "a playbook beside it runs roles from it"),
    ("group_vars", "Ansible reads variables from it (ansible_python_interpreter, connection settings) for a "
                   "playbook or inventory beside it"),
    ("host_vars", "Ansible reads variables from it (ansible_python_interpreter, connection settings) for a "
                  "playbook or inventory beside it"),
])
WATCHED = dict(CONFIGURATION, **ADJACENT)
# Entries read under one watched directory before it counts as changed without a full
# comparison (a finding says so): the walk stays bounded whatever the agent made.
MAX_ENTRIES = 100000
# What snapshot() holds for a directory it could not list: Ansible's files in it unknown.
UNREADABLE = "unreadable"


def read_only(project):
    """The CONFIGURATION names at PROJECT's top that are a file or a directory (not a
    link: a bind would land on its target, the link itself staying replaceable)."""
    found = []
    for name in sorted(CONFIGURATION):
        try:
            mode = os.lstat(os.path.join(project, name)).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            found.append(name)
    return found


def _entry(path, info):
    # ctime: the kernel sets it on every change and nobody can set it back (mtime the agent can).
    target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    return "%o %d %d %d %d %s" % (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, target)


def fingerprint(path):
    """A digest of PATH and everything below it (types, modes, sizes, times, link
    targets, by stat alone; a link at PATH followed), None when it does not exist,
    "too-large" past MAX_ENTRIES."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    digest = hashlib.sha256(_entry(path, info).encode("utf-8", "surrogateescape"))
    if stat.S_ISLNK(info.st_mode):
        # Ansible reads through a link: what it points at counts (a file, or a directory walked below).
        try:
            digest.update(_entry(path, os.stat(path)).encode("utf-8", "surrogateescape"))
        except OSError:
            pass
    pending = [path] if os.path.isdir(path) else []
    count = 0
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            digest.update(("unreadable %s %s" % (directory, error.errno)).encode("utf-8", "surrogateescape"))
            continue
        count += len(entries)
        if count > MAX_ENTRIES:
            return "too-large"
        for entry in entries:
            try:
                child_info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            digest.update(("%s\0%s\n" % (entry.path[len(path):], _entry(entry.path, child_info)))
                          .encode("utf-8", "surrogateescape"))
            if stat.S_ISDIR(child_info.st_mode):
                pending.append(entry.path)
    return digest.hexdigest()


def snapshot(project):
    """{"found": {relative path: fingerprint}, "bound": None or where the walk stopped}:
    every WATCHED name in PROJECT at any depth (not in a .git, not below a watched name,
    whose fingerprint covers what is below it; UNREADABLE for a directory that could not
    be listed), by an iterative walk that stops past the project walk's bounds
    (_project_layout.MAX_ENTRIES entries, MAX_DEPTH levels) and says where."""
    found, pending, count = {}, [("", 0)], 0
    while pending:
        relative, depth = pending.pop()
        try:
            with os.scandir(os.path.join(project, relative)) as listing:
                entries = list(listing)
        except OSError:
            found[relative] = UNREADABLE
            continue
        count += len(entries)
        if count > _project_layout.MAX_ENTRIES or depth > _project_layout.MAX_DEPTH:
            return {"found": found, "bound": relative}
        for entry in entries:
            path = os.path.join(relative, entry.name)
            if entry.name in WATCHED:
                found[path] = fingerprint(entry.path)
            elif entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                pending.append((path, depth + 1))
    return {"found": found, "bound": None}


def findings(before, after):
    """What the agent created or changed that ansible-playbook would read: [{"path",
    "what"}], sorted by path, then where AFTER's walk stopped. BEFORE and AFTER are
    snapshot()s."""
    found = []
    for path, now in sorted(after["found"].items()):
        then = before["found"].get(path)
        if now is None or now == then:
            continue
        if now == UNREADABLE:
            found.append({"path": path, "what": "could not be read: Ansible's files in it were not looked for"})
            continue
        change = "new" if then is None else "changed"
        if now == "too-large":
            change = "more than %d entries, not compared" % MAX_ENTRIES
        found.append({"path": path, "what": "%s: %s" % (change, WATCHED[os.path.basename(path)])})
    if after["bound"] is not None:
        found.append({"path": after["bound"] or ".", "what": "the walk stopped here (more than %d entries or %d "
                      "levels): Ansible's files beyond it were not looked for"
                      % (_project_layout.MAX_ENTRIES, _project_layout.MAX_DEPTH)})
    return found


def warning(project, found):
    """One sentence for the play on FOUND (findings(), not empty)."""
    return ("the agent created or changed what Ansible reads on this host: %s. Look at each before running "
            "ansible-playbook (or ansible, ansible-galaxy, ansible-lint) in %s: Ansible imports plugins before any "
            "task runs" % ("; ".join("%s (%s)" % (os.path.join(project, f["path"]), f["what"]) for f in found),
                           project))


def review_flags(parts):
    """Why a review change at the path of components PARTS is flagged for Ansible's sake:
    a WATCHED name anywhere on it (a playbook or ansible.cfg may be in any directory)."""
    return ["Ansible: %s (%s)" % (WATCHED[part], part) for part in parts if part in WATCHED]


def _inside(path, project):
    real = os.path.realpath(path)
    return real == project or real.startswith(project.rstrip("/") + "/")


def origin(project, config_file, paths):
    """Where a session's own ansible-playbook read its configuration and code from, as far
    as PROJECT goes: {"config_file", "from_project": ["WHAT PATH", ...]}. CONFIG_FILE:
    the file in use (None: none); PATHS: [(what, path)] (plugin, collection and role
    paths, the Python and Ansible running it)."""
    project = os.path.realpath(project)
    named = ([("configuration file", config_file)] if config_file else []) + list(paths)
    inside = []
    for what, path in named:
        item = "%s %s" % (what, path)
        if path and _inside(path, project) and item not in inside:
            inside.append(item)
    return {"config_file": config_file, "from_project": inside}


def origin_warning(found):
    """One sentence when ORIGIN (origin()) names anything of the project, else None."""
    if not (found or {}).get("from_project"):
        return None
    return ("this ansible-playbook read its configuration from the project (%s): code the agent wrote may already "
            "have run on this host, before any task. Check what it loaded with `ansible-config dump --only-changed` "
            "and `ansible-playbook -vvv` from the same directory, read the files named, and run sessions from "
            "outside the project or with ANSIBLE_CONFIG set to your own file" % "; ".join(found["from_project"]))
