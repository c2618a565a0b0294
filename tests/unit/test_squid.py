# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's squid configuration: ACL order, the session part, refused session inputs."""

import ipaddress

import pytest
from test_policy import PASSING, REFUSED

from ansible_collections.aisb.sandbox.plugins.module_utils._policy import REFUSED_DESTINATIONS, parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils._squid import parse_gate_log, render_policy_conf, render_session_conf


def access_rules(text):
    return [line for line in text.splitlines() if line.startswith("http_access")]


def test_acl_order_follows_the_design():
    conf = render_policy_conf(parse_policy(["example.com", ".github.com", "198.18.0.5"]))
    assert access_rules(conf) == [
        "http_access deny !aisb_domains",
        "http_access deny manager",
        "http_access deny aisb_ip_literal",
        "http_access deny aisb_connect !aisb_connect_ports",
        "http_access deny !aisb_connect !aisb_http_ports",
        "http_access deny aisb_denied_dst",
        "http_access allow aisb_domains",
        "http_access deny all",
    ]
    assert "acl aisb_domains dstdomain -n .github.com example.com\n" in conf
    assert "acl aisb_connect_ports port 443\n" in conf
    # Pinned addresses belong to the ruleset, never to squid.
    assert "198.18.0.5" not in conf


def test_domain_allowlist_never_resolves():
    conf = render_policy_conf(parse_policy(["example.com"]))
    acls = [line for line in conf.splitlines() if line.startswith("acl ") and ("dstdom" in line)]
    assert acls and all(" -n " in line for line in acls)


def denied_dst(conf):
    line = next(l for l in conf.splitlines() if l.startswith("acl aisb_denied_dst dst "))
    return line.split()[3:]


def as_squid_sees(text):
    """TEXT (an address or network) in squid's own form: IPv4 kept as ::ffff:a.b.c.d."""
    network = ipaddress.ip_network(text)
    if network.version == 4:
        network = ipaddress.ip_network("::ffff:%s/%d" % (network.network_address, 96 + network.prefixlen))
    return network


def test_denied_destinations_are_the_one_refused_list():
    assert denied_dst(render_policy_conf(parse_policy(["example.com"]))) == list(REFUSED_DESTINATIONS)


@pytest.mark.parametrize("address,network", REFUSED)
def test_the_gate_refuses_every_refused_form(address, network):
    """Judged as squid judges: both sides in its internal form, a mapped address as given."""
    acl = [as_squid_sees(entry) for entry in denied_dst(render_policy_conf(parse_policy(["example.com"])))]
    destination = as_squid_sees(address)
    assert [str(entry) for entry in acl if entry.overlaps(destination)] == [str(as_squid_sees(network))]


@pytest.mark.parametrize("address", PASSING)
def test_the_gate_relays_to_public_destinations(address):
    acl = [as_squid_sees(entry) for entry in denied_dst(render_policy_conf(parse_policy(["example.com"])))]
    assert not any(entry.overlaps(as_squid_sees(address)) for entry in acl)


def test_extra_ports_only_for_their_host():
    conf = render_policy_conf(parse_policy(["git.example.org:2222", "example.com"], [443, 8443]))
    assert "acl aisb_extra_0_host dstdomain -n git.example.org\n" in conf
    assert "acl aisb_extra_0_port port 2222\n" in conf
    assert "acl aisb_extra_0 all-of aisb_extra_0_host aisb_extra_0_port\n" in conf
    assert "http_access deny aisb_connect !aisb_connect_ports !aisb_extra\n" in conf
    assert "acl aisb_connect_ports port 443 8443\n" in conf
    assert "acl aisb_http_ports port 80 443 8443\n" in conf
    assert "acl aisb_domains dstdomain -n example.com git.example.org\n" in conf


def test_names_covered_by_a_leading_dot_are_listed_once():
    conf = render_policy_conf(parse_policy([".example.com", "example.com", "a.example.com", "b.example.org"]))
    assert "acl aisb_domains dstdomain -n .example.com b.example.org\n" in conf


def test_empty_allowlist_denies_everything():
    conf = render_policy_conf(parse_policy([]))
    assert access_rules(conf) == ["http_access deny all"]
    assert "acl " not in conf


def test_no_obsolete_or_builtin_redeclaring_directives():
    conf = render_policy_conf(parse_policy(["example.com", "a.example.org:22"])) + \
        render_session_conf(3128, "s1", "/etc/aisb/gate-policy/squid-policy.conf")
    for word in ["dns_v4_first", "max_mem_obj_size", "acl manager", "src localhost", "acl localhost"]:
        assert word not in conf


def test_session_part():
    conf = render_session_conf(41234, "20261130-abc", "/etc/aisb/gate-policy/squid-policy.conf")
    lines = conf.splitlines()
    assert "http_port 127.0.0.1:41234" in lines
    assert "pid_filename /tmp/aisb-gate-20261130-abc.pid" in lines
    assert "cache deny all" in lines
    # Bounded whatever descriptor limit the host hands the container: memory follows it.
    assert "max_filedescriptors 4096" in lines
    assert any(l.startswith("logformat aisb ") and "session=20261130-abc " in l for l in lines)
    assert "access_log stdio:/dev/stdout logformat=aisb" in lines
    assert lines[-1] == "include /etc/aisb/gate-policy/squid-policy.conf"


@pytest.mark.parametrize("port,session_id,path", [
    (80, "s1", "/p"), (65536, "s1", "/p"), ("3128", "s1", "/p"), (True, "s1", "/p"),
    (3128, "s1\nhttp_access allow all", "/p"), (3128, "", "/p"), (3128, "a b", "/p"), (3128, "x" * 65, "/p"),
    (3128, "s1", "relative"), (3128, "s1", "/p\ninclude /etc/passwd"), (3128, "s1", "/p q"),
])
def test_session_part_refuses_bad_input(port, session_id, path):
    with pytest.raises(ValueError):
        render_session_conf(port, session_id, path)


def test_gate_log_is_split_into_allowed_and_denied():
    log = "\n".join([
        "1764490000.123 session=sid client=127.0.0.1 TCP_TUNNEL/200 CONNECT example.com:443 dst=198.18.0.10",
        "1764490001.456 session=sid client=127.0.0.1 TCP_DENIED/403 GET http://evil.test/ dst=-",
        "squid noise that is not an access line",
    ])
    decisions = parse_gate_log(log)
    assert [d["url"] for d in decisions["allowed"]] == ["example.com:443"]
    assert [d["url"] for d in decisions["denied"]] == ["http://evil.test/"]


def test_gate_log_skips_connections_that_sent_no_request():
    log = "1764490000.123 session=sid client=127.0.0.1 NONE_NONE/000 - error:transaction-end-before-headers dst=-"
    assert parse_gate_log(log) == {"allowed": [], "denied": []}
