# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a session's provider credentials make of it, besides the injector itself
(_credential_injector): the per-session placeholders, the harness's view (its variables,
the injector's URL, pi's models.json), the gate's refusal of a placeholder sent anywhere
else, and that refusal read back from the gate's log.

Pure. The sandbox only ever sees placeholders; the keys stay with the injector.
"""

from __future__ import annotations

import json
import re
import uuid

# The harness reaches a provider at $AISB_CREDENTIAL_PROXY/HOST[:PORT]/PATH.
PROXY_VARIABLE = "AISB_CREDENTIAL_PROXY"
PLACEHOLDER_PREFIX = "aisb-placeholder-"
# Headers the gate searches for a placeholder in plain HTTP, besides each entry's own
# header and the URL: where the usual providers and tools put a key.
KEY_HEADERS = ("Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key")
# The gate's log line for a request that carried a placeholder (parse_gate_log's aisb
# lines never match it: "credential-elsewhere" stands where they have client=).
ELSEWHERE_LINE = re.compile(
    r"^(?P<time>\d+\.\d+) session=(?P<session>\S+) credential-elsewhere client=(?P<client>\S+) "
    r"(?P<status>[A-Z_]+)/(?P<code>\d{3}) (?P<method>\S+) (?P<url>\S+)$")
# pi (harness command "pi") reads ~/.pi/agent/models.json: a provider entry there with
# only a baseUrl moves that built-in provider. The variable pi reads each provider's key
# from, that provider's name in pi, and the path its built-in base URL has after the host.
PI_PROVIDERS = {
    "ANTHROPIC_API_KEY": ("anthropic", ""),
    "OPENAI_API_KEY": ("openai", "/v1"),
    "GEMINI_API_KEY": ("google", "/v1beta"),
}
PI_MODELS_PATH = "/home/agent/.pi/agent/models.json"
# Its name in the session's directory.
PI_MODELS_FILE = "pi-models.json"


def new_placeholder():
    return PLACEHOLDER_PREFIX + uuid.uuid4().hex


def route(entry):
    """The injector's path segment for ENTRY's provider: HOST, or HOST:PORT off 443."""
    return entry["host"] if entry["port"] == 443 else "%s:%d" % (entry["host"], entry["port"])


def harness_environment(placeholders, proxy_url):
    """The harness's variables: each entry's placeholder, and where the injector is."""
    environment = dict(placeholders)
    environment[PROXY_VARIABLE] = proxy_url
    return environment


def pi_models(entries, proxy_url):
    """pi's models.json text moving each provider it knows by ENTRIES' variables to the
    injector, or None when no entry names one."""
    providers = {}
    for entry in entries:
        if entry["variable"] in PI_PROVIDERS:
            name, path = PI_PROVIDERS[entry["variable"]]
            providers[name] = {"baseUrl": "%s/%s%s" % (proxy_url, route(entry), path)}
    return json.dumps({"providers": providers}, indent=2, sort_keys=True) + "\n" if providers else None


def writable_dir(inside):
    """The directory a read-only file at INSIDE sits in: the harness keeps writing there."""
    return inside.rsplit("/", 1)[0]


def gate_refusal_conf(session_id, entries, placeholders):
    """squid lines, before the policy, that refuse and log a request carrying one of
    PLACEHOLDERS ({variable: placeholder}) in the URL or a key header: the gate only
    sees plain HTTP, so inside TLS to an allowed host a placeholder goes unseen (it is
    only a placeholder there)."""
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
    lines += [
        "logformat aisb_credential %%ts.%%03tu session=%s credential-elsewhere client=%%>a %%Ss/%%03>Hs %%rm %%ru"
        % session_id,
        "access_log stdio:/dev/stdout logformat=aisb_credential aisb_placeholder",
        "http_access deny aisb_placeholder",
    ]
    return "\n".join(lines) + "\n"


def parse_elsewhere(gate_log):
    """The gate's refusals of a placeholder from its log: [{time, method, url, status}]."""
    found = []
    for line in gate_log.splitlines():
        match = ELSEWHERE_LINE.match(line.strip())
        if match:
            found.append({"time": float(match.group("time")), "method": match.group("method"),
                          "url": match.group("url"), "status": "%s/%s" % (match.group("status"), match.group("code"))})
    return found
