# SPDX-License-Identifier: GPL-3.0-or-later
"""The built-in providers' request rules: a path some server would read as another is
refused, never decoded; a rule matches a whole path, '*' inside one segment only."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import (
    ANTHROPIC, DEFAULTS, GOOGLE, OPENAI, PathRuleError, allowed_request, check_paths, held_sentence, key_parameters,
    keys_held, outbound_request, provider_at, request_path)


@pytest.mark.parametrize("target", [
    "/v1/../v1/files", "/v1/%2e%2e/files", "/v1/%2E%2E/files", "/v1%2ffiles", "/v1%2Ffiles", "//v1/messages",
    "/v1//messages", "/v1\\messages", "/v1/messages%00", "/v1/messages\x00", "/v1/%5cfiles", "v1/messages", "",
])
def test_an_ambiguous_path_is_refused_not_decoded(target):
    assert request_path(target) is None


def test_the_query_is_not_part_of_the_path():
    assert request_path("/v1/models?limit=1") == "/v1/models"


@pytest.mark.parametrize("method, path, rule", [
    ("POST", "/v1/messages", "POST /v1/messages"),
    ("POST", "/v1/messages/count_tokens", "POST /v1/messages/count_tokens"),
    ("GET", "/v1/models", "GET /v1/models"),
    ("GET", "/v1/models/claude-x", "GET /v1/models/*"),
])
def test_anthropics_rules_let_a_harness_work(method, path, rule):
    assert allowed_request(ANTHROPIC.paths, method, path) == rule


@pytest.mark.parametrize("method, path", [
    ("POST", "/v1/files"), ("GET", "/v1/files"), ("POST", "/v1/messages/batches"), ("GET", "/v1/messages"),
    ("DELETE", "/v1/models/x"), ("POST", "/v1/messages/"), ("POST", "/V1/messages"), ("GET", "/v1/models/a/b"),
    ("POST", "/v1/messages/count_tokens/x"),
])
def test_anything_else_of_the_key_is_refused(method, path):
    assert allowed_request(ANTHROPIC.paths, method, path) is None


def test_openai_and_google_rules():
    assert allowed_request(OPENAI.paths, "POST", "/v1/responses")
    assert allowed_request(OPENAI.paths, "POST", "/v1/files") is None
    assert allowed_request(GOOGLE.paths, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert allowed_request(GOOGLE.paths, "POST", "/v1beta/models/gemini:generateContent")
    assert allowed_request(GOOGLE.paths, "POST", "/v1beta/models/:generateContent") is None
    assert allowed_request(GOOGLE.paths, "POST", "/v1beta/files") is None
    assert allowed_request(GOOGLE.paths, "POST", "/v1beta/models/x/y:generateContent") is None


def test_an_operator_extends_or_replaces_the_defaults():
    assert check_paths(None, ANTHROPIC, "p") == ANTHROPIC.paths
    assert check_paths([DEFAULTS, "POST /v1/files"], ANTHROPIC, "p") == ANTHROPIC.paths + ("POST /v1/files",)
    assert check_paths(["POST /v1/messages"], ANTHROPIC, "p") == ("POST /v1/messages",)
    assert check_paths(None, None, "p") is None
    assert provider_at("api.openai.com", 443) is OPENAI and provider_at("api.openai.com", 8443) is None


@pytest.mark.parametrize("paths, words", [
    ([], "non-empty list"), ("POST /v1/messages", "non-empty list"), (["post /v1/messages"], "p[0]"),
    (["POST v1/messages"], "p[0]"), (["POST  /v1"], "p[0]"), (["POST /v1/../files"], "p[0]"),
    (["GET /v1", "POST /v1/%2e"], "p[1]"), (["POST /v1//x"], "p[0]"), ([3], "p[0]"), (["POST /v1 x"], "p[0]"),
])
def test_a_bad_rule_is_refused_naming_it(paths, words):
    with pytest.raises(PathRuleError, match=words.replace("[", r"\[")):
        check_paths(paths, ANTHROPIC, "p")


def test_defaults_need_a_built_in_provider():
    with pytest.raises(PathRuleError, match="no built-in provider is at this host"):
        check_paths([DEFAULTS], None, "p")


def test_the_keys_the_agent_holds_are_said_in_one_line():
    assert keys_held({"OPENAI_API_KEY": "k", "OTHER": "1"}) == ["OPENAI_API_KEY"]
    assert held_sentence([]) is None
    line = held_sentence(["OPENAI_API_KEY"])
    assert "OPENAI_API_KEY" in line and "\n" not in line


@pytest.mark.parametrize("target", ["/v1/models#/../files", "/v1/messages#x", "/v1/models/%252e%252e%252ffiles",
                                    "/v1/models/%41", "/v1/models?x=1#frag"])
def test_a_fragment_or_any_escape_is_refused(target):
    assert request_path(target) is None


@pytest.mark.parametrize("target, names", [
    ("/v1beta/models?key=PLANTED", ["key"]), ("/v1/models?alt=sse&KEY=x", ["key"]),
    ("/v1/models?a=1;access_token=t", ["access_token"]), ("/v1/models?api_key", ["api_key"]),
    ("/v1/models?alt=sse&beta=true", []), ("/v1/models", []), ("/v1/models?monkey=1", []),
])
def test_a_key_in_the_query_is_found(target, names):
    assert key_parameters(target) == names


@pytest.mark.parametrize("body", [
    {"model": "m", "mcp_servers": [{"type": "url", "url": "https://attacker.example/mcp", "name": "x"}]},
    {"model": "m", "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
    {"model": "m", "tools": [{"type": "mcp", "server_label": "x", "server_url": "https://attacker.example"}]},
    {"contents": [], "tools": [{"url_context": {}}]},
    {"contents": [], "tools": [{"urlContext": {}}]},
], ids=["anthropic mcp_servers", "anthropic web_fetch", "openai mcp", "google url_context", "google urlContext"])
def test_a_request_that_has_the_provider_reach_a_server_of_its_choosing_is_named(body):
    assert outbound_request(json.dumps(body).encode())


def test_an_escaped_or_doubled_key_does_not_hide_it():
    assert outbound_request(b'{"\\u006dcp_servers": [{"url": "https://attacker.example"}]}')
    assert "twice" in outbound_request(b'{"tools": [{"type": "mcp", "server_url": "x"}], "tools": []}')
    assert outbound_request(b'{"mcp_servers": [1], ') is not None


@pytest.mark.parametrize("body", [
    None, b"", b"{}", json.dumps({"model": "m", "messages": [{"role": "user", "content": "say mcp_servers"}]}).encode(),
    json.dumps({"tools": [{"type": "custom", "name": "bash"}, {"type": "web_search_20250305"}]}).encode(),
    json.dumps({"mcp_servers": []}).encode(), b"not json at all",
])
def test_an_ordinary_request_is_not(body):
    assert outbound_request(body) is None
