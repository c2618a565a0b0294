# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The operator's provider credentials (aisb_credentials): each entry checked, and its
secret read where the operator is, on the controller.

An entry names a provider host (HTTPS, port 443 unless told), the request header the
key goes in (with an optional prefix, such as "Bearer "), the harness variable that
gets a per-session placeholder instead of the key, exactly one source for the key:
from_environment (a variable of the calling shell), from_file (a file only its owner
can read) or value (an Ansible Vault variable, say), and optionally the requests the
injector relays (paths; a built-in provider's own rules by default, _providers). Every
error names its entry. A key the calling shell holds in a variable a built-in recipe
reads is injected without an entry (implicit_entries). Pure but for reading the file;
the session module gets the resolved entries (resolve_credentials) and never reads a
source itself.
"""

from __future__ import annotations

import json
import os
import re
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials import _providers
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_plan import DEFAULT_PORT, by_route, injector_url
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, check_env_name)

OPTION = "aisb_credentials"
SOURCES = ("from_environment", "from_file", "value")
KEYS = frozenset(("host", "port", "header", "prefix", "variable", "paths") + SOURCES)
HOST_NAME = re.compile(r"\A(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z]([a-z0-9-]{0,61}[a-z0-9])?\Z")
# An HTTP field name (RFC 9110 token).
HEADER_NAME = re.compile(r"\A[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# Set by the injector itself, or meaningless to a provider through it.
HOP_HEADERS = frozenset(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"])
# Allowed in a key and its prefix: visible ASCII and spaces; nothing that ends a header.
HEADER_VALUE = re.compile(r"\A[\x20-\x7e]*\Z")


def _fail(index, message, option=OPTION):
    raise InputError("%s[%d]: %s" % (option, index, message))


def entry_list(entries, option):
    """ENTRIES of OPTION as the operator wrote them: a list, its JSON text or None (none)."""
    if entries is None:
        return []
    if isinstance(entries, str):
        try:
            entries = json.loads(entries)
        except ValueError as error:
            raise InputError("%s is not a list nor JSON text of one: %s" % (option, error))
    if not isinstance(entries, list):
        raise InputError("%s must be a list of entries, got %s" % (option, type(entries).__name__))
    return entries


def secret_source(index, entry, option=OPTION):
    """Which of SOURCES ENTRY (number INDEX of OPTION) reads its secret from: exactly one,
    a non-empty string; a value a header can carry, a variable's name."""
    given = [source for source in SOURCES if entry.get(source) is not None]
    if len(given) != 1:
        _fail(index, "give exactly one of %s (got %s)" % (", ".join(SOURCES), ", ".join(given) or "none"), option)
    source = given[0]
    if not isinstance(entry[source], str) or not entry[source]:
        _fail(index, "%s must be a non-empty string" % source, option)
    if source == "value" and not HEADER_VALUE.match(entry[source]):
        _fail(index, "value holds characters a header cannot carry (only visible ASCII and spaces)", option)
    if source == "from_environment":
        check_env_name(entry[source], "%s[%d] from_environment" % (option, index))
    return source


def check_credentials(entries):
    """ENTRIES as the operator wrote them, checked; a list of dicts with port and prefix
    filled in. InputError names the first bad entry."""
    entries = entry_list(entries, OPTION)
    checked, hosts, variables = [], set(), set()
    for index, entry in enumerate(entries):
        entry = _check_entry(index, entry)
        route = "%s:%d" % (entry["host"], entry["port"])
        if route in hosts:
            _fail(index, "host %s is named by an earlier entry: one key per provider host" % route)
        if entry["variable"] in variables:
            _fail(index, "variable %s is named by an earlier entry" % entry["variable"])
        hosts.add(route)
        variables.add(entry["variable"])
        checked.append(entry)
    return checked


def _check_entry(index, entry):
    if not isinstance(entry, dict):
        _fail(index, "must be a dict (host, header, variable and one of %s), got %s"
              % (", ".join(SOURCES), type(entry).__name__))
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        _fail(index, "unknown keys %s; an entry has %s" % (", ".join(unknown), ", ".join(sorted(KEYS))))
    for key in ("host", "header", "variable"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            _fail(index, "%s is required (a string)" % key)
    host = entry["host"].lower()
    if not HOST_NAME.match(host):
        _fail(index, "host %r must be a DNS name (no scheme, port, path or address): the key goes to that "
                     "name only, over TLS verified for it" % entry["host"])
    port = entry.get("port", DEFAULT_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        _fail(index, "port %r must be an integer from 1 to 65535" % (port,))
    header = entry["header"]
    if not HEADER_NAME.match(header) or header.lower() in HOP_HEADERS:
        _fail(index, "header %r must be a plain HTTP header name, not one of %s"
              % (header, ", ".join(sorted(HOP_HEADERS))))
    prefix = entry.get("prefix", "")
    if not isinstance(prefix, str) or not HEADER_VALUE.match(prefix):
        _fail(index, "prefix must be text of visible characters and spaces (such as 'Bearer ')")
    check_env_name(entry["variable"], "%s[%d] variable" % (OPTION, index))
    source = secret_source(index, entry)
    try:
        paths = _providers.check_paths(entry.get("paths"), _providers.provider_at(host, port),
                                       "%s[%d] paths" % (OPTION, index))
    except _providers.PathRuleError as error:
        raise InputError(str(error))
    checked = {"host": host, "port": port, "header": header, "prefix": prefix, "variable": entry["variable"],
               source: entry[source]}
    if paths is not None:
        checked["paths"] = list(paths)
    return checked


def implicit_entries(names, controller_env, entries, pass_names, given, url_variables=None):
    """Entries (from_environment) for the provider keys the calling shell holds
    (CONTROLLER_ENV) in NAMES, the recipe's variables that are a built-in provider's key
    variable: the safe default, so that an exported key is injected, never handed over.
    None for a name the operator passes through (PASS_NAMES) or gives a value (GIVEN), nor
    for a provider host ENTRIES (checked) already serve, nor for a key an entry reads:
    the operator's word wins. The first of two names for one provider wins. A key whose
    base-URL variable (the recipe's credential_urls, URL_VARIABLES) points at another
    server is refused: the key would go to the provider, not where the developer meant."""
    served = set(by_route(entries))
    taken = set(entry["variable"] for entry in entries) | sources(entries)
    implicit = []
    for name in names:
        key = _providers.key_for(name)
        if key is None or not controller_env.get(name) or name in pass_names or name in given or name in taken:
            continue
        entry = {"host": key.provider.host, "port": DEFAULT_PORT, "header": key.header, "prefix": key.prefix,
                 "variable": name, "from_environment": name, "paths": list(key.provider.paths)}
        url_variable = (url_variables or {}).get(name)
        url = given.get(url_variable) if url_variable in given else (
            controller_env.get(url_variable) if url_variable in pass_names or url_variable in names else None)
        if url and injector_url(url, by_route([entry]), "") is None:
            raise InputError(
                "%s is exported, and %s=%s names another server than %s: write an aisb_credentials entry for that "
                "server's host (the key is then injected there), or name %s in aisb_pass_environment to hand the "
                "key to the agent as it is" % (name, url_variable, url, key.provider.host, name))
        route = "%s:%d" % (key.provider.host, DEFAULT_PORT)
        if route not in served:
            served.add(route)
            implicit.append(entry)
    return implicit


def sources(entries):
    """The calling shell's variables that ENTRIES (checked) read their keys from."""
    return set(entry["from_environment"] for entry in entries if "from_environment" in entry)


def read_key_file(index, path, option=OPTION):
    """The key in PATH: its owner's alone (no permission for group or others), one line.
    Errors name entry INDEX of OPTION."""
    path = os.path.expanduser(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        _fail(index, "from_file %r cannot be opened: %s" % (path, error.strerror), option)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            _fail(index, "from_file %r is not a regular file" % path, option)
        if info.st_uid != os.getuid():
            _fail(index, "from_file %r belongs to uid %d, not to this user" % (path, info.st_uid), option)
        if info.st_mode & 0o077:
            _fail(index, "from_file %r can be used by group or others (mode %04o): a key file must be its "
                         "owner's alone; chmod 600 it" % (path, stat.S_IMODE(info.st_mode)), option)
        data = handle.read(65536)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _fail(index, "from_file %r is not UTF-8 text" % path, option)
    return text.rstrip("\r\n")


def read_secret(index, entry, controller_env, option=OPTION):
    """The secret checked ENTRY (number INDEX of OPTION) names: a variable of the calling
    shell (CONTROLLER_ENV), its file or its value; refused when empty or holding what a
    header cannot carry."""
    if "from_environment" in entry:
        name = entry["from_environment"]
        if name not in controller_env:
            _fail(index, "from_environment %s is not set in the controller's environment" % name, option)
        secret = controller_env[name]
    elif "from_file" in entry:
        secret = read_key_file(index, entry["from_file"], option)
    else:
        secret = entry["value"]
    if not secret or not HEADER_VALUE.match(secret):
        _fail(index, "the key is empty or holds characters a header cannot carry (only visible ASCII and spaces)",
              option)
    return secret


def resolve_credentials(entries, controller_env):
    """Checked ENTRIES with each key read from its source: dicts of host, port, header,
    prefix, variable and key. Run on the controller (the calling shell's variables, the
    operator's files)."""
    resolved = []
    for index, entry in enumerate(check_credentials(entries)):
        key = read_secret(index, entry, controller_env)
        resolved.append(dict(((k, v) for k, v in entry.items() if k not in SOURCES), key=key))
    return resolved


def as_values(entries, name, secret):
    """What the session module is sent as option NAME (resolved entries, each with its
    SECRET, or their JSON text) as entries whose source is the value, to be checked
    again: what reaches the host is never trusted blindly."""
    if isinstance(entries, str):
        try:
            entries = json.loads(entries)
        except ValueError as error:
            raise InputError("%s is not JSON text of a list: %s" % (name, error))
    if not isinstance(entries, list) or not all(isinstance(e, dict) and secret in e for e in entries):
        raise InputError("%s must be a list of resolved entries (each with its %s)" % (name, secret))
    return [dict(((k, v) for k, v in entry.items() if k != secret), value=entry[secret]) for entry in entries]


def check_resolved(entries):
    """The session module's view of resolve_credentials' result, checked again (as_values)."""
    return [dict(((k, v) for k, v in entry.items() if k != "value"), key=entry["value"])
            for entry in check_credentials(as_values(entries, "credentials", "key"))]


def check_session_use(entries, environment, network, url_variables=None):
    """Refuse resolved ENTRIES a session cannot honour: a variable the ENVIRONMENT also
    sets (the key would be its value), a base-URL variable (the recipe's credential_urls,
    URL_VARIABLES) that two entries fill or that the ENVIRONMENT points away from the
    entry's host and port (the placeholder would go there), or a NETWORK without the
    gate's address."""
    filled = {}
    for index, entry in enumerate(entries):
        if entry["variable"] in environment:
            _fail(index, "variable %s is also given in environment or pass_environment: the harness gets a "
                         "placeholder there, never a value" % entry["variable"])
        url_variable = (url_variables or {}).get(entry["variable"])
        if not url_variable:
            continue
        if url_variable in filled:
            _fail(index, "the harness reads one base URL from %s, which %s[%d] already points at its injector"
                         % (url_variable, OPTION, filled[url_variable]))
        filled[url_variable] = index
        given = environment.get(url_variable)
        if given is not None and injector_url(given, by_route([entry]), "") is None:
            _fail(index, "environment %s=%s is not an https:// URL on %s port %d: the harness reaches this "
                         "provider through its injector at %s; unset it, or give https://%s[:%d]/PATH"
                  % (url_variable, given, entry["host"], entry["port"], url_variable, entry["host"], entry["port"]))
    if entries and network != "allow":
        raise InputError("%s need network allow: the sandbox reaches their injector where it reaches the "
                         "gate (network is %s)" % (OPTION, network))


def check_private_hosts(entries, private):
    """Refuse an entry whose host is a private entry's name (PRIVATE: the policy's
    (name, port, address)) on a port no such entry names: the injector sends a key for a
    private entry's name and port to its pinned address only, and never resolves the name."""
    pinned = {}
    for name, port, address in private:
        pinned.setdefault(name, {})[port] = "%s:%d=%s" % (name, port, address)
    for index, entry in enumerate(entries):
        ports = pinned.get(entry["host"], {})
        if ports and entry["port"] not in ports:
            _fail(index, "host %s port %d: %s is a private entry's name (aisb_allow %s): a key for it goes only "
                         "to the pinned address, on that entry's port; give that port"
                  % (entry["host"], entry["port"], entry["host"], ", ".join(ports[one] for one in sorted(ports))))
