# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The operator's harness configuration (aisb_harness_config): a directory on the
controller holding what the harness recipe's `config` names (pi: settings.json,
models.json, AGENTS.md, prompts/, ...), read there, checked, and mounted read-only in
the sandbox where the harness reads it. Never taken from the project, never a key.

read_config reads the directory (on the controller); everything else is pure.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
from typing import Dict, List, NamedTuple

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import ENV_NAME, InputError

OPTION = "aisb_harness_config"
# The whole configuration travels in the session's arguments: text, and not much of it.
MAX_BYTES = 4 * 1024 * 1024
# Where the session writes it, in its own directory, before mounting it.
SESSION_SUBDIR = "harness-config"
# The sandbox's home: a recipe's paths are the harness user's own.
HOME = "/home/agent"
NAME = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]*/?\Z")
# Where harnesses keep keys and subscription logins (pi's auth.json, Claude Code's
# .credentials.json): never configuration.
LOGIN_FILES = ("auth.json", ".credentials.json")
# codex's config.toml: a provider's literal key (its env_key names a variable instead).
CODEX_TOKEN = re.compile(r"experimental_bearer_token", re.I)
# opencode.json: a provider's apiKey is a variable's value ({env:NAME}), never the key.
OPENCODE_ENV_KEY = re.compile(r"\A\{env:[A-Za-z_][A-Za-z0-9_]*\}\Z")


class HarnessConfig(NamedTuple):
    """A recipe's `config`, checked: the directory inside, {name: is a directory}, and
    the file names in which the provider URLs move behind the credential injector."""

    dir: str
    names: Dict[str, bool]
    endpoints: List[str]


def recipe_config(harness):
    """The recipe's `config` as a HarnessConfig, or None when the harness reads no
    operator configuration."""
    config = harness.get("config")
    if config is None:
        return None
    if not isinstance(config, dict) or not {"dir", "names"} <= set(config) <= {"dir", "names", "endpoints"}:
        raise InputError("harness config must be a dict with dir, names and optionally endpoints, got %r"
                         % (config,))
    inside, names = config["dir"], config["names"]
    if not isinstance(inside, str) or posixpath.normpath(inside) != inside or not inside.startswith(HOME + "/"):
        raise InputError("harness config dir %r must be a normalised path under %s" % (inside, HOME))
    if not isinstance(names, list) or not all(isinstance(n, str) and NAME.match(n) for n in names):
        raise InputError("harness config names must be plain file names (a directory's ending in /), got %r"
                         % (names,))
    endpoints = config.get("endpoints", [])
    if not isinstance(endpoints, list) or not all(isinstance(n, str) and n in names and not n.endswith("/")
                                                  for n in endpoints):
        raise InputError("harness config endpoints must be file names among its names, got %r"
                         % (endpoints,))
    return HarnessConfig(inside, dict((n.rstrip("/"), n.endswith("/")) for n in names), list(endpoints))


def endpoint_paths(files, recipe):
    """The paths of checked FILES in which a session with credentials moves the provider
    URLs behind the injector: the RECIPE's config endpoints (codex's config.toml, ...)."""
    endpoints = set(recipe.config.endpoints if recipe.config else [])
    return [f["path"] for f in files if f["path"] in endpoints]


def _allowed(names):
    return ", ".join(n + ("/" if is_dir else "") for n, is_dir in sorted(names.items()))


def read_config(directory, recipe):
    """The files of DIRECTORY (on this controller) as [{path, text}], checked against
    the RECIPE (a _recipes.Recipe; check_config); [] when no directory is given. Nothing
    in it may be a link: what is read is what the operator put there."""
    if not directory:
        return []
    if recipe.config is None:
        raise InputError("%s is given but the harness recipe has no config: this harness reads no "
                         "operator configuration" % OPTION)
    root = os.path.realpath(os.path.expanduser(directory))
    if not os.path.isdir(root):
        raise InputError("%s %r is not a directory on the controller" % (OPTION, directory))
    files = []
    for top in sorted(os.listdir(root)):
        _read_entry(root, top, files)
    return check_config(files, recipe)


def _read_entry(root, relative, files):
    path = os.path.join(root, relative)
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        for name in sorted(os.listdir(path)):
            _read_entry(root, posixpath.join(relative, name), files)
    elif stat.S_ISREG(info.st_mode):
        try:
            with open(path, "rb") as handle:
                files.append({"path": relative, "text": handle.read(MAX_BYTES + 1).decode("utf-8")})
        except UnicodeDecodeError:
            raise InputError("%s %s is not UTF-8 text" % (OPTION, relative))
    else:
        raise InputError("%s %s is %s: only regular files and directories are read (copy the file in)"
                         % (OPTION, relative, "a symbolic link" if stat.S_ISLNK(info.st_mode) else
                            "not a regular file"))


def check_config(files, recipe):
    """FILES ([{path, text}], or its JSON text: what the action plugin sends) checked
    against the RECIPE's config names; InputError names the file and what is allowed."""
    if isinstance(files, str):
        try:
            files = json.loads(files)
        except ValueError as error:
            raise InputError("harness_config is not JSON text of a list: %s" % error)
    files = files or []
    if not isinstance(files, list) or not all(isinstance(f, dict) and set(f) == {"path", "text"} for f in files):
        raise InputError("harness_config must be a list of files, each with path and text (the action "
                         "plugin reads %s into it)" % OPTION)
    if not files:
        return []
    names = recipe.config.names if recipe.config else {}
    total = 0
    for entry in files:
        path, text = entry["path"], entry["text"]
        parts = path.split("/") if isinstance(path, str) else [""]
        if parts[0] in LOGIN_FILES:
            raise InputError("%s %s is refused: keys go in aisb_credentials, logins stay in a session "
                             "(docs/harnesses.md)" % (OPTION, parts[0]))
        if not all(NAME.match(part) and not part.endswith("/") for part in parts):
            raise InputError("%s path %r is not a relative path of plain names" % (OPTION, path))
        if parts[0] not in names or names[parts[0]] != (len(parts) > 1):
            raise InputError("%s %s is not something this harness reads; allowed: %s"
                             % (OPTION, path, _allowed(names)))
        if not isinstance(text, str) or "\0" in text:
            raise InputError("%s %s must be text without NUL bytes" % (OPTION, path))
        total += len(text.encode("utf-8"))
        if total > MAX_BYTES:
            raise InputError("%s holds more than %d bytes" % (OPTION, MAX_BYTES))
        if len(parts) == 1 and path.endswith(".json"):
            _check_json(path, text)
        if path == "config.toml" and CODEX_TOKEN.search(text):
            raise InputError("%s config.toml sets experimental_bearer_token, a key in the configuration: "
                             "name its variable in env_key and give the key in aisb_credentials" % OPTION)
    return sorted(files, key=lambda f: f["path"])


def _check_json(path, text):
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InputError("%s %s is not JSON: %s" % (OPTION, path, error))
    if not isinstance(value, dict):
        raise InputError("%s %s must hold a JSON object" % (OPTION, path))
    if path == "opencode.json":
        for where, key in opencode_api_keys(value):
            if not isinstance(key, str) or not OPENCODE_ENV_KEY.match(key):
                raise InputError(
                    "%s opencode.json %s must be {env:NAME}, not a key: keys go in aisb_credentials (the harness "
                    "gets a placeholder in that variable)" % (OPTION, where))
    if path == "models.json":
        providers = value.get("providers", {})
        if not isinstance(providers, dict) or not all(
                isinstance(p, dict) and isinstance(p.get("models", []), list)
                and all(isinstance(m, dict) for m in p.get("models", [])) for p in providers.values()):
            raise InputError("%s models.json providers must be an object of provider objects, each with "
                             "an optional list of model objects" % OPTION)
        for where, key in api_keys(value):
            # pi reads an apiKey as a variable's name, else as the key itself.
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise InputError(
                    "%s models.json %s must name an environment variable, not hold a key or a command: keys go in "
                    "aisb_credentials (the harness gets a placeholder in that variable)" % (OPTION, where))


def opencode_api_keys(config):
    """(where, value) for every provider's options.apiKey in opencode's CONFIG."""
    providers = config.get("provider", {})
    for name, provider in sorted(providers.items() if isinstance(providers, dict) else []):
        options = provider.get("options") if isinstance(provider, dict) else None
        if isinstance(options, dict) and "apiKey" in options:
            yield "provider.%s.options.apiKey" % name, options["apiKey"]


def api_keys(models):
    """(where, value) for every apiKey in pi's models.json MODELS, its providers' and their models'."""
    for name, provider in sorted(models.get("providers", {}).items()):
        if "apiKey" in provider:
            yield "providers.%s.apiKey" % name, provider["apiKey"]
        for index, model in enumerate(provider.get("models", [])):
            if "apiKey" in model:
                yield "providers.%s.models[%d].apiKey" % (name, index), model["apiKey"]


def mounts(files, recipe):
    """(name in the session's SESSION_SUBDIR, path inside) for each top-level entry of
    checked FILES: a file, or a whole directory, in the RECIPE's config directory."""
    tops = sorted(set(f["path"].split("/")[0] for f in files))
    return [(posixpath.join(SESSION_SUBDIR, top), posixpath.join(recipe.config.dir, top)) for top in tops]
