# SPDX-License-Identifier: GPL-3.0-or-later
"""The upload budget's cost: a sandbox's throughput through its gate with the quota in
its table and without (issue 35).

usage: python3 bench/upload_budget.py [RUNS]   (as root on the build machine; default 3
runs; bench/run runs it with the rest)

In a provisioned workstation: the gate benchmark's origin server (bench/payload_server.py)
in the test internet. Sessions through run_agent.yml (harness `shell`, the mapped gate
path) alternate with aisb_upload_budget (1 TiB: never spent, every packet to the gate
goes through its chain) and without; each session's command, inside the sandbox,
downloads DOWNLOAD_BYTES and uploads UPLOAD_BYTES (a PUT) over plain HTTP through its
gate with curl, which reports each transfer's rate. The figure is the median rate with
the quota beside the median without, RUNS sessions each. A measurement, not a test: it
asserts nothing.
"""

import json
import re

import gate
from measure import median, playbook_argv, row, run_alone
from scenario import ANSIBLE_ENV, Internet

DOWNLOAD_BYTES = 200 * 1000 * 1000
UPLOAD_BYTES = 100 * 1000 * 1000
BUDGET = 1 << 40
PROJECT = "/home/dev/bench-upload"
URL = f"http://{gate.NAME}:{gate.HTTP_PORT}"
COMMAND = f"""
head -c {UPLOAD_BYTES} /dev/zero >/tmp/upload
curl -sS --fail -o /dev/null -w 'RATE download %{{speed_download}}\\n' {URL}/bytes/{DOWNLOAD_BYTES}
curl -sS --fail -o /dev/null -H 'Expect:' -w 'RATE upload %{{speed_upload}}\\n' -T /tmp/upload {URL}/put
"""
TARGET = "at least 0.95x of without"


def rates(ws, budget):
    """{download, upload: bytes per second} of one session, with BUDGET or none."""
    extra = {"aisb_allow": [f"{gate.NAME}:{gate.HTTP_PORT}"], "aisb_gate_path": "map-host-loopback"}
    if budget:
        extra["aisb_upload_budget"] = budget
    done = ws.run(playbook_argv(ws, "run_agent", "-e", f"project={PROJECT}", "-e", json.dumps(extra),
                                "-e", json.dumps({"command": ["bash", "-c", COMMAND]})),
                  env=ANSIBLE_ENV, timeout=900, check=False)
    record = json.loads(ws.path(re.search(r"record (\S+/record\.json)", done.stdout).group(1)).read_text())
    found = dict((kind, float(rate)) for kind, rate in re.findall(
        r"^RATE (\w+) (\S+)$", ws.path(record["transcript"]).read_text(), re.M))
    if set(found) != {"download", "upload"} or (record["upload"] is not None) != bool(budget):
        raise SystemExit("a benchmark session did not transfer both ways, or its budget is not in its record: %s"
                         % done.stdout[-2000:])
    return found


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    # The gate section's test internet leaves its line for NAME: this one's alone, then as it was.
    hosts = ws.path("/etc/hosts")
    before = hosts.read_text()
    hosts.write_text("".join(line for line in before.splitlines(True) if gate.NAME not in line.split()[1:]))
    internet = Internet(ws).start()
    try:
        gate.check_resolves_here(ws, internet)
        gate.start_origin(ws, internet)
        ws.sh(f"mkdir -p {PROJECT}")
        metered, plain = [], []
        for _run in range(runs):
            plain.append(rates(ws, None))
            metered.append(rates(ws, BUDGET))
    finally:
        ws.sh(f"ip netns pids {internet.netns} | xargs -r kill", user="root")
        internet.stop()
        hosts.write_text(before)
    rows = []
    for kind, size in (("download", DOWNLOAD_BYTES), ("upload", UPLOAD_BYTES)):
        with_quota, without = ([one[kind] / 1e6 for one in sessions] for sessions in (metered, plain))
        value, floor = round(median(with_quota), 1), round(median(without), 1)
        rows.append(row("upload_budget", f"{size // 1000000} MB {kind} through the gate from a sandbox, with its "
                        "upload quota", value, "MB/s", floor, "same session without the quota", TARGET,
                        value >= 0.95 * floor, runs, with_quota, without))
    return rows


if __name__ == "__main__":
    run_alone(measure, 3)
