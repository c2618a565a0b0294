# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The team's session settings on a workstation (TEAM_FILE, root's, written by
provision.yml) and how a developer's own values combine with them.

A team file is JSON: {"format": 1, "settings": {KEY: value}, "user_may_add": [KEY]}.
KEY is one of SETTINGS, the name of run_agent.yml's (or prune.yml's) variable without
its "aisb_".
For every KEY the value a session uses is the team's (or DEFAULTS' when the team sets
none); a developer's value for a KEY in user_may_add is added on top (LIST_KEYS: its
entries after the team's; DICT_KEYS: its names beside the team's, which it cannot
change) or replaces it (the others). A developer's value for any other KEY is refused
unless it changes nothing, or for a CEILING_KEYS one, unless it is at most the team's
(a lower bound, or one where the team sets none, only tightens). Without a team file
every developer value applies.

read_team_file reads the file (refusing one that anybody but root could have written);
everything else is pure.
"""

from __future__ import annotations

import errno
import json
import os
import stat

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import check_credentials
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import (
    KEYS as REMOTE_KEYS, ROUTE, as_written, check_git_remotes, repository)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, build_environment, check_env_name, check_token_budget, check_upload_budget, environment_values)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError, parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import check_recipes, recipe_for
from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError
from ansible_collections.aisb.sandbox.plugins.module_utils.retention._retention import (
    DEFAULT_DAYS, DEFAULT_KEEP_SESSIONS, check_count)

TEAM_FILE = "/etc/aisb/team.json"
# What the playbooks' variable for a setting starts with.
PREFIX = "aisb_"
FORMAT = 1
# What a session takes from the team (run_agent.yml's aisb_<KEY>), and retention from it
# (prune.yml's aisb_retention_days, aisb_retention_sessions), with the value when neither
# the team nor the developer gives one: the playbooks' own defaults.
DEFAULTS = {
    "allow": [], "connect_ports": [443], "pass_environment": [], "environment": {}, "credentials": [],
    "limits": {}, "require_limits": False, "network": "allow", "harness": "pi", "recipes": {}, "harness_config": None,
    "project_mode": "direct", "allow_unenforced": False, "project_harness_code": False,
    "retention_days": DEFAULT_DAYS, "retention_sessions": DEFAULT_KEEP_SESSIONS, "token_budget": None,
    "upload_budget": None, "provider_upload_budget": None,
    "allowed_harnesses": None, "git_remotes": [],
}
SETTINGS = tuple(sorted(DEFAULTS))
LIST_KEYS = ("allow", "connect_ports", "pass_environment", "credentials", "git_remotes")
DICT_KEYS = ("environment", "limits", "recipes")
# The team's value is the default and the most a developer may give (None: no ceiling).
CEILING_KEYS = ("token_budget", "upload_budget", "provider_upload_budget")
# The team's word on what developers may choose, never a developer's value (None: any).
TEAM_ONLY_KEYS = ("allowed_harnesses",)
CHOICES = {"network": ("allow", "none", "no-gate"), "project_mode": ("direct", "review")}
# As the session's limits option takes them (its spec converts a number's text).
LIMITS = {"memory": (str,), "pids": (int,), "cpus": (str, int, float)}
# The file is for every local user to read: a key or token never goes in it.
TEAM_CREDENTIAL_SOURCES = ("from_environment", "from_file")
# The settings whose entries take a key or token from a source.
SECRET_KEYS = ("credentials", "git_remotes")
MAX_BYTES = 1024 * 1024


class TeamError(RefusedError):
    """A team file, or a developer's value, that a session must not start with."""


def variable(key):
    """run_agent.yml's variable for KEY."""
    return PREFIX + key


def _check_value(key, value, where):
    """VALUE for KEY, checked as the session would check it; TeamError naming WHERE."""
    try:
        if key == "allow":
            parse_policy(_list(value, where), [443])
        elif key == "connect_ports":
            parse_policy([], _list(value, where))
        elif key == "pass_environment":
            for name in _list(value, where):
                check_env_name(name, where)
        elif key == "environment":
            # A dict, or its JSON text (as the session takes it).
            value = environment_values(value)
            build_environment(value, [], {})
        elif key == "credentials":
            # Entries (or their JSON text) with port and prefix filled in.
            value = check_credentials(value)
        elif key == "git_remotes":
            # As written (url normalised, defaults filled): the session checks them again.
            value = [as_written(entry) for entry in check_git_remotes(value)]
        elif key == "limits":
            _check_limits(_dict(value, where), where)
        elif key in ("require_limits", "allow_unenforced", "project_harness_code"):
            if not isinstance(value, bool):
                raise TeamError("%s must be true or false, got %r" % (where, value))
        elif key in CHOICES:
            if value not in CHOICES[key]:
                raise TeamError("%s %r is not one of %s" % (where, value, ", ".join(CHOICES[key])))
        elif key == "harness":
            if not (isinstance(value, str) and value):
                raise TeamError("%s must name a recipe (a built-in one, or one of recipes: an operator's own recipe "
                                "goes there under a name of its own), got %r" % (where, value))
        elif key == "recipes":
            # As written: the settings travel as the operator's dicts, parsed where a session reads them.
            value = dict((name, recipe.given) for name, recipe in check_recipes(_dict(value, where), where).items())
        elif key == "allowed_harnesses":
            names = _list(value, where)
            if not names or not all(isinstance(name, str) and name for name in names) or len(set(names)) != len(names):
                raise TeamError("%s must be a list of recipe names, each once, at least one, got %r" % (where, value))
        elif key in ("retention_days", "retention_sessions"):
            try:
                check_count(value, where)
            except ValueError as error:
                raise TeamError(str(error))
        elif key == "token_budget":
            try:
                check_token_budget(value, where)
            except InputError as error:
                raise TeamError(str(error))
        elif key in ("upload_budget", "provider_upload_budget"):
            try:
                check_upload_budget(value, where)
            except InputError as error:
                raise TeamError(str(error))
        elif key == "harness_config":
            if value is not None and not (isinstance(value, str) and os.path.isabs(value)):
                raise TeamError("%s must be an absolute path on the workstation, got %r" % (where, value))
    except (InputError, PolicyError) as error:
        raise TeamError("%s: %s" % (where, error))
    return value


def _list(value, where):
    if not isinstance(value, list):
        raise TeamError("%s must be a list, got %s" % (where, type(value).__name__))
    return value


def _dict(value, where):
    if not isinstance(value, dict):
        raise TeamError("%s must be a dict, got %s" % (where, type(value).__name__))
    return value


def _check_limits(limits, where):
    for name, value in limits.items():
        if name not in LIMITS:
            raise TeamError("%s: unknown limit %r; the limits are %s" % (where, name, ", ".join(sorted(LIMITS))))
        if isinstance(value, bool) or not isinstance(value, LIMITS[name]):
            raise TeamError("%s: %s must be %s, got %r" % (
                where, name, " or ".join(kind.__name__ for kind in LIMITS[name]), value))


def check_team(data, origin=TEAM_FILE):
    """DATA (a team file's content, parsed) checked: {"settings", "user_may_add"};
    TeamError naming ORIGIN, the key and what is allowed."""
    if not isinstance(data, dict):
        raise TeamError("team file %s must hold a JSON object, got %s" % (origin, type(data).__name__))
    unknown = sorted(set(data) - {"format", "settings", "user_may_add"})
    if unknown:
        raise TeamError("team file %s: unknown keys %s; a team file has format, settings and user_may_add"
                        % (origin, ", ".join(unknown)))
    # bool is an int to Python: true is not format 1.
    if type(data.get("format")) is not int or data.get("format") != FORMAT:  # pylint: disable=unidiomatic-typecheck
        raise TeamError("team file %s: format must be %d, got %r" % (origin, FORMAT, data.get("format")))
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise TeamError("team file %s: settings must be a dict, got %s" % (origin, type(settings).__name__))
    settings = dict(settings)
    for key, value in sorted(settings.items()):
        if key not in DEFAULTS:
            raise TeamError("team file %s: settings.%s is not a setting; the settings are %s"
                            % (origin, key, ", ".join(SETTINGS)))
        settings[key] = _check_value(key, value, "team file %s: settings.%s" % (origin, key))
    try:
        recipe_for(settings.get("harness", DEFAULTS["harness"]), settings.get("recipes"))
        for name in settings.get("allowed_harnesses") or []:
            recipe_for(name, settings.get("recipes"))
    except InputError as error:
        raise TeamError("team file %s: settings.harness or allowed_harnesses: %s" % (origin, error))
    _check_allowed_harness(settings.get("harness", DEFAULTS["harness"]), settings.get("allowed_harnesses"),
                           "team file %s: settings.harness" % origin)
    for key in SECRET_KEYS:
        for index, entry in enumerate(settings.get(key, [])):
            if not any(source in entry for source in TEAM_CREDENTIAL_SOURCES):
                raise TeamError("team file %s: settings.%s[%d] must take its %s from %s: the team file is readable "
                                "by every local user, so a secret (value) never goes in it"
                                % (origin, key, index, "key" if key == "credentials" else "token",
                                   " or ".join(TEAM_CREDENTIAL_SOURCES)))
    may_add = data.get("user_may_add", [])
    if not isinstance(may_add, list) or not all(isinstance(key, str) for key in may_add):
        raise TeamError("team file %s: user_may_add must be a list of setting names (%s), got %r"
                        % (origin, ", ".join(SETTINGS), may_add))
    for key in may_add:
        if key not in DEFAULTS:
            raise TeamError("team file %s: user_may_add names %r, which is not a setting; the settings are %s"
                            % (origin, key, ", ".join(SETTINGS)))
        if key in TEAM_ONLY_KEYS:
            raise TeamError("team file %s: user_may_add names %s, which is the team's word on what developers may "
                            "choose, never a developer's" % (origin, key))
    if len(set(may_add)) != len(may_add):
        raise TeamError("team file %s: user_may_add names a setting twice" % origin)
    return {"settings": settings, "user_may_add": sorted(may_add)}


def render_team(team, origin="aisb_team"):
    """The team file's text for TEAM ({"settings", "user_may_add"}, as provision.yml's
    aisb_team holds them), checked first (check_team)."""
    if not isinstance(team, dict):
        raise TeamError("%s must be a dict with settings and user_may_add, got %s" % (origin, type(team).__name__))
    checked = check_team(dict({"format": FORMAT}, **team), origin)
    return json.dumps(dict(checked, format=FORMAT), indent=2, sort_keys=True) + "\n"


def _check_allowed_harness(harness, allowed, where):
    """TeamError naming WHERE unless HARNESS is among ALLOWED (None: any recipe)."""
    if allowed is not None and harness not in allowed:
        raise TeamError("%s %r is not among the harnesses the team allows: %s" % (where, harness, ", ".join(allowed)))


def root_only(info):
    """Whether a file's stat INFO says root's and writable by root alone."""
    return info.st_uid == 0 and not info.st_mode & 0o022


def _refuse_unless_root_only(path, info, what):
    if not root_only(info):
        raise TeamError(
            "%s %s belongs to uid %d with mode %04o: it must be root's and writable by root alone, or anybody "
            "could set the team's settings; run aisb.sandbox.provision to write it again"
            % (what, path, info.st_uid, stat.S_IMODE(info.st_mode)))


def read_team_file(path=TEAM_FILE):
    """PATH's team, checked (check_team), or None when there is no team file. A file that
    is a link, not root's, writable by anybody but root, in such a directory, or not a
    valid team file is refused (TeamError): the settings would not be the team's."""
    directory = os.path.dirname(path)
    try:
        # O_NONBLOCK: a FIFO in its place must not hang the session (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENOENT:
            return None
        raise TeamError("team file %s cannot be opened: %s%s" % (
            path, error.strerror, " (a link: the team file must be the file itself)"
            if error.errno == errno.ELOOP else ""))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise TeamError("team file %s is %s, not a regular file: write it again with aisb.sandbox.provision"
                        % (path, "a directory" if stat.S_ISDIR(info.st_mode) else "a special file"))
    with os.fdopen(fd, "rb") as handle:
        _refuse_unless_root_only(path, info, "team file")
        _refuse_unless_root_only(directory, os.lstat(directory), "the team file's directory")
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise TeamError("team file %s is larger than %d bytes" % (path, MAX_BYTES))
    try:
        parsed = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except ValueError as error:
        raise TeamError("team file %s is not JSON: %s" % (path, error))
    return check_team(parsed, path)


def _unique_keys(pairs):
    """A JSON object's dict; a key given twice is refused (json would keep the last, silently)."""
    names = [name for name, _value in pairs]
    twice = sorted(set(name for name in names if names.count(name) > 1))
    if twice:
        raise ValueError("key %s given more than once in one object" % ", ".join(repr(name) for name in twice))
    return dict(pairs)


def _changes(key, base, value):
    """Whether a developer's VALUE for KEY would change BASE, the value without it."""
    if key in LIST_KEYS:
        return any(entry not in base for entry in value)
    if key in DICT_KEYS:
        return any(name not in base or base[name] != entry for name, entry in value.items())
    return value != base


def _added(key, base, value, origin):
    """BASE with a developer's VALUE for KEY on top; TeamError for a dict entry the team set."""
    if key == "git_remotes":
        _refuse_changed_remotes(base, value, REMOTE_KEYS, origin)
    if key in LIST_KEYS:
        return base + [entry for entry in value if entry not in base]
    if key in DICT_KEYS:
        changed = sorted(name for name in value if name in base and base[name] != value[name])
        if changed:
            raise TeamError("%s changes %s, which the team file %s sets; a developer may add names, not change "
                            "the team's" % (variable(key), ", ".join(changed), origin))
        return dict(base, **value)
    return value


def _refuse_changed_remotes(team_remotes, given, keys, origin):
    """TeamError naming each of GIVEN's remotes for a repository one of TEAM_REMOTES names
    (_git_remotes.repository) with other KEYS' values: the team's url, branches, user name
    and token source are the team's."""
    team = dict((repository(remote["url"]), remote) for remote in team_remotes)
    changed = sorted(remote["url"] for remote in given if repository(remote["url"]) in team
                     and any(remote.get(k) != team[repository(remote["url"])].get(k) for k in keys))
    if changed:
        raise TeamError("%s changes %s, which the team file %s lists; a developer may add remotes, not change the "
                        "team's (their branches, username or token source)"
                        % (variable("git_remotes"), ", ".join(changed), origin))


def _under_ceiling(key, ceiling, value, origin):
    """A developer's VALUE for KEY, at most CEILING (the team's, None: none); TeamError above it."""
    if ceiling is not None and value > ceiling:
        raise TeamError("%s %d is over the team file %s's %s, %d: give at most %d, or leave it out for %d"
                        % (variable(key), value, origin, key, ceiling, ceiling, ceiling))
    return value


def apply_team(team, user, origin=TEAM_FILE):
    """The session's settings from TEAM (check_team's result, or None: no team file) and
    USER (the developer's values: {KEY: value} for the variables given). Returns
    (settings with every KEY, {allow entry: "team" or "user"}); TeamError naming ORIGIN
    when the team forbids a developer's value."""
    team_settings = team["settings"] if team else {}
    may_add = team["user_may_add"] if team else list(SETTINGS)
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        raise TeamError("not session settings: %s" % ", ".join(unknown))
    settings = {}
    for key in SETTINGS:
        base = team_settings.get(key, DEFAULTS[key])
        if key not in user or user[key] is None:
            settings[key] = base
            continue
        value = _check_value(key, user[key], variable(key))
        if key in may_add:
            settings[key] = _added(key, base, value, origin)
        elif key in CEILING_KEYS:
            settings[key] = _under_ceiling(key, base, value, origin)
        elif _changes(key, base, value):
            raise TeamError(
                "%s is refused: the team file %s %s and lets developers add to %s only (user_may_add)"
                % (variable(key), origin, "sets " + key if key in team_settings else "leaves %s at %s" % (
                    key, json.dumps(base)), ", ".join(may_add) or "nothing"))
        else:
            settings[key] = base
    try:
        recipe_for(settings["harness"], settings["recipes"])
    except InputError as error:
        raise TeamError("%s: %s" % (variable("harness"), error))
    _check_allowed_harness(settings["harness"], settings["allowed_harnesses"],
                           "%s (the team file %s's allowed_harnesses)" % (variable("harness"), origin))
    team_allow = team_settings.get("allow", [])
    origins = dict((entry, "team" if entry in team_allow else "user") for entry in settings["allow"])
    return settings, origins


def user_spec():
    """The developer's values as run_agent.yml gives them (its aisb_<KEY> variables): no
    defaults, so a value left out stays out (None)."""
    return dict(
        allow=dict(type="list", elements="raw"),
        connect_ports=dict(type="list", elements="raw"),
        pass_environment=dict(type="list", elements="str", no_log=False),
        environment=dict(type="raw", no_log=True),
        credentials=dict(type="raw", no_log=True),
        limits=dict(type="dict"),
        require_limits=dict(type="bool"),
        network=dict(type="str", choices=list(CHOICES["network"])),
        harness=dict(type="raw"),
        recipes=dict(type="raw"),
        harness_config=dict(type="str"),
        project_mode=dict(type="str", choices=list(CHOICES["project_mode"])),
        allow_unenforced=dict(type="bool"),
        project_harness_code=dict(type="bool"),
        retention_days=dict(type="int"),
        retention_sessions=dict(type="int"),
        token_budget=dict(type="int", no_log=False),
        upload_budget=dict(type="int"),
        provider_upload_budget=dict(type="int"),
        git_remotes=dict(type="raw", no_log=True),
    )


def check_session(team, given, origin=TEAM_FILE):
    """Refuse (TeamError) a session whose GIVEN settings (what the session itself was
    given: the policy's allow entries beyond the harness recipe's, its CONNECT ports,
    network, limits, ...) the team file does not allow. run_agent.yml applies the team
    file first, but its own variables (gate_allow, run_agent_settings) can be overridden
    with -e: the session checks again. A team limit missing or changed is refused too.
    GIVEN's git_remotes are the session's (tokens read, sources gone): each is the team's
    in all the broker does with it (_git_remotes.ROUTE), or one the team lets developers add."""
    if team is None:
        return
    apply_team(team, dict((key, value) for key, value in given.items() if key != "git_remotes"), origin)
    remotes = given.get("git_remotes") or []
    _refuse_changed_remotes(team["settings"].get("git_remotes", []), remotes, ROUTE, origin)
    listed = set(repository(remote["url"]) for remote in team["settings"].get("git_remotes", []))
    added = sorted(remote["url"] for remote in remotes if repository(remote["url"]) not in listed)
    if added and "git_remotes" not in team["user_may_add"]:
        raise TeamError("%s is refused: %s %s not among the team file %s's git_remotes, and it lets developers "
                        "add to %s only (user_may_add)" % (variable("git_remotes"), ", ".join(added),
                                                           "is" if len(added) == 1 else "are", origin,
                                                           ", ".join(team["user_may_add"]) or "nothing"))
    team_limits = team["settings"].get("limits", {})
    changed = sorted(name for name in team_limits if (given.get("limits") or {}).get(name) != team_limits[name])
    if changed:
        raise TeamError("the session's limits leave out or change %s, which the team file %s sets"
                        % (", ".join(changed), origin))
    # What the session runs with, not only what was added: apply_team takes a value left
    # out as the team's, so a team's variable or harness configuration missing is refused here.
    team_environment = team["settings"].get("environment", {})
    changed = sorted(name for name in team_environment
                     if (given.get("environment") or {}).get(name) != team_environment[name])
    if changed:
        raise TeamError("the session's environment leaves out or changes %s, which the team file %s sets"
                        % (", ".join(changed), origin))
    team_config = team["settings"].get("harness_config")
    if team_config is not None and given.get("harness_config") is None:
        raise TeamError("the session has no harness configuration, which the team file %s sets (harness_config %s)"
                        % (origin, team_config))
    team_budget = team["settings"].get("token_budget")
    if team_budget is not None and given.get("token_budget") is None:
        raise TeamError("the session has no token budget, which the team file %s sets (token_budget %d)"
                        % (origin, team_budget))
