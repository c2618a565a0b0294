# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the image and gate roles' outcome depends on, read on the controller, where the
roles run: the key of aisb.sandbox.session_images (module_utils/images/_session_images).

- this collection's roles and plugins (templates, files, tasks, defaults, the recipe
  lookup, content_image, gate_policy): one digest over their bytes;
- every variable the two roles name anywhere (defaults, vars, tasks and their
  conditions, argument specs, templates), found by parsing them (role_variables), with
  the value it has in the play; none is listed by hand;
- the files the roles read from a variable's paths: the extra CA certificates.

Pure but for reading this collection's files, and play_key, which templates the play's
variables and finds the files through the task's action plugin.
"""

from __future__ import annotations

import hashlib
import os

import yaml
from ansible.errors import AnsibleError
from jinja2 import Environment, meta

from ansible_collections.aisb.sandbox.plugins.module_utils.common._content_hash import content_hash

# libyaml's safe loader where PyYAML has it (as Ansible's own does).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

ROLES = ("image", "gate")
# Role files whose strings are Jinja, and the task keys whose text is a bare expression.
ROLE_YAML = ("defaults/main.yml", "vars/main.yml", "tasks/main.yml", "meta/argument_specs.yml")
CONDITIONS = ("when", "that", "failed_when", "changed_when", "until")
# Named by the roles but not their inputs: the host's facts (the roles' own outputs among
# them, and the state directory run_agent.yml passes itself) and Ansible's per-run omit token.
NOT_INPUTS = ("ansible_facts", "omit")
# The variables naming files the roles read (the image role's query of their contents).
FILE_LISTS = ("image_extra_ca_certificates", "aisb_extra_ca_certificates")
# A refresh builds whatever was found: nothing is looked up for it.
REFRESH = ("aisb_refresh", "image_refresh", "gate_refresh")
# What the digest covers, under the collection's root.
DIGESTED = ("roles", "plugins")


class _AnyName(dict):
    """Every filter and test name is known: Ansible's (to_json, dict2items, ...) are not
    Jinja's, and parsing (nothing is rendered here) only needs to know they exist."""

    def __contains__(self, _name):
        return True

    def __getitem__(self, _name):
        return _unrendered

    def get(self, _name, _default=None):
        return _unrendered


def _unrendered(*_args, **_kwargs):
    """What every filter and test is while parsing: never called."""


# Parses only: Jinja's syntax, which Ansible's templates use.
_JINJA = Environment()
_JINJA.filters = _AnyName()
_JINJA.tests = _AnyName()


def collection_root():
    """This collection's directory (this file is plugins/plugin_utils/ in it)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _strings(data, key=None):
    """(text, whether it is a bare expression) for every string in DATA."""
    if isinstance(data, dict):
        for name, value in data.items():
            yield from _strings(value, name)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value, key)
    elif isinstance(data, str):
        yield data, key in CONDITIONS


def as_template(text, expression=False):
    """TEXT as a template (with EXPRESSION a bare one, as `when:` has, wrapped), or None
    when it is plain text."""
    if expression:
        return "{{ (%s) }}" % text
    return text if "{{" in text or "{%" in text else None


def template_names(templates):
    """The variables TEMPLATES name. Those without a statement ({% %}: only a statement
    declares a name) are parsed as one, since a parse costs per call. A role's text Jinja
    cannot read raises: a key that missed its variables would find images made for other
    inputs."""
    joined = "\n".join(text for text in templates if "{%" not in text)
    names = set()
    for text in [joined] + [text for text in templates if "{%" in text]:
        names |= meta.find_undeclared_variables(_JINJA.parse(text))
    return names


def role_variables(root):
    """Every variable ROOT's image and gate roles name, but NOT_INPUTS, sorted."""
    templates = []
    for role in ROLES:
        base = os.path.join(root, "roles", role)
        for relative in ROLE_YAML:
            try:
                with open(os.path.join(base, relative)) as handle:
                    data = yaml.load(handle, Loader=_YAML_LOADER)
            except FileNotFoundError:
                continue
            templates += filter(None, (as_template(text, expression) for text, expression in _strings(data)))
        directory = os.path.join(base, "templates")
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
            with open(os.path.join(directory, name)) as handle:
                templates.append(handle.read())
    return sorted(template_names(templates) - set(NOT_INPUTS))


def collection_digest(root):
    """sha256 over the paths and bytes of every file under ROOT's DIGESTED directories."""
    paths = []
    for top in DIGESTED:
        for directory, subdirectories, files in os.walk(os.path.join(root, top)):
            # Python's byte code is written as the plugins load: not the collection's.
            subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
            paths += [os.path.relpath(os.path.join(directory, name), root) for name in files]
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(os.path.join(root, path), "rb") as handle:
            digest.update(path.encode("utf-8") + b"\0" + hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def refresh_asked(values):
    """Whether VALUES (variable: value) ask for a refresh."""
    return any(str(values.get(name, "")).strip().lower() in ("1", "true", "yes", "on") for name in REFRESH)


def listed_files(values):
    """The paths VALUES' FILE_LISTS name, in order, once each."""
    paths = []
    for name in FILE_LISTS:
        listed = values.get(name)
        for path in listed if isinstance(listed, list) else []:
            if isinstance(path, str) and path not in paths:
                paths.append(path)
    return paths


def inputs_key(digest, values, file_digests):
    """The key: the content hash (as images are tagged) of the collection's DIGEST, the
    variables' VALUES and the read files' FILE_DIGESTS (path: sha256 of its bytes, or None
    when unreadable)."""
    return content_hash({"collection": digest, "variables": values, "files": file_digests})


def play_key(action, task_vars, registered=None):
    """The key of the roles' inputs in the play ACTION's task runs in (TASK_VARS), or None
    when a refresh is asked for. REGISTERED (name: value) are results the play's variables
    will see (the task's own, under its register name) before the roles run."""
    # pylint: disable=protected-access
    templar = (action._templar.copy_with_new_env(available_variables=dict(task_vars, **registered)) if registered
               else action._templar)
    root = collection_root()
    values = dict((name, templar.template(task_vars[name])) for name in role_variables(root) if name in task_vars)
    if refresh_asked(values):
        return None
    files = dict((path, _file_digest(action, path)) for path in listed_files(values))
    return inputs_key(collection_digest(root), values, files)


def _file_digest(action, path):
    """sha256 of the file PATH names as the roles' file lookup finds it, or None."""
    try:
        with open(action._find_needle("files", path), "rb") as handle:  # pylint: disable=protected-access
            return hashlib.sha256(handle.read()).hexdigest()
    except (AnsibleError, OSError):
        return None
