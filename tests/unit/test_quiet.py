# SPDX-License-Identifier: GPL-3.0-or-later
"""The quiet stdout callback: its documentation, a debug message shown as it is, and which
messages go to stderr (all but the answer)."""

import yaml

from ansible_collections.aisb.sandbox.plugins.callback import quiet


def test_its_documentation_is_yaml_naming_it():
    doc = yaml.safe_load(quiet.DOCUMENTATION)
    assert doc["name"] == "quiet" and doc["type"] == "stdout"
    assert quiet.CallbackModule.CALLBACK_NAME == "aisb.sandbox.quiet"


def test_a_message_is_shown_as_it_is():
    assert quiet.shown(["line one", "line two"]) == "line one\nline two"
    assert quiet.shown("as {{ it }} is") == "as {{ it }} is"
    assert quiet.shown({"applied": ["a"]}) == '{\n  "applied": [\n    "a"\n  ]\n}'


class Task(object):
    def __init__(self, role=None, variables=None):
        self._role, self.vars = role, variables or {}


def test_the_plays_status_line_and_a_roles_messages_go_to_stderr_its_answer_to_stdout():
    assert quiet.status_message(Task(role="image")) is True
    assert quiet.status_message(Task(variables={quiet.STDERR_VARIABLE: True})) is True
    assert quiet.status_message(Task()) is False
    assert quiet.status_message(Task(variables={quiet.STDERR_VARIABLE: "yes"})) is False
