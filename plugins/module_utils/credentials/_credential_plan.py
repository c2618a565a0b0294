# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a session's provider credentials make of it, besides the injector itself
(_credential_injector): the per-session placeholders, the harness's view (its variables,
the injector's URL, a recipe's base-URL variables, pi's models.json, codex's
config.toml), the gate's
refusals (a placeholder sent anywhere else; a provider the injector serves reached
directly), and those refusals read back from the gate's log.

Pure. The sandbox only ever sees placeholders; the keys stay with the injector.
"""

from __future__ import annotations

import json
import re
import uuid
from urllib.parse import urlsplit

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import PROXY_VARIABLE
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import key_for, provider_at
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import log_entry

DEFAULT_PORT = 443
PLACEHOLDER_PREFIX = "aisb-placeholder-"
# Headers the gate searches for a placeholder in plain HTTP, besides each entry's own
# header and the URL: where the usual providers and tools put a key.
KEY_HEADERS = ("Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key")
# The gate's log lines for a request that carried a placeholder and for one that went to
# a provider the injector serves, past it (parse_gate_log's aisb lines never match them:
# the kind stands where they have client=).
ELSEWHERE = "credential-elsewhere"
PROVIDER_DIRECT = "provider-direct"
REFUSAL_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) (?P<kind>%s|%s) client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+)$" % (ELSEWHERE, PROVIDER_DIRECT))
# pi (harness command "pi") reads ~/.pi/agent/models.json: a provider entry there with
# only a baseUrl moves that built-in provider (_providers: pi's names for them, the
# variables pi reads their keys from, the path a base URL has after the host).
PI_MODELS_PATH = "/home/agent/.pi/agent/models.json"
# Its name in the session's directory.
PI_MODELS_FILE = "pi-models.json"
# codex (harness command "codex") reads ~/.codex/config.toml. Its built-in openai
# provider takes neither a key nor a base URL from the environment (0.169.0: the key from
# auth.json, the URL fixed), so an injected OPENAI_API_KEY needs a provider of the
# session's own there, reading the placeholder from the variable, speaking the Responses
# API (its only wire API).
CODEX_CONFIG_PATH = "/home/agent/.codex/config.toml"
CODEX_CONFIG_FILE = "codex-config.toml"
CODEX_PROVIDER = "aisb-injected-openai"


def new_placeholder():
    return PLACEHOLDER_PREFIX + uuid.uuid4().hex


def route(entry):
    """The injector's path segment for ENTRY's provider: HOST, or HOST:PORT off the default."""
    return entry["host"] if entry["port"] == DEFAULT_PORT else "%s:%d" % (entry["host"], entry["port"])


def harness_environment(placeholders, proxy_url):
    """The harness's variables: each entry's placeholder, and where the injector is."""
    environment = dict(placeholders)
    environment[PROXY_VARIABLE] = proxy_url
    return environment


def by_route(entries):
    """{"host:port": entry} for ENTRIES."""
    return dict(("%s:%d" % (entry["host"], entry["port"]), entry) for entry in entries)


def base_urls(entries, url_variables, proxy_url, environment):
    """{URL variable: URL} for each of ENTRIES whose variable the recipe's credential_urls
    (URL_VARIABLES, {key variable: URL variable}) names: where the harness reads that
    provider's base URL (Claude Code: ANTHROPIC_BASE_URL), moved to the injector, with a
    built-in provider's base path (opencode's OPENAI_BASE_URL: /v1). A value the operator gave in ENVIRONMENT
    keeps its path behind the injector (it is on the entry's host and port:
    _credentials.check_session_use refused it otherwise)."""
    urls = {}
    for entry in entries:
        variable = url_variables.get(entry["variable"])
        if variable:
            provider = provider_at(entry["host"], entry["port"])
            urls[variable] = (injector_url(environment.get(variable), by_route([entry]), proxy_url)
                              or "%s/%s%s" % (proxy_url, route(entry), provider.base_path if provider else ""))
    return urls


def pi_models(entries, proxy_url, operator_text=None):
    """pi's models.json text with each provider ENTRIES reach moved to the injector, or
    None when there is nothing to write. OPERATOR_TEXT, the operator's own models.json
    (aisb_harness_config), is the base: a provider or model whose baseUrl is on an
    entry's host and port keeps its path behind the injector; then each built-in
    provider named by an entry's variable gets the injector's URL for that entry, over
    whatever the operator's file said (the key goes only where its entry says)."""
    models = json.loads(operator_text) if operator_text else {}
    providers = models.setdefault("providers", {})
    routes = by_route(entries)
    for provider in providers.values():
        # Shapes as _harness_config checked them: objects all the way down.
        for holder in [provider] + list(provider.get("models") or []):
            moved = injector_url(holder.get("baseUrl"), routes, proxy_url)
            if moved:
                holder["baseUrl"] = moved
    for entry in entries:
        key = key_for(entry["variable"])
        if key is not None:
            providers.setdefault(key.provider.name, {})["baseUrl"] = "%s/%s%s" % (
                proxy_url, route(entry), key.provider.base_path)
    if not providers and not operator_text:
        return None
    return json.dumps(models, indent=2, sort_keys=True) + "\n"


def codex_config(entries, proxy_url):
    """codex's config.toml text naming a provider behind the injector for the entry of
    OPENAI_API_KEY on OpenAI's API, or None when no entry is. JSON's string syntax is
    TOML's basic string for these values."""
    key = key_for("OPENAI_API_KEY")
    for entry in entries:
        if entry["variable"] == key.variable and provider_at(entry["host"], entry["port"]) is key.provider:
            return "\n".join([
                "# Written by the session: OPENAI_API_KEY is held by its injector.",
                "model_provider = %s" % json.dumps(CODEX_PROVIDER), "",
                "[model_providers.%s]" % CODEX_PROVIDER,
                "name = %s" % json.dumps("OpenAI (key held by aisb)"),
                "base_url = %s" % json.dumps("%s/%s%s" % (proxy_url, route(entry), key.provider.base_path)),
                "env_key = %s" % json.dumps(key.variable),
                'wire_api = "responses"', ""])
    return None


def moved_urls(text, entries, proxy_url):
    """TEXT (a harness's configuration, any format) with every https:// URL on an entry's
    host and port moved behind the injector, its path kept: https://HOST[:PORT]/v1 becomes
    PROXY_URL/HOST[:PORT]/v1. The host must end there (a longer name or another port is
    someone else's)."""
    for entry in entries:
        port = ":%d" % entry["port"]
        pattern = re.compile(r"https://%s(?:%s)%s(?=[/\"'\s]|\Z)" % (
            re.escape(entry["host"]), re.escape(port), "?" if entry["port"] == DEFAULT_PORT else ""), re.I)
        moved = "%s/%s" % (proxy_url, route(entry))
        text = pattern.sub(lambda _match, moved=moved: moved, text)
    return text


def injector_url(url, routes, proxy_url):
    """URL moved behind the injector when it is HTTPS to a route in ROUTES
    ({"host:port": entry}), else None."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        return None
    entry = routes.get("%s:%d" % ((parts.hostname or "").lower(), port))
    if parts.scheme != "https" or entry is None:
        return None
    return "%s/%s%s" % (proxy_url, route(entry), parts.path.rstrip("/"))


def writable_dir(inside):
    """The directory a read-only file at INSIDE sits in: the harness keeps writing there."""
    return inside.rsplit("/", 1)[0]


def gate_refusal_conf(session_id, entries, placeholders):
    """squid lines, before the policy, that refuse and log a request carrying one of
    PLACEHOLDERS ({variable: placeholder}) in the URL or a key header (the gate only
    sees plain HTTP, so inside TLS to an allowed host a placeholder goes unseen: it is
    only a placeholder there), and any request, CONNECT or plain, to a host of ENTRIES:
    a provider the injector serves is reached through it only, whatever the allowlist
    says, so a key of the agent's own never reaches it."""
    if not placeholders:
        return ""
    either = "|".join(sorted(placeholders.values()))
    headers = sorted(set(KEY_HEADERS) | set(entry["header"] for entry in entries), key=str.lower)
    seen = {}
    for header in headers:
        seen.setdefault(header.lower(), header)
    # One ACL per header: squid keeps one header name per req_header ACL (a later line
    # with another name would replace it), and an ACL's lines must share its type.
    lines = ["acl aisb_placeholder_url url_regex %s" % either]
    names = ["aisb_placeholder_url"]
    for index, header in enumerate(seen.values()):
        names.append("aisb_placeholder_header_%d" % index)
        lines.append("acl %s req_header %s %s" % (names[-1], header, either))
    lines.append("acl aisb_placeholder any-of %s" % " ".join(names))
    lines += _refusal_log("aisb_placeholder", session_id, ELSEWHERE) + ["http_access deny aisb_placeholder"]
    lines += [
        "acl aisb_provider_direct dstdomain -n %s" % " ".join(sorted(set(entry["host"] for entry in entries))),
        "acl aisb_provider_connect method CONNECT",
        # The policy part's miss_access answers this mark with 403 before any tunnel opens
        # (an http_access refusal of a CONNECT on the peeking port would be a TLS handshake).
        "acl aisb_provider_refuse annotate_transaction aisb_verdict=refused",
    ] + _refusal_log("aisb_provider_direct", session_id, PROVIDER_DIRECT) + [
        "http_access deny !aisb_provider_connect aisb_provider_direct",
        "ssl_bump splice aisb_client_hello aisb_provider_direct aisb_provider_refuse",
    ]
    return "\n".join(lines) + "\n"


def _refusal_log(acl, session_id, kind):
    """squid lines that log each request ACL matches as a REFUSAL_LINE of KIND."""
    return ["logformat %s %%ts.%%03tu session=%s %s client=%%>a %%Ss/%%03>Hs %%rm %%ru" % (acl, session_id, kind),
            "access_log stdio:/dev/stdout logformat=%s %s" % (acl, acl)]


def parse_refusals(gate_log, kind):
    """The gate's refusals of KIND (ELSEWHERE, PROVIDER_DIRECT) from its log:
    [{time, method, url, status}]."""
    matches = (REFUSAL_LINE.match(line.strip()) for line in gate_log.splitlines())
    return [log_entry(match) for match in matches if match and match.group("kind") == kind]
