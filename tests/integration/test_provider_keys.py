# SPDX-License-Identifier: GPL-3.0-or-later
"""Provider keys on the easy path, with real traffic: a developer exports the keys pi
reads (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY) and runs a session with no
aisb_credentials. A fake provider in the test internet serves the three built-in
provider names over HTTPS (a test CA the workstation trusts, the names in its
/etc/hosts, which the injector and the gate both resolve with), so a request that got
past a control would complete and be logged there.

The agent must find no key anywhere in the sandbox, reach each provider only through
the injector with its placeholder, and get nothing with a key of its own (a planted key
sent to the provider directly, by CONNECT or plain HTTP in any spelling of the name, or
to the injector), nor any request of the key's beyond what the harness needs."""

import base64
import json
import re
import uuid

import pytest

import certificates
from providers import BUNDLE, PlainProvider, addresses
from sessions import record_of, run_agent
from workstation import TRANSFER_DIR

PROJECT = "/home/dev/src/provider-keys"
HOSTS = ("api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com")
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-exported-" + uuid.uuid4().hex, "OPENAI_API_KEY": "sk-oai-exported-" + uuid.uuid4().hex,
        "GEMINI_API_KEY": "g-exported-" + uuid.uuid4().hex}
PLANTED = "sk-ant-planted-" + uuid.uuid4().hex
ANSWER = "EXPORTED-KEY-ANSWER-" + uuid.uuid4().hex[:8]
CERTIFICATES = f"{TRANSFER_DIR}/provider-keys-tls"
# Searched for inside the sandbox with no key on any command line or in any file there:
# the patterns come through a pipe, decoded there.
PATTERNS = base64.b64encode("\n".join(KEYS.values()).encode()).decode()
SCRIPT = r"""
pattern() { printf %s @PATTERNS@ | base64 -d; }
echo environ-hits-begin; grep -l -s -F -f <(pattern) /proc/[0-9]*/environ /proc/[0-9]*/cmdline; echo environ-hits-end
echo fs-hits-begin; grep -r -l -s -F --exclude-dir=proc --exclude-dir=sys -f <(pattern) / /project; echo fs-hits-end
code() { echo "RESULT $1 $(curl -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}' "${@:2}")"; }
injector=$AISB_CREDENTIAL_PROXY
# Through the injector with this session's placeholders: each provider's models list.
code models-anthropic -H "x-api-key: $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1/models"
code models-openai -H "authorization: Bearer $OPENAI_API_KEY" "$injector/api.openai.com/v1/models"
code models-google -H "x-goog-api-key: $GEMINI_API_KEY" "$injector/generativelanguage.googleapis.com/v1beta/models"
# A key of the agent's own, straight to the provider: CONNECT and plain HTTP.
code direct-connect -H "x-api-key: @PLANTED@" https://api.anthropic.com/v1/models
code direct-plain -H "x-api-key: @PLANTED@" http://api.anthropic.com/v1/models
code direct-connect-openai -H "authorization: Bearer @PLANTED@" https://api.openai.com/v1/models
# The name in other spellings, by hand (curl would tidy them).
proxy=${HTTPS_PROXY#http://}
raw() {
  exec 3<>"/dev/tcp/${proxy%:*}/${proxy##*:}"
  printf '%s %s HTTP/1.1\r\nHost: %s\r\nx-api-key: @PLANTED@\r\n\r\n' "$2" "$3" "$4" >&3
  echo "RESULT $1 $(timeout 15 head -c 12 <&3 | tr -d '\r\n')"
  exec 3<&-
}
raw connect-upper CONNECT API.Anthropic.COM:443 API.Anthropic.COM:443
raw connect-dot CONNECT api.anthropic.com.:443 api.anthropic.com.:443
raw connect-port CONNECT api.anthropic.com:8443 api.anthropic.com:8443
raw plain-upper GET http://API.ANTHROPIC.COM/v1/models API.ANTHROPIC.COM
raw plain-dot GET http://api.anthropic.com./v1/models api.anthropic.com.
# The agent's own key through the injector: alone, and beside the placeholder.
code injector-planted -H "x-api-key: @PLANTED@" "$injector/api.anthropic.com/v1/models"
code injector-planted-beside -H "x-api-key: @PLANTED@ $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1/models"
# More of the key than a harness needs, and paths that some server reads as another.
code files -X POST -H "x-api-key: $ANTHROPIC_API_KEY" -d x "$injector/api.anthropic.com/v1/files"
code batches -X POST -H "x-api-key: $ANTHROPIC_API_KEY" -d x "$injector/api.anthropic.com/v1/messages/batches"
code dot-dot --path-as-is -H "x-api-key: $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1/models/../files"
code escaped-dots -H "x-api-key: $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1/models/%2e%2e/files"
code escaped-slash -H "x-api-key: $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1%2ffiles"
code delete-model -X DELETE -H "x-api-key: $ANTHROPIC_API_KEY" "$injector/api.anthropic.com/v1/models/x"
"""
REACHED = {"models-anthropic": "200 000", "models-openai": "200 000", "models-google": "200 000"}
REFUSED = {
    "direct-connect": "000 403", "direct-plain": "403 000", "direct-connect-openai": "000 403",
    "connect-upper": "HTTP/1.1 403", "connect-dot": "HTTP/1.1 403", "connect-port": "HTTP/1.1 403",
    "plain-upper": "HTTP/1.1 403", "plain-dot": "HTTP/1.1 403",
    "injector-planted": "403 000", "injector-planted-beside": "403 000",
    "files": "403 000", "batches": "403 000", "dot-dot": "403 000", "escaped-dots": "403 000",
    "escaped-slash": "403 000", "delete-model": "403 000",
}


@pytest.fixture(scope="module")
def provider(workstation, internet):
    """The fake provider at a public test address on 443 for the three built-in names."""
    address = addresses(internet)[0]
    workstation.sh(f"mkdir -p {CERTIFICATES} && cd {CERTIFICATES}\n{certificates.script(*HOSTS)}", user="root")
    bundle = workstation.path(BUNDLE).read_text()
    hosts = workstation.path("/etc/hosts").read_text()
    server = PlainProvider(workstation, internet, address, 443, ANSWER,
                           f"{CERTIFICATES}/server.crt {CERTIFICATES}/server.key")
    try:
        workstation.path(BUNDLE).write_text(bundle + workstation.path(f"{CERTIFICATES}/ca.crt").read_text())
        workstation.path("/etc/hosts").write_text(hosts + "".join(f"{address} {host}\n" for host in HOSTS))
        workstation.sh(f"mkdir -p {PROJECT} && echo 'print(1)' >{PROJECT}/main.py")
        yield server
    finally:
        server.stop()
        workstation.path(BUNDLE).write_text(bundle)
        workstation.path("/etc/hosts").write_text(hosts)


def session(ws, *extra, command=None, env=None, timeout=300):
    """run_agent.yml on PROJECT with ENV exported (default: every key in KEYS)."""
    result = run_agent(ws, *extra, command=command, env=KEYS if env is None else env, project=PROJECT,
                       timeout=timeout)
    return result, record_of(ws, result.stdout)


def between(text, name):
    return re.search(f"^{name}-begin$(.*?)^{name}-end$", text, re.M | re.S).group(1).split()


def headers_of(request):
    return dict((name.lower(), value) for name, value in request["headers"])


def test_exported_keys_are_injected_and_the_agents_own_key_goes_nowhere(workstation, provider):
    before = len(provider.requests())
    script = SCRIPT.replace("@PATTERNS@", PATTERNS).replace("@PLANTED@", PLANTED)
    result, record = session(workstation, command=["bash", "-c", script])
    assert result.returncode == 0, result.stdout[-4000:]
    transcript = workstation.path(record["transcript"]).read_text()
    assert between(transcript, "environ-hits") == [], "a key is in a sandbox process's environment or argv"
    assert between(transcript, "fs-hits") == [], "a key is in a file the sandbox can read"
    results = dict(re.findall(r"^RESULT (\S+) (.*)$", transcript, re.M))
    assert {label: results.get(label) for label in REACHED} == REACHED, transcript[-3000:]
    assert {label: results.get(label) for label in REFUSED} == REFUSED, transcript[-3000:]
    seen = provider.requests()[before:]
    assert PLANTED not in json.dumps(seen), "the agent's own key reached the provider"
    assert sorted((headers_of(r)["host"], r["method"], r["path"]) for r in seen) == sorted([
        ("api.anthropic.com", "GET", "/v1/models"), ("api.openai.com", "GET", "/v1/models"),
        ("generativelanguage.googleapis.com", "GET", "/v1beta/models")])
    by_host = dict((headers_of(r)["host"], headers_of(r)) for r in seen)
    assert by_host["api.anthropic.com"]["x-api-key"] == KEYS["ANTHROPIC_API_KEY"]
    assert by_host["api.openai.com"]["authorization"] == "Bearer " + KEYS["OPENAI_API_KEY"]
    assert by_host["generativelanguage.googleapis.com"]["x-goog-api-key"] == KEYS["GEMINI_API_KEY"]
    credentials = record["credentials"]
    assert sorted(entry["variable"] for entry in credentials["entries"]) == sorted(KEYS)
    assert record["provider_keys_held"] == []
    direct = [(entry["method"], entry["url"]) for entry in credentials["provider_direct"]]
    assert ("CONNECT", "api.anthropic.com:443") in direct and ("CONNECT", "api.openai.com:443") in direct, direct
    assert any(method == "GET" and url.startswith("http://api.anthropic.com/") for method, url in direct), direct
    refused = dict((entry["path"], entry["status"]) for entry in credentials["refused"])
    assert refused.get("/api.anthropic.com/v1/files") == 403, credentials["refused"]
    for key in KEYS.values():
        assert key not in result.stdout and key not in json.dumps(record) and key not in transcript


def test_pi_answers_through_the_injector_with_the_exported_key(workstation, provider):
    before = len(provider.requests())
    result, record = session(workstation, "-e", "prompt=Say the answer.")
    assert result.returncode == 0, result.stdout[-4000:]
    transcript = workstation.path(record["transcript"]).read_text()
    assert ANSWER in transcript, transcript[-3000:]
    seen = [r for r in provider.requests()[before:] if r["method"] == "POST"]
    assert seen and all(headers_of(r)["x-api-key"] == KEYS["ANTHROPIC_API_KEY"] for r in seen), seen
    assert [r["path"] for r in seen] == ["/v1/messages"] * len(seen)
    assert not record["credentials"]["provider_direct"], "pi went past its injector"


def test_a_key_the_operator_names_reaches_the_agent_and_is_said_to(workstation, provider):
    result, record = session(workstation, "-e", json.dumps({"aisb_pass_environment": ["OPENAI_API_KEY"]}),
                             command=["bash", "-c", 'test "$OPENAI_API_KEY" = "' + KEYS["OPENAI_API_KEY"] + '"'])
    assert result.returncode == 0, result.stdout[-4000:]
    assert record["provider_keys_held"] == ["OPENAI_API_KEY"]
    assert sorted(entry["variable"] for entry in record["credentials"]["entries"]) == [
        "ANTHROPIC_API_KEY", "GEMINI_API_KEY"]
    warning = [line for line in result.stdout.splitlines() + result.stderr.splitlines()
               if "the agent holds the provider key OPENAI_API_KEY" in line]
    assert len(warning) == 1, result.stdout[-3000:] + result.stderr[-2000:]


# Each recipe's harness with one exported key and nothing configured: its default
# provider reached through the injector (its base-URL variable, credential_urls; for
# codex, whose built-in provider reads no base URL from the environment, the config.toml
# the session writes).
HARNESS_KEYS = {"claude-code": ("ANTHROPIC_API_KEY", "x-api-key", "", "/v1/messages"),
                "codex": ("OPENAI_API_KEY", "authorization", "Bearer ", "/v1/responses"),
                "opencode": ("OPENAI_API_KEY", "authorization", "Bearer ", "/v1/responses")}


@pytest.mark.parametrize("harness", sorted(HARNESS_KEYS))
def test_every_recipe_answers_through_the_injector_with_an_exported_key(workstation, provider, harness):
    variable, header, prefix, path = HARNESS_KEYS[harness]
    before = len(provider.requests())
    # Its first session builds its image: minutes.
    result, record = session(workstation, "-e", json.dumps({"aisb_harness": harness, "prompt": "Say the answer."}),
                             env={variable: KEYS[variable]}, timeout=1800)
    transcript = workstation.path(record["transcript"]).read_text()
    assert result.returncode == 0 and record["exit_code"] == 0, result.stdout[-3000:] + transcript[-3000:]
    assert ANSWER in transcript, transcript[-3000:]
    asked = [r for r in provider.requests()[before:] if r["method"] == "POST"]
    assert [r["path"].split("?")[0] for r in asked][-1:] == [path], [(r["method"], r["path"]) for r in asked]
    assert all(headers_of(r)[header] == prefix + KEYS[variable] for r in asked)
    assert record["credentials"]["provider_direct"] == [], record["credentials"]["provider_direct"]
    assert [entry["variable"] for entry in record["credentials"]["entries"]] == [variable]
    assert KEYS[variable] not in transcript and KEYS[variable] not in json.dumps(record)
