# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model providers the built-in harness recipes talk to, in one place: each one's
host, the path its base URL has, the requests a harness needs of it, and the variables a
key for it is read from (with the header and prefix the key goes in).

A session injects a key found in one of these variables (_credentials.implicit_entries)
instead of handing it to the sandbox, and the credential injector relays to a provider
only the requests its rules name (allowed_request). Pure.
"""

from __future__ import annotations

import functools
import json
import re
import typing

# The word in a paths list that stands for the provider's own rules (Provider.paths).
DEFAULTS = "defaults"
METHOD = re.compile(r"\A[A-Z]{1,16}\Z")
# A rule's path: segments of URL characters, '*' standing for any run of them inside one
# segment. What a path may hold is checked again on each request (request_path).
RULE_PATH = re.compile(r"\A(/[A-Za-z0-9._~:@!$&'()*+,;=-]+)+\Z")
# Spellings that mean another path to some server: refused, never decoded. Any %-escape
# at all (a double one, %252e, is '.' to a server that decodes twice); no rule needs one.
AMBIGUOUS = re.compile(r"\.\.|%|//|\\|\x00")
# Query parameters a provider takes a key from (Google's key=): a key of the agent's own
# would ride along beside the injected one.
KEY_PARAMETERS = frozenset(["key", "api_key", "apikey", "api-key", "access_token"])


class Provider(typing.NamedTuple):
    name: str  # pi's name for it (its models.json providers)
    host: str
    base_path: str  # what a harness's base URL for it has after the host
    paths: typing.Tuple[str, ...]  # "METHOD /path" rules: what a harness needs of it


class ProviderKey(typing.NamedTuple):
    variable: str  # where a harness reads the key
    provider: Provider
    header: str
    prefix: str


ANTHROPIC = Provider("anthropic", "api.anthropic.com", "", (
    "POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models", "GET /v1/models/*"))
OPENAI = Provider("openai", "api.openai.com", "/v1", (
    "POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models", "GET /v1/models/*"))
GOOGLE = Provider("google", "generativelanguage.googleapis.com", "/v1beta", tuple(
    rule for version in ("v1beta", "v1") for rule in (
        "POST /%s/models/*:generateContent" % version, "POST /%s/models/*:streamGenerateContent" % version,
        "POST /%s/models/*:countTokens" % version, "GET /%s/models" % version, "GET /%s/models/*" % version)))
PROVIDERS = (ANTHROPIC, OPENAI, GOOGLE)
# In the order a session prefers them when two name the same provider (Claude Code reads either).
PROVIDER_KEYS = (
    ProviderKey("ANTHROPIC_API_KEY", ANTHROPIC, "x-api-key", ""),
    ProviderKey("ANTHROPIC_AUTH_TOKEN", ANTHROPIC, "Authorization", "Bearer "),
    ProviderKey("OPENAI_API_KEY", OPENAI, "Authorization", "Bearer "),
    ProviderKey("GEMINI_API_KEY", GOOGLE, "x-goog-api-key", ""),
)
KEY_VARIABLES = frozenset(key.variable for key in PROVIDER_KEYS)


def key_for(variable):
    """The ProviderKey read from VARIABLE, or None."""
    return next((key for key in PROVIDER_KEYS if key.variable == variable), None)


def provider_at(host, port):
    """The built-in provider served at HOST (lower case) and PORT, or None."""
    return next((provider for provider in PROVIDERS if provider.host == host and port == 443), None)


def keys_held(environment):
    """The provider key variables ENVIRONMENT (the harness's, before the session adds its
    placeholders) hands the agent as they are: the operator named each one."""
    return sorted(name for name in environment if name in KEY_VARIABLES)


def held_sentence(held):
    """One line for the play and the record when the agent holds provider keys, else None."""
    if not held:
        return None
    return ("the agent holds the provider key%s %s as it is (named in aisb_pass_environment or aisb_environment): "
            "it can use it from the sandbox for anything the key allows; leave it out to have it injected"
            % ("s" if len(held) > 1 else "", ", ".join(held)))


# Bytes without which a JSON request cannot ask the provider to reach a server of its
# choosing (a key spelled with an escape needs "\u"): requests without any are not parsed.
OUTBOUND_MARKS = (b"mcp_servers", b"server_url", b"web_fetch", b"url_context", b"urlContext", b"\\u")


def _unique_keys(pairs):
    keys = [key for key, _value in pairs]
    if len(keys) != len(set(keys)):
        # Parsers differ on which of two equal keys wins: neither is taken.
        raise ValueError("a key appears twice in one object")
    return dict(pairs)


def outbound_request(body):
    """Why BODY (a request's) would have the provider itself reach a server the request
    names, past the gate (Anthropic's MCP connector and web_fetch tool, OpenAI's remote
    MCP tool, Google's url_context), or None. A body that holds such a name but is not
    JSON every parser reads alike (a key twice in one object, say) is refused too."""
    if not body or not any(mark in body for mark in OUTBOUND_MARKS):
        return None
    try:
        request = json.loads(body, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as error:
        return "its body names a server-side fetch or MCP server but is not plain JSON (%s)" % error
    if not isinstance(request, dict):
        return None
    if request.get("mcp_servers"):
        return "mcp_servers has the provider connect to a server the request names"
    tools = request.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        kind = str(tool.get("type", "")) if isinstance(tool, dict) else ""
        if isinstance(tool, dict) and (kind == "mcp" or kind.startswith("web_fetch") or "server_url" in tool
                                       or "url_context" in tool or "urlContext" in tool):
            return "a tool (%s) has the provider fetch from a server the request names" % (
                kind or ", ".join(sorted(tool)))
    return None


class PathRuleError(ValueError):
    """A paths list that is not rules: the message says which item and why."""


def check_paths(paths, provider, origin):
    """PATHS as an entry gives them (a list of "METHOD /path" rules, DEFAULTS standing
    for PROVIDER's rules), or None for the defaults: a tuple of rules, or None when
    neither is given (an entry for a host no built-in provider is at: any request)."""
    if paths is None:
        return provider.paths if provider else None
    if not isinstance(paths, list) or not paths:
        raise PathRuleError("%s must be a non-empty list of \"METHOD /path\" rules (and %r for the provider's own)"
                            % (origin, DEFAULTS))
    rules = []
    for index, rule in enumerate(paths):
        if rule == DEFAULTS:
            if provider is None:
                raise PathRuleError("%s[%d]: %r names a built-in provider's rules, and no built-in provider is at "
                                    "this host (%s)" % (origin, index, DEFAULTS,
                                                        ", ".join(p.host for p in PROVIDERS)))
            rules.extend(provider.paths)
            continue
        method, _space, path = rule.partition(" ") if isinstance(rule, str) else ("", "", "")
        if not METHOD.match(method) or not RULE_PATH.match(path) or AMBIGUOUS.search(path):
            raise PathRuleError("%s[%d]: %r must be \"METHOD /path\": an upper-case method, one space, and a path "
                                "of URL characters ('*' for any run of them inside one segment), without '..', "
                                "'//', backslashes or %%-escapes of '.', '/', '\\' or NUL" % (origin, index, rule))
        rules.append(rule)
    return tuple(dict.fromkeys(rules))


def request_path(target):
    """The path of a request TARGET (its query left out), or None when the target has a
    fragment (no request carries one; a server may read '#' as part of the path) or the
    path holds a spelling that some server would read as another path ('..', '//', a
    backslash, NUL, any %-escape): such a request is refused, never decoded."""
    path = target.split("?", 1)[0]
    if "#" in target or not path.startswith("/") or AMBIGUOUS.search(path):
        return None
    return path


def key_parameters(target):
    """The query parameters of TARGET that a provider would read a key from (any case)."""
    query = target.partition("?")[2]
    if not query:
        return []
    names = (pair.partition("=")[0].lower() for pair in re.split(r"[&;]", query) if pair)
    return sorted(set(name for name in names if name in KEY_PARAMETERS))


@functools.lru_cache(maxsize=256)
def _rule_pattern(rule):
    """RULE as one pattern over "METHOD /path": '*' is one or more characters but '/'."""
    return re.compile(r"\A%s\Z" % "[^/]+".join(re.escape(part) for part in rule.split("*")))


def allowed_request(rules, method, path):
    """The rule of RULES ("METHOD /path") that METHOD and PATH (request_path's) match, or
    None. A rule matches the whole path, segment by segment; '*' matches one or more
    characters within a segment."""
    request = "%s %s" % (method, path)
    return next((rule for rule in rules if _rule_pattern(rule).match(request)), None)
