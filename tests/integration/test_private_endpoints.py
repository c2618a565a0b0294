# SPDX-License-Identifier: GPL-3.0-or-later
"""A self-hosted model server on HTTPS at a private address ('host:443=address'), with
real traffic: fake providers in a private range of the test internet's namespace, all
serving one test CA's certificate for the private name, so that a request misrouted to
any of them would complete and be logged.

Through the gate (CONNECT, peeked: the SNI must be the CONNECT name) the pinned server
answers, and nothing else does: a wrong or missing SNI, the name on other ports, the
address as a literal, other names for the address (plain, IPv4-mapped IPv6), ULA and
link-local names, the name's own DNS answer (another private server). Through the
credential injector (aisb_credentials) pi's key reaches the pinned server and no other;
without the pin neither the gate nor the injector sends anything anywhere."""

import json
import re
import uuid

import pytest

import certificates
import tally
from providers import BUNDLE, PlainProvider, addresses
from sessions import allow, record_of, run_agent
from workstation import REPO, TRANSFER_DIR

PROJECT = "/home/dev/src/private-endpoints"
NAME = "models-tls.lan"
SAME = "same-address-tls.lan"
MAPPED = "mapped-private.lan"
ULA = "ula-private.lan"
LINK_LOCAL = "linklocal-private.lan"
ANSWER = "PRIVATE-TLS-ANSWER-" + uuid.uuid4().hex[:8]
KEY = "sk-aisb-private-" + uuid.uuid4().hex
CERTIFICATES = f"{TRANSFER_DIR}/private-tls"
# One line per probe: "RESULT LABEL CODE CONNECT" from curl (CONNECT: the gate's answer
# to the CONNECT, 000 without one), "RESULT LABEL tunnel=... tls=..." from tls_probe.js.
SCRIPT = r"""
https() { echo "RESULT $1 $(curl -s -m 15 --cacert /project/ca.crt -o /dev/null -w '%{http_code} %{http_connect}' "https://$2/c-$1")"; }
plain() { echo "RESULT $1 $(curl -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}' "http://$2/c-$1")"; }
probe() { node /project/tls_probe.js "$@"; }
https ok @NAME@
https other-port @NAME@:8443
plain other-port-plain @NAME@:8443
plain port-80 @NAME@
https literal @ADDRESS@
plain literal-plain @ADDRESS@:443
https same-address @SAME@
https mapped @MAPPED@
plain mapped-plain @MAPPED@:443
https ula @ULA@
https link-local @LINK_LOCAL@
probe wrong-sni @NAME@:443 sni @SAME@
probe no-sni @NAME@:443 sni ''
probe sni-inside-other allowed.test:443 sni @NAME@
probe upper MODELS-TLS.LAN:443 sni MODELS-TLS.LAN
probe trailing-dot @NAME@.:443 sni @NAME@
timeout 120 pi -p 'Say the answer.'
echo "RESULT pi exit=$?"
"""
# The probes whose request must reach no server, and what the sandbox must see.
REFUSED = {
    "other-port": "000 403", "other-port-plain": "403 000", "port-80": "403 000",
    "literal": "000 403", "literal-plain": "403 000", "same-address": "000 403",
    "mapped": "000 403", "mapped-plain": "403 000", "ula": "000 403", "link-local": "000 403",
    "wrong-sni": "tunnel=200 tls=refused", "no-sni": "tunnel=200 tls=refused",
    "sni-inside-other": "tunnel=200 tls=refused",
}


@pytest.fixture(scope="module")
def servers(workstation, internet):
    """The pinned server at ADDRESS:443, its other port 8443 and port 80, and the server
    at OTHER:443 that the name resolves to; the test CA in the workstation's bundle (the
    injector's trust store) and in the project (curl's, in the sandbox); the names in
    the workstation's /etc/hosts (the gate's resolver)."""
    _public, address, other = addresses(internet)
    workstation.sh(f"mkdir -p {CERTIFICATES} && cd {CERTIFICATES}\n{certificates.script(NAME)}", user="root")
    credentials = f"{CERTIFICATES}/server.crt {CERTIFICATES}/server.key"
    bundle = workstation.path(BUNDLE).read_text()
    hosts = workstation.path("/etc/hosts").read_text()
    started = {}
    try:
        started["pinned"] = PlainProvider(workstation, internet, address, 443, ANSWER, credentials)
        started["other-port"] = PlainProvider(workstation, internet, address, 8443, "x", credentials)
        started["port-80"] = PlainProvider(workstation, internet, address, 80, "x")
        started["rebound"] = PlainProvider(workstation, internet, other, 443, "x", credentials)
        ca = workstation.path(f"{CERTIFICATES}/ca.crt").read_text()
        workstation.path(BUNDLE).write_text(bundle + ca)
        workstation.path("/etc/hosts").write_text(
            hosts + f"{other} {NAME}\n{address} {SAME}\n::ffff:{address} {MAPPED}\nfd00::5 {ULA}\n"
                    f"fe80::1 {LINK_LOCAL}\n")
        workstation.sh(f"mkdir -p {PROJECT}")
        workstation.path(f"{PROJECT}/ca.crt").write_text(ca)
        workstation.path(f"{PROJECT}/tls_probe.js").write_text(
            (REPO / "tests" / "workstation" / "tls_probe.js").read_text())
        workstation.path(f"{PROJECT}/private-endpoints.sh").write_text(
            SCRIPT.replace("@NAME@", NAME).replace("@SAME@", SAME).replace("@MAPPED@", MAPPED)
            .replace("@ULA@", ULA).replace("@LINK_LOCAL@", LINK_LOCAL).replace("@ADDRESS@", address))
        yield {"address": address, "other": other, "servers": started}
    finally:
        for server in started.values():
            server.stop()
        workstation.path(BUNDLE).write_text(bundle)
        workstation.path("/etc/hosts").write_text(hosts)


def session(workstation, servers, *entries, keyed=True):
    """One session with ENTRIES allowed and, when KEYED, pi's key for NAME:443 in
    aisb_credentials: its results, record, transcript and what each server saw (only this
    session's)."""
    before = {label: len(server.requests()) for label, server in servers["servers"].items()}
    credentials = ([{"host": NAME, "header": "x-api-key", "variable": "ANTHROPIC_API_KEY", "value": KEY}]
                   if keyed else [])
    result = run_agent(workstation, *allow(*entries), "-e", json.dumps({"aisb_credentials": credentials}),
                       command=["bash", "/project/private-endpoints.sh"], project=PROJECT, timeout=600)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    results = dict(re.findall(r"^RESULT (\S+) (.*)$", transcript, re.M))
    seen = {label: server.requests()[before[label]:] for label, server in servers["servers"].items()}
    return {"result": result, "record": record, "transcript": transcript, "results": results, "seen": seen}


def paths(seen, label):
    return [request["path"] for request in seen[label]]


def keys_sent(seen):
    """{server: [x-api-key values it got]} for the servers that got any."""
    sent = {}
    for label, requests in seen.items():
        for request in requests:
            sent.setdefault(label, []).extend(v for k, v in request["headers"] if k.lower() == "x-api-key")
    return sent


PINNED_ENTRIES = (SAME, MAPPED, ULA, LINK_LOCAL, "allowed.test")


@pytest.fixture(scope="module")
def pinned(workstation, servers):
    """The gate's ways to the private server, without a key for it (with one, the gate
    refuses the name whole: keyed)."""
    return session(workstation, servers, f"{NAME}:443={servers['address']}", *PINNED_ENTRIES, keyed=False)


@pytest.fixture(scope="module")
def keyed(workstation, servers):
    return session(workstation, servers, f"{NAME}:443={servers['address']}", *PINNED_ENTRIES)


def test_the_pinned_https_server_answers_through_the_gate(pinned, servers):
    """curl's CONNECT with the name as SNI: 200 over TLS verified with the test CA, from
    the pinned address, not the one the name resolves to; logged by the gate."""
    assert pinned["results"].get("ok") == "200 200", pinned["transcript"][-3000:]
    assert "/c-ok" in paths(pinned["seen"], "pinned") and "/c-ok" not in paths(pinned["seen"], "rebound")
    allowed = [(e["method"], e["url"], e["dst"]) for e in pinned["record"]["gate"]["allowed"]]
    assert ("CONNECT", f"{NAME}:443", servers["address"]) in allowed, allowed


@pytest.mark.parametrize("label", sorted(REFUSED))
def test_every_other_way_to_the_private_server_is_refused(pinned, label):
    result = pinned["results"].get(label)
    arrived = [server for server, requests in pinned["seen"].items()
               if any(request["path"] == f"/c-{label}" for request in requests)]
    tally.record("private-tls-" + label, leaked=bool(arrived))
    assert result == REFUSED[label], (label, result, pinned["transcript"][-3000:])
    assert arrived == [], (label, arrived)


@pytest.mark.parametrize("label", ["upper", "trailing-dot"])
def test_another_spelling_of_the_name_goes_to_the_pinned_address(pinned, label):
    """Letter case and a trailing dot: squid takes them for the entry's name (its URL is
    the name in lower case, no dot) and relays them to the pinned address, never where
    the name resolves, nor to another port."""
    result = pinned["results"].get(label)
    arrived = sorted(server for server, requests in pinned["seen"].items()
                     if any(request["path"] == f"/c-{label}" for request in requests))
    tally.record("private-tls-" + label, leaked=bool(set(arrived) - {"pinned"}))
    assert (result, arrived) == ("tunnel=200 tls=ok", ["pinned"]), (label, result, arrived)


def test_the_key_reaches_the_pinned_server_and_nothing_else(keyed, servers):
    """pi, with a placeholder, through the injector: the pinned server gets the key (the
    name resolves to another private server, which gets nothing); the record names the
    address the injector connected to; the key is nowhere in the record or transcript.
    With the key held for the name, the gate refuses the name itself (provider-direct)."""
    assert keyed["results"].get("pi") == "exit=0" and ANSWER in keyed["transcript"], keyed["transcript"][-3000:]
    assert keyed["result"].returncode == 0, keyed["result"].stdout[-3000:]
    sent = keys_sent(keyed["seen"])
    assert set(sent) == {"pinned"} and set(sent["pinned"]) == {KEY}, sent
    assert any(path.startswith("/v1/messages") for path in paths(keyed["seen"], "pinned"))
    injected = keyed["record"]["credentials"]["injected"]
    assert injected and {(e["host"], e["address"]) for e in injected} == {(NAME, servers["address"])}, injected
    assert KEY not in json.dumps(keyed["record"]) and KEY not in keyed["transcript"]
    assert keyed["results"].get("ok") == "000 403" and "/c-ok" not in paths(keyed["seen"], "pinned")
    direct = [(e["method"], e["url"]) for e in keyed["record"]["credentials"]["provider_direct"]]
    assert ("CONNECT", f"{NAME}:443") in direct, direct


def test_without_the_pin_the_name_reaches_nothing(workstation, servers):
    """The same name as a plain entry (it resolves to a private address): the gate
    refuses its CONNECT, the injector refuses to send the key there, pi fails, and no
    server sees a request."""
    plain = session(workstation, servers, NAME, "allowed.test")
    assert plain["results"].get("ok") == "000 403", plain["transcript"][-3000:]
    assert plain["results"].get("pi") not in (None, "exit=0") and ANSWER not in plain["transcript"]
    assert {label: paths(plain["seen"], label) for label in plain["seen"]} == {label: [] for label in plain["seen"]}
    refused = plain["record"]["credentials"]["refused"]
    assert refused and all(e["host"] == NAME and e["status"] == 502 and "refused destinations" in e["why"]
                           for e in refused), refused
    assert plain["record"]["credentials"]["injected"] == []
