# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's squid configuration: ACL order, the session part, refused session inputs."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils._squid import render_policy_conf, render_session_conf


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


def test_denied_destinations_cover_local_and_private_ranges():
    line = next(l for l in render_policy_conf(parse_policy(["example.com"])).splitlines()
                if l.startswith("acl aisb_denied_dst dst "))
    ranges = line.split()[3:]
    for needed in ["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                   "169.254.0.0/16", "::1/128", "fc00::/7", "fe80::/10"]:
        assert needed in ranges


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
