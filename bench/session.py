# SPDX-License-Identifier: GPL-3.0-or-later
"""Warm session start beside its floor, and run_agent.yml beside Ansible's own.

usage: python3 bench/session.py [RUNS]   (as root on the build machine; default 7 runs;
bench/run runs it with the rest)

In a provisioned workstation, with facts and images warm, times RUNS of each:
  - floor: a bare `podman run --rm` of the sandbox image with the same network mode,
    until its command's first instruction;
  - session: the session machinery (plan, gate start and readiness, sandbox start,
    entrypoint enforcement) until the harness's first instruction, in-process;
  both on each gate path (map-host-loopback, and tcp-forward through the session's
  gate_path option: pasta -T, as on a host with an older passt);
  - the session on the mapped gate path without the sandbox's seccomp profile (podman's
    default instead), in the same loop: the profile's cost on the warm start;
  - run_agent.yml: the whole playbook wall time with a command that exits at once,
    beside ansible-playbook running an empty play;
  - aisb run: the developer's command with the same command, beside run_agent.yml in
    the same run (what aisb adds: its own start, the quiet callback, the transcript's
    follower); and a headless line's way to aisb's stdout: from the harness writing it
    (its `date`) to aisb's stdout giving it to a reader;
  - the enforcement watch's CPU over one session of WATCH_SECONDS: its helpers (wait4's
    rusage: nft in interactive mode and every reading it answered, nft monitor, the
    canaries' python3 and every round of probes) and the session's watching and
    canaries' threads (thread_time), as the record keeps them, as a share of one core
    over the time it watched.
A measurement, not a test: it asserts nothing.
"""

import json

from measure import (ANSIBLE_ENV, HARNESS, empty_play, median, operator_vars, playbook_argv, row, run_alone, timed,
                     watch_cpu)
from sessions import record_of

PROJECT = "/home/dev/bench-project"
FIRST_INSTRUCTION = ["sh", "-c", "date +%s.%N"]
WATCH_SECONDS = 60

# Runs in the workstation's Python: the session from its admission to the harness's first
# instruction, and the bare podman floor, alternately, RUNS times each.
IN_PROCESS = r"""
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.gate import _gate_loopback
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session, _session_admission, _session_plan
params = json.loads(sys.argv[1])
runs = int(sys.argv[2])
found = dict((path, {"floor": [], "session": []}) for path in _session_plan.GATE_PATHS)
found["without-seccomp-profile"] = {"session": []}
with_profile = _session_admission.load_profile


def first_instruction(path):
    start = time.time()
    result = _session.run_session(dict(params, gate_path=path), dict(os.environ), False)
    assert not result.get("failed"), result
    return float(open(result["transcript"]).read().split()[-1]) - start


for _ in range(runs):
    # The bench's own switch, never a session's: admission finds no profile and no problem.
    _session_admission.load_profile = lambda: (None, None)
    found["without-seccomp-profile"]["session"].append(first_instruction("map-host-loopback"))
    _session_admission.load_profile = with_profile
    for path in _session_plan.GATE_PATHS:
        network = _session_plan.network_plan("allow", path, _gate_loopback.free_loopback_port())[0]
        start = time.time()
        out = subprocess.run(["podman", "run", "--rm", "--network=" + network, "--entrypoint", "date",
                              params["image"], "+%s.%N"], capture_output=True, text=True, check=True)
        found[path]["floor"].append(float(out.stdout) - start)
        found[path]["session"].append(first_instruction(path))
print(json.dumps(found))
"""


def session_params(ws, project):
    """The session module's parameters for PROJECT with the workstation's facts, images
    and newest policy, as run_agent.yml would pass them."""
    facts = json.loads(ws.path("/home/dev/.local/state/aisb/host_capabilities.json").read_text())
    tags = ws.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"]).stdout.split()
    sandbox = next(t for t in tags if t.startswith("localhost/aisb-sandbox:"))
    gate = next(t for t in tags if t.startswith("localhost/aisb-gate:"))
    policies = sorted(ws.path("/home/dev/.local/state/aisb/policies").iterdir(), key=lambda p: p.stat().st_mtime)
    return {"project": project, "image": sandbox, "gate_image": gate,
            "policy_dir": "/" + str(policies[-1].relative_to(ws.root)),
            "network": "allow", "command": FIRST_INSTRUCTION, "environment": {}, "host_facts": facts,
            "max_facts_age": 604800, "limits": {}, "require_limits": False, "allow_unenforced": False, "answer": True,
            "executable": "podman"}


# Runs in the workstation: ARGV (aisb run, headless) RUNS times; each time, the seconds
# from the harness writing its first line (its own clock reading) to aisb's stdout
# giving that line to this reader.
HEADLESS_LINE = r"""
import json, subprocess, sys, time
argv, runs = json.loads(sys.argv[1]), int(sys.argv[2])
found = []
for _ in range(runs):
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = process.stdout.readline()
    arrived = time.time()
    process.stdout.read()
    assert process.wait() == 0 and line, (process.returncode, line)
    found.append(arrived - float(line))
print(json.dumps(found))
"""
# What aisb may add to run_agent.yml warm, and a headless line's way to its stdout.
AISB_OVER_PLAYBOOK_S = 0.3
HEADLESS_LINE_S = 0.2


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    ws.sh(f"mkdir -p {PROJECT}")
    params = session_params(ws, PROJECT)
    script = "/home/dev/bench_session.py"
    ws.path(script).write_text(IN_PROCESS)
    pairs = json.loads(ws.run(["/opt/ansible/bin/python3", script, json.dumps(params), str(runs)],
                              timeout=1800).stdout)
    empty_runs = empty_play(ws, runs)
    playbook = playbook_argv(ws, "run_agent", "-e", f"project={PROJECT}", "-e", json.dumps({"command": ["true"]}))
    aisb = ["aisb", "run", PROJECT, "-e", operator_vars(ws), "-H", HARNESS[1].split("=", 1)[1]]
    # Each warmed once (Python's bytecode caches written), then alternately, so that both
    # see the same load on the machine.
    timed(ws, playbook, 1)
    timed(ws, aisb + ["--", "true"], 1)
    agent_runs, aisb_runs = [], []
    for _run in range(runs):
        agent_runs += timed(ws, playbook, 1)
        aisb_runs += timed(ws, aisb + ["--", "true"], 1)
    line_script = "/home/dev/bench_headless_line.py"
    ws.path(line_script).write_text(HEADLESS_LINE)
    line_runs = json.loads(ws.run(["python3", line_script, json.dumps(aisb + ["--", "sh", "-c", "date +%s.%N; sleep 1"]),
                                   str(runs)], timeout=1800).stdout)
    watch = watcher_cpu(ws)
    empty, agent, by_aisb, line = median(empty_runs), median(agent_runs), median(aisb_runs), median(line_runs)
    unprofiled = pairs.pop("without-seccomp-profile")["session"]
    profiled = pairs["map-host-loopback"]["session"]
    rows = [row("session", "warm session start with the sandbox's seccomp profile, beside the same without it "
                "(gate path map-host-loopback)", round(median(profiled), 3), "s", round(median(unprofiled), 3),
                "the session under podman's default profile, same loop", "<= 1.05x floor",
                median(profiled) <= 1.05 * median(unprofiled), runs, profiled, unprofiled)]
    for path, pair in sorted(pairs.items()):
        floor, session = median(pair["floor"]), median(pair["session"])
        rows.append(row("session", "warm session start, to the harness's first instruction (gate path %s)" % path,
                        round(session, 3), "s", round(floor, 3), "bare `podman run --rm`, same image and network "
                        "mode", "<= 2.5x floor", session <= 2.5 * floor, runs, pair["session"], pair["floor"]))
    return rows + [
        row("session", "`run_agent.yml` warm, command `true`", round(agent, 2), "s", round(empty, 2),
            "`ansible-playbook`, empty play", "<= 2x floor", agent <= 2 * empty, runs, agent_runs, empty_runs),
        row("session", "`aisb run -- true` warm (%+.2f s over `run_agent.yml`)" % (by_aisb - agent), round(by_aisb, 2),
            "s", round(agent, 2), "`run_agent.yml` warm, command `true`, same run",
            "<= floor + %.1f s" % AISB_OVER_PLAYBOOK_S, by_aisb <= agent + AISB_OVER_PLAYBOOK_S, runs, aisb_runs,
            agent_runs),
        row("session", "headless: the harness's first line on `aisb run`'s stdout, after the harness wrote it",
            round(line, 3), "s", target="<= %.1f s" % HEADLESS_LINE_S, met=line <= HEADLESS_LINE_S, runs=runs,
            samples=line_runs),
        row("session", "enforcement watch and canaries: CPU of their helpers, %d readings, %d canary rounds and "
            "their threads over a %d s session" % (watch["readings"], watch["rounds"], WATCH_SECONDS),
            round(watch["percent"], 3), "% of one core",
            target="<= 1 %", met=watch["percent"] <= 1, runs=1, samples=[watch["percent"]]),
    ]


def watcher_cpu(ws):
    """The watch's CPU share over one session of WATCH_SECONDS, from its record."""
    result = ws.run(playbook_argv(ws, "run_agent", "-e", f"project={PROJECT}",
                                  "-e", json.dumps({"command": ["sleep", str(WATCH_SECONDS)]})),
                    env=ANSIBLE_ENV, timeout=600)
    return watch_cpu(record_of(ws, result.stdout)["enforcement_watch"])


if __name__ == "__main__":
    run_alone(measure, 7)
