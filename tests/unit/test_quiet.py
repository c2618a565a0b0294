# SPDX-License-Identifier: GPL-3.0-or-later
"""The quiet stdout callback: its documentation, and a debug message shown as it is."""

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
