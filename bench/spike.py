# SPDX-License-Identifier: GPL-3.0-or-later
"""How long the network spike takes: a full measurement and a cached answer.

usage: python3 bench/spike.py [RUNS]   (as root on the build machine; default 5 runs;
bench/run runs it with the rest)

In a workstation provisioned by this checkout (the probe image built, not timed), times
RUNS full spikes and RUNS cached ones two ways: as a user sees them (`ansible localhost
-m aisb.sandbox.host_capabilities`, Ansible's own start-up included, beside `ansible
localhost -m ping`) and in-process (the module's execute() alone, beside one bare
`podman run --rm` of the base image). Medians. A measurement, not a test: it asserts
nothing.
"""

import json
import time

from measure import median, row, run_alone, timed
from scenario import ANSIBLE_ENV
from spike_host import run_spike
from workstation import BASE_IMAGE

# Times the host_capabilities module's execute() in the workstation's own Python, without
# Ansible around it (commands through _runner.subprocess_execute, as before through subprocess).
# The module's own defaults (its argspec), so the script follows its options.
IN_PROCESS = """
import json, os, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute
from ansible_collections.aisb.sandbox.plugins.modules.host_capabilities import argspec, execute
params = dict((name, spec.get("default")) for name, spec in argspec().items())
params.update(base_image=sys.argv[1], cached=sys.argv[2] == "cached", max_age=86400)
times = []
for _ in range(int(sys.argv[3])):
    start = time.monotonic()
    answer = execute(params, False, Runner(subprocess_execute()), os.environ)
    times.append(time.monotonic() - start)
    assert answer["cached"] is (sys.argv[2] == "cached"), answer["cached"]
print(json.dumps(times))
"""


def timed_ansible(ws, runs, cached):
    times = []
    for _run in range(runs):
        start = time.monotonic()
        answer = run_spike(ws, base_image=BASE_IMAGE, cached=cached)
        times.append(time.monotonic() - start)
        if answer["cached"] is not cached:
            raise SystemExit("expected cached=%s, got %s" % (cached, answer["cached"]))
    return times


def timed_in_process(ws, runs, cached):
    script = "/home/dev/bench_spike.py"
    ws.path(script).write_text(IN_PROCESS)
    done = ws.run(["/opt/ansible/bin/python3", script, BASE_IMAGE, "cached" if cached else "full", str(runs)],
                  env=ANSIBLE_ENV, timeout=1800)
    return json.loads(done.stdout)


def measure(ws, runs, full_runs=None):
    """Figure rows for a provisioned workstation WS: RUNS of each, FULL_RUNS (default
    RUNS) of the full spikes, several seconds each."""
    full_runs = full_runs or runs
    run_spike(ws, base_image=BASE_IMAGE)  # the probe image exists, the facts are fresh: not timed
    samples = {
        "ping": timed(ws, ["ansible", "localhost", "-m", "ansible.builtin.ping"], runs),
        "bare": timed(ws, ["podman", "run", "--rm", "--network=none", BASE_IMAGE, "true"], runs),
        "full": timed_in_process(ws, full_runs, False), "cached": timed_in_process(ws, runs, True),
        "full_ad_hoc": timed_ansible(ws, full_runs, False), "cached_ad_hoc": timed_ansible(ws, runs, True),
    }
    ping, bare, full, cached, full_ad_hoc, cached_ad_hoc = (median(samples[name]) for name in (
        "ping", "bare", "full", "cached", "full_ad_hoc", "cached_ad_hoc"))
    ad_hoc_floor = "`ansible localhost -m ping`"
    return [
        row("spike", "full spike, in-process", round(full, 2), "s", round(bare, 3),
            "one bare `podman run --rm` of the base image", "<= 8 s", full <= 8, full_runs,
            samples["full"], samples["bare"]),
        row("spike", "cached answer, in-process", round(cached, 4), "s", None, None, "<= 0.3 s", cached <= 0.3, runs,
            samples["cached"]),
        row("spike", "full spike, `ansible -m aisb.sandbox.host_capabilities`", round(full_ad_hoc, 2), "s",
            round(ping, 2), ad_hoc_floor, "<= 8 s", full_ad_hoc <= 8, full_runs,
            samples["full_ad_hoc"], samples["ping"]),
        row("spike", "cached answer, `ansible -m aisb.sandbox.host_capabilities`", round(cached_ad_hoc, 2), "s",
            round(ping, 2), ad_hoc_floor, None, None, runs, samples["cached_ad_hoc"], samples["ping"]),
    ]


if __name__ == "__main__":
    run_alone(measure, 5)
