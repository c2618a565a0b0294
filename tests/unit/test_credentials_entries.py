# SPDX-License-Identifier: GPL-3.0-or-later
"""aisb_credentials: each entry checked, its key read on the controller, every error
naming the entry and never the key."""

import json
import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credentials import (
    check_credentials, check_private_hosts, check_resolved, check_session_use, resolve_credentials)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import ANTHROPIC

KEY = "sk-unit-secret-value"


def entry(**overrides):
    base = {"host": "api.anthropic.com", "header": "x-api-key", "variable": "ANTHROPIC_API_KEY", "value": KEY}
    base.update(overrides)
    return dict((k, v) for k, v in base.items() if v is not None)


def test_defaults_are_filled_in():
    # A built-in provider's host gets its request rules; another host none (any request).
    assert check_credentials([entry(host="API.Anthropic.com")]) == [
        {"host": "api.anthropic.com", "port": 443, "header": "x-api-key", "prefix": "", "variable": "ANTHROPIC_API_KEY",
         "value": KEY, "paths": list(ANTHROPIC.paths)}]
    assert "paths" not in check_credentials([entry(host="models.example")])[0]
    assert check_credentials(None) == [] and check_credentials("[]") == []


@pytest.mark.parametrize("bad, words", [
    (entry(host="https://api.anthropic.com"), "host"),
    (entry(host="198.18.0.1"), "DNS name"),
    (entry(host="*.anthropic.com"), "DNS name"),
    (entry(port=0), "port"),
    (entry(port="443"), "port"),
    (entry(header="Host"), "header"),
    (entry(header="x api key"), "header"),
    (entry(prefix="Bearer\n"), "prefix"),
    (entry(variable="HTTPS_PROXY"), "set by the session"),
    (entry(variable="1BAD"), "not a valid"),
    (entry(value=None), "exactly one"),
    (entry(from_environment="K"), "exactly one"),
    (entry(value=""), "non-empty"),
    (entry(value="two\nlines"), "cannot carry"),
    (entry(from_environment="bad name", value=None), "not a valid"),
    (dict(entry(), colour="blue"), "unknown keys colour"),
    ("api.anthropic.com", "must be a dict"),
])
def test_a_bad_entry_is_refused_by_its_index(bad, words):
    with pytest.raises(InputError) as error:
        check_credentials([entry(host="ok.example"), bad])
    assert str(error.value).startswith("aisb_credentials[1]") or "aisb_credentials[1]" in str(error.value)
    assert words in str(error.value)
    assert KEY not in str(error.value)


def test_one_key_per_host_and_per_variable():
    with pytest.raises(InputError, match=r"\[1\]: host api.anthropic.com:443"):
        check_credentials([entry(), entry(variable="OTHER")])
    with pytest.raises(InputError, match=r"\[1\]: variable ANTHROPIC_API_KEY"):
        check_credentials([entry(), entry(host="other.example")])
    assert len(check_credentials([entry(), entry(port=8443, variable="OTHER")])) == 2


def test_keys_come_from_the_controller_environment_a_file_or_a_value(tmp_path):
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    os.chmod(path, 0o600)
    resolved = resolve_credentials([
        entry(value=None, from_environment="MY_KEY"),
        entry(value=None, from_file=str(path), host="b.example", variable="B"),
        entry(host="c.example", variable="C", prefix="Bearer ", header="Authorization"),
    ], {"MY_KEY": KEY})
    assert [r["key"] for r in resolved] == [KEY, KEY, KEY]
    assert set(resolved[0]) == {"host", "port", "header", "prefix", "variable", "key", "paths"}
    assert all(set(r) == {"host", "port", "header", "prefix", "variable", "key"} for r in resolved[1:])
    with pytest.raises(InputError, match=r"\[0\]: from_environment MY_KEY is not set"):
        resolve_credentials([entry(value=None, from_environment="MY_KEY")], {})


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o700 | 0o002])
def test_a_key_file_others_may_use_is_refused(tmp_path, mode):
    path = tmp_path / "key"
    path.write_text(KEY)
    os.chmod(path, mode)
    with pytest.raises(InputError) as error:
        resolve_credentials([entry(value=None, from_file=str(path))], {})
    assert "aisb_credentials[0]" in str(error.value) and "group or others" in str(error.value)
    assert KEY not in str(error.value)


def test_a_key_file_that_is_missing_or_a_link_is_refused(tmp_path):
    with pytest.raises(InputError, match="cannot be opened"):
        resolve_credentials([entry(value=None, from_file=str(tmp_path / "missing"))], {})
    target = tmp_path / "target"
    target.write_text(KEY)
    os.chmod(target, 0o600)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(InputError, match="cannot be opened"):
        resolve_credentials([entry(value=None, from_file=str(tmp_path / "link"))], {})


def test_the_module_checks_what_it_receives_again():
    resolved = resolve_credentials([entry()], {})
    assert check_resolved(json.dumps(resolved)) == resolved
    with pytest.raises(InputError, match="resolved entries"):
        check_resolved([entry()])
    with pytest.raises(InputError, match="cannot carry"):
        check_resolved([dict(resolved[0], key="a\r\nX-Injected: 1")])


def test_a_session_refuses_a_variable_given_twice_or_no_gate():
    resolved = resolve_credentials([entry()], {})
    with pytest.raises(InputError, match=r"\[0\]: variable ANTHROPIC_API_KEY is also given"):
        check_session_use(resolved, {"ANTHROPIC_API_KEY": "x"}, "allow")
    with pytest.raises(InputError, match="need network allow"):
        check_session_use(resolved, {}, "no-gate")
    check_session_use(resolved, {"OTHER": "x"}, "allow")
    check_session_use([], {}, "none")


def test_a_private_entrys_name_takes_a_key_on_its_pinned_port_only():
    private = parse_policy(["models.lan:443=10.0.0.5", "models.lan:8443=10.0.0.6", "other.lan:443=10.0.0.7"]).private
    for port in (443, 8443):
        check_private_hosts(resolve_credentials([entry(host="models.lan", port=port)], {}), private)
    check_private_hosts(resolve_credentials([entry()], {}), private)
    with pytest.raises(InputError, match=r"aisb_credentials\[0\]: host models.lan port 8000: models.lan is a "
                                         r"private entry's name \(aisb_allow models.lan:443=10.0.0.5, "
                                         r"models.lan:8443=10.0.0.6\): a key for it goes only to the pinned "
                                         r"address, on that entry's port; give that port"):
        check_private_hosts(resolve_credentials([entry(host="models.lan", port=8000)], {}), private)
