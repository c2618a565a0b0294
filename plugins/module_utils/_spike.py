# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network spike: what rootless podman really gives this host, measured with containers.

No probe sends a packet to an address outside the workstation. A negative probe aims at
a listener the spike runs itself (a thread on the host's loopback, reached from the
container through a pasta mapping, or on the host's own address), so a leak is seen by
that listener instead of being inferred from a timeout. Each negative probe takes
ENFORCE: False runs it against a container without the protection, which is how the
tests show that the probe does catch a leak.

Commands run through RUN(argv, timeout=None) -> (rc, stdout, stderr); rc is None when
the command did not finish within TIMEOUT.
"""

import json
import os
import shutil
import socket
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.aisb.sandbox.plugins.module_utils import _host_facts
from ansible_collections.aisb.sandbox.plugins.module_utils import _images
from ansible_collections.aisb.sandbox.plugins.module_utils import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils._policy import MAPPED_LOOPBACK

# MAPPED_LOOPBACK is where pasta maps the host's loopback, as the session uses it. The
# v6 one exists only in the probe, to give IPv6 a way to a local listener the table must block.
MAPPED_ADDR6 = "fd00:a15b::1"
# Seconds one connection attempt inside a container may take before it counts as blocked.
CONNECT_SECONDS = 3
# The sandbox probe's blocked connections wait a multiple of what its positive control
# (the gate's port, the same path through pasta) took, never less than the floor: a
# connection the table let through would arrive as fast as the control did.
BLOCKED_WAIT_MULTIPLE = 10
BLOCKED_WAIT_FLOOR_MS = 1000
STDERR_EXCERPT = 400
DROP_ALL_PRIVILEGES = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--inh-caps=-all",
                       "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
KEEP_ID = "--userns=keep-id:uid=1000,gid=1000"

# Shell helpers every probe script starts with. A blocked TCP connect hangs (the table
# drops the SYN), so each attempt is bounded; the listener, not this rc, decides.
PRELUDE = """
connect_seconds=${connect_seconds:-%d}
tcp() { timeout "$connect_seconds" bash -c 'exec 3<>"/dev/tcp/$1/$2" && echo aisb-probe >&3' _ "$1" "$2"; }
udp() { echo aisb-probe >"/dev/udp/$1/$2"; }
echo started
""" % CONNECT_SECONDS

# The probe's model of the session's table: output policy drop, loopback, replies, and
# exactly one address and port (the gate's).
RULESET = """table inet aisb {
  chain output {
    type filter hook output priority 0; policy drop;
    oif lo accept
    ct state established,related accept
    ip daddr $gate_addr tcp dport $gate_port accept
  }
}
"""
# On plain pasta (network no-gate) the probe aims at the host's own address through
# podman's entry for it in the container's /etc/hosts.
HOST_ENTRY = "host.containers.internal"

# What to do when a probe fails, by probe name. Probes missing here are informational.
FIXES = {
    "rootless": "Run the spike as the workstation user, not root (rootless podman is the model).",
    "subids": "Give the user a subordinate uid and gid range (the host role does; or usermod "
              "--add-subuids/--add-subgids), then run `podman system migrate`.",
    "tun": "Make /dev/net/tun readable and writable by the user (mode 0666; the host role does).",
    "pasta": "Install a podman with the pasta network mode (podman >= 4.4 with passt; Debian 13, "
             "Ubuntu 24.04, Fedora): the allow mode cannot run without pasta.",
    "host_loopback_reachable": "Install passt >= 2024-08-21 (pasta --map-host-loopback) so the "
                               "sandbox can reach the gate on the host's loopback.",
    "network_host": "The gate needs --network=host for rootless containers; check podman's "
                    "rootless setup.",
    "nft_needs_net_admin": "nft changed the ruleset without CAP_NET_ADMIN: do not use this "
                           "runtime for sandboxes.",
    "nft_default_drop": "The in-container default-drop table did not block a connection: install "
                        "nftables in the image and check the kernel's nf_tables support.",
    "table_allows_gate": "The gate's port was unreachable under the table: check pasta's "
                         "--map-host-loopback.",
    "setpriv_locks_table": "After setpriv the process could still change the table or kept "
                           "capabilities: use a util-linux setpriv with --ambient-caps.",
    "raw_tcp_blocked": "A raw TCP connection passed the table: the sandbox would not hold.",
    "udp_blocked": "A UDP datagram passed the table: the sandbox would not hold.",
    "ipv6_blocked": "An IPv6 connection passed the table: the sandbox would not hold.",
    "bind_mount": "The project mount was not writable even with :z: check the SELinux policy.",
    "keep_id_owner": "Files written under --userns=keep-id:uid=1000,gid=1000 were not owned by "
                     "the caller: keep-id with uid and gid needs podman >= 4.3.",
}
# Probes measured for the record (and the fleet report) that do not decide the verdict.
INFORMATIONAL = ("selinux", "map_host_loopback", "tcp_forward", "internal_network_blackout",
                 "container_to_container", "limits")


# --- podman command lines (the spike's own; images come from _podman) ---

def run_argv(podman, name, options, image, script, args=()):
    """podman run --rm --name NAME OPTIONS IMAGE bash -c SCRIPT _ ARGS."""
    return ([podman, "run", "--rm", "--name", name] + list(options) +
            [image, "bash", "-c", PRELUDE + script, "_"] + [str(a) for a in args])


def unshare_argv(podman, argv):
    """ARGV in the user namespace rootless podman sets up for this user."""
    return [podman, "unshare"] + list(argv)


def remove_argv(podman, name):
    return [podman, "rm", "--force", "--ignore", "--time", "0", name]


def network_argv(podman, action, name, internal=False):
    return [podman, "network", action] + (["--internal"] if internal else []) + [name]


def address_argv(podman, name, network):
    return [podman, "inspect", "--format", '{{(index .NetworkSettings.Networks "%s").IPAddress}}' % network,
            name]


def tag_argv(podman, image, tag):
    return [podman, "tag", image, tag]


# --- results ---

def error_line(stderr):
    """podman's own message (its "Error: ..." line) out of STDERR; the rest is context."""
    lines = (stderr or "").strip().splitlines() or [""]
    return next((line for line in lines if line.startswith("Error")), lines[-1])[:300]


def result(ok, detail, outcome=None, **values):
    """One probe's entry: ok, a plain sentence, its evidence and any measured values."""
    entry = {"ok": bool(ok), "detail": detail, "evidence": outcome.evidence() if outcome else {}}
    entry.update(values)
    return entry


def unmeasured(names, why, outcome=None):
    """Entries for probes that could not run at all: failed, and marked measured=false so
    the verdict blames the cause instead of the probe."""
    return dict((name, result(False, "not measured: " + why, outcome, measured=False)) for name in names)


class Outcome(object):
    """A command that ran: argv, rc (None: it hung and was stopped), stdout, stderr."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out or "", err or ""

    def evidence(self):
        return {"command": self.argv, "rc": self.rc, "stderr": self.err.strip()[-STDERR_EXCERPT:]}

    def values(self):
        """KEY=VALUE lines a probe script printed."""
        return dict(line.split("=", 1) for line in self.out.splitlines() if "=" in line)

    def started(self):
        return "started" in self.out.splitlines()

    def failure(self, timeout):
        """Why the container did not get to run its script, or None when it did."""
        if self.rc is None:
            return "hung: no exit within %d s (container removed)" % timeout
        if not self.started():
            return "the container did not start (rc %s): %s" % (self.rc, error_line(self.err))
        return None


class Listener(object):
    """A TCP or UDP socket the spike owns, recording who reached it: a leak is seen here."""

    def __init__(self, address, udp=False):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.udp = udp
        self.sock = socket.socket(family, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
        self.sock.bind((address, 0))
        self.port = self.sock.getsockname()[1]
        if not udp:
            self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.hits = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve)
        self._thread.daemon = True
        self._thread.start()

    def _serve(self):
        # After close() is asked for, keep going until the socket has been idle for one
        # timeout: a connection still queued in the backlog is a leak too.
        while True:
            stopping = self._stop.is_set()
            try:
                if self.udp:
                    self.hits.append(self.sock.recvfrom(512)[1][0])
                else:
                    conn, peer = self.sock.accept()
                    conn.close()
                    self.hits.append(peer[0])
            except socket.timeout:
                if stopping:
                    return
            except OSError:
                return

    def stop(self):
        """Let the listener end once it has been idle for one timeout; close() waits for that."""
        self._stop.set()

    def close(self):
        self.stop()
        self._thread.join()
        self.sock.close()
        return self.hits

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()


class Spike(object):
    """What every probe needs: how to run commands, podman, the probe image, a time bound."""

    def __init__(self, run, podman, image, timeout, image_error=None):
        self.run, self.podman, self.image, self.timeout = run, podman, image, timeout
        self.image_error = image_error

    def command(self, argv, timeout=None):
        rc, out, err = self.run(argv, timeout=timeout or self.timeout)
        return Outcome(argv, rc, out, err)

    def container(self, options, script, args=()):
        """Run SCRIPT in a fresh probe container; a hung one is removed, not left behind."""
        name = "aisb-probe-" + uuid.uuid4().hex[:12]
        outcome = self.command(run_argv(self.podman, name, options, self.image, script, args))
        if outcome.rc is None:
            self.run(remove_argv(self.podman, name), timeout=60)
        return outcome


# --- probes: each returns {name: entry} ---

def probe_rootless(spike):
    outcome = spike.command(_host_facts.info_argv(spike.podman))
    try:
        rootless = json.loads(outcome.out)["host"]["security"]["rootless"]
    except (ValueError, KeyError, TypeError):
        return {"rootless": result(False, "podman info failed", outcome)}
    return {"rootless": result(rootless is True, "podman runs rootless" if rootless is True
                               else "podman runs as root", outcome)}


def probe_subids(spike):
    outcome = spike.command(unshare_argv(spike.podman, ["cat", "/proc/self/uid_map", "/proc/self/gid_map"]))
    lines = [line.split() for line in outcome.out.splitlines() if len(line.split()) == 3]
    if outcome.rc != 0 or not lines:
        return {"subids": result(False, "podman unshare failed", outcome)}
    # uid_map then gid_map; the first line of each maps container 0.
    starts = [i for i, fields in enumerate(lines) if fields[0] == "0"] + [len(lines)]
    sizes = [sum(int(f[2]) for f in lines[a:b]) for a, b in zip(starts, starts[1:])]
    # keep-id:uid=1000 and an image's own ids (up to nobody, 65534) all need a mapping.
    ok = len(sizes) == 2 and min(sizes) >= 65536
    return {"subids": result(ok, "the user namespace maps %s uids and %s gids (needs 65536)"
                             % tuple((sizes + [0, 0])[:2]), outcome)}


def probe_tun(_spike):
    command = ["open", "/dev/net/tun", "O_RDWR"]
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        return {"tun": result(False, "/dev/net/tun cannot be opened by this user: %s" % exc.strerror,
                              Outcome(command, exc.errno, "", str(exc)))}
    return {"tun": result(True, "/dev/net/tun opens read-write", Outcome(command, 0, "", ""))}


def probe_selinux(_spike):
    try:
        with open("/sys/fs/selinux/enforce") as handle:
            mode = "enforcing" if handle.read().strip() == "1" else "permissive"
    except (IOError, OSError):
        mode = "disabled"
    return {"selinux": result(True, "SELinux is %s" % mode, mode=mode)}


def probe_pasta(spike):
    outcome = spike.container(["--network=pasta"], "")
    failure = outcome.failure(spike.timeout)
    return {"pasta": result(failure is None, failure or "--network=pasta starts a container", outcome)}


def probe_host_loopback(spike):
    with Listener("127.0.0.1") as gate:
        outcome = spike.container(["--network=pasta:--map-host-loopback,%s" % MAPPED_LOOPBACK],
                                  'tcp "$1" "$2"', [MAPPED_LOOPBACK, gate.port])
    failure = outcome.failure(spike.timeout)
    return {
        "map_host_loopback": result(failure is None, failure or "pasta accepts --map-host-loopback", outcome),
        "host_loopback_reachable": result(
            bool(gate.hits), "%s:%d reached the listener on the host's 127.0.0.1" % (MAPPED_LOOPBACK, gate.port)
            if gate.hits else failure or "nothing reached the host's 127.0.0.1:%d" % gate.port, outcome),
    }


def probe_tcp_forward(spike):
    with Listener("127.0.0.1") as gate:
        outcome = spike.container(["--network=pasta:-T,%d" % gate.port], 'tcp 127.0.0.1 "$1"', [gate.port])
    return {"tcp_forward": result(bool(gate.hits), "pasta -T %d forwarded to the host's loopback" % gate.port
                                  if gate.hits else outcome.failure(spike.timeout) or "nothing arrived",
                                  outcome)}


def probe_network_host(spike):
    with Listener("127.0.0.1") as gate:
        outcome = spike.container(["--network=host"], 'tcp 127.0.0.1 "$1"', [gate.port])
    return {"network_host": result(bool(gate.hits), "--network=host reaches the host's loopback"
                                   if gate.hits else outcome.failure(spike.timeout) or "nothing arrived",
                                   outcome)}


def host_address():
    """The host's address that podman's host.containers.internal leads to (the source of
    the default route). connect() on a UDP socket only looks the route up: nothing is sent."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return probe.getsockname()[0]
    finally:
        probe.close()


def probe_internal_network(spike, enforce=True):
    """A user-defined --internal network must let nothing out: TCP and UDP aimed at
    listeners on the host's own address through host.containers.internal (podman maps
    that name to the host's address)."""
    name = "internal_network_blackout"
    try:
        address = host_address()
    except OSError as exc:
        return unmeasured([name], "no default route to find the host's address (%s)" % exc)
    # The leak control runs on pasta, a network with a way out: a non-internal bridge
    # network would also need nft on the host for netavark's NAT rules.
    network = "aisb-probe-" + uuid.uuid4().hex[:12] if enforce else "pasta"
    if enforce:
        created = spike.command(network_argv(spike.podman, "create", network, internal=True))
        if created.rc != 0:
            return unmeasured([name], "podman network create failed", created)
    try:
        with Listener(address) as tcp, Listener(address, udp=True) as udp:
            outcome = spike.container(
                ["--network=" + network],
                'peer=$(awk \'$2 == "host.containers.internal" {print $1; exit}\' /etc/hosts)\n'
                'echo "peer=$peer"; tcp "$peer" "$1"; echo "tcp=$?"; udp "$peer" "$2"; echo "udp=$?"',
                [tcp.port, udp.port])
    finally:
        if enforce:
            spike.command(network_argv(spike.podman, "rm", network))
    failure = outcome.failure(spike.timeout)
    if failure or not outcome.values().get("peer"):
        return unmeasured([name], failure or "no host.containers.internal entry to aim at", outcome)
    leaks = [kind for kind, hits in (("TCP", tcp.hits), ("UDP", udp.hits)) if hits]
    return {name: result(not leaks, "leak: %s from the network reached the host's %s"
                         % (" and ".join(leaks), address) if leaks else
                         "TCP and UDP to the host's %s never arrived" % address, outcome)}


def probe_container_to_container(spike):
    """Two containers on one user-defined network: a refused connection means the peer
    answered (reachable); a timeout or no route means it did not."""
    name = "container_to_container"
    network = "aisb-probe-" + uuid.uuid4().hex[:12]
    peer = network + "-peer"
    created = spike.command(network_argv(spike.podman, "create", network, internal=True))
    if created.rc != 0:
        return unmeasured([name], "podman network create failed", created)
    try:
        started = spike.command(run_argv(spike.podman, peer, ["--detach", "--network=" + network],
                                         spike.image, "exec sleep %d" % spike.timeout))
        address = spike.command(address_argv(spike.podman, peer, network))
        if started.rc != 0 or address.rc != 0:
            return unmeasured([name], started.failure(spike.timeout) or "the peer has no address", started)
        outcome = spike.container(["--network=" + network], 'tcp "$1" 9; echo "tcp=$?"',
                                  [address.out.strip()])
    finally:
        spike.run(remove_argv(spike.podman, peer), timeout=60)
        spike.command(network_argv(spike.podman, "rm", network))
    reached = "refused" in outcome.err
    return {name: result(reached, "the peer refused the connection: containers reach each other"
                         if reached else outcome.failure(spike.timeout) or "the peer was unreachable", outcome)}


def probe_nft_needs_net_admin(spike, enforce=True):
    """Root in a container with podman's default capabilities must not be able to touch
    the ruleset: NET_ADMIN has to be granted on purpose (the leak control grants it)."""
    caps = [] if enforce else ["--cap-add=NET_ADMIN"]
    outcome = spike.container(caps + [KEEP_ID, "--user=0:0", "--network=none"],
                              'nft add table inet aisb_probe; echo "nft=$?"')
    failure = outcome.failure(spike.timeout)
    if failure:
        return unmeasured(["nft_needs_net_admin"], failure, outcome)
    changed = outcome.values().get("nft") == "0"
    return {"nft_needs_net_admin": result(
        not changed, "leak: root added a table" if changed
        else "nft was refused to root with podman's default capabilities", outcome)}


SANDBOX_SCRIPT = """
nft --version
if [ "$4" = @HOST_ENTRY@ ]; then
  set -- "$1" "$2" "$3" "$(awk '$2 == "@HOST_ENTRY@" {print $1; exit}' /etc/hosts)" "${@:5}"
fi
echo "target=$4"
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
    "@FLOOR_MS@", str(BLOCKED_WAIT_FLOOR_MS)).replace("@HOST_ENTRY@", HOST_ENTRY)

# Needed for the gate only: network no-gate holds without them.
GATE_PATH_PROBES = ("host_loopback_reachable",)
SANDBOX_PROBES = ("nft_default_drop", "table_allows_gate", "setpriv_locks_table", "raw_tcp_blocked",
                  "udp_blocked", "ipv6_blocked")


def probe_sandbox(spike, enforce=True):
    """A sandbox-shaped container: table installed as root, then setpriv drops every
    capability set, then raw TCP, UDP and IPv6 try to reach listeners the table must keep
    out. ENFORCE=False skips the table and setpriv (the leak control).

    Where pasta cannot map the host's loopback (that container does not start), the same
    probes run on network no-gate's plain pasta instead, aimed at listeners on the host's
    own address; each entry records the network it ran on."""
    found = sandbox_probes(spike, enforce, mapped=True)
    first = found["nft_default_drop"]
    if first.get("measured", True) or first["evidence"].get("rc") is None:
        return found
    return sandbox_probes(spike, enforce, mapped=False)


def sandbox_probes(spike, enforce, mapped):
    """The sandbox probes on the session's mapped loopback (MAPPED) or on plain pasta."""
    v6 = None
    if mapped:
        listen, target = "127.0.0.1", MAPPED_LOOPBACK
        network = "pasta:--map-host-loopback,%s" % MAPPED_LOOPBACK
        try:
            v6 = Listener("::1")
            network += ",--map-host-loopback,%s" % MAPPED_ADDR6
        except OSError:
            pass
    else:
        try:
            listen = host_address()
        except OSError as exc:
            return unmeasured(SANDBOX_PROBES, "no default route to find the host's address (%s)" % exc)
        target, network = HOST_ENTRY, _podman.NO_GATE_NETWORK
    with Listener(listen) as gate, Listener(listen) as root_tcp, \
            Listener(listen) as raw, Listener(listen, udp=True) as udp:
        try:
            outcome = spike.container(
                ["--network=" + network] + _podman.SANDBOX_SECURITY, SANDBOX_SCRIPT,
                ["enforce" if enforce else "open", RULESET, gate.port, target, root_tcp.port,
                 raw.port, udp.port, MAPPED_ADDR6, v6.port if v6 else 9])
        finally:
            # All at once: their idle drains overlap instead of adding up.
            for listener in filter(None, (gate, root_tcp, raw, udp, v6)):
                listener.stop()
            v6_hits = v6.close() if v6 else []
    failure = outcome.failure(spike.timeout)
    if failure or not outcome.values().get("target"):
        return unmeasured(SANDBOX_PROBES, failure or "no %s entry to aim at" % HOST_ENTRY, outcome)
    values = outcome.values()
    status = dict((key, values.get(key, "?")) for key in ("CapEff", "CapBnd", "CapAmb", "NoNewPrivs"))
    locked = (values.get("flush") not in (None, "0") and values.get("uid") == "1000" and
              status == {"CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16, "NoNewPrivs": "1"})

    def blocked(hits, what):
        return ("leak: %s reached the spike's listener" % what) if hits else "%s never arrived" % what

    target = values["target"]
    nowhere = ("this host has no IPv6 loopback: nothing to reach" if mapped else
               "on plain pasta no IPv6 address leads to a listener of the spike: nothing to reach")
    return {
        "nft_default_drop": result(values.get("table") == "installed" and not root_tcp.hits,
                                   blocked(root_tcp.hits, "TCP from root under the table")
                                   if root_tcp.hits or values.get("table") == "installed"
                                   else "the table did not install", outcome, network=network),
        # Two connections: the control as root, then the agent's after setpriv.
        "table_allows_gate": result(len(gate.hits) >= 2, "the %s %s:%d %s" % (
            "gate" if mapped else "pinned address", target, gate.port,
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
        "ipv6_blocked": result(not v6_hits, blocked(v6_hits, "TCP to [%s]" % MAPPED_ADDR6) if v6 else nowhere,
                               outcome, network=network),
    }


def probe_limits(spike):
    outcome = spike.container(["--network=none", "--pids-limit=64", "--memory=256m", "--cpus=0.5"],
                              'for f in pids.max memory.max cpu.max; do '
                              'echo "$f=$(cat /sys/fs/cgroup/$f 2>/dev/null)"; done')
    if outcome.failure(spike.timeout):
        return unmeasured(["limits"], outcome.failure(spike.timeout), outcome)
    values = outcome.values()
    ok = (values.get("pids.max") == "64" and values.get("memory.max") == "268435456" and
          values.get("cpu.max", "").startswith("50000 "))
    return {"limits": result(ok, "--pids-limit, --memory and --cpus are %s inside the container"
                             % ("visible" if ok else "not visible (cgroup v1 or no delegation)"),
                             outcome)}


def probe_project_mount(spike):
    """A bind-mounted directory under keep-id: writable (with or without :z), and the file
    the container writes belongs to the caller."""
    directory = tempfile.mkdtemp(prefix="aisb-probe-")
    try:
        for label in ("", ":z"):
            outcome = spike.container([KEEP_ID, "--user=1000:1000", "--network=none",
                                       "--volume=%s:/project%s" % (directory, label)],
                                      'echo x >/project/probe && echo "write=ok"')
            if outcome.values().get("write") == "ok":
                break
        written = os.path.join(directory, "probe")
        owner = os.stat(written).st_uid if os.path.exists(written) else None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if outcome.failure(spike.timeout):
        return unmeasured(["bind_mount", "keep_id_owner"], outcome.failure(spike.timeout), outcome)
    wrote = outcome.values().get("write") == "ok"
    return {
        "bind_mount": result(wrote, ("writable with label %r" % label if label else "writable without a label")
                             if wrote else "not writable, even with :z",
                             outcome, label=label if wrote else ""),
        "keep_id_owner": result(owner == os.getuid(), "the file is owned by uid %s (the caller is %d)"
                                % (owner, os.getuid()), outcome),
    }


HOST_PROBES = (probe_rootless, probe_subids, probe_tun, probe_selinux)
# The longest first: the pool starts them in this order, so they do not wait for a worker.
CONTAINER_PROBES = (probe_sandbox, probe_container_to_container, probe_internal_network, probe_pasta,
                    probe_host_loopback, probe_tcp_forward, probe_network_host, probe_nft_needs_net_admin,
                    probe_limits, probe_project_mount)
# Probe names per container probe, to report them when no image could be had.
CONTAINER_PROBE_NAMES = ("pasta", "map_host_loopback", "host_loopback_reachable", "tcp_forward",
                         "network_host", "internal_network_blackout", "container_to_container",
                         "nft_needs_net_admin") + SANDBOX_PROBES + ("limits", "bind_mount", "keep_id_owner")
# Order of the reasons: what other probes depend on comes first.
ORDER = ("rootless", "subids", "tun", "selinux") + CONTAINER_PROBE_NAMES


def run_probes(spike, workers=6):
    """Every probe, the independent ones concurrently; {name: entry} in ORDER."""
    probes = list(HOST_PROBES)
    if spike.image_error is None:
        probes = list(CONTAINER_PROBES) + probes
    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = {}
        for entries in pool.map(lambda probe: probe(spike), probes):
            found.update(entries)
    if spike.image_error is not None:
        found.update(unmeasured(CONTAINER_PROBE_NAMES, spike.image_error))
    return dict((name, found[name]) for name in ORDER)


def verdict(probes):
    """model_holds, no_gate_holds, gate_path, limits_enforceable, bind_mount_label, reasons, notes."""
    def ok(name):
        return probes.get(name, {}).get("ok") is True

    if ok("host_loopback_reachable"):
        gate_path = "map-host-loopback"
    elif ok("tcp_forward"):
        gate_path = "tcp-forward"
    else:
        gate_path = "none"
    failed = [name for name in ORDER if name in probes and not ok(name)]
    reasons = sentences(probes, [name for name in failed if name in FIXES], FIXES)
    on_plain_pasta = [name for name in SANDBOX_PROBES if probes.get(name, {}).get("network") == _podman.NO_GATE_NETWORK]
    # Network no-gate needs no gate path, but its enforcement measured on its own network.
    no_gate_holds = (len(on_plain_pasta) == len(SANDBOX_PROBES)
                     and not [name for name in failed if name in FIXES and name not in GATE_PATH_PROBES])
    if gate_path == "map-host-loopback" and on_plain_pasta:
        # The mapped sandbox container failed to start while another mapped one worked:
        # raw TCP, UDP and IPv6 through the mapping went unmeasured.
        reasons.append("%s: measured on plain pasta only, because the sandbox probe's container with "
                       "--map-host-loopback did not start; measure again." % ", ".join(on_plain_pasta))
    if gate_path != "map-host-loopback":
        reasons.append("gate_path is %s: the session reaches its gate through pasta's "
                       "--map-host-loopback, which this host lacks.%s" % (
                           gate_path, " Network no-gate (addresses pinned, no gate) holds here: "
                           "verdict.no_gate_holds." if no_gate_holds else ""))
    return {
        "model_holds": not reasons,
        "no_gate_holds": no_gate_holds,
        "gate_path": gate_path,
        "limits_enforceable": ok("limits"),
        "bind_mount_label": probes.get("bind_mount", {}).get("label", ""),
        "reasons": reasons,
        "notes": sentences(probes, [name for name in failed if name in INFORMATIONAL], {}),
    }


def sentences(probes, failed, fixes):
    """One sentence per failed probe with its fix; probes that could not run are grouped
    by their cause, so one missing prerequisite reads as one sentence."""
    said = ["%s: %s.%s" % (name, probes[name]["detail"], " " + fixes[name] if name in fixes else "")
            for name in failed if probes[name].get("measured", True)]
    causes = {}
    for name in failed:
        if not probes[name].get("measured", True):
            causes.setdefault(probes[name]["detail"], []).append(name)
    return said + ["%s: %s; fix what stops them and measure again." % (", ".join(names), detail)
                   for detail, names in causes.items()]


def measure(run, podman, image, image_error, timeout, now, environ):
    """Run the spike and return the aisb_host facts."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Read while the probes run: it starts no container and depends on none of them.
        # No image: an empty reference, so a stale alias from an older spike is not counted.
        fingerprint = pool.submit(_host_facts.current_fingerprint, run, image or "", podman, environ)
        probes = run_probes(Spike(run, podman, image, timeout, image_error))
    return {
        "schema_version": _host_facts.SCHEMA_VERSION,
        "measured_at": _host_facts.format_time(now),
        "fingerprint": fingerprint.result(),
        "probe_image": image or "",
        "probes": probes,
        "verdict": verdict(probes),
    }


def summary(facts):
    """What a re-measurement must change to count as a change: not the time or the evidence."""
    if not facts:
        return None
    decision = dict((facts.get("verdict") or {}), reasons=None, notes=None)
    return (facts.get("fingerprint"), facts.get("probe_source"), decision,
            dict((name, entry.get("ok")) for name, entry in (facts.get("probes") or {}).items()))


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def save(path, facts):
    """Write FACTS atomically, readable by the user only."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".host_capabilities.")
    with os.fdopen(handle, "w") as out:
        json.dump(facts, out, indent=2, sort_keys=True)
        out.write("\n")
    os.rename(temporary, path)


def host_capabilities(params, check_mode, run, environ, now):
    """The module's work: cached facts when they still stand, else a fresh spike."""
    podman = params["executable"]
    path = params["path"] or _host_facts.facts_path(environ)
    # Where a fresh fingerprint is also kept for sessions (check mode writes nothing).
    cache_environ = None if check_mode else environ
    previous = load(path)
    source = params["probe_image"] or params["base_image"]
    if params["cached"] and previous and previous.get("probe_source") == source:
        fingerprint = _host_facts.current_fingerprint(run, _host_facts.PROBE_IMAGE_ALIAS, podman, cache_environ)
        if not _host_facts.stale_reasons(previous, fingerprint, now, params["max_age"]):
            return {"changed": False, "cached": True, "path": path, "ansible_facts": {"aisb_host": previous}}
    image, changed, image_error = _images.ensure_probe_image(run, podman, params["base_image"],
                                                             params["probe_image"], check_mode)
    facts = measure(run, podman, image, image_error, params["probe_timeout"], now, cache_environ)
    facts["probe_source"] = source
    changed = changed or summary(previous) != summary(facts)
    if not check_mode:
        if image:
            run(tag_argv(podman, image, _host_facts.PROBE_IMAGE_ALIAS))
        save(path, facts)
    return {"changed": changed, "cached": False, "path": path, "ansible_facts": {"aisb_host": facts}}
