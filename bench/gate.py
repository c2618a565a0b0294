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
  - the same small requests' p50 through a session's own gate (run_agent.yml allowing
    the same name and ports, its harness asleep) while its enforcement watch reads that
    gate every 2 s and its canaries send it their CONNECTs every 5 s, beside the
    unwatched gate above, alternately (each first in every other round): the added p50
    within 0.1 ms of the unwatched gate's (issue 34);
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

from measure import median, percentile, playbook_argv, row, run_alone
from scenario import ANSIBLE_ENV, Internet
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
# The watched session's project, and the longest its harness sleeps (it is stopped once measured).
WATCHED_PROJECT = "/home/dev/bench-watched-project"
WATCHED_SLEEP = 1800
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


def watched_session(ws):
    """(the playbook's process, its sandbox's name, its gate's address host:port): a
    session allowing NAME on the benchmark's ports, its harness asleep, once its
    enforcement watch and canaries have run for a few seconds."""
    ws.sh(f"mkdir -p {WATCHED_PROJECT}")
    before = set(ws.run(["podman", "ps", "--format", "{{.Names}}"]).stdout.split())
    allow = {"aisb_allow": [NAME], "aisb_connect_ports": [HTTP_PORT, HTTPS_PORT],
             "command": ["sleep", str(WATCHED_SLEEP)]}
    playbook = subprocess.Popen(ws.command(playbook_argv(ws, "run_agent", "-e", f"project={WATCHED_PROJECT}",
                                                         "-e", json.dumps(allow)), env=ANSIBLE_ENV),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and playbook.poll() is None:
        started = [name for name in set(ws.run(["podman", "ps", "--format", "{{.Names}}"]).stdout.split()) - before
                   if name.startswith("aisb-sandbox-")]
        # The watch's helper runs once the entrypoint has reported its table.
        if started and ws.run(["pgrep", "-f", "nft --json --interactive"], check=False).returncode == 0:
            session = started[0][len("aisb-sandbox-"):]
            conf = ws.path(f"{AISB_STATE}/sessions/{session}/gate-session.conf").read_text()
            time.sleep(12)  # a few readings and two rounds of canaries first
            return playbook, started[0], re.search(r"^http_port (\S+) ", conf, re.M).group(1)
        time.sleep(0.5)
    playbook.kill()
    raise SystemExit("the watched session did not start: %s" % playbook.communicate()[0][-3000:])


def end_watched_session(ws, playbook, sandbox):
    """Stop the watched session's sandbox; its record, which must show nothing lost."""
    ws.run(["podman", "stop", "--time", "0", sandbox], check=False)
    output = playbook.communicate(timeout=300)[0]
    path = re.search(r'"record": "([^"]+)"', output) or re.search(r"record (\S+/record\.json)", output)
    watch = json.loads(ws.path(path.group(1)).read_text())["enforcement_watch"]
    if watch["lost"] is not None:
        raise SystemExit("the watched session lost its enforcement: %s" % watch["lost"])
    return watch


def watched_latency(ws, proxy, runs):
    """Rows: each small request's p50 through a watched session's gate beside PROXY's
    (the unwatched gate), alternately, RUNS rounds (medians)."""
    playbook, sandbox, watched = watched_session(ws)
    try:
        figures = dict((how, {"direct": [], "gate": [], "watched": []}) for _s, _p, _m, how in SMALL)
        for run in range(runs):
            # The two gates in turn first: neither gains from coming second.
            gates = [("gate", proxy), ("watched", watched)][::1 if run % 2 == 0 else -1]
            for scheme, port, mode, how in SMALL:
                for path, address in [("direct", None)] + gates:
                    figures[how][path].append(percentile(
                        request_times(ws, f"{scheme}://{NAME}:{port}/small", mode, address), 0.5))
    finally:
        watch = end_watched_session(ws, playbook, sandbox)
    rows = []
    for _scheme, _port, _mode, how in SMALL:
        direct, gate_ms, watched_ms = (1000 * median(figures[how][path]) for path in ("direct", "gate", "watched"))
        more = (watched_ms - direct) - (gate_ms - direct)
        rows.append(row("gate", f"small request p50, {how}, through a session's gate its watch read "
                        f"{watch['readings']} times and its canaries probed {watch['canaries']['rounds']} times "
                        f"meanwhile (added: "
                        f"{watched_ms - direct:.2f} ms; unwatched gate: {gate_ms - direct:.2f} ms)",
                        round(watched_ms, 3), "ms", round(gate_ms, 3), "same request, the unwatched gate",
                        "added within 0.1 ms of the unwatched gate's", more <= 0.1, runs,
                        [1000 * t for t in figures[how]["watched"]], [1000 * t for t in figures[how]["gate"]]))
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
