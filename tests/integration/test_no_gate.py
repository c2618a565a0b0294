# SPDX-License-Identifier: GPL-3.0-or-later
"""Network no-gate on a Debian 13 workstation whose pasta cannot reach the host's
loopback: the spike's verdict there, a session's real traffic (only the pinned addresses
and ports get through), and the refusals."""

import json

import pytest

from scenario import TRANSFER_DIR, Internet, install_tripwire, provisioned_variant
from sessions import (PROJECT, allow, clock, containers_created, provisioned_sandbox_image, record_of, run_agent,
                      session_containers)
from spike_host import FACTS, run_leak_control

WRAPPER_DIR = "/home/dev/.local/libexec/no-loopback-pasta"
# A pasta without a way to the host's loopback, as a passt older than 2024-08-21 is:
# --map-host-loopback and -T PORT are refused; everything else runs the real pasta.
NO_LOOPBACK_PASTA = """#!/bin/sh
previous=
for arg in "$@"; do
  case $arg in --map-host-loopback*)
    echo "pasta: --map-host-loopback is not available (aisb test pasta)" >&2; exit 1 ;;
  esac
  if [ "$previous" = -T ] && [ "$arg" != none ]; then
    echo "pasta: -T is not available (aisb test pasta)" >&2; exit 1
  fi
  previous=$arg
done
exec /usr/bin/pasta "$@"
"""
CONTAINERS_CONF = "/home/dev/.config/containers/containers.conf"
HELPERS = f'[engine]\nhelper_binaries_dir = ["{WRAPPER_DIR}", "/usr/libexec/podman", "/usr/lib/podman", "/usr/bin"]\n'
# The shell recipe: no harness names (pi's API hosts) to resolve.
OPERATOR = ["-e", "aisb_harness=shell"]
NO_GATE = ["-e", "aisb_network=no-gate"]
# Inside the sandbox: one line "RESULT ID open|blocked|sent" per attempt. Every request
# names its ID, so a listener's log says which attempt reached it.
SCRIPT = r"""
# Open means an answer came back: under load the listener's close may come after the
# timeout, and the answer already seen still shows the attempt arrived. TRIES (default 1)
# attempts each: the control's, where one answer is all it has to show.
get() { local out
        for _ in $(seq "${TRIES:-1}"); do
          out=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET /$3 HTTP/1.0\r\nHost: $1\r\n\r\n" >&3 && cat <&3' \
                _ "$1" "$2" "$3" 2>&1); printf '%s\n' "$out"
          [[ $out == HTTP/* ]] && break
        done
        if [[ $out == HTTP/* ]]; then echo "RESULT $3 open"; else echo "RESULT $3 blocked"; fi; }
udp() { if timeout 5 bash -c 'printf "$3" >"/dev/udp/$1/$2"' _ "$1" "$2" "$3" 2>/dev/null
        then echo "RESULT $3 sent"; else echo "RESULT $3 blocked"; fi; }
# An IPv6 address is tentative (duplicate address detection) for a moment after the
# sandbox starts, and a connect from it fails: wait, so that an IPv6 attempt is blocked
# only by the table, never by the clock.
tentative() { while read -r _ _ _ _ flags _; do (( 0x$flags & 0x40 )) && return 0; done </proc/net/if_inet6; return 1; }
for _ in $(seq 50); do tentative || break; sleep 0.1; done
tentative && echo "RESULT ipv6-address tentative"
env | grep -i proxy | sed 's/^/PROXY /'
get allowed.test 80 allowed-80
get allowed.test 443 allowed-443
get allowed.test 8443 allowed-8443
get @B@ 80 other-literal
get elsewhere.test 443 other-name
get @B6@ 80 other-ipv6
udp @A@ 53 dns-to-allowed
udp @B@ 53 dns-to-other
udp 169.254.1.1 53 dns-to-pasta
udp @B6@ 53 dns-to-other-ipv6
if getent hosts sandbox-query.elsewhere.test >/dev/null; then echo "RESULT resolver open"; else echo "RESULT resolver blocked"; fi
true
"""


class Elsewhere(Internet):
    """A second test "internet" that no allow entry names."""

    NAMES = ["elsewhere.test"]


def use_no_loopback_pasta(ws, on):
    if on:
        ws.sh(f"mkdir -p {WRAPPER_DIR} && cat >{WRAPPER_DIR}/pasta && chmod 0755 {WRAPPER_DIR}/pasta",
              input=NO_LOOPBACK_PASTA)
        ws.sh(f"mkdir -p $(dirname {CONTAINERS_CONF}) && cat >{CONTAINERS_CONF}", input=HELPERS)
    else:
        ws.run(["rm", "-f", CONTAINERS_CONF])


@pytest.fixture(scope="module")
def host():
    """A Debian 13 workstation provisioned with the no-loopback pasta in place."""
    with provisioned_variant(lambda ws: use_no_loopback_pasta(ws, True), *OPERATOR) as ws:
        ws.sh(f"mkdir -p {PROJECT}")
        yield ws


@pytest.fixture(scope="module")
def nets(host):
    """A: the allowed names' internet. B: another address (IPv4 and IPv6) that nothing
    allows, with tripwires on port 53 and a DNS server that the workstation (and so
    pasta's forwarder) uses. A's port 53 has tripwires too."""
    a, b = Internet(host).start(), Elsewhere(host).start()
    third, fourth = (int(n) for n in b.address.split(".")[2:])
    b.v6, v6_host = f"2001:db8:{third:x}:{fourth:x}::2", f"2001:db8:{third:x}:{fourth:x}::1"
    log = f"{TRANSFER_DIR}/tripwires-{b.netns}.log"
    resolv = host.path("/etc/resolv.conf").read_text()
    tripwire = install_tripwire(host)
    wires = {a.netns: {"tcp": [[a.address, 53]], "udp": [[a.address, 53]]},
             b.netns: {"tcp": [[b.address, 53], [b.v6, 80]], "udp": [[b.v6, 53]], "dns": [b.address, 53],
                       "zone": {}}}
    host.sh(f"""
        ip addr replace {v6_host}/64 dev {b.veth} nodad
        ip -n {b.netns} addr replace {b.v6}/64 dev eth0 nodad
        : >{log}
        """ + "\n".join(f"""
        ip netns exec {netns} setsid python3 {tripwire} {log} '{json.dumps(config)}' >{log}.{netns} 2>&1 &
        echo $! >>{log}.pids
        for _ in $(seq 50); do grep -q ready {log}.{netns} && break; sleep 0.1; done
        grep -q ready {log}.{netns}""" for netns, config in wires.items()) + f"""
        printf 'nameserver {b.address}\\noptions timeout:1 attempts:1\\n' >/etc/resolv.conf
        """, user="root")
    b.tripwires = log
    yield a, b
    host.path("/etc/resolv.conf").write_text(resolv)
    host.sh(f"kill $(cat {log}.pids) || true", user="root", check=False)
    a.stop()
    b.stop()


def created_containers(ws, since):
    """Session containers (gate or sandbox) podman created since SINCE."""
    return [name for name in containers_created(ws, since) if name.startswith(("aisb-sandbox-", "aisb-gate-"))]


def test_the_spike_offers_no_gate_and_not_the_model(host):
    info = json.loads(host.run(["podman", "info", "--format", "json"]).stdout)
    assert info["host"]["pasta"]["executable"] == f"{WRAPPER_DIR}/pasta"  # podman runs the wrapper
    facts = json.loads(host.path(FACTS).read_text())
    verdict, probes = facts["verdict"], facts["probes"]
    assert facts["schema_version"] == 4
    assert "--map-host-loopback is not available (aisb test pasta)" in \
        probes["map_host_loopback"]["evidence"]["stderr"]
    assert verdict["gate_path"] == "none" and verdict["model_holds"] is False
    assert verdict["no_gate_holds"] is True, verdict["reasons"]
    for name in ("nft_default_drop", "table_allows_gate", "setpriv_locks_table", "raw_tcp_blocked",
                 "udp_blocked", "ipv6_blocked"):
        assert probes[name]["ok"] is True and probes[name]["network"] == "pasta:--no-map-gw", probes[name]
    # provision.yml built the sandbox image for no-gate.
    assert host.run(["podman", "images", "--quiet", "localhost/aisb-sandbox"]).stdout.strip()


def test_the_probes_on_plain_pasta_see_a_leak_without_the_table(host):
    leaks = run_leak_control(host, json.loads(host.path(FACTS).read_text())["probe_image"])
    for name in ("nft_default_drop", "raw_tcp_blocked", "udp_blocked"):
        assert leaks[name]["network"] == "pasta:--no-map-gw"
        assert leaks[name]["ok"] is False and leaks[name]["detail"].startswith("leak: "), leaks[name]
    assert "flush rc 0" in leaks["setpriv_locks_table"]["detail"]


def test_a_session_reaches_only_the_pinned_address_and_ports(host, nets):
    a, b = nets
    script = "/project/traffic.sh"
    host.path(f"{PROJECT}/traffic.sh").write_text(
        SCRIPT.replace("@A@", a.address).replace("@B6@", b.v6).replace("@B@", b.address))
    result = run_agent(host, *OPERATOR, *NO_GATE, *allow("allowed.test"), command=["bash", script])
    assert result.returncode == 0, result.stdout[-4000:]
    record = record_of(host, result.stdout)
    assert record["network"] == "no-gate" and record["status"] == "exited" and record["exit_code"] == 0
    assert record["pinned_names"] == {"allowed.test": [a.address]}
    assert record["policy"].splitlines()[1:] == ["gate none", f"pin {a.address} 80", f"pin {a.address} 443"]
    assert record["gate"] == {"allowed": [], "answered": [], "denied": [], "hints": [], "canary_connects": 0,
                              "sent_by_host": {}}
    assert session_containers(host) == []
    sandbox = next(argv for argv in record["commands"] if argv[1] == "run")
    assert "--network=pasta:--no-map-gw" in sandbox and f"allowed.test:{a.address}" in sandbox
    transcript = host.path(record["transcript"]).read_text()
    results = dict(line.split()[1:3] for line in transcript.splitlines() if line.startswith("RESULT "))
    assert not [line for line in transcript.splitlines() if line.startswith("PROXY ")], transcript
    assert results == {
        "allowed-80": "open", "allowed-443": "open", "allowed-8443": "blocked",
        "other-literal": "blocked", "other-name": "blocked", "other-ipv6": "blocked",
        "dns-to-allowed": "blocked", "dns-to-other": "blocked", "dns-to-pasta": "blocked",
        "dns-to-other-ipv6": "blocked", "resolver": "blocked"}, transcript
    assert "hello from allowed.test port 80" in transcript and "hello from allowed.test port 443" in transcript
    # What arrived, as the listeners saw it: the two allowed requests and nothing else.
    assert [(r["port"], r["path"]) for r in a.requests()] == [(80, "/allowed-80"), (443, "/allowed-443")]
    assert b.requests() == []
    events = [json.loads(line) for line in host.path(b.tripwires).read_text().splitlines()]
    # The workstation's own lookups may reach the DNS server; nothing the sandbox sent may.
    assert [e for e in events if e["kind"] != "dns" or e["name"].startswith("sandbox-")] == [], events


def test_without_the_table_the_same_traffic_arrives(host, nets):
    """The control: the sandbox image on the same network with the same hosts entry, its
    entrypoint (the table) left out. Every attempt the session's table blocked gets through."""
    a, b = nets
    before_a, before_b = len(a.requests()), len(b.requests())
    before_wires = len(host.path(b.tripwires).read_text().splitlines())
    # pi's image, the sessions': not whichever recipe's image podman lists first.
    image = provisioned_sandbox_image(host)
    # Three tries an attempt: under load (CI, two workers) the IPv6 one once had no answer in 5 s.
    done = host.run(["podman", "run", "--rm", "--network=pasta:--no-map-gw", "--add-host", f"allowed.test:{a.address}",
                     "--env", "TRIES=3", "--volume", f"{PROJECT}:/project", "--entrypoint", "bash", image,
                     "/project/traffic.sh"], timeout=300)
    results = dict(line.split()[1:3] for line in done.stdout.splitlines() if line.startswith("RESULT "))
    assert {k: v for k, v in results.items() if k != "resolver"} == {
        "allowed-80": "open", "allowed-443": "open", "allowed-8443": "open", "other-literal": "open",
        "other-name": "open", "other-ipv6": "open", "dns-to-allowed": "sent", "dns-to-other": "sent",
        "dns-to-pasta": "sent", "dns-to-other-ipv6": "sent"}, done.stdout
    assert (8443, "/allowed-8443") in [(r["port"], r["path"]) for r in a.requests()[before_a:]]
    assert {r["path"] for r in b.requests()[before_b:]} == {"/other-literal", "/other-name"}
    arrived = [json.loads(line) for line in host.path(b.tripwires).read_text().splitlines()[before_wires:]]
    seen = {e.get("data") or e.get("name") for e in arrived}
    assert {"dns-to-allowed", "dns-to-other", "dns-to-pasta", "dns-to-other-ipv6",
            "sandbox-query.elsewhere.test"} <= seen, arrived
    assert any(e["kind"] == "tcp" and "GET /other-ipv6" in e["data"] for e in arrived), arrived


@pytest.mark.parametrize("entry, words", [
    (".allowed.test", "allow entry '.allowed.test': network no-gate cannot pin a wildcard"),
    ("nowhere.test", "allow entry 'nowhere.test' does not resolve on this host"),
])
def test_entries_it_cannot_pin_are_refused_before_anything_starts(host, nets, entry, words):
    since = clock(host)
    result = run_agent(host, *OPERATOR, *NO_GATE, *allow("allowed.test", entry), command=["true"])
    assert result.returncode != 0 and words in result.stdout, result.stdout[-3000:]
    assert created_containers(host, since) == []


def test_no_gate_is_refused_where_the_gate_path_exists(host):
    """The same workstation with the real pasta: the spike finds the gate path, and no-gate
    is refused in favour of the gate."""
    use_no_loopback_pasta(host, False)
    try:
        since = clock(host)
        result = run_agent(host, *OPERATOR, *NO_GATE, *allow("allowed.test"), command=["true"])
        facts = json.loads(host.path(FACTS).read_text())
    finally:
        use_no_loopback_pasta(host, True)
    assert facts["verdict"]["gate_path"] == "map-host-loopback"  # measured again: the host changed
    assert result.returncode != 0
    assert "network no-gate is refused: aisb_host.verdict.gate_path is map-host-loopback" in result.stdout
    assert "use network allow" in result.stdout
    assert created_containers(host, since) == []
