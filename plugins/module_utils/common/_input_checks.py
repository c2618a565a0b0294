# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The input checks every stage shares: InputError, environment names and values, path
text, the project path, operators' paths, the harness argv and the recipe's environment.

Pure functions: every check runs before anything starts, and every error names the
input and what is allowed.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import state_dir

ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")

# The harness reaches a provider at $AISB_CREDENTIAL_PROXY/HOST[:PORT]/PATH, PORT only
# when it is not the provider's default (HTTPS); the credential plan sets it.
PROXY_VARIABLE = "AISB_CREDENTIAL_PROXY"

# Set by the session itself: letting them be overridden would point tools at another
# proxy or none.
RESERVED_ENV = frozenset([
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "all_proxy", "no_proxy",
    "npm_config_proxy", "npm_config_https_proxy", "NODE_USE_ENV_PROXY", PROXY_VARIABLE,
])

# Mounting one of these (or anything above it) would hand the agent the system.
SYSTEM_DIRS = frozenset([
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
    "/usr", "/var", "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/var/run", "/snap",
])
# Trees a project may never be inside of.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                "/proc", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/run", "/var/log")
# Dot-directories directly in the user's home hold credentials, keys and tools' state
# (these, and this tool's own under .local): none of them, and nothing inside one, is a
# project. The rule covers every ~/.<name>; the names only go in the message.
SENSITIVE_HOME_DIRS = (".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config", ".local", ".cache",
                       ".pi", ".ansible", ".password-store")


class InputError(RefusedError):
    """An input that must not reach podman; the message names it."""


def _inside(path, tree):
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def check_path_text(name, text):
    """A path podman's -v parser reads as one path: no ':' or ',' and no control characters."""
    if not isinstance(text, str) or not text:
        raise InputError("%s must be a non-empty path, got %r" % (name, text))
    bad = [c for c in text if c in ":," or ord(c) < 32 or ord(c) == 127]
    if bad:
        raise InputError(
            "%s %r contains %r: podman's -v option would misread it (':' and ',' separate "
            "mount fields; control characters are never allowed)" % (name, text, bad[0]))


def check_project(resolved, home, protected=()):
    """Refuse a resolved project path that would expose the system, the home or PROTECTED.

    RESOLVED is absolute with symlinks resolved; PROTECTED lists paths the sandbox must
    never see (state directory, container storage, the user's runtime directory).
    """
    check_path_text("project", resolved)
    if not os.path.isabs(resolved) or os.path.normpath(resolved) != resolved:
        raise InputError("project %r must be an absolute, normalised path" % resolved)
    if resolved in SYSTEM_DIRS:
        raise InputError("project %r is a system directory; name a project directory" % resolved)
    for tree in SYSTEM_TREES:
        if _inside(resolved, tree):
            raise InputError("project %r is inside the system tree %s" % (resolved, tree))
    if _inside(home, resolved):
        raise InputError(
            "project %r is the home directory %s or above it; name a directory inside it" % (resolved, home))
    dot_dir = _home_dot_dir(resolved, home)
    if dot_dir:
        raise InputError(
            "project %r is %s or inside it: dot-directories directly in the home directory hold credentials "
            "and tools' state (%s) and are never a project; name a directory elsewhere, such as %s"
            % (resolved, dot_dir, ", ".join(SENSITIVE_HOME_DIRS), os.path.join(home, "src", "app")))
    for sensitive in protected:
        if _inside(resolved, sensitive) or _inside(sensitive, resolved):
            raise InputError(
                "project %r would expose %s (credentials or the sandbox's own state)" % (resolved, sensitive))
    return resolved


def _home_dot_dir(path, home):
    """The dot-directory directly in HOME that PATH is or is inside, or None."""
    if path == home or not _inside(path, home):
        return None
    first = path[len(home.rstrip("/")) + 1:].split("/")[0]
    return os.path.join(home, first) if first.startswith(".") else None


def _cut_at_space(raw, resolved):
    """A sentence when RESOLVED is missing but its directory holds RESOLVED's name followed
    by a space and more: `-e project=/dir/with space` (key=value) cuts the value there."""
    parent, name = os.path.split(resolved)
    try:
        longer = sorted(entry for entry in os.listdir(parent) if entry.startswith(name + " "))
    except OSError:
        return ""
    if not longer:
        return ""
    whole = os.path.join(os.path.dirname(raw), longer[0])
    return ("; %r holds %r, so the path looks cut at a space (-e key=value splits there): pass it as "
            "JSON, -e '%s'" % (parent, longer[0], json.dumps({"project": whole}, ensure_ascii=False)))


def resolve_project(raw, home, protected=()):
    """Expand ~, resolve symlinks, require an existing directory, then check_project."""
    check_path_text("project", raw)
    expanded = os.path.expanduser(raw)
    if not os.path.isabs(expanded):
        raise InputError("project %r must be an absolute path (or start with ~)" % raw)
    resolved = os.path.realpath(expanded)
    if not os.path.isdir(resolved):
        raise InputError("project %r (resolved to %r) is not an existing directory%s"
                         % (raw, resolved, "" if os.path.exists(resolved) else _cut_at_space(raw, resolved)))
    return check_project(resolved, os.path.realpath(home), [os.path.realpath(p) for p in protected])


def check_operator_path(option, path, agent_trees):
    """PATH, an operator's input read on the controller (OPTION names it), refused when it
    resolves (links followed) inside one of AGENT_TREES, the directories a session lets
    the agent write: what is read there would be what an earlier session's agent wrote."""
    resolved = os.path.realpath(os.path.expanduser(path))
    for tree in agent_trees:
        if _inside(resolved, tree):
            raise InputError("%s %r resolves to %s, inside %s, which sessions let the agent write: an "
                             "operator's input there is whatever an agent left; keep it outside the project "
                             "and the collection's state" % (option, path, resolved, tree))
    return path


def agent_trees(project, environ):
    """The directories a session on PROJECT (as given) lets the agent write, resolved: the
    project and the collection's state (kept harness state, review overlays)."""
    trees = [os.path.realpath(os.path.expanduser(state_dir(environ)))]
    if isinstance(project, str) and project:
        trees.insert(0, os.path.realpath(os.path.expanduser(project)))
    return trees


def check_token_budget(value, where="aisb_token_budget"):
    """VALUE, a token budget (a whole number, 1 or more) or None; InputError naming WHERE."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InputError("%s must be a whole number of tokens, 1 or more, got %r" % (where, value))
    return value


# The most an upload budget may be: nft's quota takes 64 bits; this is far beyond any session.
MAX_UPLOAD_BUDGET = 2 ** 50


def check_upload_budget(value, where):
    """VALUE, an upload budget in bytes (a whole number, 1 to MAX_UPLOAD_BUDGET) or None;
    InputError naming WHERE."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 1 <= value <= MAX_UPLOAD_BUDGET):
        raise InputError("%s must be a whole number of bytes, 1 to %d, got %r" % (where, MAX_UPLOAD_BUDGET, value))
    return value


def check_env_name(name, origin):
    if not isinstance(name, str) or not ENV_NAME.match(name):
        raise InputError(
            "%s name %r is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)" % (origin, name))
    if name in RESERVED_ENV:
        raise InputError("%s name %r is set by the session itself (the gate's proxy settings)"
                         % (origin, name))


def check_env_value(name, value, origin):
    if not isinstance(value, str):
        raise InputError("%s %s must be a string, got %s" % (origin, name, type(value).__name__))
    if "\0" in value:
        raise InputError("%s %s contains a NUL byte, which no environment can carry" % (origin, name))


def environment_values(values):
    """The environment option as a dict: given as one, or as its JSON text."""
    if isinstance(values, str):
        try:
            values = json.loads(values)
        except ValueError as error:
            raise InputError("environment is not a dict nor JSON text of one: %s" % error)
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise InputError("environment must be a dict of names and values, got %s" % type(values).__name__)
    return values


def build_environment(values, pass_names, controller_env):
    """The harness's whole environment besides the proxy settings: named values (a dict
    or its JSON text) plus named pass-throughs read from the controller. Nothing else
    goes in."""
    environment = {}
    for name, value in environment_values(values).items():
        check_env_name(name, "environment")
        check_env_value(name, value, "environment")
        environment[name] = value
    for name in pass_names or []:
        check_env_name(name, "pass_environment")
        if name in environment:
            raise InputError("pass_environment name %r is also given a value in environment" % name)
        if name not in controller_env:
            raise InputError("pass_environment name %r is not set in the controller's environment" % name)
        check_env_value(name, controller_env[name], "pass_environment")
        environment[name] = controller_env[name]
    return environment


def check_command(argv):
    """The harness command: a list of strings passed as they are, never through a
    shell, whose first word names a program. The entrypoint reads a first word starting
    with '-' as its own flag (--allow-unenforced must never come from the command), and
    env(1), which applies the harness's environment after the drop, would take one
    holding '=' for a variable."""
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise InputError("command must be a list of strings, got %r" % (argv,))
    for arg in argv:
        if "\0" in arg:
            raise InputError("command argument %r contains a NUL byte" % arg)
    if argv and (not argv[0] or argv[0].startswith("-") or "=" in argv[0]):
        raise InputError(
            "command's first word %r must name a program: not empty, not starting with '-', "
            "without '='" % argv[0])
    return argv


# The refusal of a session with neither a command nor a recipe's (_recipes.session_command).
NO_COMMAND = "harness must be a recipe with a command (the image role's recipe) when no command is given, got %r"


def harness_command(harness):
    """The HARNESS recipe's command (its argv), checked, with its prompt arguments (the
    arguments put before a prompt) a list."""
    if not harness.get("command"):
        raise InputError(NO_COMMAND % (harness,))
    argv, before_prompt = harness["command"], harness.get("prompt") or []
    if not isinstance(argv, list) or not isinstance(before_prompt, list):
        raise InputError("harness command and prompt must be lists of strings, got %r and %r"
                         % (argv, before_prompt))
    return check_command(argv)


def harness_values(harness):
    """The recipe's env_values ({name: value}: what the harness always gets, such as its
    switches for update checks and telemetry), checked like any value; {} without them."""
    values = harness.get("env_values") or {}
    if not isinstance(values, dict):
        raise InputError("harness env_values must be a dict of variable names and values, got %r" % (values,))
    for name, value in values.items():
        check_env_name(name, "harness env_values")
        check_env_value(name, value, "harness env_values")
    return dict(values)


def harness_credential_urls(harness):
    """The recipe's credential_urls ({key variable: URL variable}: where the harness reads
    the base URL of the provider a credential's variable is for), checked; {} without."""
    urls = harness.get("credential_urls") or {}
    if not isinstance(urls, dict):
        raise InputError("harness credential_urls must be a dict of a key variable and the variable of its "
                         "provider's base URL, got %r" % (urls,))
    for key_variable, url_variable in urls.items():
        check_env_name(key_variable, "harness credential_urls")
        check_env_name(url_variable, "harness credential_urls %s" % key_variable)
    return dict(urls)


def harness_names(harness):
    """The recipe's env names (those passed through when set), checked like any name."""
    names = harness.get("env") or []
    if not isinstance(names, list):
        raise InputError("harness env must be a list of variable names, got %r" % (names,))
    for name in names:
        check_env_name(name, "harness env")
    return names
