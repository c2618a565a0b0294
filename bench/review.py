# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode's costs: its session start beside direct mode's, and applying 1,000
changed files.

usage: python3 bench/review.py [RUNS]   (as root on the build machine; default 7 runs;
bench/run runs it with the rest)

In a provisioned workstation, with facts and images warm, on a synthetic project of
FILES files (log-normal sizes, median 2 KiB, seeded):
  - session start to the harness's first instruction, in-process, direct and review
    mode alternately, RUNS each (review mode adds the overlay mount and the project's
    manifest, which a thread takes beside the sandbox's start);
  - one review session whose agent changes 1,000 files, then project_review's apply
    in-process (check the manifest, read the changes, apply them, take the manifest
    again).
A measurement, not a test: it asserts nothing.
"""

import json

from measure import IN_PROCESS_SESSION, median, row, run_alone
from session import FIRST_INSTRUCTION, session_params

PROJECT = "/home/dev/bench-review"
FILES = 10000
CHANGED = 1000

MAKE_PROJECT = r"""
import os, random, sys
root, files = sys.argv[1], int(sys.argv[2])
rng = random.Random(14)
os.makedirs(root)
dirs = [root]
for i in range(files):
    if i % 10 == 0:
        parent = rng.choice(dirs[-50:] if rng.random() < 0.7 else dirs)
        dirs.append(os.path.join(parent, "d%05d" % i))
        os.mkdir(dirs[-1])
    with open(os.path.join(dirs[-1], "f%05d.txt" % i), "wb") as handle:
        handle.write(os.urandom(min(int(rng.lognormvariate(7.6, 1.4)), 4 << 20)))
"""

# Runs in the workstation's Python: direct and review sessions alternately to the
# harness's first instruction, then one review session that changes CHANGED files and
# project_review's apply over it.
IN_PROCESS = r"""
import json, os, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.project_review import execute
params, runs, changed = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
""" + IN_PROCESS_SESSION + r"""
starts = {"direct": [], "review": []}
for _ in range(runs):
    for mode in ("direct", "review"):
        start, record = session(project_mode=mode)
        starts[mode].append(float(open(record["transcript"]).read().split()[-1]) - start)
_start, record = session(project_mode="review", command=["sh", "-c", "find . -type f | sort | head -%d | while read "
                                                                     "f; do echo changed >> \"$f\"; done" % changed])
review = record["review"]
started = time.time()
result = execute({"session": record["session_id"], "action": "apply", "apply_flagged": [], "apply_state": [],
                  "executable": "podman"},
                 dict(os.environ), Runner(None), False)
applied_s = time.time() - started
print(json.dumps({"starts": starts, "changes": len(review["changes"]), "applied": len(result["applied"]),
                  "apply_s": applied_s}))
"""


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    ws.run(["python3", "-c", MAKE_PROJECT, PROJECT, str(FILES)])
    params = dict(session_params(ws, PROJECT), command=FIRST_INSTRUCTION)
    script = "/home/dev/bench_review.py"
    ws.path(script).write_text(IN_PROCESS)
    found = json.loads(ws.run(["/opt/ansible/bin/python3", script, json.dumps(params), str(runs), str(CHANGED)],
                              timeout=1800).stdout)
    direct, review = median(found["starts"]["direct"]), median(found["starts"]["review"])
    return [
        row("review", "review mode's session start over direct mode's, %d-file project" % FILES,
            round(review - direct, 3), "s", round(direct, 3), "direct mode's start", "<= 0.2 s",
            review - direct <= 0.2, runs, found["starts"]["review"], found["starts"]["direct"]),
        row("review", "project_review apply of %d changed files (%d applied), in-process" % (
            found["changes"], found["applied"]), round(found["apply_s"], 2), "s", target="< 2 s",
            met=found["apply_s"] < 2, runs=1, samples=[found["apply_s"]]),
    ]


if __name__ == "__main__":
    run_alone(measure, 7)
