# SPDX-License-Identifier: GPL-3.0-or-later
"""Policy validation: hostile allow entries are refused with the entry named."""

import ipaddress
import itertools
import re

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import (
    MAX_ENTRY_LENGTH, METHODS,
    PRIVATE_RANGES, REFUSED_DESTINATIONS, Policy, PolicyError, no_gate_names, parse_policy, pin_resolved,
    refused_destination, render_sandbox_policy)

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import render_policy_conf

from builders import PASSING, REFUSED

# (entry, words the error must contain besides the entry itself)
HOSTILE = [
    ("example.com\nhttp_access allow all", "'\\n'"),
    ("example.com\rhttp_access allow all", "'\\r'"),
    ("example.com http_access", "' '"),
    ("example.com\t", "'\\t'"),
    ("example.com\x00", "'\\x00'"),
    ('"example.com"', "'\"'"),
    ("'example.com'", "\"'\""),
    ("example.com#", "'#'"),
    ("#example.com", "'#'"),
    ("*.example.com", "leading dot"),
    ("ex*ample.com", "leading dot"),
    ("example.*", "leading dot"),
    ("*", "leading dot"),
    ("example.com?", "'?'"),
    ("exa_mple.com", "'_'"),
    ("ex\u00e4mple.com", "'\u00e4'"),
    ("example.com;", "';'"),
    ("example.com\\", "'\\\\'"),
    ("example.com/path", "prefix length"),
    ("http://example.com", "is not a number"),
    ("com", "bare top-level"),
    (".com", "bare top-level"),
    ("localhost", "bare top-level"),
    ("..example.com", "empty label"),
    ("example..com", "empty label"),
    ("example.com.", "empty label"),
    (".", "empty label"),
    ("-example.com", "inner hyphens"),
    ("example-.com", "inner hyphens"),
    ("a" * 64 + ".com", "longer than 63"),
    (".".join(["a" * 50] * 5) + ".com", "longer than 253"),
    ("x" * 330, "longer than 320"),
    ("", "empty"),
    ("example.123", "IP address written as a name"),
    ("0x7f.0x1", "IP address written as a name"),
    ("1.2.3", "not a valid IP"),
    ("256.1.1.1", "not a valid IP"),
    ("0.0.0.0/0", "too broad"),
    ("::/0", "too broad"),
    ("10.0.0.0/7", "too broad"),
    ("2000::/15", "too broad"),
    ("198.18.0.5/24", "host bits"),
    ("0.0.0.0", "unspecified"),
    ("127.0.0.1", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("224.0.0.1", "multicast"),
    ("::ffff:198.18.0.5", "IPv4-mapped"),
    ("100.64.0.1", "host's loopback"),
    ("100.64.0.0/10", "host's loopback"),
    ("100.64.0.1:6379", "host's loopback"),
    ("64:ff9b::a9fe:a9fe", "carries an IPv4 address"),
    ("64:ff9b:1::7f00:1", "carries an IPv4 address"),
    ("::7f00:1", "carries an IPv4 address"),
    ("2002:a9fe:a9fe::1", "carries an IPv4 address"),
    ("2001:0:a9fe:a9fe::1", "carries an IPv4 address"),
    ("2001::/16", "carries an IPv4 address"),
    ("[64:ff9b::a9fe:a9fe]:443", "carries an IPv4 address"),
    ("::ffff:0:a9fe:a9fe", "carries an IPv4 address"),
    ("example.com:0", "1 to 65535"),
    ("example.com:65536", "1 to 65535"),
    ("example.com:0443", "leading zeros"),
    ("example.com:", "1 to 65535"),
    ("example.com:-1", "1 to 65535"),
    ("example.com:http", "1 to 65535"),
    ("example.com:443:443", "not a valid IP"),
    ("198.18.0.5:99999", "1 to 65535"),
    ("[2001:db8::1]", "':port'"),
    ("[2001:db8::1]:", "1 to 65535"),
    ("[example.com]:443", "only IPv6"),
    ("[198.18.0.5]:443", "only IPv6"),
    # Private entries: one name and port, an address of the local network.
    ("models.lan=10.0.0.5", "one name and its port"),
    (".lan:8000=10.0.0.5", "one name and its port"),
    ("10.0.0.5:8000=10.0.0.5", "one name and its port"),
    ("[fd00::5]:8000=10.0.0.5", "one name and its port"),
    ("models.lan:8000=", "not an IPv4 address"),
    ("models.lan:8000=10.0.0.0/24", "not an IPv4 address"),
    # IPv6 private addresses: refused, each saying what is allowed.
    ("models.lan:8000=fd00::5", "fd00::5 is IPv6: a private entry names one IPv4 address (10.0.0.0/8"),
    ("models.lan:8000=[fd00::5]", "fd00::5 is IPv6"),
    ("models.lan:8000=fd00:ec2::254", "ULA fc00::/7"),
    ("models.lan:8000=fe80::1", "link-local fe80::/10"),
    ("models.lan:8000=fe80::1%eth0", "contains '%'"),
    ("models.lan:8000=::1", "::1 is IPv6"),
    ("models.lan:8000=::ffff:10.0.0.5", "write the IPv4-mapped address ::ffff:10.0.0.5 as plain IPv4: '=10.0.0.5'"),
    ("models.lan:8000=[::ffff:169.254.169.254]", "as plain IPv4: '=169.254.169.254'"),
    ("models.lan:8000=64:ff9b::a00:5", "64:ff9b::a00:5 is IPv6"),
    ("models.lan:8000=10.0.0.5=10.0.0.6", "not an IPv4 address"),
    ("models.lan:8000=models.lan", "not an IPv4 address"),
    ("models.lan:8000=127.0.0.1", "local network"),
    ("models.lan:8000=169.254.169.254", "local network"),
    ("models.lan:8000=0.0.0.0", "local network"),
    ("models.lan:8000=198.18.0.5", "plain entry"),
    ("models.lan:8000=100.64.0.1", "100.64.0.1"),
    ("models.lan:0=10.0.0.5", "1 to 65535"),
    ("models..lan:8000=10.0.0.5", "empty label"),
    ("models.lan:8000=10.0.0.5\nhttp_access allow all", "'\\n'"),
]


@pytest.mark.parametrize("entry,reason", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_entry_is_refused_and_named(entry, reason):
    with pytest.raises(PolicyError) as error:
        parse_policy([entry])
    message = str(error.value)
    shown = repr(entry if len(entry) <= 320 else entry[:40] + "...")
    assert shown in message
    assert reason in message
    assert "allowed forms" in message


def test_there_are_at_least_forty_hostile_entries():
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize("entry", [None, 443, True, 1.5, ["example.com"], {"name": "example.com"}, b"example.com"])
def test_non_strings_are_refused(entry):
    with pytest.raises(PolicyError, match="must be a string"):
        parse_policy([entry])


@pytest.mark.parametrize("entries", [["example.com", "example.com"], ["example.com", "EXAMPLE.com"],
                                     ["198.18.0.5", "198.18.0.5/32"], ["a.example.com:22", "a.example.com:22"],
                                     ["m.lan:8000=10.0.0.5", "m.lan:8000=10.0.0.6"]])
def test_duplicates_are_refused(entries):
    with pytest.raises(PolicyError, match="same as"):
        parse_policy(entries)


@pytest.mark.parametrize("ports", [[], None, "443", [0], [65536], [True], ["443"], [443, 443], 443])
def test_bad_connect_ports_are_refused(ports):
    with pytest.raises(PolicyError, match="connect_ports"):
        parse_policy([], ports)


def test_allow_entries_must_be_a_list():
    with pytest.raises(PolicyError, match="must be a list"):
        parse_policy("example.com")


def test_empty_allowlist_is_legal():
    assert parse_policy([]) == Policy(domains=(), host_ports=(), pins=(), connect_ports=(443,), private=())


def test_every_form_parses():
    policy = parse_policy(["Example.com", ".github.com", "git.example.org:2222", "198.18.0.5",
                           "198.18.1.0/24", "198.18.2.7:8080", "2001:db8::/32", "[2001:db8::5]:22",
                           "198.18.3.0/24:53"], [443, 8443])
    assert policy.domains == (".github.com", "example.com", "git.example.org")
    assert policy.host_ports == (("git.example.org", 2222),)
    assert policy.pins == (
        ("198.18.0.5", 443), ("198.18.0.5", 8443), ("198.18.1.0/24", 443), ("198.18.1.0/24", 8443),
        ("198.18.2.7", 8080), ("198.18.3.0/24", 53), ("2001:db8::/32", 443), ("2001:db8::/32", 8443),
        ("2001:db8::5", 22))
    assert policy.connect_ports == (443, 8443)


def test_a_private_entry_pins_one_name_and_port_to_a_local_address():
    policy = parse_policy(["example.com", "models.lan:8000=10.0.0.5", "models.lan:9000=10.0.0.6",
                           "Gpu.Lan:11434=192.168.1.20", "tail.lan:80=100.100.1.2", "k.lan:8080=172.16.0.9"])
    assert policy.private == (("gpu.lan", 11434, "192.168.1.20"), ("k.lan", 8080, "172.16.0.9"),
                              ("models.lan", 8000, "10.0.0.5"), ("models.lan", 9000, "10.0.0.6"),
                              ("tail.lan", 80, "100.100.1.2"))
    # Neither a name the gate resolves, nor a pin in the sandbox's table: only the gate relays it.
    assert policy.domains == ("example.com",) and policy.host_ports == () and policy.pins == ()


@pytest.mark.parametrize("entries", [["models.lan", "models.lan:8000=10.0.0.5"],
                                     ["models.lan:8000=10.0.0.5", "models.lan:22"]])
def test_a_private_name_is_not_also_a_plain_entry(entries):
    with pytest.raises(PolicyError, match="'models.lan' is also a plain entry: a private entry's name is reached"):
        parse_policy(entries)


def test_a_private_entry_needs_the_gate():
    with pytest.raises(PolicyError, match="a private entry needs the gate"):
        no_gate_names(parse_policy(["a.test", "models.lan:8000=10.0.0.5"]))


def test_private_ranges_are_refused_destinations_and_nothing_else_is_reachable():
    """What a private entry may name is a subset of REFUSED_DESTINATIONS (nothing else
    reaches it), and none of it is the host's loopback or link-local."""
    for network in PRIVATE_RANGES:
        assert str(refused_destination(str(ipaddress.ip_network(network).network_address))) in REFUSED_DESTINATIONS
        assert network in REFUSED_DESTINATIONS
    for address in ("127.0.0.1", "169.254.169.254", "224.0.0.1", "0.0.0.1", "192.0.0.8", "240.0.0.1"):
        with pytest.raises(PolicyError, match="local network"):
            parse_policy(["m.lan:80=" + address])


def test_longest_legal_private_entry():
    name = ".".join(["a" * 63, "a" * 63, "a" * 63, "a" * 57, "com"])
    entry = name + ":65535=192.168.255.255"
    assert len(entry) == 275
    assert parse_policy([entry]).private == ((name, 65535, "192.168.255.255"),)


def test_longest_legal_methods_entry():
    name = ".".join(["a" * 63, "a" * 63, "a" * 63, "a" * 57, "com"])
    entry = name + " methods=" + ",".join(METHODS)
    assert len(entry) == 300 <= MAX_ENTRY_LENGTH
    assert parse_policy([entry]).methods == ((name, METHODS),)


@pytest.mark.parametrize("entry,reason", [
    ("a.test methods=CONNECT", "not CONNECT"),
    ("a.test:443 methods=GET", "without a port"),
    ("a.test:80 methods=GET", "without a port"),
    ("198.18.0.5 methods=GET", "without a port"),
    ("a.test:80=10.0.0.5 methods=GET", "without a port"),
    ("a.test methods=GET,GET", "twice"),
    ("a.test methods=", "not "),
    ("a.test methods=GET\nhttp_access allow all", "not GET\nHTTP_ACCESS ALLOW ALL"),
    ("a b.test methods=GET", "must be letters"),
])
def test_a_methods_entry_names_one_host_and_known_methods(entry, reason):
    with pytest.raises(PolicyError, match="allowed forms") as error:
        parse_policy([entry])
    assert reason in str(error.value)


def test_a_methods_entry_narrows_its_name_s_plain_http_in_squid():
    policy = parse_policy(["a.test methods=get,HEAD", "b.test"])
    assert policy.domains == ("a.test", "b.test") and policy.methods == (("a.test", ("GET", "HEAD")),)
    conf = render_policy_conf(policy).splitlines()
    assert "acl aisb_methods_0_host dstdomain -n a.test" in conf and "acl aisb_methods_0 method GET HEAD" in conf
    # After CONNECT is let on to its own rules, before the names are allowed.
    deny = conf.index("http_access deny aisb_methods_0_host !aisb_methods_0")
    assert conf.index("http_access allow aisb_connect") < deny < conf.index("http_access allow aisb_domains")
    with pytest.raises(PolicyError, match="only the gate reads a request's method"):
        no_gate_names(policy)
    # A private entry's name stays its own: no methods entry, as no plain one.
    with pytest.raises(PolicyError, match="is also a plain entry"):
        parse_policy(["a.test methods=GET", "a.test:8000=10.0.0.5"])


def test_longest_legal_name_and_label():
    label = "a" * 63
    name = ".".join([label, label, label, "a" * 57, "com"])
    assert len(name) == 253
    assert parse_policy([name]).domains == (name,)


def test_sandbox_policy_file():
    policy = parse_policy(["198.18.0.0/24", "[2001:db8::5]:22", "example.com"])
    assert render_sandbox_policy(policy, ("100.64.0.1", 3128)) == (
        "# aisb sandbox policy, format 1: read by the image's entrypoint\n"
        "gate 100.64.0.1 3128\npin 198.18.0.0/24 443\npin 2001:db8::5 22\n")
    assert "gate none\n" in render_sandbox_policy(policy, None)


@pytest.mark.parametrize("gate", [("100.64.0.1\ngate", 3128), ("not-an-ip", 3128), ("100.64.0.1", 0),
                                  ("100.64.0.1", "3128"), ("100.64.0.1", True)])
def test_sandbox_policy_refuses_a_bad_gate(gate):
    with pytest.raises(PolicyError, match="gate"):
        render_sandbox_policy(parse_policy([]), gate)


@pytest.mark.parametrize("address,network", REFUSED)
def test_refused_destinations_in_no_gate(address, network):
    assert str(refused_destination(address)) == network
    shown = re.escape(str(ipaddress.ip_address(address)))
    with pytest.raises(PolicyError, match=r"allow entry 'a\.test': resolves to %s, in %s " % (shown, re.escape(network))):
        pin_resolved(parse_policy(["a.test"]), {"a.test": ["198.18.0.2", address]})


@pytest.mark.parametrize("address", PASSING)
def test_public_destinations_are_pinned_in_no_gate(address):
    assert refused_destination(address) is None
    assert (str(ipaddress.ip_address(address)), 443) in pin_resolved(parse_policy(["a.test"]), {"a.test": [address]}).pins


def test_refused_destinations_are_one_list_without_overlaps():
    networks = [ipaddress.ip_network(network) for network in REFUSED_DESTINATIONS]
    assert [str(network) for network in networks] == list(REFUSED_DESTINATIONS)
    # squid warns about an entry inside another, and ignores one of them.
    assert [(a, b) for a, b in itertools.combinations(networks, 2) if a.version == b.version and a.overlaps(b)] == []
    # squid keeps IPv4 as ::ffff:a.b.c.d: an entry there would refuse every IPv4 address.
    assert not any(network.overlaps(ipaddress.ip_network("::ffff:0:0/96")) for network in networks if network.version == 6)
    # Every listed network is refused by the check no-gate uses.
    assert all(refused_destination(str(network.network_address)) == network for network in networks)


def test_the_sandbox_policy_names_each_budget_at_the_gate_s_address():
    text = render_sandbox_policy(parse_policy(["198.18.0.7"]), ("100.64.0.1", 3128), [(3130, 5), (3128, 9)])
    assert text.splitlines()[-2:] == ["budget 100.64.0.1 3128 9", "budget 100.64.0.1 3130 5"]
    with pytest.raises(PolicyError, match="an upload budget meters the sandbox's path to its gate: there is none"):
        render_sandbox_policy(parse_policy([]), None, [(3128, 9)])
