# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a warm run_agent.yml's time goes (issue 30: profile first).

usage: python3 bench/profile_session.py [RUNS]   (as root on the build machine; default 5)

In a provisioned workstation, with facts and images warm:
  - run_agent.yml with a command that exits at once, RUNS times, each task's wall time
    taken by bench/callback_plugins/aisb_task_times.py, and the process's start before the
    callback loaded (the whole wall time less the callback's);
  - the floors in the same run: an empty play, and a play of as many ansible.builtin.ping
    tasks as run_agent.yml ran module tasks (what a trip to the host costs by itself);
  - a Python profile (cProfile) of the session module's own work, in-process, once.
Prints a report (medians); a measurement, not a test: it asserts nothing.
"""

import json
import statistics
from pathlib import Path

from measure import ANSIBLE_ENV, empty_play, playbook_argv, provisioned_workstation, timed
from session import PROJECT, session_params

CALLBACKS = "/home/dev/bench-callbacks"
TIMES = "/home/dev/bench-task-times.json"
PING_PLAY = "/home/dev/bench-ping.yml"
TIMED_ENV = dict(ANSIBLE_ENV, ANSIBLE_CALLBACK_PLUGINS=CALLBACKS, ANSIBLE_CALLBACKS_ENABLED="aisb_task_times",
                 AISB_TASK_TIMES=TIMES)

# Actions that never reach the host: the rest are trips (a module run there).
CONTROLLER_ONLY = ("assert", "debug", "set_fact", "include_role", "include_tasks", "import_role", "meta",
                   "validate_argument_spec")

# The session module's work in the workstation's Python, under cProfile: the 25 functions
# with the most cumulative time.
PROFILED = r"""
import cProfile, io, json, os, pstats, sys
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session
params = json.loads(sys.argv[1])
_session.run_session(params, dict(os.environ), False)
profile = cProfile.Profile()
profile.enable()
result = _session.run_session(params, dict(os.environ), False)
profile.disable()
assert not result.get("failed"), result
out = io.StringIO()
pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(25)
print(out.getvalue())
"""


def task_times(ws, argv, runs):
    """RUNS runs of ARGV with the task-times callback: (wall seconds, {(number, task name,
    action, skipped): [seconds]}, [seconds before the callback loaded])."""
    walls, tasks, starts = [], {}, []
    for _run in range(runs):
        wall = timed(ws, argv, 1, env=TIMED_ENV)[0]
        found = json.loads(ws.path(TIMES).read_text())
        walls.append(wall)
        starts.append(wall - found["loaded_to_end_s"])
        for number, (name, action, seconds, skipped) in enumerate(found["tasks"]):
            tasks.setdefault((number, name, action, skipped), []).append(seconds)
    return walls, tasks, starts


def report(runs):
    with provisioned_workstation() as ws:
        ws.sh(f"mkdir -p {PROJECT} {CALLBACKS}")
        ws.path(CALLBACKS + "/aisb_task_times.py").write_text(
            (Path(__file__).parent / "callback_plugins" / "aisb_task_times.py").read_text())
        agent = playbook_argv(ws, "run_agent", "-e", f"project={PROJECT}", "-e", json.dumps({"command": ["true"]}))
        # Warmed once: the first run after provisioning includes the roles and remembers
        # what they gave (session_images); every later one is the warm path measured.
        timed(ws, agent, 1)
        walls, tasks, starts = task_times(ws, agent, runs)
        trips = sum(1 for (_number, _name, action, skipped) in tasks
                    if not skipped and action.split(".")[-1] not in CONTROLLER_ONLY)
        ws.path(PING_PLAY).write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                                      + "    - ansible.builtin.ping:\n" * trips)
        ping_walls, _ping_tasks, _ping_starts = task_times(ws, ["ansible-playbook", PING_PLAY], runs)
        empty = empty_play(ws, runs)
        ws.path("/home/dev/bench_profile.py").write_text(PROFILED)
        profile = ws.run(["/opt/ansible/bin/python3", "/home/dev/bench_profile.py",
                          json.dumps(session_params(ws, PROJECT))], timeout=600).stdout
    median = statistics.median
    lines = ["run_agent.yml warm, command true: %.2f s (median of %d); empty play %.2f s; %d ping tasks %.2f s"
             % (median(walls), runs, median(empty), trips, median(ping_walls)),
             "before the first callback (process start, collection and playbook loading): %.2f s" % median(starts),
             "per task (median s):"]
    lines += ["  %6.3f  %s (%s%s)" % (median(seconds), name, action, ", skipped" if skipped else "")
              for (_number, name, action, skipped), seconds in sorted(tasks.items())]
    return "\n".join(lines) + "\n\nsession module, in-process (cProfile, cumulative):\n" + profile


if __name__ == "__main__":
    import sys
    print(report(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
