# SPDX-License-Identifier: GPL-3.0-or-later
"""Allowed names that resolve to an IPv6 address carrying a loopback, private or
metadata IPv4 address, with real traffic through a session's gate: each is refused
(403 from the gate, recorded as denied) for plain HTTP and CONNECT, and
the gate never tries to connect to it. The names resolve through the workstation's
/etc/hosts, which podman copies into the gate's container (--network=host); a control
name beside them reaches the test internet, so a refusal is not a name the gate never
found."""

import ipaddress
import re

import pytest

import tally
from sessions import PROJECT, allow, record_of, run_agent

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
