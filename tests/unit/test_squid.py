# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's squid configuration: ACL order, the session part, refused session inputs,
the peeking rules, the access log read back (the SNI helper: test_sni_helper)."""

import ipaddress

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import REFUSED_DESTINATIONS, parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import (
    parse_gate_log, render_policy_conf, render_session_conf, sent_by_host)

from builders import PASSING, REFUSED


def access_rules(text):
    return [line for line in text.splitlines() if line.startswith("http_access")]


def test_acl_order_follows_the_design():
    conf = render_policy_conf(parse_policy(["example.com", ".github.com", "198.18.0.5"]))
    assert access_rules(conf) == [
        "http_access allow aisb_connect",
        "http_access deny !aisb_domains",
        "http_access deny manager",
        "http_access deny aisb_gate_tls",
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
    assert access_rules(conf) == ["http_access allow aisb_connect", "http_access deny all"]
    # Every CONNECT is marked refused at once: none is peeked at or relayed.
    assert "ssl_bump splice aisb_client_hello all aisb_refuse\n" in conf
    assert "peek" not in conf and "dstdomain" not in conf


def test_no_obsolete_or_builtin_redeclaring_directives():
    conf = render_policy_conf(parse_policy(["example.com", "a.example.org:22"])) + \
        render_session_conf(3128, "s1", "/etc/aisb/gate-policy/squid-policy.conf")
    for word in ["dns_v4_first", "max_mem_obj_size", "acl manager", "src localhost", "acl localhost"]:
        assert word not in conf


def test_session_part():
    conf = render_session_conf(41234, "20261130-abc", "/etc/aisb/gate-policy/squid-policy.conf")
    lines = conf.splitlines()
    assert "http_port 127.0.0.1:41234 ssl-bump generate-host-certificates=off tls-cert=/etc/squid/aisb-peek.pem" in lines
    assert "pid_filename /tmp/aisb-gate-20261130-abc.pid" in lines
    assert "cache deny all" in lines
    # Bounded whatever descriptor limit the host hands the container: memory follows it.
    assert "max_filedescriptors 4096" in lines
    assert any(l.startswith("logformat aisb ") and "session=20261130-abc " in l for l in lines)
    assert "access_log stdio:/dev/stdout logformat=aisb" in lines
    assert lines[-1] == "include /etc/aisb/gate-policy/squid-policy.conf"


def test_tls_is_peeked_and_spliced_never_bumped():
    session = render_session_conf(41234, "s1", "/etc/aisb/gate-policy/squid-policy.conf").splitlines()
    policy = render_policy_conf(parse_policy(["example.com", "git.example.org:2222"], [443])).splitlines()
    assert [line for line in session if "ssl-bump" in line] == [
        "http_port 127.0.0.1:41234 ssl-bump generate-host-certificates=off tls-cert=/etc/squid/aisb-peek.pem"]
    assert "acl aisb_client_hello at_step SslBump1" in session
    assert "on_unsupported_protocol respond all" in session
    # It never speaks TLS to a server, so it trusts no CA for that.
    assert "tls_outgoing_options default-ca=off" in session
    bump = [line for line in policy if line.startswith("ssl_bump ")]
    # No rule ever bumps, stares or lets a ClientHello through unread to a CONNECT port.
    assert {line.split()[1] for line in bump} == {"splice", "peek", "terminate"}
    assert bump[-4:] == ["ssl_bump peek aisb_client_hello aisb_connect_ports",
                         "ssl_bump splice aisb_client_hello aisb_extra",
                         "ssl_bump splice aisb_sni_is_connect_host", "ssl_bump terminate all"]
    assert not [line for line in session + policy
                if line.startswith(("always_direct", "sslcrtd", "sslproxy_cert", "cache_peer", "never_direct"))]


@pytest.mark.parametrize("entries", [["example.com"], ["example.com", "git.example.org:2222"], [],
                                     ["example.com", "models.lan:8000=10.1.2.3"], ["models.lan:8000=10.1.2.3"]])
def test_a_connect_is_refused_by_the_same_rules_as_plain_http(entries):
    """http_access lets every CONNECT on (a refusal there would be served over TLS); the
    refusals it applies to plain HTTP are the ones ssl_bump marks for miss_access's 403,
    in the same order, and nothing CONNECT-specific is decided by http_access."""
    lines = render_policy_conf(parse_policy(entries)).splitlines()
    http = access_rules("\n".join(lines))
    assert http[0] == "http_access allow aisb_connect"
    assert http[-1] == "http_access deny all"
    denied = [line[len("http_access deny "):] for line in http if line.startswith("http_access deny ")][:-1]
    marked = [line[len("ssl_bump splice aisb_client_hello "):-len(" aisb_refuse")] for line in lines
              if line.startswith("ssl_bump splice") and line.endswith(" aisb_refuse")]
    assert marked == (denied or ["all"])
    assert "acl aisb_refuse annotate_transaction aisb_verdict=refused" in lines
    # A tunnel to a CONNECT port opens only where the ClientHello check said OK (squid
    # splices when the check has no answer); with nothing allowed, nothing is peeked.
    guard = ["miss_access deny aisb_connect aisb_connect_ports !aisb_hello_checked"] if entries else []
    assert lines[-2 - len(guard):] == ["miss_access deny aisb_refused"] + guard + ["miss_access allow all"]


@pytest.mark.parametrize("port,session_id,path", [
    (80, "s1", "/p"), (65536, "s1", "/p"), ("3128", "s1", "/p"), (True, "s1", "/p"),
    (3128, "s1\nhttp_access allow all", "/p"), (3128, "", "/p"), (3128, "a b", "/p"), (3128, "x" * 65, "/p"),
    (3128, "s1", "relative"), (3128, "s1", "/p\ninclude /etc/passwd"), (3128, "s1", "/p q"),
])
def test_session_part_refuses_bad_input(port, session_id, path):
    with pytest.raises(ValueError):
        render_session_conf(port, session_id, path)


def test_gate_log_is_split_into_allowed_and_denied():
    tail = " hier=HIER_NONE tls=- sni=-"
    log = "\n".join([
        "1764490000.100 session=sid client=127.0.0.1 TCP_MISS/200 GET http://example.com/ dst=198.18.0.10"
        " hier=HIER_DIRECT tls=- sni=-",
        "1764490001.456 session=sid client=127.0.0.1 TCP_DENIED/403 GET http://evil.test/ dst=-" + tail,
        "1764490001.500 session=sid client=127.0.0.1 TCP_DENIED/403 CONNECT evil.test:443 dst=-" + tail,
        "squid noise that is not an access line",
    ])
    decisions = parse_gate_log(log)
    assert decisions["allowed"] == [{"time": 1764490000.1, "method": "GET", "url": "http://example.com/",
                                     "status": "TCP_MISS/200", "dst": "198.18.0.10"}]
    assert [d["url"] for d in decisions["denied"]] == ["http://evil.test/", "evil.test:443"]


def test_a_tunnel_counts_once_as_the_verdict_on_its_client_hello():
    """A peeked CONNECT shows twice in squid's log (the verdict on the ClientHello, the
    spliced tunnel's end): one decision. A refused ClientHello (another name, no SNI, not
    TLS) is a denial; a CONNECT refused before peeking is its 403; a host:port entry's
    tunnel, never peeked, is its one line."""
    def line(t, status, url, hier, tls, sni):
        return ("%s session=sid client=127.0.0.1 %s CONNECT %s dst=- hier=%s tls=%s sni=%s"
                % (t, status, url, hier, tls, sni))
    log = "\n".join([
        line("1.001", "NONE_NONE/200", "b-tls.test:443", "HIER_NONE", "splice", "b-tls.test"),
        line("1.002", "TCP_TUNNEL/200", "b-tls.test:443", "HIER_DIRECT", "splice", "b-tls.test"),
        line("2.001", "NONE_NONE/200", "b-tls.test:443", "HIER_NONE", "terminate", "b-unlisted.test"),
        line("3.001", "NONE_NONE/200", "b-tls.test:443", "HIER_NONE", "terminate", "-"),
        line("4.001", "NONE_NONE/200", "b-tls.test:443", "HIER_NONE", "peek", "-"),
        line("5.001", "NONE_NONE/403", "b-unlisted.test:443", "HIER_NONE", "splice", "-"),
        line("6.001", "TCP_TUNNEL/200", "git.test:2222", "HIER_DIRECT", "splice", "-"),
    ])
    decisions = parse_gate_log(log)
    assert [d["time"] for d in decisions["allowed"]] == [1.001, 6.001]
    assert [d["time"] for d in decisions["denied"]] == [2.001, 3.001, 4.001, 5.001]


def test_a_tunnels_end_gives_its_verdict_the_address_connected_to():
    """The verdict on a ClientHello is logged before any server is contacted (dst=-);
    the spliced tunnel's end names the address: the record's entry gets it, the oldest
    open tunnel of that CONNECT and SNI first. A refused ClientHello never gets one."""
    def line(t, status, url, dst, hier, tls, sni):
        return ("%s session=sid client=127.0.0.1 %s CONNECT %s dst=%s hier=%s tls=%s sni=%s"
                % (t, status, url, dst, hier, tls, sni))
    log = "\n".join([
        line("1.001", "NONE_NONE/200", "models.lan:443", "-", "HIER_NONE", "splice", "models.lan"),
        line("1.002", "NONE_NONE/200", "models.lan:443", "-", "HIER_NONE", "splice", "models.lan"),
        line("1.003", "NONE_NONE/200", "models.lan:443", "-", "HIER_NONE", "terminate", "other.lan"),
        line("1.004", "NONE_NONE/200", "b-tls.test:443", "-", "HIER_NONE", "splice", "b-tls.test"),
        line("2.001", "TCP_TUNNEL/200", "models.lan:443", "10.0.0.5", "FIRSTUP_PARENT", "splice", "models.lan"),
        line("2.002", "TCP_TUNNEL/200", "other.lan:443", "10.0.0.9", "HIER_DIRECT", "splice", "other.lan"),
    ])
    decisions = parse_gate_log(log)
    assert [(d["time"], d["url"], d["dst"]) for d in decisions["allowed"]] == [
        (1.001, "models.lan:443", "10.0.0.5"), (1.002, "models.lan:443", "-"), (1.004, "b-tls.test:443", "-")]
    assert [(d["time"], d["dst"]) for d in decisions["denied"]] == [(1.003, "-")]


def test_a_splice_refused_for_want_of_an_answer_is_one_denial():
    """When the ClientHello check gives no answer squid splices, and miss_access refuses
    the tunnel (403) before any server is contacted: the verdict's "splice" allowed
    nothing, the request is one denial; another tunnel of that name is untouched."""
    def line(t, status, hier):
        return ("%s session=sid client=127.0.0.1 %s CONNECT b-tls.test:443 dst=- hier=%s tls=splice sni=b-tls.test"
                " reason=-" % (t, status, hier))
    log = "\n".join([line("1.001", "NONE_NONE/200", "HIER_NONE"), line("1.002", "NONE_NONE/200", "HIER_NONE"),
                     line("1.003", "TCP_TUNNEL/403", "HIER_NONE"), line("2.001", "TCP_TUNNEL/200", "HIER_DIRECT")])
    decisions = parse_gate_log(log)
    assert [(d["time"], d["status"]) for d in decisions["denied"]] == [(1.003, "TCP_TUNNEL/403")]
    assert [(d["time"], d["dst"]) for d in decisions["allowed"]] == [(1.002, "-")]


def test_a_refused_client_hello_keeps_the_helpers_reason():
    """The SNI helper's log= (reason=, URL-encoded by squid) is the denied entry's reason;
    "-" (no helper answer, or OK) and a line written before the field existed give none."""
    head = "1.001 session=sid client=127.0.0.1 NONE_NONE/200 CONNECT b-tls.test:443 dst=- hier=HIER_NONE"
    log = "\n".join([
        head + " tls=terminate sni=b-tls.test reason=sni-several-names",
        head + " tls=terminate sni=- reason=client-hello-malformed",
        head + " tls=peek sni=- reason=-",
        head + " tls=terminate sni=b-unlisted.test",
        head + " tls=splice sni=b-tls.test reason=-",
    ])
    decisions = parse_gate_log(log)
    assert [d.get("reason") for d in decisions["denied"]] == [
        "sni-several-names", "client-hello-malformed", None, None]
    assert "reason" not in decisions["allowed"][0]


def test_the_helper_gets_the_raw_client_hello_and_nothing_is_cached():
    """%>handshake: the bytes squid splices to the server (base64), not its own reading of
    the SNI; cache=0: each ClientHello is another (its random); a queue as long as the
    gate's descriptors (squid gives up on a check beyond it); its OK tags the connection
    with the tag the policy part's miss_access asks for."""
    conf = render_session_conf(3128, "sid", "/etc/squid/policy.conf").splitlines()
    helper = [line for line in conf if line.startswith("external_acl_type aisb_sni ")]
    assert helper == ["external_acl_type aisb_sni children-max=1 children-startup=1 concurrency=64 queue-size=4096"
                      " cache=0 %DST %>handshake /usr/bin/perl /usr/local/lib/aisb/sni-is-connect-host"
                      " aisb-hello-checked"]
    assert "acl aisb_hello_checked note clt_conn_tag aisb-hello-checked" in conf
    assert [line for line in conf if line.startswith("logformat aisb ")][0].endswith(" up=%>st reason=%#ea")


def test_gate_log_skips_connections_that_sent_no_request():
    log = ("1764490000.123 session=sid client=127.0.0.1 NONE_NONE/000 - error:transaction-end-before-headers"
           " dst=- hier=HIER_NONE tls=- sni=-")
    assert parse_gate_log(log) == {"allowed": [], "denied": [], "answered": []}


def test_a_private_entry_goes_to_its_address_on_its_port_only_and_is_never_resolved():
    """'models.lan:8000=10.1.2.3': squid relays that name and port to a peer at the pinned
    address (never_direct: no lookup of the name can move it), refuses the name on any
    other port before anything resolves it, and keeps the refused destinations for every
    other request; no other request may use the peer."""
    lines = render_policy_conf(parse_policy(["example.com", "models.lan:8000=10.1.2.3",
                                             "models.lan:9000=10.1.2.4"])).splitlines()
    assert "acl aisb_domains dstdomain -n example.com models.lan" in lines
    assert [line for line in lines if line.startswith(("cache_peer", "never_direct"))] == [
        "cache_peer 10.1.2.3 parent 8000 0 originserver no-query no-digest name=aisb_private_0",
        "cache_peer_access aisb_private_0 allow aisb_private_0",
        "cache_peer_access aisb_private_0 deny all",
        "cache_peer 10.1.2.4 parent 9000 0 originserver no-query no-digest name=aisb_private_1",
        "cache_peer_access aisb_private_1 allow aisb_private_1",
        "cache_peer_access aisb_private_1 deny all",
        "never_direct allow aisb_private"]
    assert "acl aisb_private_0 all-of aisb_private_0_host aisb_private_0_port" in lines
    assert "acl aisb_private_0_host dstdomain -n models.lan" in lines and "acl aisb_private_1_port port 9000" in lines
    assert "acl aisb_private any-of aisb_private_0 aisb_private_1" in lines
    assert "acl aisb_extra any-of aisb_private_0 aisb_private_1" in lines
    denied = [line for line in lines if line.startswith("http_access deny ")]
    assert denied == ["http_access deny !aisb_domains", "http_access deny manager",
                      "http_access deny aisb_gate_tls",
                      "http_access deny aisb_ip_literal", "http_access deny aisb_private_names !aisb_private",
                      "http_access deny aisb_connect !aisb_connect_ports !aisb_extra",
                      "http_access deny !aisb_connect !aisb_http_ports !aisb_extra",
                      # squid evaluates left to right: a private request never reaches the
                      # dst ACL, which would resolve its name.
                      "http_access deny !aisb_private aisb_denied_dst", "http_access deny all"]


def test_no_peer_without_a_private_entry():
    lines = render_policy_conf(parse_policy(["example.com", "git.example.org:2222"])).splitlines()
    assert not [line for line in lines if "private" in line or line.startswith(("cache_peer", "never_direct"))]


def test_the_gates_own_answers_are_their_own_kind_each_with_its_reason():
    """Allowed means relayed to a destination: a request the gate answered itself (an
    origin-form GET sent to its port: 400; a destination it could not reach: 503) is
    no decision to relay anything, and says why; an allowed tunnel's verdict is still allowed."""
    def line(t, status, method, url, hier, tls="-", sni="-", dst="-"):
        return ("%s session=sid client=127.0.0.1 %s %s %s dst=%s hier=%s tls=%s sni=%s"
                % (t, status, method, url, dst, hier, tls, sni))
    log = "\n".join([
        line("1.001", "NONE_NONE/400", "GET", "/path", "HIER_NONE"),
        line("2.001", "TCP_MISS/503", "GET", "http://allowed.test/", "HIER_NONE"),
        line("3.001", "TCP_TUNNEL/503", "CONNECT", "git.test:2222", "HIER_NONE"),
        line("4.001", "TCP_MISS/200", "GET", "http://allowed.test/", "HIER_DIRECT", dst="198.18.0.10"),
        line("5.001", "TCP_MISS/503", "GET", "http://allowed.test/", "HIER_DIRECT", dst="198.18.0.10"),
        line("6.001", "NONE_NONE/200", "CONNECT", "b-tls.test:443", "HIER_NONE", tls="splice", sni="b-tls.test"),
    ])
    decisions = parse_gate_log(log)
    assert [(d["time"], d["url"]) for d in decisions["allowed"]] == [
        (4.001, "http://allowed.test/"), (5.001, "http://allowed.test/"), (6.001, "b-tls.test:443")]
    assert [(d["time"], d["status"]) for d in decisions["answered"]] == [
        (1.001, "NONE_NONE/400"), (2.001, "TCP_MISS/503"), (3.001, "TCP_TUNNEL/503")]
    reasons = [d["reason"] for d in decisions["answered"]]
    assert "not a request the gate relays" in reasons[0] and "could not reach" in reasons[1] and reasons[1] == reasons[2]
    assert decisions["denied"] == []


def test_the_bytes_up_are_summed_by_host_a_tunnel_s_at_its_end():
    line = ("%s session=sid client=127.0.0.1 %s %s %s dst=%s hier=%s tls=%s sni=%s up=%s reason=-")
    log = "\n".join([
        line % ("1.0", "TCP_MISS/200", "PUT", "http://up.test:8080/a", "198.18.0.2", "HIER_DIRECT", "-", "-", 3000),
        line % ("2.0", "TCP_MISS/200", "PUT", "http://up.test:8080/b", "198.18.0.2", "HIER_DIRECT", "-", "-", 500),
        # A tunnel's verdict (its ClientHello), then its end with all it carried.
        line % ("3.0", "NONE_NONE/200", "CONNECT", "api.test:443", "-", "HIER_NONE", "splice", "api.test", 517),
        line % ("9.0", "TCP_TUNNEL/200", "CONNECT", "api.test:443", "198.18.0.3", "HIER_DIRECT", "splice",
                "api.test", 90000),
        line % ("4.0", "TCP_DENIED/403", "PUT", "http://evil.test/", "-", "HIER_NONE", "-", "-", 7000),
    ])
    decisions = parse_gate_log(log)
    assert sent_by_host(decisions) == {"up.test": 3500, "api.test": 90000}
    # An older gate's lines have no bytes: nothing is summed, nothing fails.
    assert sent_by_host(parse_gate_log(log.replace(" up=7000", "").replace(" up=3000", ""))) == {
        "up.test": 500, "api.test": 90000}
