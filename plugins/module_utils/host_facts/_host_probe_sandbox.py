# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox probe: a container shaped like the session's sandbox installs the table
as root, drops every privilege the way the entrypoint does, then tries raw TCP, UDP and
IPv6 at listeners the table must keep out.

Its model of the entrypoint (RULESET, DROP_ALL_PRIVILEGES) is checked against
roles/image/files/ by tests/unit/test_enforcement_copies.py.
"""

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_results import (
    Listener, host_address, result, unmeasured)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK

# MAPPED_LOOPBACK is where pasta maps the host's loopback, as the session uses it. The
# v6 one exists only in the probe, to give IPv6 a way to a local listener the table must block.
MAPPED_ADDR6 = "fd00:a15b::1"
# The blocked connections wait a multiple of what the positive control (the gate's
# port, the same path through pasta) took, never less than the floor: a connection the
# table let through would arrive as fast as the control did.
BLOCKED_WAIT_MULTIPLE = 10
BLOCKED_WAIT_FLOOR_MS = 1000
# The entrypoint's last step (roles/image/files/entrypoint.sh): every id and capability
# set given up, no-new-privs, then the harness.
DROP_ALL_PRIVILEGES = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--inh-caps=-all",
                       "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
# The session's table (roles/image/files/ruleset.nft plus the gate's rule the entrypoint
# adds): output policy drop, loopback, and exactly one address and port.
RULESET = """table inet aisb {
  chain output {
    type filter hook output priority 0; policy drop;
    oif lo accept
    ip daddr $gate_addr tcp dport $gate_port accept
  }
}
"""
# On plain pasta (network no-gate) the probe aims at the host's own address through
# podman's entry for it in the container's /etc/hosts.
HOST_ENTRY = "host.containers.internal"
# On pasta with the gateway mapped (an old passt): the probe aims at the container's
# default gateways, which lead to the host's loopback.
GATEWAY = "gateway"
# Needed for the gate only: network no-gate holds without them.
GATE_PATH_PROBES = ("host_loopback_reachable",)
SANDBOX_PROBES = ("nft_default_drop", "table_allows_gate", "setpriv_locks_table", "raw_tcp_blocked",
                  "udp_blocked", "ipv6_blocked")

SANDBOX_SCRIPT = """
nft --version
if [ "$4" = @HOST_ENTRY@ ]; then
  set -- "$1" "$2" "$3" "$(awk '$2 == "@HOST_ENTRY@" {print $1; exit}' /etc/hosts)" "${@:5}"
fi
if [ "$4" = @GATEWAY@ ]; then
  gw=$(awk '$2 == "00000000" {print $3; exit}' /proc/net/route)
  gw6=$(awk '$1 ~ /^0+$/ && $2 == "00" && $10 != "lo" {print $5; exit}' /proc/net/ipv6_route)
  set -- "$1" "$2" "$3" "${gw:+$(printf '%d.%d.%d.%d' "0x${gw:6:2}" "0x${gw:4:2}" "0x${gw:2:2}" "0x${gw:0:2}")}" \
    "$5" "$6" "$7" "$(sed 's/..../&:/g; s/:$//' <<<"$gw6")" "$9"
fi
echo "target=$4"
echo "target6=$8"
[ -n "$4" ] || exit 0
if [ "$1" = enforce ]; then
  printf '%s' "$2" | nft -D gate_addr="$4" -D gate_port="$3" -f - || exit 77
  nft -j list chain inet aisb output >/dev/null || exit 77
  echo table=installed
fi
start=$(date +%s%N); tcp "$4" "$3"; control=$?; control_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "control_tcp=$control"
echo "control_ms=$control_ms"
if [ "$control" = 0 ]; then
  wait_ms=$(( control_ms * @MULTIPLE@ > @FLOOR_MS@ ? control_ms * @MULTIPLE@ : @FLOOR_MS@ ))
  connect_seconds=$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))
fi
export connect_seconds
echo "connect_seconds=$connect_seconds"
{ tcp "$4" "$5"; echo "root_tcp=$?"; } &
locked='
grep -E "^(CapEff|CapBnd|CapAmb|NoNewPrivs):" /proc/self/status | tr -d "\\t" | tr : =
echo "uid=$(id -u)"
tcp "$1" "$2"; echo "gate_tcp=$?"
tcp "$1" "$3" & udp "$1" "$4" & tcp "$5" "$6" & wait
# Last, after every connection here and as root: a flush that works leaks nothing above.
nft flush ruleset 2>/dev/null; echo "flush=$?"
'
prelude=$(declare -f tcp udp)
drop=
[ "$1" = enforce ] && drop="@DROP@"
$drop bash -c "$prelude;$locked" _ "$4" "$3" "$6" "$7" "$8" "$9" &
wait
""".replace("@DROP@", " ".join(DROP_ALL_PRIVILEGES)).replace("@MULTIPLE@", str(BLOCKED_WAIT_MULTIPLE)).replace(
    "@FLOOR_MS@", str(BLOCKED_WAIT_FLOOR_MS)).replace("@HOST_ENTRY@", HOST_ENTRY).replace("@GATEWAY@", GATEWAY)


def probe_sandbox(prober, enforce=True):
    """A sandbox-shaped container: table installed as root, then setpriv drops every
    capability set, then raw TCP, UDP and IPv6 try to reach listeners the table must keep
    out. ENFORCE=False skips the table and setpriv (the leak control).

    Where pasta cannot map the host's loopback (that container does not start), the same
    probes run on network no-gate's plain pasta instead, aimed at listeners on the host's
    own address. A passt before --map-guest-addr gives that address no name, or podman
    names another of the host's addresses (one the network check does not listen on: the pinned
    address is not reached); then they run on pasta with the gateway mapped to the
    host's loopback, aimed at listeners there, and that result stands when its gate was
    reached. Each entry records the network it ran on."""
    found = sandbox_probes(prober, enforce, "map-host-loopback")
    first = found["nft_default_drop"]
    if first.get("measured", True) or first["evidence"].get("rc") is None:
        return found
    found = sandbox_probes(prober, enforce, "none")
    if found["table_allows_gate"]["ok"]:
        return found
    gateway = sandbox_probes(prober, enforce, GATEWAY)
    return gateway if gateway["table_allows_gate"]["ok"] else found


def probe_tcp_forward_sandbox(prober):
    """The sandbox probes on the tcp-forward gate path's network, the session's own (-T
    for the gate's port only, --no-map-gw, -4), all in one entry: the gate reached through
    the forwarded port, while the host's other loopback ports (TCP, UDP, ::1) stay out of
    reach. The verdict needs it where tcp-forward is the host's only gate path."""
    found = sandbox_probes(prober, True, "tcp-forward")
    failed = [name for name in SANDBOX_PROBES if not found[name]["ok"]]
    first = found[SANDBOX_PROBES[0]]
    if not first.get("measured", True):
        detail = first["detail"]
    else:
        detail = ("; ".join("%s: %s" % (name, found[name]["detail"]) for name in failed) if failed else
                  "on %s: %s" % (first["network"], found["table_allows_gate"]["detail"]))
    return {"tcp_forward_sandbox": result(
        not failed, detail, network=first.get("network"), evidence=first["evidence"],
        probes=dict((name, {"ok": found[name]["ok"], "detail": found[name]["detail"]}) for name in SANDBOX_PROBES))}


def network_of(path, gate_port, mapped_to):
    """The sandbox probe's pasta network on gate path PATH: the session's own for
    tcp-forward, plain pasta (none), the gateway mapped (gateway), the mapped addresses
    MAPPED_TO otherwise."""
    if path == "tcp-forward":
        return _podman.tcp_forward_network([gate_port])
    if path == GATEWAY:
        return _podman.GATEWAY_NETWORK
    if path == "none":
        return _podman.NO_GATE_NETWORK
    return _podman.pasta_network(map_host_loopback=mapped_to)


def sandbox_probes(prober, enforce, path):
    """The sandbox probes on gate path PATH: the session's mapped loopback
    (map-host-loopback), the sandbox's own loopback with the gate's port forwarded
    (tcp-forward; the host's other loopback ports are the listeners it must not reach),
    plain pasta (none), or pasta with the gateway mapped to the host's loopback (gateway)."""
    v6, target6, mapped_to = None, MAPPED_ADDR6, []
    if path in ("map-host-loopback", "tcp-forward", GATEWAY):
        listen, target, mapped_to = "127.0.0.1", MAPPED_LOOPBACK, [MAPPED_LOOPBACK]
        try:
            v6 = Listener("::1")
            mapped_to.append(MAPPED_ADDR6)
        except OSError:
            pass
        if path == "tcp-forward":
            target, target6 = "127.0.0.1", "::1"
        elif path == GATEWAY:
            target = target6 = GATEWAY
    else:
        try:
            listen = host_address()
        except OSError as exc:
            return unmeasured(SANDBOX_PROBES, "no default route to find the host's address (%s)" % exc)
        target = HOST_ENTRY
    with Listener(listen) as gate, Listener(listen) as root_tcp, \
            Listener(listen) as raw, Listener(listen, udp=True) as udp:
        network = network_of(path, gate.port, mapped_to)
        try:
            outcome = prober.container(
                ["--network=" + network] + _podman.SANDBOX_SECURITY, SANDBOX_SCRIPT,
                ["enforce" if enforce else "open", RULESET, gate.port, target, root_tcp.port,
                 raw.port, udp.port, target6, v6.port if v6 else 9])
        finally:
            # All at once: their idle drains overlap instead of adding up.
            for listener in filter(None, (gate, root_tcp, raw, udp, v6)):
                listener.stop()
            v6_hits = v6.close() if v6 else []
    failure = outcome.failure(prober.timeout)
    if failure or not outcome.values().get("target"):
        return unmeasured(SANDBOX_PROBES, failure or "no %s to aim at" % (
            "default gateway" if path == GATEWAY else HOST_ENTRY + " entry"), outcome)
    values = outcome.values()
    status = dict((key, values.get(key, "?")) for key in ("CapEff", "CapBnd", "CapAmb", "NoNewPrivs"))
    locked = (values.get("flush") not in (None, "0") and values.get("uid") == "1000" and
              status == {"CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16, "NoNewPrivs": "1"})

    def blocked(hits, what):
        return ("leak: %s reached the network check's listener" % what) if hits else "%s never arrived" % what

    target, target6 = values["target"], values.get("target6")
    if path == "none":
        nowhere = "on plain pasta no IPv6 address leads to a listener of the network check: nothing to reach"
    elif not target6:
        nowhere, v6 = "the container has no IPv6 default gateway: nothing to reach", None
    else:
        nowhere = "this host has no IPv6 loopback: nothing to reach"
    return {
        "nft_default_drop": result(values.get("table") == "installed" and not root_tcp.hits,
                                   blocked(root_tcp.hits, "TCP from root under the table")
                                   if root_tcp.hits or values.get("table") == "installed"
                                   else "the table did not install", outcome, network=network),
        # Two connections: the control as root, then the agent's after setpriv.
        "table_allows_gate": result(len(gate.hits) >= 2, "the %s %s:%d %s" % (
            "gate" if path != "none" else "pinned address", target, gate.port,
            "was reached as root and after setpriv" if len(gate.hits) >= 2
            else "was reached %d of 2 times (as root, then after setpriv)" % len(gate.hits)),
            outcome, network=network),
        "setpriv_locks_table": result(locked, "in the agent's process: flush rc %s, uid %s, %s"
                                      % (values.get("flush"), values.get("uid"),
                                         ", ".join("%s %s" % item for item in sorted(status.items()))),
                                      outcome, network=network),
        "raw_tcp_blocked": result(not raw.hits, blocked(raw.hits, "TCP to the literal %s:%d"
                                                        % (target, raw.port)), outcome, network=network),
        "udp_blocked": result(not udp.hits, blocked(udp.hits, "a UDP datagram (as DNS would send)"),
                              outcome, network=network),
        "ipv6_blocked": result(not v6_hits, blocked(v6_hits, "TCP to [%s]" % target6) if v6 else nowhere,
                               outcome, network=network),
    }
