# SPDX-License-Identifier: GPL-3.0-or-later
"""How long the network spike takes: a full measurement and a cached answer.

usage: python3 bench/spike.py [RUNS]   (as root on the build machine; default 5 runs)

Starts a fresh Debian 13 workstation provisioned by this checkout, builds the probe
image once (not timed), then times RUNS full spikes and RUNS cached ones two ways:
as a user sees them (`ansible localhost -m aisb.sandbox.host_capabilities`, Ansible's
own start-up included) and in-process (the module_utils call alone). Prints medians.
This is a measurement, not a test: it asserts nothing.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "workstation"))

from spike_host import ENV, provisioned, run_spike  # noqa: E402  pylint: disable=wrong-import-position
from workstation import BASE_IMAGE  # noqa: E402  pylint: disable=wrong-import-position

# Times host_capabilities() in the workstation's own Python, without Ansible around it.
IN_PROCESS = """
import json, os, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils import _spike
from ansible_collections.aisb.sandbox.plugins.modules.host_capabilities import run
params = dict(base_image=sys.argv[1], probe_image=None, cached=sys.argv[2] == "cached", max_age=86400,
              path=None, probe_timeout=60, executable="podman")
times = []
for _ in range(int(sys.argv[3])):
    start = time.monotonic()
    answer = _spike.host_capabilities(params, False, run, os.environ, time.time())
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
                  env=ENV, timeout=1800)
    return json.loads(done.stdout)


def line(label, times):
    return "%-34s median %6.2f s   min %6.2f s   max %6.2f s   (%d runs)" % (
        label, statistics.median(times), min(times), max(times), len(times))


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with provisioned("trixie") as (ws, _done):
        run_spike(ws, base_image=BASE_IMAGE)  # builds the probe image: not part of any figure
        results = [
            ("full spike, ansible ad hoc", timed_ansible(ws, runs, False)),
            ("cached, ansible ad hoc", timed_ansible(ws, runs, True)),
            ("full spike, in-process", timed_in_process(ws, runs, False)),
            ("cached, in-process", timed_in_process(ws, runs, True)),
        ]
        facts = json.loads(ws.path("/home/dev/.local/state/aisb/host_capabilities.json").read_text())
    print("host: %(distro)s, podman %(podman)s, %(runtime)s, kernel %(kernel)s" % facts["fingerprint"])
    for label, times in results:
        print(line(label, times))


if __name__ == "__main__":
    main()
