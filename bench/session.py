# SPDX-License-Identifier: GPL-3.0-or-later
"""Warm session start beside its floor, and run_agent.yml beside Ansible's own.

usage: python3 bench/session.py [RUNS]   (as root on the build machine; default 7 runs)

Provisions a fresh Debian 13 workstation with this checkout (not timed), then, with
facts and images warm, times RUNS of each, medians printed together with ratios:
  - floor: a bare `podman run --rm` of the sandbox image with the same network mode,
    until its command's first instruction;
  - session: the session machinery (plan, gate start and readiness, sandbox start,
    entrypoint enforcement) until the harness's first instruction, in-process;
  - run_agent.yml: the whole playbook wall time with a command that exits at once,
    beside ansible-playbook running an empty play.
A measurement, not a test: it asserts nothing.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "workstation"))

from scenario import ANSIBLE_ENV, operator_vars, playbook  # noqa: E402  pylint: disable=wrong-import-position
from workstation import Workstation, install_checkout  # noqa: E402  pylint: disable=wrong-import-position

PROJECT = "/home/dev/bench-project"
FIRST_INSTRUCTION = ["sh", "-c", "date +%s.%N"]

# Runs in the workstation's Python: the session from prepare() to the harness's first
# instruction, and the bare podman floor, alternately, RUNS times each.
IN_PROCESS = r"""
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils import _session_run
params = json.loads(sys.argv[1])
runs = int(sys.argv[2])
facts = params["host_facts"]
floor, session = [], []
for _ in range(runs):
    start = time.time()
    out = subprocess.run(["podman", "run", "--rm", "--network=pasta:--map-host-loopback,100.64.0.1,--no-map-gw",
                          "--entrypoint", "date", params["image"], "+%s.%N"], capture_output=True, text=True, check=True)
    floor.append(float(out.stdout) - start)
    start = time.time()
    inputs, facts_, problems, _warnings = _session_run.prepare(params, dict(os.environ))
    assert not problems, problems
    inputs["executable"] = "podman"
    record = _session_run.execute(inputs, facts_, dict(os.environ))
    first = float(open(record["transcript"]).read().split()[-1])
    session.append(first - start)
print(json.dumps({"floor": floor, "session": session}))
"""


def median(values):
    return statistics.median(values)


def timed(ws, argv, runs):
    times = []
    for _run in range(runs):
        start = time.monotonic()
        ws.run(argv, env=ANSIBLE_ENV)
        times.append(time.monotonic() - start)
    return times


def main(runs):
    with Workstation("trixie") as ws:
        install_checkout(ws)
        done = playbook(ws, "provision", timeout=3600)
        if done.returncode != 0:
            raise SystemExit(done.stdout[-3000:])
        ws.sh(f"mkdir -p {PROJECT}")
        facts = json.loads(ws.path("/home/dev/.local/state/aisb/host_capabilities.json").read_text())
        tags = ws.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"]).stdout.split()
        sandbox = next(t for t in tags if t.startswith("localhost/aisb-sandbox:"))
        gate = next(t for t in tags if t.startswith("localhost/aisb-gate:"))
        policies = sorted(ws.path("/home/dev/.local/state/aisb/policies").iterdir())
        params = {"project": PROJECT, "image": sandbox, "gate_image": gate,
                  "policy_dir": "/" + str(policies[-1].relative_to(ws.root)), "allow": [], "connect_ports": [443],
                  "network": "allow", "command": FIRST_INSTRUCTION, "environment": {}, "host_facts": facts,
                  "max_facts_age": 604800, "limits": {}, "require_limits": False, "allow_unenforced": False,
                  "executable": "podman"}
        script = "/home/dev/bench_session.py"
        ws.path(script).write_text(IN_PROCESS)
        pairs = json.loads(ws.run(["/opt/ansible/bin/python3", script, json.dumps(params), str(runs)],
                                  timeout=1800).stdout)
        ws.path("/home/dev/empty.yml").write_text("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
        empty = timed(ws, ["ansible-playbook", "/home/dev/empty.yml"], runs)
        agent = timed(ws, ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws),
                           "-e", f"project={PROJECT}", "-e", json.dumps({"command": ["true"]})], runs)
    floor, session = median(pairs["floor"]), median(pairs["session"])
    figures = {
        "runs": runs,
        "bare_podman_run_s": round(floor, 3),
        "session_start_s": round(session, 3),
        "session_over_floor": round(session / floor, 2),
        "empty_play_s": round(median(empty), 3),
        "run_agent_s": round(median(agent), 3),
        "run_agent_over_empty_play": round(median(agent) / median(empty), 2),
    }
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
