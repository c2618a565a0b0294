# SPDX-License-Identifier: GPL-3.0-or-later
"""What every benchmark shares: the provisioned workstation they run in, timing, and
the figure rows bench/run turns into a table.

A figure row: {"section", "what", "value", "unit", "floor", "floor_what", "ratio",
"target", "met", "runs", "samples", "floor_samples"}; "floor" is the same kind of figure
without the thing being measured, taken in the same run, "ratio" is value / floor, and
the samples are the single runs the value and the floor are the medians of (seconds).
"""

import json
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "workstation"))

from fleet import install_and_provision  # noqa: E402  pylint: disable=wrong-import-position
from scenario import ANSIBLE_ENV, operator_vars  # noqa: E402  pylint: disable=wrong-import-position
from workstation import Workstation  # noqa: E402  pylint: disable=wrong-import-position

# Every playbook the benchmarks run uses the harness provision.yml built (fleet.install_and_provision).
HARNESS = ("-e", "aisb_harness=shell")
EMPTY_PLAY = "/home/dev/empty.yml"


@contextmanager
def provisioned_workstation():
    """A fresh Debian 13 workstation provisioned by this checkout (harness `shell`)."""
    with Workstation("trixie") as ws:
        install_and_provision(ws)
        yield ws


# For the scripts that run sessions in the workstation's Python (they define params):
# session(**more) runs one with PARAMS updated by MORE, returning its start and record.
IN_PROCESS_SESSION = r"""
def session(**more):
    start = time.time()
    result = _session.run_session(dict(params, **more), dict(os.environ), False)
    assert not result.get("failed"), result
    with open(result["record"]) as record:
        return start, json.load(record)
"""


def run_alone(measure, default_runs):
    """A benchmark script run by itself: its rows, from a workstation of its own, as JSON;
    the number of runs is its first argument."""
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else default_runs
    with provisioned_workstation() as ws:
        rows = measure(ws, runs)
    print(json.dumps(rows, indent=2))


def playbook_argv(ws, name, *extra):
    """ansible-playbook for one of the collection's playbooks, as the benchmarks run it."""
    return ["ansible-playbook", f"aisb.sandbox.{name}", "-e", operator_vars(ws), *HARNESS, *extra]


def timed(ws, argv, runs, env=None):
    """Wall seconds of RUNS runs of ARGV inside WS (each must succeed)."""
    times = []
    for _run in range(runs):
        start = time.monotonic()
        ws.run(argv, env=dict(ANSIBLE_ENV, **(env or {})), timeout=1800)
        times.append(time.monotonic() - start)
    return times


def empty_play(ws, runs, gather_facts=False):
    """Ansible's own floor: ansible-playbook over a play with no tasks."""
    play = "- hosts: localhost\n  gather_facts: %s\n  tasks: []\n" % ("true" if gather_facts else "false")
    ws.path(EMPTY_PLAY).write_text(play)
    return timed(ws, ["ansible-playbook", EMPTY_PLAY], runs)


def median(values):
    return statistics.median(values)


def percentile(values, fraction):
    """The nearest-rank percentile of VALUES (FRACTION 0.5 for p50, 0.99 for p99)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(fraction * len(ordered))) - 1))]


def watch_cpu(watch):
    """The CPU a session's enforcement watch and canaries used, from its record's
    enforcement_watch: their helpers (wait4's rusage) and threads (thread_time), as a share
    of one core over the time it watched."""
    canaries = watch["canaries"]
    cpu = sum(watch["cpu_s"][part] for part in ("helper_s", "monitor_s", "canaries_s", "thread_s")) + canaries["cpu_s"]
    watched = watch["last_good_reading_at"] - watch["first_reading_at"] + watch["interval_s"]
    return {"percent": 100 * cpu / watched, "readings": watch["readings"], "rounds": canaries["rounds"], "cpu_s": cpu,
            "watched_s": watched}


def row(section, what, value, unit, floor=None, floor_what=None, target=None, met=None, runs=None,
        samples=None, floor_samples=None):
    """One figure beside its floor; VALUE and FLOOR in UNIT."""
    return {"section": section, "what": what, "value": value, "unit": unit, "floor": floor,
            "floor_what": floor_what, "ratio": round(value / floor, 2) if floor else None,
            "target": target, "met": met, "runs": runs,
            "samples": [round(sample, 4) for sample in samples or []],
            "floor_samples": [round(sample, 4) for sample in floor_samples or []]}
