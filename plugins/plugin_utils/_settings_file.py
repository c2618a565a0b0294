# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The developer's own settings, ~/.config/aisb/settings.yml: the aisb_* values run_agent.yml
(and prune.yml) take, for a workstation without an inventory. The team_settings action
reads it on the controller, as the user who runs the play; a value given to the play
(-e, inventory) replaces the file's for its setting, and the team file filters the
result as it filters extra vars (_team.apply_team).

The file is refused, before anything starts, when anybody but its owner could have
written it (it or a directory on its way from the home directory, writable by group or
others; owned by another user), when it is a link out of the home directory or into a
tree sessions let the agent write, or when it is not a plain mapping of those names.

read_settings_file reads it (its side effects); everything else is pure.
"""

from __future__ import annotations

import errno
import os
import stat

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import RefusedError
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError, check_operator_path
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import check_credentials
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import check_git_remotes
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import PREFIX, TeamError, apply_team, user_spec, variable

# Under the home directory.
SETTINGS_FILE = os.path.join(".config", "aisb", "settings.yml")
# Far more than any settings need; the whole file is read before it is parsed.
MAX_BYTES = 64 * 1024
# Deeper than any setting's value (credentials: a list of dicts of lists).
MAX_DEPTH = 8


class SettingsFileError(RefusedError):
    """A settings file a session must not start with; the message names it and the fix."""


def settings_path(home):
    """The settings file of the user whose home directory is HOME."""
    return os.path.join(home, SETTINGS_FILE)


def origin(path):
    """The origin of the allow entries the file at PATH gave, as the record names it."""
    return "settings file %s" % path


def check_place(path, resolved, home, agent_trees):
    """PATH, whose links resolve to RESOLVED, refused when RESOLVED is outside HOME (both
    resolved) or inside one of AGENT_TREES (_input_checks.agent_trees)."""
    if not resolved.startswith(home.rstrip("/") + "/"):
        raise SettingsFileError("settings file %s is a link to %s, outside the home directory %s: keep the file "
                                "itself in %s (or link it to a file of yours in the home directory)"
                                % (path, resolved, home, os.path.dirname(path)))
    try:
        check_operator_path("settings file", path, agent_trees)
    except InputError as error:
        raise SettingsFileError(str(error))


def check_owner(path, info, uid, what="settings file"):
    """Refuse PATH (WHAT it is), whose lstat or fstat is INFO, unless it is UID's or root's and
    writable by its owner alone: anybody else could otherwise set the developer's settings."""
    mode = stat.S_IMODE(info.st_mode)
    fixes = (["chown %d %s" % (uid, path)] if info.st_uid not in (uid, 0) else []) + (
        ["chmod go-w %s" % path] if mode & 0o022 else [])
    if fixes:
        raise SettingsFileError(
            "%s %s belongs to uid %d with mode %04o: it must be yours (uid %d) and writable by you alone, or "
            "anybody else could choose your sessions' settings; run %s"
            % (what, path, info.st_uid, mode, uid, " and ".join(fixes)))


def parse_settings(data, path, readable_by_others):
    """DATA (the file's bytes) as {setting: value} (names without aisb_, values as the play's
    options would take them); SettingsFileError naming PATH. READABLE_BY_OTHERS: whether
    the file's mode lets others read it (a key value then may not be in it)."""
    if len(data) > MAX_BYTES:
        raise SettingsFileError("settings file %s is larger than %d bytes: it holds aisb_* settings only"
                                % (path, MAX_BYTES))
    try:
        text = data.decode("utf-8")
        _check_plain(text, path)
        parsed = yaml.load(text, Loader=_UniqueKeyLoader)
    except UnicodeDecodeError as error:
        raise SettingsFileError("settings file %s is not UTF-8 text: %s" % (path, error))
    except yaml.YAMLError as error:
        raise SettingsFileError("settings file %s is not YAML: %s" % (path, " ".join(str(error).split())))
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise SettingsFileError("settings file %s must hold a mapping of aisb_* settings, got %s"
                                % (path, type(parsed).__name__))
    spec = user_spec()
    names = sorted(variable(key) for key in spec)
    unknown = sorted(str(name) for name in parsed if not isinstance(name, str) or not name.startswith(PREFIX)
                     or name[len(PREFIX):] not in spec)
    if unknown:
        raise SettingsFileError("settings file %s: %s %s not a setting it may hold; it holds only %s"
                                % (path, ", ".join(unknown), "is" if len(unknown) == 1 else "are", ", ".join(names)))
    values = dict((name[len(PREFIX):], value) for name, value in parsed.items() if value is not None)
    validation = ArgumentSpecValidator(spec).validate(values)
    if validation.error_messages:
        raise SettingsFileError("settings file %s: %s (the option's name is the setting's without aisb_)"
                                % (path, validation.error_messages[0]))
    settings = dict((key, value) for key, value in validation.validated_parameters.items() if value is not None)
    for key, check in (("credentials", check_credentials), ("git_remotes", check_git_remotes)):
        if readable_by_others and key in settings:
            try:
                entries = check(settings[key])
            except InputError as error:
                raise SettingsFileError("settings file %s: %s" % (path, error))
            if any("value" in entry for entry in entries):
                raise SettingsFileError("settings file %s holds a secret (%s value) and other users can read it: "
                                        "run chmod 600 %s, or take it from_environment or from_file"
                                        % (path, variable(key), path))
    return settings


def _check_plain(text, path):
    """Refuse TEXT with an anchor, an alias (the way to a billion laughs), an explicit tag
    or nesting deeper than MAX_DEPTH: settings are plain values."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise SettingsFileError("settings file %s uses a YAML anchor or alias (&, *): write each value out"
                                    % path)
        if getattr(event, "tag", None):
            raise SettingsFileError("settings file %s uses a YAML tag (%s): write plain values" % (path, event.tag))
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise SettingsFileError("settings file %s nests values deeper than %d levels" % (path, MAX_DEPTH))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


class _UniqueKeyLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """A SafeLoader that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, "key %r given more than once" % (key,),
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_settings_file(home, agent_trees, uid):
    """(path, {setting: value}) of the settings file in HOME, checked (check_place,
    check_owner on it and each directory from HOME to it, parse_settings); (path, {}) when
    there is none. UID: the user's. SettingsFileError naming the file and the fix."""
    path = settings_path(home)
    try:
        os.lstat(path)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return path, {}
        raise SettingsFileError("settings file %s cannot be read: %s" % (path, error.strerror))
    home = os.path.realpath(home)
    resolved = os.path.realpath(path)
    check_place(path, resolved, home, agent_trees)
    try:
        # The links are resolved above: one appearing now is refused. O_NONBLOCK: a FIFO must not hang.
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise SettingsFileError("settings file %s cannot be read: %s" % (path, error.strerror))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsFileError("settings file %s is not a regular file: make it a YAML file of aisb_* settings"
                                    % path)
        check_owner(path if resolved == path else "%s (%s)" % (path, resolved), info, uid)
        directory = os.path.dirname(resolved)
        while True:
            check_owner(directory, os.lstat(directory), uid, "the settings file's directory")
            if directory == home or directory == os.path.dirname(directory):
                break
            directory = os.path.dirname(directory)
        data = handle.read(MAX_BYTES + 1)
    return path, parse_settings(data, path, bool(info.st_mode & 0o044))


def apply_settings(team, given, from_file, path, team_origin):
    """The session's settings and allow origins (_team.apply_team) from TEAM, GIVEN (the
    values given to the play) over FROM_FILE (the settings file PATH's, parse_settings).
    A refusal caused by the file's values names the file; the allow entries it gave have
    its origin."""
    used = dict((key, value) for key, value in from_file.items() if key not in given)
    try:
        settings, origins = apply_team(team, dict(used, **given), team_origin)
    except TeamError as error:
        # The play's own values refused alone: theirs is the sentence, as without a file.
        apply_team(team, given, team_origin)
        raise SettingsFileError("settings file %s: %s; change or remove it there (a value given to the play "
                                "with -e replaces the file's)" % (path, error))
    if "allow" in used:
        origins = dict((entry, origin(path) if source == "user" else source) for entry, source in origins.items())
    return settings, origins
