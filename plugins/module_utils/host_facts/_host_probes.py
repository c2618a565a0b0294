# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host probes: what rootless podman really gives this host, measured with real
containers, each probe returning {name: entry} (_host_probe_results.result).

Commands go through the Prober's RUN (a _runner.Runner, or any callable RUN(argv,
timeout=None) -> (rc, stdout, stderr) with rc None when the command did not finish
within TIMEOUT). Each negative probe takes ENFORCE: False runs it against a container
without the protection, which is how the tests show that the probe does catch a leak.
"""

import json
import os
import shutil
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman, _seccomp
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_results import (
    Listener, Outcome, host_address, result, unmeasured)
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import (
    DROP_ALL_PRIVILEGES, SANDBOX_PROBES, probe_sandbox, probe_tcp_forward_sandbox)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAPPED_LOOPBACK

# Seconds one connection attempt inside a container may take before it counts as blocked.
CONNECT_SECONDS = 3
# The sandbox's user namespace: the caller is uid and gid 1000 inside.
KEEP_ID = next(flag for flag in _podman.SANDBOX_SECURITY if flag.startswith("--userns="))

# Shell helpers every probe script starts with. A blocked TCP connect hangs (the table
# drops the SYN), so each attempt is bounded; the listener, not this rc, decides.
PRELUDE = """
connect_seconds=${connect_seconds:-%d}
tcp() { timeout "$connect_seconds" bash -c 'exec 3<>"/dev/tcp/$1/$2" && echo aisb-probe >&3' _ "$1" "$2"; }
udp() { echo aisb-probe >"/dev/udp/$1/$2"; }
echo started
""" % CONNECT_SECONDS


class Prober(object):
    """What every probe needs: how to run commands, podman, the probe image, a time bound."""

    def __init__(self, run, podman, image, timeout, image_error=None):
        self.run, self.podman, self.image, self.timeout = run, podman, image, timeout
        self.image_error = image_error

    def command(self, argv, timeout=None):
        rc, out, err = self.run(argv, timeout=timeout or self.timeout)
        return Outcome(argv, rc, out, err)

    def argv(self, name, options, script, args=()):
        """A probe container NAME running SCRIPT after the PRELUDE, with ARGS."""
        return _podman.run_script(self.podman, name, options, self.image, PRELUDE + script, args)

    def container(self, options, script, args=()):
        """Run SCRIPT in a fresh probe container; a hung one is removed, not left behind."""
        name = "aisb-probe-" + uuid.uuid4().hex[:12]
        outcome = self.command(self.argv(name, options, script, args))
        if outcome.rc is None:
            self.run(_podman.remove(self.podman, [name]), timeout=60)
        return outcome


def probe_rootless(prober):
    outcome = prober.command(_podman.info(prober.podman))
    try:
        rootless = json.loads(outcome.out)["host"]["security"]["rootless"]
    except (ValueError, KeyError, TypeError):
        return {"rootless": result(False, "podman info failed", outcome)}
    return {"rootless": result(rootless is True, "podman runs rootless" if rootless is True
                               else "podman runs as root", outcome)}


def probe_subids(prober):
    outcome = prober.command(_podman.unshare(prober.podman, ["cat", "/proc/self/uid_map", "/proc/self/gid_map"]))
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


def probe_tun(_prober):
    command = ["open", "/dev/net/tun", "O_RDWR"]
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        return {"tun": result(False, "/dev/net/tun cannot be opened by this user: %s" % exc.strerror,
                              Outcome(command, exc.errno, "", str(exc)))}
    return {"tun": result(True, "/dev/net/tun opens read-write", Outcome(command, 0, "", ""))}


def probe_selinux(_prober):
    try:
        with open("/sys/fs/selinux/enforce") as handle:
            mode = "enforcing" if handle.read().strip() == "1" else "permissive"
    except (IOError, OSError):
        mode = "disabled"
    return {"selinux": result(True, "SELinux is %s" % mode, mode=mode)}


def probe_pasta(prober):
    outcome = prober.container(["--network=" + _podman.pasta_network()], "")
    failure = outcome.failure(prober.timeout)
    return {"pasta": result(failure is None, failure or "--network=pasta starts a container", outcome)}


def probe_host_loopback(prober):
    with Listener("127.0.0.1") as gate:
        outcome = prober.container(["--network=" + _podman.pasta_network(map_host_loopback=[MAPPED_LOOPBACK])],
                                   'tcp "$1" "$2"', [MAPPED_LOOPBACK, gate.port])
    failure = outcome.failure(prober.timeout)
    return {
        "map_host_loopback": result(failure is None, failure or "pasta accepts --map-host-loopback", outcome),
        "host_loopback_reachable": result(
            bool(gate.hits), "%s:%d reached the listener on the host's 127.0.0.1" % (MAPPED_LOOPBACK, gate.port)
            if gate.hits else failure or "nothing reached the host's 127.0.0.1:%d" % gate.port, outcome),
    }


def probe_tcp_forward(prober):
    with Listener("127.0.0.1") as gate:
        outcome = prober.container(["--network=" + _podman.pasta_network(forward_tcp=[gate.port])],
                                   'tcp 127.0.0.1 "$1"', [gate.port])
    return {"tcp_forward": result(bool(gate.hits), "pasta -T %d forwarded to the host's loopback" % gate.port
                                  if gate.hits else outcome.failure(prober.timeout) or "nothing arrived",
                                  outcome)}


def probe_network_host(prober):
    with Listener("127.0.0.1") as gate:
        outcome = prober.container(["--network=host"], 'tcp 127.0.0.1 "$1"', [gate.port])
    return {"network_host": result(bool(gate.hits), "--network=host reaches the host's loopback"
                                   if gate.hits else outcome.failure(prober.timeout) or "nothing arrived",
                                   outcome)}


def probe_internal_network(prober, enforce=True):
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
        created = prober.command(_podman.network(prober.podman, "create", network, internal=True))
        if created.rc != 0:
            return unmeasured([name], "podman network create failed", created)
    try:
        with Listener(address) as tcp, Listener(address, udp=True) as udp:
            outcome = prober.container(
                ["--network=" + network],
                'peer=$(awk \'$2 == "host.containers.internal" {print $1; exit}\' /etc/hosts)\n'
                'echo "peer=$peer"; tcp "$peer" "$1"; echo "tcp=$?"; udp "$peer" "$2"; echo "udp=$?"',
                [tcp.port, udp.port])
    finally:
        if enforce:
            prober.command(_podman.network(prober.podman, "rm", network))
    failure = outcome.failure(prober.timeout)
    if failure or not outcome.values().get("peer"):
        return unmeasured([name], failure or "no host.containers.internal entry to aim at", outcome)
    leaks = [kind for kind, hits in (("TCP", tcp.hits), ("UDP", udp.hits)) if hits]
    return {name: result(not leaks, "leak: %s from the network reached the host's %s"
                         % (" and ".join(leaks), address) if leaks else
                         "TCP and UDP to the host's %s never arrived" % address, outcome)}


def probe_container_to_container(prober):
    """Two containers on one user-defined network: a refused connection means the peer
    answered (reachable); a timeout or no route means it did not."""
    name = "container_to_container"
    network = "aisb-probe-" + uuid.uuid4().hex[:12]
    peer = network + "-peer"
    created = prober.command(_podman.network(prober.podman, "create", network, internal=True))
    if created.rc != 0:
        return unmeasured([name], "podman network create failed", created)
    try:
        started = prober.command(prober.argv(peer, ["--detach", "--network=" + network],
                                             "exec sleep %d" % prober.timeout))
        address = prober.command(_podman.container_address(prober.podman, peer, network))
        if started.rc != 0 or address.rc != 0:
            return unmeasured([name], started.failure(prober.timeout) or "the peer has no address", started)
        outcome = prober.container(["--network=" + network], 'tcp "$1" 9; echo "tcp=$?"',
                                   [address.out.strip()])
    finally:
        prober.run(_podman.remove(prober.podman, [peer]), timeout=60)
        prober.command(_podman.network(prober.podman, "rm", network))
    reached = "refused" in outcome.err
    return {name: result(reached, "the peer refused the connection: containers reach each other"
                         if reached else outcome.failure(prober.timeout) or "the peer was unreachable", outcome)}


def probe_nft_needs_net_admin(prober, enforce=True):
    """Root in a container with podman's default capabilities must not be able to touch
    the ruleset: NET_ADMIN has to be granted on purpose (the leak control grants it)."""
    caps = [] if enforce else ["--cap-add=NET_ADMIN"]
    outcome = prober.container(caps + [KEEP_ID, "--user=0:0", "--network=none"],
                               'nft add table inet aisb_probe; echo "nft=$?"')
    failure = outcome.failure(prober.timeout)
    if failure:
        return unmeasured(["nft_needs_net_admin"], failure, outcome)
    changed = outcome.values().get("nft") == "0"
    return {"nft_needs_net_admin": result(
        not changed, "leak: root added a table" if changed
        else "nft was refused to root with podman's default capabilities", outcome)}


# As root in the sandbox's user namespace (the entrypoint's privileged stage), then as the
# agent after the entrypoint's drop: nft must work, a new user namespace must not.
SECCOMP_SCRIPT = """
nft add table inet aisb_probe; echo "nft=$?"
grep -E '^Seccomp(_filters)?:' /proc/self/status | tr -d '\\t' | tr : =
@DROP@ unshare -Urn true; echo "unshare=$?"
""".replace("@DROP@", " ".join(DROP_ALL_PRIVILEGES))


def probe_seccomp_profile(prober, enforce=True):
    """A sandbox-shaped container under the sandbox's seccomp profile (_seccomp, rendered
    from this host's podman default): nft works in the privileged stage, and the agent's
    `unshare -Urn true` is refused. ENFORCE=False runs it without the profile (the leak
    control: unshare works there)."""
    name = "seccomp_profile"
    profile, problem = _seccomp.load_profile()
    if problem:
        return {name: result(False, problem)}
    directory = tempfile.mkdtemp(prefix="aisb-probe-")
    try:
        path = os.path.join(directory, _seccomp.PROFILE_FILE)
        with open(path, "w") as handle:
            handle.write(profile)
        os.chmod(directory, 0o755)
        outcome = prober.container(["--network=none"] + _podman.SANDBOX_SECURITY +
                                   ([_podman.seccomp_option(path)] if enforce else []), SECCOMP_SCRIPT)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    failure = outcome.failure(prober.timeout)
    if failure:
        return unmeasured([name], failure, outcome)
    values = outcome.values()
    problems = []
    if values.get("nft") != "0":
        problems.append("nft failed as root in the privileged stage (exit %s)" % values.get("nft"))
    if values.get("unshare") == "0":
        problems.append("leak: the agent made a user namespace (unshare -Urn true exited 0)")
    if values.get("Seccomp") != str(_seccomp.FILTER_MODE):
        problems.append("the container is not under a seccomp filter (Seccomp: %s)" % values.get("Seccomp"))
    return {name: result(not problems, "; ".join(problems) or (
        "nft works in the privileged stage and the agent's unshare -Urn is refused (exit %s) under the sandbox's "
        "profile, derived from %s" % (values.get("unshare"), _seccomp.HOST_DEFAULT_PROFILE)), outcome)}


def probe_limits(prober):
    outcome = prober.container(["--network=none", "--pids-limit=64", "--memory=256m", "--cpus=0.5"],
                               'for f in pids.max memory.max cpu.max; do '
                               'echo "$f=$(cat /sys/fs/cgroup/$f 2>/dev/null)"; done')
    if outcome.failure(prober.timeout):
        return unmeasured(["limits"], outcome.failure(prober.timeout), outcome)
    values = outcome.values()
    ok = (values.get("pids.max") == "64" and values.get("memory.max") == "268435456" and
          values.get("cpu.max", "").startswith("50000 "))
    return {"limits": result(ok, "--pids-limit, --memory and --cpus are %s inside the container"
                             % ("visible" if ok else "not visible (cgroup v1 or no delegation)"),
                             outcome)}


def probe_project_mount(prober):
    """A bind-mounted directory under keep-id: writable (with or without :z), and the file
    the container writes belongs to the caller."""
    directory = tempfile.mkdtemp(prefix="aisb-probe-")
    try:
        for label in ("", ":z"):
            outcome = prober.container([KEEP_ID, "--user=1000:1000", "--network=none",
                                        "--volume=%s:/project%s" % (directory, label)],
                                       'echo x >/project/probe && echo "write=ok"')
            if outcome.values().get("write") == "ok":
                break
        written = os.path.join(directory, "probe")
        owner = os.stat(written).st_uid if os.path.exists(written) else None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if outcome.failure(prober.timeout):
        return unmeasured(["bind_mount", "keep_id_owner"], outcome.failure(prober.timeout), outcome)
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
CONTAINER_PROBES = (probe_sandbox, probe_tcp_forward_sandbox, probe_container_to_container, probe_internal_network,
                    probe_pasta,
                    probe_host_loopback, probe_tcp_forward, probe_network_host, probe_nft_needs_net_admin,
                    probe_seccomp_profile, probe_limits, probe_project_mount)
# Probe names per container probe, to report them when no image could be had.
CONTAINER_PROBE_NAMES = ("pasta", "map_host_loopback", "host_loopback_reachable", "tcp_forward", "tcp_forward_sandbox",
                         "network_host", "internal_network_blackout", "container_to_container",
                         "nft_needs_net_admin", "seccomp_profile") + SANDBOX_PROBES + (
                             "limits", "bind_mount", "keep_id_owner")
# Order of the reasons: what other probes depend on comes first.
ORDER = ("rootless", "subids", "tun", "selinux") + CONTAINER_PROBE_NAMES


def run_probes(prober, workers=6):
    """Every probe, the independent ones concurrently; {name: entry} in ORDER."""
    probes = list(HOST_PROBES)
    if prober.image_error is None:
        probes = list(CONTAINER_PROBES) + probes
    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = {}
        for entries in pool.map(lambda probe: probe(prober), probes):
            found.update(entries)
    if prober.image_error is not None:
        found.update(unmeasured(CONTAINER_PROBE_NAMES, prober.image_error))
    return dict((name, found[name]) for name in ORDER)
