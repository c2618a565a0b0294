# SPDX-License-Identifier: GPL-3.0-or-later
"""The bypass battery: every class of ../shared/THREATS.md (named in each case) tried
with real traffic from inside a real session, each case asserting both the refusal and
that no listener saw the traffic. The listeners are tripwires in network namespaces the
test creates (and on the workstation's loopback): nothing is sent off this machine."""

import fcntl
import json
import re
import uuid

import pytest

import tally
from scenario import TRANSFER_DIR, free_port, install_tripwire
from sessions import PROJECT, allow, left_running, record_of, run_agent, session_containers, through
from workstation import REPO

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_plan import sni_canary_target

# The TLS probe (node, inside the sandbox): copied into the project with battery.sh.
TLS_PROBE = REPO / "tests" / "workstation" / "tls_probe.js"
# Where pasta maps the host's loopback on the mapped gate path (the gate's address there).
MAPPED_ADDR = "100.64.0.1"
# The gate and pasta resolve through the workstation's resolv.conf: the battery points
# it at its own DNS server, so a lookup the gate should never make is logged.
DNS_OPTIONS = "options timeout:1 attempts:1\n"
# Allowed names that resolve to addresses the gate must never relay to, through the
# battery's DNS server only.
PRIVATE_NAMES = ["b-private10.test", "b-private172.test", "b-private192.test", "b-linklocal.test", "b-metadata.test"]
# The session's allowlist: allowed.test (in /etc/hosts) and names only the battery's DNS
# server knows.
ALLOWED_NAMES = ["allowed.test", "b-allowed.test", "b-tls.test", "b-loop.test", "b-mapped.test",
                 "b-ula.test"] + PRIVATE_NAMES
# A wildcard entry: its names resolve to the TLS server too.
WILDCARD = ".b-wild.test"
WILDCARD_NAMES = ["a.b-wild.test", "c.b-wild.test"]
# What an allowed case may show: a listener saw it (answered: a TLS server answered a
# rebuilt ClientHello).
REACHED = ("http=200", "tunnel=200 tls=ok", "tunnel=200 tls=answered")
# A ClientHello the gate refused after answering its CONNECT.
HELLO_REFUSED = "tunnel=200 tls=refused"
# What the gate refuses and records as denied: the CONNECT or request itself (403), or,
# after an allowed CONNECT, what the tunnel carries (not a ClientHello, or one whose SNI
# is not the CONNECT name): nothing comes back through the tunnel.
# On a connection that carried a refused request, a second one (a CONNECT) is refused
# (403) or never read (the gate closed the connection: none).
REFUSED = ("http=403", "http=000", "tunnel=200 tls=refused", "second=403", "second=none")
# Cases that send two refused requests the gate reads: two denials in its record.
TWO_REQUESTS = {"connect-after-refused-get"}
# The metadata address is the same for every run on the build machine, and so is its
# route there (the workstations share its network namespace): one battery at a time.
METADATA_ROUTE_LOCK = "/run/lock/aisb-tests-metadata-route"


class Tripwires:
    """Extra addresses and listeners around the test internet: private, link-local and
    metadata addresses routed into its namespace, an IPv6 network of the documentation
    prefix and a ULA, a TLS server (its own self-signed certificate: what the gate
    decides does not depend on what the tunnel carries, so the probes skip verification
    rather than rebuild the image with another CA), a loopback address and a
    host-loopback service, a DNS server."""

    def __init__(self, ws, internet):
        self.ws, self.internet = ws, internet
        third, fourth = (int(n) for n in internet.address.split(".")[2:])
        self.v4 = internet.address
        self.v6 = f"2001:db8:{third:x}:{fourth:x}::2"
        self.v6_host = f"2001:db8:{third:x}:{fourth:x}::1"
        self.ula = f"fd5e:{third:x}:{fourth:x}::2"
        self.loop = f"127.83.{third}.{fourth}"
        self.tls = f"198.19.{third}.{fourth}"
        # A leak to the metadata address must stay on this machine too: it is routed
        # into the namespace while the battery runs.
        self.private = dict(zip(PRIVATE_NAMES, [f"10.255.{third}.{fourth}", f"172.31.{third}.{fourth}",
                                                f"192.168.{third}.{fourth}", f"169.254.{third}.{fourth + 1}",
                                                "169.254.169.254"]))
        self.host_port = None
        self.log = f"{TRANSFER_DIR}/tripwires-{internet.netns}.log"
        self.zone = {"b-allowed.test": {"A": [self.v4]}, "b-unlisted.test": {"A": [self.v4]},
                     "b-tls.test": {"A": [self.tls]},
                     **{name: {"A": [self.tls]} for name in WILDCARD_NAMES},
                     "b-loop.test": {"A": [self.loop]}, "b-mapped.test": {"AAAA": [f"::ffff:{self.loop}"]},
                     "b-ula.test": {"AAAA": [self.ula]}}
        self.zone.update({name: {"A": [address]} for name, address in self.private.items()})
        self.resolv = None
        self.route_lock = None

    def start(self):
        ws, net = self.ws, self.internet
        tripwire = install_tripwire(ws)
        ws.path(self.log).write_text("")
        self.host_port = free_port()
        addresses = [self.v4] * 4 + list(self.private.values()) * 2 + [self.v6] * 3 + [self.ula] * 2
        ports = [22, 25, 53, 8080] + [80] * len(self.private) + [443] * len(self.private) + [80, 443, 8080, 80, 443]
        inside = {"tcp": [list(pair) for pair in zip(addresses, ports)],
                  "udp": [[self.v4, 123], [self.v4, 5353], [self.v6, 53]],
                  "tls": [[self.tls, 443, f"{self.log}.crt", f"{self.log}.key"]],
                  "dns": [self.v4, 53], "zone": self.zone}
        outside = {"tcp": [[self.loop, 80], [self.loop, 443], ["127.0.0.1", self.host_port]]}
        routes = "\n".join(f"ip -n {net.netns} addr replace {a}/32 dev eth0\nip route replace {a}/32 via {self.v4}"
                           for a in [*self.private.values(), self.tls])
        self.resolv = ws.path("/etc/resolv.conf").read_text()
        self.route_lock = open(METADATA_ROUTE_LOCK, "w")
        fcntl.flock(self.route_lock, fcntl.LOCK_EX)
        ws.sh(f"""
            openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=b-tls.test \\
              -keyout {self.log}.key -out {self.log}.crt 2>/dev/null
            {routes}
            ip addr replace {self.v6_host}/64 dev {net.veth} nodad
            ip -n {net.netns} addr replace {self.v6}/64 dev eth0 nodad
            ip -n {net.netns} addr replace {self.ula}/128 dev eth0 nodad
            ip -6 route replace {self.ula}/128 via {self.v6}
            ip -n {net.netns} route replace default via {net.host_side}
            ip -n {net.netns} -6 route replace default via {self.v6_host}
            ip netns exec {net.netns} setsid python3 {tripwire} {self.log} '{json.dumps(inside)}' \\
              >{self.log}.inside 2>&1 &
            echo $! >{self.log}.pids
            setsid python3 {tripwire} {self.log} '{json.dumps(outside)}' >{self.log}.outside 2>&1 &
            echo $! >>{self.log}.pids
            for _ in $(seq 50); do grep -q ready {self.log}.inside && grep -q ready {self.log}.outside && break
              sleep 0.1; done
            grep -q ready {self.log}.inside && grep -q ready {self.log}.outside
            printf 'nameserver {self.v4}\\n{DNS_OPTIONS}' >/etc/resolv.conf
        """, user="root")
        return self

    def stop(self):
        self.ws.path("/etc/resolv.conf").write_text(self.resolv)
        script = "\n".join(f"ip route del {a}/32 via {self.v4}" for a in [*self.private.values(), self.tls])
        self.ws.sh(f"""
            {script}
            ip -6 route del {self.ula}/128 via {self.v6} || true
            kill $(cat {self.log}.pids) || true
        """, user="root", check=False)
        self.route_lock.close()

    def events(self):
        return [json.loads(line) for line in self.ws.path(self.log).read_text().splitlines()]


PROBE_HELPERS = r"""
say() { printf 'RESULT %s %s\n' "$1" "$2"; }
# The gate as the session's proxy variables name it: 100.64.0.1 (mapped) or the
# sandbox's own 127.0.0.1 (tcp-forward), and its port.
GATE_HOST=${HTTP_PROXY#http://}; GATE_HOST=${GATE_HOST%:*}; GATE_PORT=${HTTP_PROXY##*:}
# Listens on HOST:PORT (SO_REUSEPORT asked for): "bound", or the error's code.
bind() { node -e 'require("net").createServer().on("error", e => { console.log("RESULT " + process.argv[1] + " " +
  e.code); process.exit() }).listen({host: process.argv[2], port: +process.argv[3], reusePort: true},
  () => { console.log("RESULT " + process.argv[1] + " bound"); process.exit() })' "$@"; }
# Through the gate (the session's proxy variables): the status code squid answered (to
# the CONNECT, when the tunnel was refused; 000 when a tunnel was made and nothing came
# back through it).
gate() { local id=$1 url=$2 code connect; shift 2
  read -r code connect < <(curl -s -m 8 -o /dev/null -w '%{http_code} %{http_connect}\n' "$@" "$url")
  say "$id" "http=$([ "$code" = 000 ] && [ "$connect" != 200 ] && echo "$connect" || echo "$code")"; }
# A CONNECT by hand, then a ClientHello (or something else) of the probe's choosing.
tls() { node /project/tls_probe.js "$@"; }
# Around the gate: no proxy at all.
direct() { local id=$1 url=$2; shift 2
  if curl -s -m 5 --noproxy '*' -o /dev/null "$@" "$url"; then say "$id" open; else say "$id" blocked; fi; }
# A TCP connection: "refused" means a packet got through to a closed port, "blocked" that
# it failed otherwise (the table drops the SYN without an answer; the tripwires say
# whether anything arrived).
connect() { timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET /c-%s\r\n\r\n" "$3" >&3' _ "$2" "$3" "$1" 2>&1; }
tcp() { local err
  if err=$(connect "$@"); then say "$1" open; elif [[ $err == *"refused"* ]]; then say "$1" refused
  else say "$1" blocked; fi; }
# An IPv6 address is tentative (duplicate address detection) for a moment after the
# sandbox starts: wait it out, so that what stops an IPv6 attempt is never the clock.
tentative6() { local _ flags
  while read -r _ _ _ _ flags _; do (( 0x$flags & 0x40 )) && return 0; done </proc/net/if_inet6; return 1; }
settled6() { for _ in $(seq 50); do tentative6 || return 0; sleep 0.1; done; }
# What stopped a TCP connection: "no-answer" (the table drops the SYN; TCP retries it
# until the wait runs out) or "unreachable" (ENETUNREACH at once: no route at all,
# nothing for the table to see).
why() { local err rc
  err=$(connect "$@"); rc=$?
  if [ "$rc" = 0 ]; then say "$1" open; elif [ "$rc" = 124 ]; then say "$1" no-answer
  elif [[ $err == *"unreachable"* ]]; then say "$1" unreachable; else say "$1" "other=${err//[[:space:]]/_}"; fi; }
# The sandbox's IPv4 default gateway: pasta maps it to the host's loopback unless told
# not to (--no-map-gw; the only mapping a passt before --map-host-loopback has).
gateway() { local gw; gw=$(awk '$2 == "00000000" {print $3; exit}' /proc/net/route)
  [ -n "$gw" ] && printf '%d.%d.%d.%d' "0x${gw:6:2}" "0x${gw:4:2}" "0x${gw:2:2}" "0x${gw:0:2}"; }
udp() { if timeout 5 bash -c 'printf "c-%s\n" "$3" >"/dev/udp/$1/$2"' _ "$2" "$3" "$1" 2>/dev/null
        then say "$1" sent; else say "$1" blocked; fi; }
# REQUEST written as it is (printf %b escapes) to the gate: the status code it answered.
raw() { local id=$1 request=$2 gate=${HTTP_PROXY#http://} code
  code=$(timeout 8 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && printf "%b" "$2" >&3 && timeout 5 head -c 12 <&3' \
    _ "${gate%/}" "$request" 2>/dev/null | cut -d" " -f2)
  say "$id" "http=${code:-000}"; }
# FIRST (a request, printf %b escapes) on a connection to the gate, then on the same
# connection a CONNECT to TARGET and a request carrying c-ID through whatever that opened:
# the status code of the second answer, or none when the gate closed the connection.
again() { local id=$1 first=$2 target=$3 gate=${HTTP_PROXY#http://} codes
  # The gate closes the connection after refusing a CONNECT: the wait is for a busy machine.
  codes=$(timeout 15 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit
    printf "%b" "$2" >&3; sleep 1
    printf "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /c-%s HTTP/1.1\r\nHost: %s\r\n\r\n" "$3" "$3" "$4" "$3" >&3
    timeout 10 cat <&3' _ "${gate%/}" "$first" "$target" "$id" 2>/dev/null \
    | grep -a -o "^HTTP/1\.[01] [0-9]*" | cut -d" " -f2 | tr "\n" " ")
  set -- $codes; say "$id" "second=${2:-none}"; }
# A DNS query for NAME (type A) to RESOLVER port 53.
raw_dns() { local id=$1 resolver=$2 name=$3 query='\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00' label
  for label in ${name//./ }; do query+=$(printf '\\x%02x' ${#label})$label; done
  query+='\x00\x00\x01\x00\x01'
  if timeout 5 bash -c 'printf "$2" >"/dev/udp/$1/53"' _ "$resolver" "$query" 2>/dev/null
  then say "$id" sent; else say "$id" blocked; fi; }
"""


# (id, THREATS class, probe, expected result). Probes use the helpers above; @V4@, @V6@
# (the test internet) and @LO@ (a host-loopback service's port) are filled in per run,
# $GATE_HOST and $GATE_PORT in the sandbox (PROBE_HELPERS). Every probe's traffic carries c-ID (a path, a payload or a DNS label), so a
# leak names its case.
CASES = [
    ("http-allowed", "positive control", "gate http-allowed http://allowed.test/c-http-allowed", "http=200"),
    ("connect-allowed", "another protocol inside CONNECT:443 (plain HTTP to an allowed name)",
     "gate connect-allowed http://allowed.test:443/c-connect-allowed --proxytunnel", "http=000"),
    ("dns-only-allowed", "positive control: the gate resolves through the battery's DNS server",
     "gate dns-only-allowed http://b-allowed.test/c-dns-only-allowed", "http=200"),
    ("tls-allowed", "positive control: TLS through CONNECT to an allowed name",
     "gate tls-allowed https://b-tls.test/c-tls-allowed -k", "http=200"),
    ("tls-sni-differs", "SNI differs from the CONNECT name",
     "gate tls-sni-differs https://b-unlisted.test/c-tls-sni-differs -k --connect-to b-unlisted.test:443:b-tls.test:443",
     "http=000"),
    ("tunnelled-protocol", "another protocol inside CONNECT:443",
     "tls tunnelled-protocol b-tls.test:443 ssh", "tunnel=200 tls=refused"),
    ("tls-sni-matches", "positive control: a ClientHello naming the CONNECT name",
     "tls tls-sni-matches b-tls.test:443 sni b-tls.test", "tunnel=200 tls=ok"),
    ("tls-sni-case", "positive control: the CONNECT name in other letter case",
     "tls tls-sni-case b-tls.test:443 sni B-TLS.Test", "tunnel=200 tls=ok"),
    ("tls-sni-trailing-dot", "positive control: the CONNECT name with a trailing dot",
     "tls tls-sni-trailing-dot b-tls.test:443 sni b-tls.test.", "tunnel=200 tls=ok"),
    ("tls-sni-absent", "SNI differs from the CONNECT name (a ClientHello without SNI)",
     "tls tls-sni-absent b-tls.test:443 sni ''", "tunnel=200 tls=refused"),
    ("tls-split-hello", "positive control: a ClientHello in many TCP segments",
     "tls tls-split-hello b-tls.test:443 split b-tls.test", "tunnel=200 tls=ok"),
    ("tls-split-hello-differs", "SNI differs from the CONNECT name (a ClientHello in many TCP segments)",
     "tls tls-split-hello-differs b-tls.test:443 split b-unlisted.test", "tunnel=200 tls=refused"),
    ("tls-wildcard-matches", "positive control: a name of a wildcard entry, its own SNI",
     "tls tls-wildcard-matches a.b-wild.test:443 sni a.b-wild.test", "tunnel=200 tls=ok"),
    ("tls-wildcard-differs", "SNI differs from the CONNECT name (another name of the same wildcard entry)",
     "tls tls-wildcard-differs a.b-wild.test:443 sni c.b-wild.test", "tunnel=200 tls=refused"),
] + [
    # node's own ClientHello for b-tls.test, rebuilt with these server_name extensions.
    ("tls-hello-" + variant, threat, "tls tls-hello-%s b-tls.test:443 hello %s" % (variant, variant), result)
    for variant, threat, result in [
        ("rebuilt", "positive control: a rebuilt ClientHello with one good name", "tunnel=200 tls=answered"),
        ("two-names-other-first", "parser differential at the handshake (two names, the other first)", HELLO_REFUSED),
        ("two-names-other-second", "parser differential at the handshake (two names, the other second)",
         HELLO_REFUSED),
        ("two-extensions", "parser differential at the handshake (two server_name extensions, the other first)",
         HELLO_REFUSED),
        ("name-type", "parser differential at the handshake (a name type other than host_name)", HELLO_REFUSED),
        ("name-type-first", "parser differential at the handshake (another name type before the host_name)",
         HELLO_REFUSED),
        ("nul", "parser differential at the handshake (a NUL inside the name)", HELLO_REFUSED),
        ("space", "parser differential at the handshake (a space inside the name)", HELLO_REFUSED),
        ("300-bytes", "parser differential at the handshake (a 300-byte name)", HELLO_REFUSED),
        ("label-over-63", "parser differential at the handshake (a label of 64)", HELLO_REFUSED),
        ("empty", "parser differential at the handshake (an empty name)", HELLO_REFUSED),
    ]
] + [
    ("server-speaks-first", "another protocol inside CONNECT:443 (the server speaks first)",
     "tls server-speaks-first b-tls.test:443 quiet", "tunnel=200 tls=refused"),
    ("h2c-prior-knowledge", "another protocol inside CONNECT:443 (cleartext HTTP/2)",
     "tls h2c-prior-knowledge b-tls.test:443 h2c", "tunnel=200 tls=refused"),
    ("gate-speaks-tls", "SNI differs from the CONNECT name (no CONNECT: the gate asked to speak TLS itself)",
     r"raw gate-speaks-tls 'GET https://b-tls.test/c-gate-speaks-tls HTTP/1.1\r\nHost: b-tls.test\r\n"
     r"Connection: close\r\n\r\n'", "http=403"),
    ("tls-host-differs", "residual risk, not closed: domain fronting (the Host header inside TLS)",
     "tls tls-host-differs b-tls.test:443 sni b-tls.test b-unlisted.test", "tunnel=200 tls=ok"),
    ("unlisted-name", "proxy resolves denied names",
     "gate unlisted-name http://b-unlisted.test/c-unlisted-name", "http=403"),
    ("unlisted-connect", "proxy resolves denied names",
     "gate unlisted-connect http://b-unlisted.test:443/c-unlisted-connect --proxytunnel", "http=403"),
    ("ip-literal-v4", "proxy resolves denied names", "gate ip-literal-v4 http://@V4@/c-ip-literal-v4", "http=403"),
    ("ip-literal-v4-connect", "proxy resolves denied names",
     "gate ip-literal-v4-connect http://@V4@:443/c-ip-literal-v4-connect --proxytunnel", "http=403"),
    ("ip-literal-v6", "proxy resolves denied names",
     "gate ip-literal-v6 'http://[@V6@]/c-ip-literal-v6' -g", "http=403"),
    ("connect-other-port", "CONNECT to any port of an allowed name",
     "gate connect-other-port http://allowed.test:8443/c-connect-other-port --proxytunnel", "http=403"),
    ("connect-ssh-port", "CONNECT to any port of an allowed name",
     "gate connect-ssh-port http://b-allowed.test:22/c-connect-ssh-port --proxytunnel", "http=403"),
    ("connect-after-refused-connect", "CONNECT to any port of an allowed name (on a refused CONNECT's connection)",
     r"again connect-after-refused-connect 'CONNECT b-unlisted.test:443 HTTP/1.1\r\nHost: b-unlisted.test:443\r\n\r\n'"
     " b-allowed.test:80", "second=none"),
    ("connect-after-refused-get", "CONNECT to any port of an allowed name (after a refused request, kept alive)",
     r"again connect-after-refused-get 'GET http://b-unlisted.test/ HTTP/1.1\r\nHost: b-unlisted.test\r\n\r\n'"
     " b-allowed.test:80", "second=403"),
    ("http-other-port", "CONNECT to any port of an allowed name",
     "gate http-other-port http://allowed.test:8443/c-http-other-port", "http=403"),
] + [
    ("resolves-" + name[2:-5], "allowed name -> loopback, private or metadata address",
     "gate resolves-%s http://%s/c-resolves-%s" % (name[2:-5], name, name[2:-5]), "http=403")
    for name in ["b-loop.test", "b-mapped.test", "b-ula.test"] + PRIVATE_NAMES
] + [
    ("host-loopback-service", "the whole host loopback mapped into the sandbox",
     "tcp host-loopback-service $GATE_HOST @LO@", "blocked"),
    ("gate-other-port", "the whole host loopback mapped into the sandbox",
     "tcp gate-other-port $GATE_HOST $(( GATE_PORT + 1 ))", "blocked"),
    ("mapped-address-service", "the whole host loopback mapped into the sandbox (at the mapped address)",
     f"tcp mapped-address-service {MAPPED_ADDR} @LO@", "blocked"),
    ("gateway-loopback-service", "the whole host loopback mapped into the sandbox (at the gateway address)",
     "tcp gateway-loopback-service \"$(gateway)\" @LO@", "blocked"),
    ("loopback-service-v6", "the whole host loopback mapped into the sandbox (its ::1)",
     "tcp loopback-service-v6 ::1 @LO@", "refused"),
    ("gate-port-v6", "the forwarded gate port (-T) reached at the sandbox's ::1",
     "tcp gate-port-v6 ::1 $GATE_PORT", "refused"),
    ("bind-gate-port", "the agent takes the gate's address and port (the forwarded one, on tcp-forward)",
     "bind bind-gate-port $GATE_HOST $GATE_PORT", "EADDRNOTAVAIL"),
    ("bind-gate-port-any", "the agent takes the gate's port on every address",
     "bind bind-gate-port-any 0.0.0.0 $GATE_PORT", "bound"),
    ("raw-tcp-literal", "host ports reachable without the proxy", "tcp raw-tcp-literal @V4@ 22", "blocked"),
    ("raw-tcp-literal-8080", "host ports reachable without the proxy",
     "tcp raw-tcp-literal-8080 @V4@ 8080", "blocked"),
    ("raw-udp-literal", "DNS to any resolver (no UDP at all)", "udp raw-udp-literal @V4@ 123", "blocked"),
    ("dns-literal-resolver", "DNS to any resolver",
     "raw_dns dns-literal-resolver @V4@ c-dns-literal-resolver.b-leak.test", "blocked"),
    ("dns-pasta-resolver", "DNS to any resolver",
     "RES_OPTIONS='timeout:1 attempts:1' getent hosts c-dns-pasta-resolver.b-leak.test >/dev/null"
     " && say dns-pasta-resolver resolved || say dns-pasta-resolver blocked", "blocked"),
    ("dns-pasta-resolver-raw", "DNS to any resolver",
     # Only resolvers on this machine: pasta's forwarder and the battery's own server.
     "for ns in $(awk '/^nameserver (169\\.254\\.1\\.1|@V4@)$/{print $2}' /etc/resolv.conf); do"
     " raw_dns dns-pasta-resolver-raw \"$ns\" c-dns-pasta-resolver-raw.b-leak.test; done", "blocked"),
    ("ipv6-direct", "IPv6 left open", "direct ipv6-direct 'http://[@V6@]/c-ipv6-direct' -g -6", "blocked"),
    ("ipv6-tcp", "IPv6 left open", "tcp ipv6-tcp @V6@ 8080", "blocked"),
    ("ipv6-udp", "IPv6 left open", "udp ipv6-udp @V6@ 53", "blocked"),
    ("ipv6-no-route", "IPv6 left open (what stops it: the table, or on tcp-forward no IPv6 route at all)",
     "settled6; why ipv6-no-route @V6@ 8080", "no-answer"),
    ("proxy-vars-removed", "clients that ignore proxy variables",
     "direct proxy-vars-removed http://@V4@/c-proxy-vars-removed", "blocked"),
    ("proxy-vars-removed-name", "clients that ignore proxy variables",
     "direct proxy-vars-removed-name http://allowed.test/c-proxy-vars-removed-name", "blocked"),
    ("node-ignores-proxy", "clients that ignore proxy variables",
     "node -e 'const s = require(\"net\").connect(80, process.argv[1]);"
     " s.on(\"connect\", () => { s.end(\"GET /c-node-ignores-proxy\\r\\n\\r\\n\");"
     " console.log(\"RESULT node-ignores-proxy open\") });"
     " s.setTimeout(3000, () => { console.log(\"RESULT node-ignores-proxy blocked\"); s.destroy() });"
     " s.on(\"error\", () => console.log(\"RESULT node-ignores-proxy blocked\"))' @V4@", "blocked"),
    ("nested-netns", "nested containers or sockets passed in",
     "unshare -Urn bash -c 'curl -s -m 3 --noproxy \"*\" http://@V4@/c-nested-netns' >/dev/null 2>&1"
     " && say nested-netns open || say nested-netns blocked", "blocked"),
    ("nested-userns-nft", "the agent keeps NET_ADMIN",
     "unshare -Ur bash -c 'nft flush ruleset; nft add rule inet aisb output accept' >/dev/null 2>&1;"
     " direct nested-userns-nft http://@V4@/c-nested-userns-nft", "blocked"),
    ("nft-flush", "the agent keeps NET_ADMIN",
     "{ nft flush ruleset; nft add rule inet aisb output accept; nft add table inet open; } >/dev/null 2>&1;"
     " direct nft-flush http://@V4@/c-nft-flush", "blocked"),
    ("setpriv-regain", "the agent keeps NET_ADMIN",
     "{ setpriv --inh-caps=+net_admin --ambient-caps=+net_admin nft flush ruleset;"
     " setpriv --reuid=0 nft flush ruleset;"
     " for suid in $(find / -xdev -perm -4000 -type f); do \"$suid\" -c 'nft flush ruleset' root </dev/null; done;"
     " } >/dev/null 2>&1; direct setpriv-regain http://@V4@/c-setpriv-regain", "blocked"),
]
CASE_IDS = [case[0] for case in CASES]
# Where tcp-forward expects otherwise: the gate's address is the sandbox's own loopback, so
# a connection to one of its other ports is refused there (nothing leaves the sandbox,
# as the tripwires show), and the gate's port is pasta's, taken before the agent runs.
TCP_FORWARD_EXPECTED = {"host-loopback-service": "refused", "gate-other-port": "refused",
                        "bind-gate-port": "EADDRINUSE", "bind-gate-port-any": "EADDRINUSE",
                        # pasta -4: the sandbox has no IPv6 route out for the table to refuse.
                        "ipv6-no-route": "unreachable"}


def expected(case_id, gate_path):
    """CASE_ID's expected result over GATE_PATH."""
    default = CASES[CASE_IDS.index(case_id)][3]
    return TCP_FORWARD_EXPECTED.get(case_id, default) if gate_path == "tcp-forward" else default


# Cases that send nothing: they run in the same session, with their own expectations.
LOCAL_PROBES = r"""
caps=$(awk '/^Cap(Inh|Prm|Eff|Bnd|Amb):/{print $2}' /proc/self/status | sort -u)
say capabilities "$caps"
written=""; for dir in / /etc /usr /usr/local/bin /var/lib; do
  touch "$dir/c-write-outside" 2>/dev/null && written="$written $dir"; done
say write-outside "written=${written:-none}"
for dir in /tmp /home/agent /var/tmp /project; do echo x >"$dir/$MARKER" 2>/dev/null; done
echo 'gate 0.0.0.0 1' 2>/dev/null >/etc/aisb/policy && say policy-readonly written || say policy-readonly refused
sockets=$(find / -xdev -type s 2>/dev/null | wc -l)
for s in /run/podman/podman.sock /run/user/1000/podman/podman.sock /var/run/docker.sock /run/user/1000/bus; do
  [ -e "$s" ] && sockets=$((sockets + 1)); done
say sockets "count=$sockets"
say default-gateway "$(gateway || echo none)"
# IPv6 ways out: default routes on an interface (lo's is a reject route) and global addresses.
say ipv6-default-routes "$(awk '$1 ~ /^0+$/ && $2 == "00" && $10 != "lo" {n++} END {print n+0}' /proc/net/ipv6_route)"
say ipv6-global-addresses "$(awk '$4 == "00" && $6 != "lo" {n++} END {print n+0}' /proc/net/if_inet6)"
say host-env "count=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' \
  | grep -c -e "^$HOST_SECRET_NAME=" -e must-not-cross)"
"""


@pytest.fixture(scope="module")
def tripwires(workstation, internet):
    wires = Tripwires(workstation, internet).start()
    yield wires
    wires.stop()


def probe_script(wires):
    lines = [probe.replace("@V4@", wires.v4).replace("@V6@", wires.v6).replace("@LO@", str(wires.host_port))
             for _id, _threat, probe, _expected in CASES]
    return PROBE_HELPERS + "\n".join(lines) + "\n" + LOCAL_PROBES


@pytest.fixture(scope="module")
def battery(workstation, internet, tripwires, gate_path, profile):
    """One session over GATE_PATH runs every probe; the tests below read its results and the logs."""
    marker = "aisb-battery-" + uuid.uuid4().hex[:8]
    secret_name = "BATTERY_HOST_SECRET_" + uuid.uuid4().hex[:8].upper()
    workstation.sh(f"mkdir -p {PROJECT}")
    workstation.path(f"{PROJECT}/battery.sh").write_text(probe_script(tripwires))
    workstation.path(f"{PROJECT}/tls_probe.js").write_text(TLS_PROBE.read_text())
    http_before, events_before = len(internet.requests()), len(tripwires.events())
    running = session_containers(workstation)
    result = run_agent(workstation, *allow(*ALLOWED_NAMES, WILDCARD), *through(gate_path), "-e", json.dumps({"aisb_environment": {
        "MARKER": marker, "HOST_SECRET_NAME": secret_name}}), command=["bash", "/project/battery.sh"],
        env={secret_name: "must-not-cross"}, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:]
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    return {"results": dict(re.findall(r"^RESULT (\S+) ?(.*)$", transcript, re.M)), "transcript": transcript,
            "record": record, "http": internet.requests()[http_before:],
            "events": tripwires.events()[events_before:], "marker": marker, "gate_path": gate_path,
            "tally": f"{gate_path} ({profile})" if profile else gate_path,
            "left_running": left_running(workstation, running)}


def seen(battery, case_id):
    """Every listener entry that carries c-CASE_ID: what reached a listener from that case."""
    token = re.compile(r"c-" + re.escape(case_id) + r"(?![\w-])")
    return ([r for r in battery["http"] if token.search(r["path"])] +
            [e for e in battery["events"]
             if token.search(" ".join((e.get("data", ""), e.get("name", ""), e.get("hello", ""))))])


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_case(battery, case_id):
    threat, path = CASES[CASE_IDS.index(case_id)][1], battery["gate_path"]
    wanted = expected(case_id, path)
    result = battery["results"].get(case_id)
    assert result is not None, f"{case_id} ({threat}) did not run:\n{battery['transcript'][-3000:]}"
    hits = seen(battery, case_id)
    if wanted in REACHED:
        tally.record(case_id, leaked=False, gate_path=battery["tally"])
        assert result == wanted, threat
        assert len(hits) == 1, (threat, hits)
        return
    tally.record(case_id, leaked=bool(hits), gate_path=battery["tally"])
    assert hits == [], f"LEAK ({threat}): {hits}"
    assert result == wanted, f"{threat}: {result}"


def test_ipv6_has_no_route_out_on_tcp_forward(battery):
    """On tcp-forward (pasta -4) the sandbox has no IPv6 default route and no global IPv6
    address: ipv6-no-route's connect fails with ENETUNREACH before the table sees it. On
    the mapped path IPv6 is there and the table drops it (no answer, and the tripwire saw
    nothing: test_case): that path measures the table's IPv6 rules."""
    results = battery["results"]
    found = (results["ipv6-default-routes"], results["ipv6-global-addresses"])
    if battery["gate_path"] == "tcp-forward":
        assert found == ("0", "0"), battery["transcript"][-3000:]
        assert results["ipv6-no-route"] == "unreachable"
    else:
        assert found[0] != "0" and found[1] != "0", found
        assert results["ipv6-no-route"] == "no-answer"


def test_the_gateway_case_aimed_at_a_gateway(battery):
    """gateway-loopback-service is blocked, not vacuous: the sandbox had a default gateway."""
    assert battery["results"]["default-gateway"].count(".") == 3, battery["results"]["default-gateway"]


def test_unlisted_name_is_never_resolved(battery):
    names = {e["name"] for e in battery["events"] if e["kind"] == "dns"}
    # The gate does resolve through this server (an allowed, DNS-only name) ...
    assert "b-allowed.test" in names, names
    # ... but never a name the allowlist refuses, for plain http or CONNECT.
    assert "b-unlisted.test" not in names


def test_no_listener_saw_anything_unexplained(battery):
    """Beyond the per-case checks: a leak that carried no case id (a bare connect) is
    still a leak. Only the gate's lookups of allowed names and the cases meant to get
    through may appear."""
    reached = [e for case in CASES if case[3] in REACHED for e in seen(battery, case[0])]
    # The gate resolves a CONNECT name, never an SNI it refuses (c.b-wild.test); the
    # canaries' mismatched ClientHello goes to the first allowed name, which it resolves too.
    canary_name = sni_canary_target(parse_policy(ALLOWED_NAMES + [WILDCARD]))[0]
    resolved = ALLOWED_NAMES + WILDCARD_NAMES[:1] + [canary_name]
    unexplained = [e for e in battery["events"]
                   if not (e["kind"] == "dns" and e["name"] in resolved) and e not in reached]
    assert unexplained == []
    assert sorted(r["path"] for r in battery["http"]) == ["/c-dns-only-allowed", "/c-http-allowed"]


def test_the_session_left_nothing_running(battery):
    assert battery["record"]["status"] == "exited"
    assert battery["left_running"] == []


def test_gate_decisions_match_the_cases(battery):
    gate = battery["record"]["gate"]
    refused = [c for c in CASES if c[3] in REFUSED]
    assert len(gate["allowed"]) == len([c for c in CASES if c[3] in REACHED]), gate
    assert len(gate["denied"]) == len(refused) + len([c for c in refused if c[0] in TWO_REQUESTS]), gate


# Why the gate's ClientHello check refused each case it answered (its log=, the record's
# reason); the other refused cases never reach it (squid's own parser, or no ClientHello).
CHECK_REASONS = {
    "tls-sni-differs": "sni-differs", "tls-split-hello-differs": "sni-differs", "tls-wildcard-differs": "sni-differs",
    "tls-sni-absent": "sni-absent",
    "tls-hello-two-names-other-first": "sni-several-names", "tls-hello-two-names-other-second": "sni-several-names",
    "tls-hello-two-extensions": "sni-extension-twice",
    "tls-hello-name-type": "sni-name-type", "tls-hello-name-type-first": "sni-name-type",
    **{"tls-hello-" + variant: "sni-not-a-dns-name"
       for variant in ["nul", "space", "300-bytes", "label-over-63", "empty"]},
}


def test_refused_client_hellos_are_recorded_with_their_reasons(battery):
    """Each ClientHello the check refused is a denied CONNECT with its reason in the
    record (the helper's log=, through squid's access log): one per case."""
    recorded = sorted(entry["reason"] for entry in battery["record"]["gate"]["denied"] if "reason" in entry)
    assert recorded == sorted(CHECK_REASONS.values())


def test_residual_risks_are_what_the_docs_say(battery):
    """docs/security.md states these plainly: a ClientHello naming the CONNECT name gets
    through, whatever the Host header inside TLS names (domain fronting); an SNI other
    than the CONNECT name and another protocol inside CONNECT:443 no longer do (test_case
    shows no listener saw them). If either changes, the docs must change with it."""
    fronted = [e for e in seen(battery, "tls-host-differs") if e["kind"] == "tls"]
    assert [e["sni"] for e in fronted] == ["b-tls.test"], fronted
    assert "Host: b-unlisted.test" in fronted[0]["data"]
    spliced = [e for case in CASES if case[3] == "tunnel=200 tls=ok" for e in seen(battery, case[0])]
    assert sorted(e["sni"].lower().rstrip(".") for e in spliced) == [
        "a.b-wild.test"] + ["b-tls.test"] * 5, spliced


def test_nothing_outside_the_project_and_no_privilege(battery, workstation):
    results = battery["results"]
    # "nested containers or sockets passed in": only the project crosses into the sandbox.
    assert results["sockets"] == "count=0"
    assert results["write-outside"] == "written=none"
    found = workstation.run(["find", "/home", "/tmp", "/var/tmp", "/root", "-name", battery["marker"]],
                            user="root", check=False).stdout.split()
    assert found == [f"{PROJECT}/{battery['marker']}"]
    # "policy widened by the agent": the policy is mounted read-only from outside the project.
    assert results["policy-readonly"] == "refused"
    # "the agent keeps NET_ADMIN": every capability set is empty.
    assert results["capabilities"] == "0000000000000000"
    # Reading the host environment: a variable of ansible-playbook's own environment
    # that nobody named never reaches any process in the sandbox.
    assert results["host-env"] == "count=0"
