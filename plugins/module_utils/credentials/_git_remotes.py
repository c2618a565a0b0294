# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The operator's git remotes (aisb_git_remotes): each entry checked, and its token read
on the controller, as aisb_credentials reads a key.

An entry names a repository's HTTPS URL (https://HOST[:PORT]/PATH, no user, query or
fragment), the branches the agent may push there (a pattern, _git_push.check_pattern;
aisb/{session}/* unless told), the user name the token goes with in HTTP Basic auth
(x-access-token, GitHub's, unless told; GitLab takes oauth2) and exactly one source for
the token: from_environment, from_file or value. Every error names its entry. Pure but
for reading the file.
"""

from __future__ import annotations

import re

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import (
    HOST_NAME, SOURCES, as_values, entry_list, read_secret, secret_source)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import DEFAULT_PATTERN, check_pattern

OPTION = "aisb_git_remotes"
# git's system configuration inside the sandbox, written in the session's directory.
GIT_CONFIG_FILE = "gitconfig"
GIT_CONFIG_PATH = "/etc/gitconfig"
KEYS = frozenset(("url", "branches", "username") + SOURCES)
DEFAULT_USERNAME = "x-access-token"
URL = re.compile(r"\Ahttps://([^/:@?#]+)(?::([0-9]{1,5}))?(/[A-Za-z0-9._~/-]*[A-Za-z0-9_~-])/?\Z")
USERNAME = re.compile(r"\A[A-Za-z0-9._~-]{1,64}\Z")
# What the broker does with an entry, its token's source aside: where it relays, which
# branches it lets through, the user name the token goes with.
ROUTE = ("url", "branches", "username")


def _fail(index, message):
    raise InputError("%s[%d]: %s" % (OPTION, index, message))


def check_git_remotes(entries):
    """ENTRIES as the operator wrote them (a list, or its JSON text), checked: dicts of url
    (without a trailing slash), host, port, path, branches, username and the source.
    InputError names the first bad entry."""
    checked, repositories = [], set()
    for index, entry in enumerate(entry_list(entries, OPTION)):
        entry = _check_entry(index, entry)
        if repository(entry["url"]) in repositories:
            _fail(index, "url %s names the repository of an earlier entry (forges read a path without case "
                         "and with or without .git)" % entry["url"])
        repositories.add(repository(entry["url"]))
        checked.append(entry)
    return checked


def _check_entry(index, entry):
    if not isinstance(entry, dict):
        _fail(index, "must be a dict (url and one of %s), got %s" % (", ".join(SOURCES), type(entry).__name__))
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        _fail(index, "unknown keys %s; an entry has %s" % (", ".join(unknown), ", ".join(sorted(KEYS))))
    url = entry.get("url")
    match = URL.match(url) if isinstance(url, str) else None
    path = match.group(3) if match else ""
    if not match or not HOST_NAME.match(match.group(1).lower()) or ".." in path or "//" in path \
            or "/./" in path + "/" \
            or not 1 <= int(match.group(2) or 443) <= 65535:
        _fail(index, "url %r must be https://HOST[:PORT]/PATH of a repository: a DNS name, no user, query or "
                     "fragment, a path of letters, digits and . _ ~ - / without '..', '/./' or '//'" % (url,))
    host, port = match.group(1).lower(), int(match.group(2) or 443)
    try:
        branches = check_pattern(entry.get("branches", DEFAULT_PATTERN), "%s[%d] branches" % (OPTION, index))
    except ValueError as error:
        raise InputError(str(error))
    username = entry.get("username", DEFAULT_USERNAME)
    if not isinstance(username, str) or not USERNAME.match(username):
        _fail(index, "username must be 1 to 64 letters, digits or . _ ~ - (x-access-token for GitHub, oauth2 "
                     "for GitLab)")
    source = secret_source(index, entry, OPTION)
    return {"url": "https://%s%s%s" % (host, "" if port == 443 else ":%d" % port, path), "host": host,
            "port": port, "path": path, "branches": branches, "username": username, source: entry[source]}


def repository(url):
    """The repository a checked URL names, as GitHub and GitLab tell repositories apart:
    its path without case and without a trailing .git. Two entries for one repository
    would be two branch patterns for it."""
    url = url.lower()
    return url[:-len(".git")] if url.endswith(".git") else url


def as_written(entry):
    """A checked ENTRY as an operator writes it (without the host, port and path derived
    from its url): check_git_remotes takes it again."""
    return dict((k, v) for k, v in entry.items() if k in KEYS)


def resolve_git_remotes(checked, controller_env):
    """CHECKED entries (check_git_remotes') with each token read from its source (dicts
    without the source, with token). Run on the controller."""
    resolved = []
    for index, entry in enumerate(checked):
        token = read_secret(index, entry, controller_env, OPTION)
        resolved.append(dict(((k, v) for k, v in entry.items() if k not in SOURCES), token=token))
    return resolved


def check_resolved_remotes(entries):
    """The session module's view of resolve_git_remotes' result, checked again (as_values;
    host, port and path are derived from the url again)."""
    written = [as_written(entry) for entry in as_values(entries, "git_remotes", "token")]
    return [dict(((k, v) for k, v in entry.items() if k != "value"), token=entry["value"])
            for entry in check_git_remotes(written)]


def git_config(remotes, broker_url):
    """git's configuration text that leads each of REMOTES (checked) to the broker at
    BROKER_URL (/r<index>, _git_broker), by its URL with and without .git. It routes only:
    a git that ignores it reaches the remote's host through the gate, which refuses it
    unless the policy allows that host, and holds no token there."""
    lines = ["# Written by the session: the listed remotes go through its git broker (aisb_git_remotes)."]
    for index, remote in enumerate(remotes):
        url = remote["url"]
        other = url[:-len(".git")] if url.endswith(".git") else url + ".git"
        lines += ['[url "%s/r%d"]' % (broker_url, index), "\tinsteadOf = %s" % url, "\tinsteadOf = %s" % other]
    return "\n".join(lines) + "\n"
