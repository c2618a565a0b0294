# SPDX-License-Identifier: GPL-3.0-or-later
"""Allowed names that resolve to an IPv6 address carrying a loopback, private or
metadata IPv4 address, with real traffic through a session's gate: each is refused
(403 from the gate, recorded as denied) for plain HTTP and CONNECT, and
the gate never tries to connect to it. The names resolve through the workstation's
/etc/hosts, which podman copies into the gate's container (--network=host); a control
name beside them reaches the test internet, so a refusal is not a name the gate never
found.

And the one way to a private address, an operator's private entry
('host:port=address'): a self-hosted model server on a private address of the test
internet's namespace answers that name on that port (curl, and pi), and every other way
to a private destination is still refused and never arrives."""

import ipaddress
import json
import re
import uuid

import pytest

import tally
from providers import PlainProvider, addresses
from sessions import PROJECT, allow, record_of, run_agent
from workstation import REPO

WILDCARD = ".wild.test"
# (label, address, form). Each address embeds 127.0.0.1 or 169.254.169.254.
EMBEDDED = [
    ("compat", "::127.0.0.1", "IPv4-compatible (::/96)"),
    ("nat64", "64:ff9b::7f00:1", "NAT64 well-known prefix (64:ff9b::/96)"),
    ("nat64-metadata", "64:ff9b::a9fe:a9fe", "NAT64 well-known prefix, metadata address"),
    # RFC 6052 with a /48 prefix: IPv4 bits 48-63 and 72-87, bits 64-71 zero.
    ("nat64-local", "64:ff9b:1:7f00:0:100::", "NAT64 local-use prefix (64:ff9b:1::/48)"),
    ("nat64-local96", "64:ff9b:1::7f00:1", "NAT64 local-use prefix, a /96 inside it"),
    ("6to4", "2002:7f00:1::1", "6to4 (2002::/16)"),
    # Server 169.254.169.254, client 127.0.0.1 (stored inverted), port 0 (stored inverted).
    ("teredo", "2001:0:a9fe:a9fe:0:ffff:80ff:fffe", "Teredo (2001::/32)"),
    ("translated", "::ffff:0:a9fe:a9fe", "IPv4-translated, SIIT (::ffff:0:0:0/96)"),
    ("mapped", "::ffff:127.0.0.1", "IPv4-mapped, judged as 127.0.0.1"),
    ("mapped-metadata", "::ffff:169.254.169.254", "IPv4-mapped, judged as 169.254.169.254"),
]
CONTROL = "control"
MARKER = "# aisb test_refused_destinations"
# One line per request: "RESULT LABEL http=CODE" and "RESULT LABEL connect=CODE"
# (the gate's answer to the CONNECT; curl's own code is 000 when the tunnel is refused).
SCRIPT = r"""
probe() { local label=$1 name=$1@WILDCARD@ code connect
  read -r code _ < <(curl -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}\n' "http://$name/c-$label")
  echo "RESULT $label http=$code"
  read -r _ connect < <(curl -sk -m 15 -o /dev/null -w '%{http_code} %{http_connect}\n' "https://$name/c-$label")
  echo "RESULT $label connect=$connect"; }
"""


def test_the_addresses_embed_what_they_say():
    """The forms above really carry a loopback or metadata IPv4 address (Python's own
    decoders where it has one)."""
    local = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("169.254.0.0/16"))
    decoded = {label: ipaddress.ip_address(address) for label, address, _form in EMBEDDED}
    embedded = {
        "compat": ipaddress.ip_address(int(decoded["compat"])),
        "nat64": ipaddress.ip_address(int(decoded["nat64"]) & 0xFFFFFFFF),
        "nat64-metadata": ipaddress.ip_address(int(decoded["nat64-metadata"]) & 0xFFFFFFFF),
        "nat64-local": ipaddress.ip_address(((int(decoded["nat64-local"]) >> 64) & 0xFFFF) << 16
                                            | (int(decoded["nat64-local"]) >> 40) & 0xFFFF),
        "nat64-local96": ipaddress.ip_address(int(decoded["nat64-local96"]) & 0xFFFFFFFF),
        "6to4": decoded["6to4"].sixtofour,
        "teredo": decoded["teredo"].teredo[1],
        "translated": ipaddress.ip_address(int(decoded["translated"]) & 0xFFFFFFFF),
        "mapped": decoded["mapped"].ipv4_mapped,
        "mapped-metadata": decoded["mapped-metadata"].ipv4_mapped,
    }
    assert str(embedded["nat64-local"]) == "127.0.0.1"
    assert str(decoded["teredo"].teredo[0]) == "169.254.169.254"
    for label, address in embedded.items():
        assert any(address in network for network in local), label


@pytest.fixture(scope="module")
def wild_hosts(workstation, internet):
    """The names in the workstation's /etc/hosts for as long as this module runs."""
    hosts = workstation.path("/etc/hosts")
    lines = [f"{address} {label}{WILDCARD}" for label, address, _form in EMBEDDED]
    lines.append(f"{internet.address} {CONTROL}{WILDCARD}")
    # Appended in place (the internet fixture's line stays), removed the same way.
    with hosts.open("a") as file:
        file.write(MARKER + "\n" + "\n".join(lines) + "\n")
    yield lines
    ours = set(lines + [MARKER])
    hosts.write_text("".join(line + "\n" for line in hosts.read_text().splitlines() if line not in ours))


@pytest.fixture(scope="module")
def wild_session(workstation, internet, wild_hosts):
    """One session: every name, plain HTTP and CONNECT, through the gate."""
    labels = [label for label, _address, _form in EMBEDDED] + [CONTROL]
    workstation.sh(f"mkdir -p {PROJECT}")
    script = SCRIPT.replace("@WILDCARD@", WILDCARD) + "\n".join(f"probe {label}" for label in labels) + "\n"
    workstation.path(f"{PROJECT}/refused-destinations.sh").write_text(script)
    before = len(internet.requests())
    result = run_agent(workstation, *allow(WILDCARD), command=["bash", "/project/refused-destinations.sh"],
                       timeout=600)
    assert result.returncode == 0, result.stdout[-4000:]
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    results = {}
    for label, what, code in re.findall(r"^RESULT (\S+) (http|connect)=(\S*)$", transcript, re.M):
        results.setdefault(label, {})[what] = code
    return {"results": results, "record": record, "transcript": transcript,
            "http": internet.requests()[before:]}


def decisions(session, label):
    """The gate's record entries for LABEL's name: (allowed, denied)."""
    host = re.compile(r"(^|//)" + re.escape(label + WILDCARD) + r"[:/]")
    gate = session["record"]["gate"]
    return ([e for e in gate["allowed"] if host.search(e["url"])],
            [e for e in gate["denied"] if host.search(e["url"])])


def test_the_control_name_under_the_same_wildcard_is_relayed(wild_session):
    """The gate sees the workstation's /etc/hosts entries: without this, a 403 below
    could be a name it never resolved."""
    assert wild_session["results"].get(CONTROL) == {"http": "200", "connect": "200"}, wild_session["transcript"]
    allowed, denied = decisions(wild_session, CONTROL)
    assert len(allowed) == 2 and denied == [], (allowed, denied)
    assert sorted(r["path"] for r in wild_session["http"]) == ["/c-control", "/c-control"]


@pytest.mark.parametrize("label,address,form", EMBEDDED, ids=[case[0] for case in EMBEDDED])
def test_an_embedded_local_address_is_refused_not_tried(wild_session, label, address, form):
    result = wild_session["results"].get(label)
    allowed, denied = decisions(wild_session, label)
    tried = [(e["method"], e["status"]) for e in allowed]
    # A leak here is the gate trying the address (TCP_MISS..., TCP_TUNNEL...), whatever
    # became of the attempt.
    tally.record("resolves-embedded-" + label, leaked=bool(allowed))
    assert result == {"http": "403", "connect": "403"}, (form, address, result, tried)
    assert tried == [], (form, address)
    # The GET refused by http_access: TCP_DENIED/403 (TCP_DENIED_ABORTED/403 when curl
    # hangs up first); a server's own 403 would be TCP_MISS/403. A CONNECT's 403 is the
    # gate's own whatever squid's tag (miss_access answers it before any tunnel opens:
    # TCP_TUNNEL/403 in squid 6): a server is never asked for a CONNECT's answer.
    refusals = sorted((e["method"], e["status"].split("/")[0], e["status"].split("/")[1]) for e in denied)
    assert [(method, method == "CONNECT" or status.startswith("TCP_DENIED"), code)
            for method, status, code in refusals] == [
        ("CONNECT", True, "403"), ("GET", True, "403")], (form, address, refusals)


PRIVATE_NAME = "models-private.lan"
# Another allowed name whose address is the model server's.
SAME_ADDRESS_NAME = "same-address.lan"
PRIVATE_ANSWER = "PRIVATE-MODEL-ANSWER-" + uuid.uuid4().hex[:8]
PRIVATE_SCRIPT = r"""
http() { read -r code _ < <(curl -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}\n' "http://$2/c-$1")
  echo "RESULT $1 http=$code"; }
connect() { read -r _ code < <(curl -s -m 15 -o /dev/null -p -w '%{http_code} %{http_connect}\n' "http://$2/c-$1")
  echo "RESULT $1 connect=$code"; }
http ok @NAME@:8000; connect ok @NAME@:8000
http other-port @NAME@:8001; connect other-port @NAME@:8001
http port-80 @NAME@; connect port-80 @NAME@:80
http same-address @SAME@:8000; connect same-address @SAME@:8000
http literal @ADDRESS@:8000; connect literal @ADDRESS@:8000
# The private name as the SNI inside an allowed CONNECT, and a CONNECT to its port 443.
node /project/tls_probe.js sni-other allowed.test:443 sni @NAME@
node /project/tls_probe.js connect-443 @NAME@:443 sni @NAME@
mkdir -p ~/.pi/agent && printf '%s' '@MODELS@' >~/.pi/agent/models.json
ANTHROPIC_API_KEY=sk-fake-key timeout 120 pi -p 'Say the answer.'
echo "RESULT pi exit=$?"
"""


@pytest.fixture(scope="module")
def private_session(workstation, internet):
    """One session with a private entry for the model server at ADDRESS:8000, whose name
    resolves (in the workstation's /etc/hosts, as the gate would see it) to OTHER: a DNS
    answer that differs from the operator's pin, as a rebinding attacker would give."""
    _public, address, other = addresses(internet)
    servers = {"pinned": PlainProvider(workstation, internet, address, 8000, PRIVATE_ANSWER),
               "other-port": PlainProvider(workstation, internet, address, 8001, "x"),
               "port-80": PlainProvider(workstation, internet, address, 80, "x"),
               "rebound": PlainProvider(workstation, internet, other, 8000, "x")}
    hosts = workstation.path("/etc/hosts")
    before = hosts.read_text()
    hosts.write_text(before + f"{other} {PRIVATE_NAME}\n{address} {SAME_ADDRESS_NAME}\n")
    models = json.dumps({"providers": {"anthropic": {"baseUrl": f"http://{PRIVATE_NAME}:8000"}}})
    script = (PRIVATE_SCRIPT.replace("@NAME@", PRIVATE_NAME).replace("@SAME@", SAME_ADDRESS_NAME)
              .replace("@ADDRESS@", address).replace("@MODELS@", models))
    workstation.sh(f"mkdir -p {PROJECT}")
    workstation.path(f"{PROJECT}/private-destinations.sh").write_text(script)
    workstation.path(f"{PROJECT}/tls_probe.js").write_text((REPO / "tests" / "workstation" / "tls_probe.js").read_text())
    try:
        result = run_agent(workstation, *allow(f"{PRIVATE_NAME}:8000={address}", f"{SAME_ADDRESS_NAME}:8000",
                                               "allowed.test"),
                           command=["bash", "/project/private-destinations.sh"], timeout=600)
        assert result.returncode == 0, result.stdout[-4000:]
        record = record_of(workstation, result.stdout)
        transcript = workstation.path(record["transcript"]).read_text()
        results = {}
        for label, what in re.findall(r"^RESULT (\S+) (.*)$", transcript, re.M):
            results.setdefault(label, []).append(what)
        yield {"results": results, "record": record, "transcript": transcript, "address": address,
               "seen": {name: [r["path"] for r in server.requests()] for name, server in servers.items()}}
    finally:
        for server in servers.values():
            server.stop()
        hosts.write_text(before)


def test_the_private_entry_reaches_its_address_on_its_port(private_session):
    """Plain HTTP and CONNECT (as Node sends http://) reach the pinned address, not the
    one the name resolves to; pi answers from the model server; the gate logs each."""
    results, seen = private_session["results"], private_session["seen"]
    assert results.get("ok") == ["http=200", "connect=200"], private_session["transcript"][-3000:]
    assert results.get("pi") == ["exit=0"] and PRIVATE_ANSWER in private_session["transcript"], \
        private_session["transcript"][-3000:]
    assert seen["pinned"][:2] == ["/c-ok", "/c-ok"], seen
    assert any(path.startswith("/v1/messages") for path in seen["pinned"][2:]), seen
    allowed = [(e["method"], e["url"], e["dst"]) for e in private_session["record"]["gate"]["allowed"]]
    address = private_session["address"]
    assert ("GET", f"http://{PRIVATE_NAME}:8000/c-ok", address) in allowed and \
        allowed.count(("CONNECT", f"{PRIVATE_NAME}:8000", address)) >= 2, allowed


@pytest.mark.parametrize("label,wanted", [
    ("other-port", ["http=403", "connect=403"]),
    ("port-80", ["http=403", "connect=403"]),
    ("same-address", ["http=403", "connect=403"]),
    ("literal", ["http=403", "connect=403"]),
    ("sni-other", ["tunnel=200 tls=refused"]),
    ("connect-443", ["tunnel=403 tls=none"]),
])
def test_every_other_way_to_a_private_destination_is_refused(private_session, label, wanted):
    results = private_session["results"].get(label)
    tally.record("private-" + label, leaked=any(f"/c-{label}" in paths for paths in private_session["seen"].values()))
    assert results == wanted, (label, results, private_session["transcript"][-3000:])
    assert not any(f"/c-{label}" in paths for paths in private_session["seen"].values()), private_session["seen"]


def test_the_name_is_never_resolved_so_no_dns_answer_moves_it(private_session):
    """The name resolves to another private address (a rebinding attacker's answer):
    nothing reached it, and nothing reached the pinned server's other ports."""
    seen = private_session["seen"]
    assert seen["rebound"] == [] and seen["other-port"] == [] and seen["port-80"] == [], seen
