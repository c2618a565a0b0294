# SPDX-License-Identifier: GPL-3.0-or-later
"""aisb_git_remotes: each entry checked with its name in every error, tokens read on the
controller, and the session module's second check of what it is sent."""

import json
import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_remotes import (
    check_git_remotes, check_resolved_remotes, resolve_git_remotes)


def test_an_entry_is_filled_in():
    assert check_git_remotes([{"url": "https://GitHub.com/org/repo.git/", "from_environment": "GH_TOKEN"}]) == [
        {"url": "https://github.com/org/repo.git", "host": "github.com", "port": 443, "path": "/org/repo.git",
         "branches": "aisb/{session}/*", "username": "x-access-token", "from_environment": "GH_TOKEN"}]
    entry = check_git_remotes(json.dumps([{"url": "https://git.example.org:8443/g/sub/r", "branches": "bot/*",
                                           "username": "oauth2", "value": "t"}]))[0]
    assert (entry["url"], entry["port"], entry["path"], entry["branches"], entry["username"]) == (
        "https://git.example.org:8443/g/sub/r", 8443, "/g/sub/r", "bot/*", "oauth2")
    assert check_git_remotes(None) == []


@pytest.mark.parametrize("entry, why", [
    ("x", "must be a dict"),
    ({"url": "https://h.org/r", "value": "t", "token": "t"}, "unknown keys token"),
    ({"value": "t"}, "url None"),
    ({"url": "http://h.org/r", "value": "t"}, "must be https://"),
    ({"url": "https://u:p@h.org/r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/r?x=1", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/r#x", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/a/../r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org//r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/a/./r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/a/.", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/", "value": "t"}, "must be https://"),
    ({"url": "https://10.0.0.1/r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org:0/r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org:70000/r", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/r%2e", "value": "t"}, "must be https://"),
    ({"url": "https://h.org/r", "value": "t", "branches": "main/*/x"}, "branches 'main/*/x'"),
    ({"url": "https://h.org/r", "value": "t", "username": "a:b"}, "username"),
    ({"url": "https://h.org/r"}, "exactly one of"),
    ({"url": "https://h.org/r", "value": "t", "from_file": "/f"}, "exactly one of"),
    ({"url": "https://h.org/r", "value": ""}, "non-empty"),
    ({"url": "https://h.org/r", "from_environment": "A-B"}, "from_environment"),
])
def test_bad_entries_are_refused_with_their_index(entry, why):
    with pytest.raises(InputError) as raised:
        check_git_remotes([{"url": "https://h.org/first", "value": "t"}, entry])
    assert str(raised.value).startswith("aisb_git_remotes[1]") and why in str(raised.value)


@pytest.mark.parametrize("other", ["https://H.org/r/", "https://h.org/r.git", "https://h.org/R.GIT", "https://h.org:443/r"])
def test_a_repository_twice_is_refused(other):
    """Forges read a repository's path without case and with or without .git: two entries
    for one repository would be two branch patterns for it."""
    with pytest.raises(InputError, match=r"aisb_git_remotes\[1\]: url https://h.org/\S+ names the repository of an "
                                         r"earlier entry"):
        check_git_remotes([{"url": "https://h.org/r", "value": "t"}, {"url": other, "value": "u"}])
    assert len(check_git_remotes([{"url": "https://h.org/r", "value": "t"}, {"url": "https://h.org/r2", "value": "u"},
                                  {"url": "https://h.org:8443/r", "value": "v"}])) == 3


def test_tokens_are_read_from_their_sources(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    os.chmod(token_file, 0o600)
    resolved = resolve_git_remotes(check_git_remotes([{"url": "https://h.org/a", "from_environment": "GH"},
                                                      {"url": "https://h.org/b", "from_file": str(token_file)},
                                                      {"url": "https://h.org/c", "value": "v"}]), {"GH": "from-env"})
    assert [entry["token"] for entry in resolved] == ["from-env", "from-file", "v"]
    assert all("value" not in entry and "from_file" not in entry for entry in resolved)
    os.chmod(token_file, 0o644)
    with pytest.raises(InputError, match=r"^aisb_git_remotes\[0\]: from_file .* chmod 600"):
        resolve_git_remotes(check_git_remotes([{"url": "https://h.org/b", "from_file": str(token_file)}]), {})
    with pytest.raises(InputError, match=r"^aisb_git_remotes\[0\]: from_environment GH is not set"):
        resolve_git_remotes(check_git_remotes([{"url": "https://h.org/a", "from_environment": "GH"}]), {})
    with pytest.raises(InputError, match="visible ASCII"):
        resolve_git_remotes([{"url": "https://h.org/a", "username": "u", "from_environment": "GH"}], {"GH": "a\nb"})


def test_the_module_checks_what_it_is_sent_again():
    resolved = resolve_git_remotes(check_git_remotes([{"url": "https://h.org/a", "value": "tok"}]), {})
    assert check_resolved_remotes(json.dumps(resolved)) == resolved
    for bad in ("[", [{"url": "https://h.org/a"}], [dict(resolved[0], url="http://h.org/a")],
                [dict(resolved[0], token="a\rb")]):
        with pytest.raises(InputError):
            check_resolved_remotes(bad)
