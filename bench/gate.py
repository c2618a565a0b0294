# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's cost: download throughput through it, latency it adds, its peak memory.

usage: python3 bench/gate.py [RUNS]   (as root on the build machine; default 3 runs;
bench/run runs it with the rest)

In a provisioned workstation: an origin server (bench/payload_server.py) in the test
internet (tests/workstation/scenario.Internet: a network namespace behind a veth pair)
serves plain HTTP and HTTPS with a self-signed certificate. The gate is the long-lived
one (`ansible-playbook aisb.sandbox.gate`: a systemd user service, under a user manager
started as tests/workstation/user_manager.py does), the same squid configuration a
session's gate gets, allowing that server's name. The client is the workstation itself, outside
any sandbox, so the floor is the same client fetching the same URL from the same
server directly (no pasta in either path; a sandbox's own path is the session's
business):
  - 200 MB over plain HTTP (curl -x) and over CONNECT (HTTPS through a CONNECT tunnel),
    gate and direct alternately, RUNS times each, and the CPU time squid spent on each:
    once as fast as the machine goes (on 2 cores a CPU-bound transfer: TLS at both ends,
    and through the gate a third process sharing the cores), once over a LINK_RATE link
    (a token bucket on the test internet's side of the veth: a fast workstation uplink);
  - 1000 small requests one after another, a new connection each (as curl does) and on
    one kept-alive connection, and over HTTPS a new CONNECT tunnel and TLS handshake each
    (what the peeking port reads a ClientHello of): p50 and p99, gate and direct, RUNS
    rounds (medians);
  - the same small requests' p50 through the gates of two run_agent.yml sessions side by
    side (same allow entries and ports, harnesses asleep): a normal one, whose enforcement
    watch reads its gate every 2 s (squid's process in /proc, its configuration and
    ClientHello check hashed through /proc/PID/root) and whose canaries send it two
    CONNECTs every 5 s, and one with aisb_allow_unenforced, which has neither. Their gates
    are the same: a session's gate-session.conf is render_session_conf(port, session id,
    the policy) (_session_plan.plan_session), which aisb_allow_unenforced does not enter;
    same image, podman options and policy directory, both on the host's loopback; only
    port and session id differ. (aisb_allow_unenforced also lets the entrypoint go on
    when its table fails, which it does not here: the sandbox's side, off the measured
    path.) The two alternately, each first in every other round, then the long-lived gate
    (its configuration rendered the same, its container a systemd service's): the watched
    gate's added p50 within 0.1 ms of the unwatched one's (issue 34), and the unwatched
    one's beside the long-lived gate's as a figure. Both sessions run through all rounds,
    so the machine's load, the watch's own CPU included, weighs on both: the row is what
    the watch does to its gate's requests; the watch's CPU share over that session is a
    row of its own (over a 60 s session, bench/session.py's);
  - peak memory: the gate container's cgroup memory.peak where cgroup v2 keeps one,
    else the kernel's high-water mark of resident memory (VmHWM) of its processes,
    read after all the traffic above and a burst of 32 downloads at once (5 MB each,
    half plain HTTP, half CONNECT).
A measurement, not a test: it asserts nothing.
"""

import json
import os
import re
import subprocess
import time
from pathlib import Path

from measure import median, percentile, playbook_argv, row, run_alone, watch_cpu
from scenario import ANSIBLE_ENV, Internet
from sessions import record_of
from user_manager import UserManager
from workstation import AISB_STATE, TRANSFER_DIR

HERE = Path(__file__).resolve().parent
NAME = "allowed.test"
HTTP_PORT, HTTPS_PORT = 9080, 9443
DOWNLOAD_BYTES = 200 * 1000 * 1000
SMALL_REQUESTS = 1000
BURST_CLIENTS, BURST_BYTES = 32, 5 * 1000 * 1000
# The shaped link's rate, in tc's spelling.
LINK_RATE = "1gbit"
SERVER = f"{TRANSFER_DIR}/payload_server.py"
CLIENT = f"{TRANSFER_DIR}/latency_client.py"
CERT, KEY = f"{TRANSFER_DIR}/payload.crt", f"{TRANSFER_DIR}/payload.key"
# The projects of the watched session and of the unwatched one (by watched), and the
# longest their harnesses sleep (they are stopped once measured).
PROJECTS = {True: "/home/dev/bench-watched-project", False: "/home/dev/bench-unwatched-project"}
SESSION_SLEEP = 1800
# The enforcement watch's helper, as pgrep -f finds it.
WATCH_HELPER = "nft --json --interactive"
# The small requests: URL's scheme and port, the client's mode, and what the row says.
SMALL = (("http", HTTP_PORT, "new", "a new connection each"), ("http", HTTP_PORT, "reuse", "one kept-alive connection"),
         ("https", HTTPS_PORT, "new", "HTTPS, a new CONNECT tunnel and TLS handshake each"))


def start_origin(ws, internet):
    """The payload server in the test internet, with a certificate for NAME."""
    ws.path(SERVER).write_text((HERE / "payload_server.py").read_text())
    ws.path(CLIENT).write_text((HERE / "latency_client.py").read_text())
    ready = f"{TRANSFER_DIR}/payload-server.out"
    ws.sh(f"""
        openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN={NAME} \\
          -addext subjectAltName=DNS:{NAME} -keyout {KEY} -out {CERT} 2>/dev/null
        chmod 0644 {KEY} {CERT}
        ip netns exec {internet.netns} setsid python3 {SERVER} {internet.address} {HTTP_PORT} {HTTPS_PORT} \\
          {CERT} {KEY} >{ready} 2>&1 &
        for _ in $(seq 50); do grep -q ready {ready} && break; sleep 0.1; done
        grep -q ready {ready}
    """, user="root")


def check_resolves_here(ws, internet):
    """Stop unless NAME resolves to this run's test internet alone: a stale address would
    send the benchmark's traffic off this machine."""
    addresses = {line.split()[0] for line in ws.run(["getent", "ahosts", NAME]).stdout.splitlines()}
    if addresses != {internet.address}:
        raise SystemExit(f"{NAME} resolves to {sorted(addresses)}, not only to {internet.address}: stale /etc/hosts")


def gate_playbook(ws, state):
    """The long-lived gate allowing NAME, started or absent; the playbook's output."""
    allow = {"aisb_allow": [NAME], "aisb_connect_ports": [HTTP_PORT, HTTPS_PORT]}
    done = ws.run(playbook_argv(ws, "gate", "-e", json.dumps(allow), "-e", f"state={state}"),
                  env=ANSIBLE_ENV, timeout=900)
    return done.stdout


def start_gate(ws):
    """(container name, proxy address host:port) of the gate. Started after the test
    internet: a container reads the names in /etc/hosts when it is created."""
    found = re.search(r"(aisb-gate-policy-\S+) listens on http://(\S+) ", gate_playbook(ws, "started"))
    return found.groups()


def sandboxes(ws):
    """Names of the sandboxes running."""
    return set(name for name in ws.run(["podman", "ps", "--format", "{{.Names}}"]).stdout.split()
               if name.startswith("aisb-sandbox-"))


def relays(ws, proxy):
    """Whether the gate at PROXY (host:port) relays a small request to the origin."""
    argv = ["curl", "-sS", "--fail", "-o", "/dev/null", "--max-time", "5", "--proxy", f"http://{proxy}",
            f"http://{NAME}:{HTTP_PORT}/small"]
    return ws.run(argv, check=False).returncode == 0


def watch_helper_runs(ws):
    """Whether an enforcement watch's helper runs on the workstation."""
    return ws.run(["pgrep", "-f", WATCH_HELPER], check=False).returncode == 0


def start_session(ws, watched):
    """(the playbook's process, its sandbox's name, its gate's address host:port): a
    run_agent.yml session allowing NAME on the benchmark's ports, its harness asleep, once
    its gate relays. WATCHED: a normal session, once its enforcement watch and canaries have
    run for a few seconds; else one with aisb_allow_unenforced (no watch, no canaries),
    started first: the watch's helper then found running is the watched session's."""
    project = PROJECTS[watched]
    ws.sh(f"mkdir -p {project}")
    before = sandboxes(ws)
    settings = {"aisb_allow": [NAME], "aisb_connect_ports": [HTTP_PORT, HTTPS_PORT],
                "command": ["sleep", str(SESSION_SLEEP)]}
    if not watched:
        settings["aisb_allow_unenforced"] = True
    playbook = subprocess.Popen(ws.command(playbook_argv(ws, "run_agent", "-e", f"project={project}",
                                                         "-e", json.dumps(settings)), env=ANSIBLE_ENV),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and playbook.poll() is None:
        for sandbox in sandboxes(ws) - before:
            # Written before the sandbox starts; its port is the gate's.
            conf = ws.path(f"{AISB_STATE}/sessions/{sandbox[len('aisb-sandbox-'):]}/gate-session.conf")
            proxy = re.search(r"^http_port (\S+) ", conf.read_text(), re.M).group(1) if conf.exists() else None
            if not (proxy and relays(ws, proxy)):
                continue
            if not watched:
                if watch_helper_runs(ws):
                    playbook.kill()
                    raise SystemExit("an enforcement watch's helper runs beside the unwatched session")
                return playbook, sandbox, proxy
            # The watch's helper runs once the entrypoint has reported its table.
            if watch_helper_runs(ws):
                time.sleep(12)  # a few readings and two rounds of canaries first
                return playbook, sandbox, proxy
        time.sleep(0.5)
    playbook.kill()
    raise SystemExit("the %s session did not start: %s" % ("watched" if watched else "unwatched",
                                                           playbook.communicate()[0][-3000:]))


def end_sessions(ws, sessions):
    """Stop the sandboxes of SESSIONS ({watched: (playbook, sandbox, proxy)}); their records'
    enforcement_watch, by watched. The watched one must have lost nothing, the other must
    not have been watched."""
    for _playbook, sandbox, _proxy in sessions.values():
        ws.run(["podman", "stop", "--time", "0", sandbox], check=False)
    watches = dict((watched, record_of(ws, playbook.communicate(timeout=300)[0])["enforcement_watch"])
                   for watched, (playbook, _sandbox, _proxy) in sessions.items())
    if True in watches and not (watches[True]["watched"] and watches[True]["lost"] is None):
        raise SystemExit("the watched session was not watched, or lost its enforcement: %s" % watches[True])
    if False in watches and watches[False]["watched"]:
        raise SystemExit("the unwatched session was watched: %s" % watches[False])
    return watches


def watched_latency(ws, proxy, runs):
    """Rows: each small request's p50 through a watched session's gate beside an unwatched
    session's, alternately (each first in every other round), then through the long-lived
    gate at PROXY, RUNS rounds (medians); the watch's CPU meanwhile."""
    sessions = {}
    try:
        for watched in (False, True):
            sessions[watched] = start_session(ws, watched)
        figures = dict((how, dict((path, []) for path in ("direct", "watched", "unwatched", "service")))
                       for _s, _p, _m, how in SMALL)
        for run in range(runs):
            # The two session gates in turn first: neither gains from coming second.
            pair = [("watched", sessions[True][2]), ("unwatched", sessions[False][2])][::1 if run % 2 == 0 else -1]
            for scheme, port, mode, how in SMALL:
                for path, address in [("direct", None)] + pair + [("service", proxy)]:
                    figures[how][path].append(percentile(
                        request_times(ws, f"{scheme}://{NAME}:{port}/small", mode, address), 0.5))
    finally:
        watch = end_sessions(ws, sessions).get(True)
    cpu = watch_cpu(watch)
    rows = []
    for _scheme, _port, _mode, how in SMALL:
        direct, watched_ms, unwatched_ms, service_ms = (1000 * median(figures[how][path])
                                                        for path in ("direct", "watched", "unwatched", "service"))
        rows.append(row("gate", f"small request p50, {how}, through a session's gate its watch read "
                        f"{cpu['readings']} times and its canaries probed {cpu['rounds']} times meanwhile (added: "
                        f"{watched_ms - direct:.2f} ms; the unwatched session's gate: {unwatched_ms - direct:.2f} ms)",
                        round(watched_ms, 3), "ms", round(unwatched_ms, 3),
                        "same request, the gate of a session without watch and canaries (aisb_allow_unenforced)",
                        "added within 0.1 ms of the unwatched session gate's", watched_ms - unwatched_ms <= 0.1, runs,
                        [1000 * t for t in figures[how]["watched"]], [1000 * t for t in figures[how]["unwatched"]]))
        rows.append(row("gate", f"small request p50, {how}, through the unwatched session's gate (added: "
                        f"{unwatched_ms - direct:.2f} ms; the long-lived gate: {service_ms - direct:.2f} ms)",
                        round(unwatched_ms, 3), "ms", round(service_ms, 3), "same request, the long-lived gate",
                        None, None, runs, [1000 * t for t in figures[how]["unwatched"]],
                        [1000 * t for t in figures[how]["service"]]))
    rows.append(row("gate", "enforcement watch and canaries: CPU of their helpers, %d readings, %d canary rounds and "
                    "their threads over the watched session (%.0f s, the small requests above through its gate)"
                    % (cpu["readings"], cpu["rounds"], cpu["watched_s"]), round(cpu["percent"], 3), "% of one core",
                    target="<= 1 %", met=cpu["percent"] <= 1, runs=1, samples=[cpu["percent"]]))
    return rows


def download(ws, url, proxy):
    """Bytes per second of one download of URL, through PROXY (host:port) or directly."""
    argv = ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", "--cacert", CERT]
    argv += ["--proxy", f"http://{proxy}"] if proxy else ["--noproxy", "*"]
    size, seconds = ws.run(argv + [url], timeout=600).stdout.split()
    if int(size) != DOWNLOAD_BYTES:
        raise SystemExit(f"{url}: {size} bytes, expected {DOWNLOAD_BYTES}")
    return int(size) / float(seconds)


def request_times(ws, url, mode, proxy):
    """Seconds of each of SMALL_REQUESTS small requests to URL (MODE new or reuse)."""
    argv = ["python3", CLIENT, url, str(SMALL_REQUESTS), mode]
    return json.loads(ws.run(argv + ([proxy] if proxy else []), timeout=600).stdout)


def burst(ws, proxy):
    """BURST_CLIENTS downloads at once through the gate, half plain HTTP, half CONNECT
    (what a package manager does): the load the peak memory figure includes."""
    urls = [f"{scheme}://{NAME}:{port}/bytes/{BURST_BYTES}" for scheme, port in
            (("http", HTTP_PORT), ("https", HTTPS_PORT)) for _client in range(BURST_CLIENTS // 2)]
    argv = ["curl", "-sS", "--fail", "--parallel", "--parallel-immediate", "--parallel-max", str(BURST_CLIENTS),
            "--cacert", CERT, "--proxy", f"http://{proxy}"]
    ws.run(argv + [arg for url in urls for arg in ("-o", "/dev/null", url)], timeout=600)


def gate_processes(ws, name):
    """Host PIDs of the gate container's processes."""
    return [int(pid) for pid in ws.run(["podman", "top", name, "hpid"]).stdout.split()[1:]]


def resident_kib(ws, pids, field):
    """Sum of FIELD (VmRSS, VmHWM) over PIDS, in KiB."""
    total = 0
    for pid in pids:
        status = ws.run(["cat", f"/proc/{pid}/status"]).stdout
        total += int(re.search(r"^%s:\s+(\d+) kB" % field, status, re.M).group(1))
    return total


def cpu_seconds(ws, pids):
    """User and system CPU seconds PIDS have used so far."""
    ticks = 0
    for pid in pids:
        fields = ws.run(["cat", f"/proc/{pid}/stat"]).stdout.rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def peak_memory(ws, name):
    """(peak bytes, how it was read) of the gate container."""
    pids = gate_processes(ws, name)
    # The workstation's own /proc and /sys: read them from inside it.
    cgroup = ws.run(["cat", f"/proc/{pids[0]}/cgroup"]).stdout
    unified = re.search(r"^0::(/\S+)$", cgroup, re.M)
    if unified:
        peak = ws.run(["cat", f"/sys/fs/cgroup{unified.group(1)}/memory.peak"], check=False)
        if peak.returncode == 0:
            return int(peak.stdout), "cgroup v2 memory.peak of the gate container"
    return 1024 * resident_kib(ws, pids, "VmHWM"), "VmHWM (peak resident memory) of squid's %d process(es)" % len(pids)


def shape_link(ws, internet, rate):
    """Limit the test internet's sending side to RATE (tc's spelling), or lift it (None)."""
    tc = ["ip", "netns", "exec", internet.netns, "tc", "qdisc"]
    if rate:
        ws.run(tc + ["replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "256kb", "latency", "20ms"],
               user="root")
    else:
        ws.run(tc + ["del", "dev", "eth0", "root"], user="root")


def downloads(ws, pids, proxy, runs, link, target):
    """Figure rows of DOWNLOAD_BYTES over plain HTTP and over CONNECT, gate and direct
    alternately, RUNS times each, on the LINK named; TARGET judges the ratio (None: a
    figure only)."""
    rows = []
    for scheme, port, how in (("http", HTTP_PORT, "plain HTTP"), ("https", HTTPS_PORT, "CONNECT (HTTPS)")):
        url = f"{scheme}://{NAME}:{port}/bytes/{DOWNLOAD_BYTES}"
        gated, direct, cpu = [], [], []
        for _run in range(runs):
            direct.append(download(ws, url, None))
            before = cpu_seconds(ws, pids)
            gated.append(download(ws, url, proxy))
            cpu.append(cpu_seconds(ws, pids) - before)
        through, floor = median(gated) / 1e6, median(direct) / 1e6
        rows.append(row("gate", f"200 MB download over {how}, through the gate, {link}", round(through, 1), "MB/s",
                        round(floor, 1), "same download, same client, directly",
                        target, through >= 0.9 * floor if target else None, runs,
                        [rate / 1e6 for rate in gated], [rate / 1e6 for rate in direct]))
        rows.append(row("gate", f"the gate's CPU time for that download over {how}, {link}", round(median(cpu), 2),
                        "s", None, None, None, None, runs, cpu))
    return rows


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    internet = Internet(ws).start()
    manager = UserManager(ws)
    manager.start()
    try:
        check_resolves_here(ws, internet)
        start_origin(ws, internet)
        name, proxy = start_gate(ws)
        pids = gate_processes(ws, name)
        idle = 1024 * resident_kib(ws, pids, "VmRSS")
        rows = downloads(ws, pids, proxy, runs, "as fast as this machine goes", None)
        shape_link(ws, internet, LINK_RATE)
        try:
            rows += downloads(ws, pids, proxy, runs, f"over a {LINK_RATE}/s link", ">= 0.9x floor")
        finally:
            shape_link(ws, internet, None)
        for scheme, port, mode, how in SMALL:
            url = f"{scheme}://{NAME}:{port}/small"
            figures = {"gate": {"p50": [], "p99": []}, "direct": {"p50": [], "p99": []}}
            for _run in range(runs):
                for path, address in (("direct", None), ("gate", proxy)):
                    times = request_times(ws, url, mode, address)
                    figures[path]["p50"].append(percentile(times, 0.5))
                    figures[path]["p99"].append(percentile(times, 0.99))
            for cut in ("p50", "p99"):
                gate_ms, direct_ms = 1000 * median(figures["gate"][cut]), 1000 * median(figures["direct"][cut])
                added = gate_ms - direct_ms
                target = "<= 1 ms added" if cut == "p50" else None
                rows.append(row("gate", f"small request {cut}, {how}, through the gate (added: {added:.2f} ms)",
                                round(gate_ms, 3), "ms", round(direct_ms, 3), "same request directly",
                                target, added <= 1 if target else None, runs,
                                [1000 * t for t in figures["gate"][cut]], [1000 * t for t in figures["direct"][cut]]))
        rows += watched_latency(ws, proxy, runs)
        burst(ws, proxy)
        peak, how = peak_memory(ws, name)
        rows.append(row("gate", f"gate peak memory ({how}; {idle / 1e6:.1f} MB resident when idle)",
                        round(peak / 1e6, 1), "MB", None, None, "<= 40 MB", peak <= 40e6, None))
        return rows
    finally:
        gate_playbook(ws, "absent")
        manager.remove()
        ws.sh(f"ip netns pids {internet.netns} | xargs -r kill", user="root")
        internet.stop()


if __name__ == "__main__":
    run_alone(measure, 3)
