# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's git costs (issue 28): the session's start on a 10,000-commit repository
beside the same tree without a git directory, and bringing 100 of the agent's commits
back (the bundle container, verify and fetch on the host).

usage: python3 bench/project_git.py [RUNS]   (as root on the build machine; default 5
runs; bench/run runs it with the rest)

In a provisioned workstation, with facts and images warm:
  - session start to the harness's first instruction, in-process, alternately on a
    repository of COMMITS commits (its .git overlaid, walked before and after, its
    commits bundled at the end: none new) and on the same tree without .git, RUNS each;
  - RUNS sessions whose agent makes NEW commits on two branches, timing
    _project_commits.bring_back in-process.
A measurement, not a test: it asserts nothing.
"""

import json

from measure import IN_PROCESS_SESSION, median, row, run_alone
from session import FIRST_INSTRUCTION, session_params

REPO = "/home/dev/bench-git"
PLAIN = "/home/dev/bench-git-plain"
COMMITS = 10000
NEW = 100

# COMMITS commits over 500 files, through fast-import (seconds, not minutes).
MAKE_REPO = r"""
set -e
rm -rf {repo} {plain} && git init -q -b main {repo} && cd {repo}
python3 - <<'PY' | git -c user.name=dev -c user.email=dev@bench fast-import --quiet
import sys
out = sys.stdout
for i in range({commits}):
    data, msg = "line %d\n" % i, "commit %d\n" % i
    out.write("commit refs/heads/main\ncommitter dev <dev@bench> %d +0000\n" % (1700000000 + i))
    out.write("data %d\n%s" % (len(msg), msg))
    out.write("M 644 inline f%03d.txt\ndata %d\n%s\n" % (i % 500, len(data), data))
PY
git reset -q --hard main && git gc -q
cp -r {repo} {plain} && rm -rf {plain}/.git
""".format(repo=REPO, plain=PLAIN, commits=COMMITS)

AGENT = ("export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=a@s GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=a@s; "
         "for i in $(seq %d); do echo $i >> a.txt; git add a.txt; git commit -q -m a$i; done; "
         "git checkout -q -b b; for i in $(seq %d); do echo $i >> b.txt; git add b.txt; git commit -q -m b$i; done"
         % (NEW // 2, NEW - NEW // 2))

IN_PROCESS = r"""
import json, os, sys, time
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_commits
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session
params, runs, repo, plain, agent = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
brought = []
untimed = _project_commits.bring_back

def timed(*args, **kwargs):
    start = time.time()
    found = untimed(*args, **kwargs)
    brought.append((time.time() - start, sum(len(entry["refs"]) for entry in found)))
    return found

_project_commits.bring_back = timed
""" + IN_PROCESS_SESSION + r"""
starts = {"git": [], "plain": []}
for _ in range(runs):
    for name, project in (("git", repo), ("plain", plain)):
        start, record = session(project=project)
        starts[name].append(float(open(record["transcript"]).read().split()[-1]) - start)
del brought[:]
for _ in range(runs):
    session(project=repo, command=["bash", "-c", agent])
print(json.dumps({"starts": starts, "brought": brought}))
"""


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    # The developer's git: a workstation is provisioned without it.
    ws.sh("apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
          "--no-install-recommends git >/dev/null", user="root", timeout=900)
    ws.run(["bash", "-c", MAKE_REPO], timeout=900)
    params = dict(session_params(ws, REPO), command=FIRST_INSTRUCTION)
    script = "/home/dev/bench_project_git.py"
    ws.path(script).write_text(IN_PROCESS)
    found = json.loads(ws.run(["/opt/ansible/bin/python3", script, json.dumps(params), str(runs), REPO, PLAIN, AGENT],
                              timeout=3600).stdout)
    with_git, plain = median(found["starts"]["git"]), median(found["starts"]["plain"])
    seconds = [s for s, _refs in found["brought"]]
    return [
        row("project_git", "session start on a %d-commit repository over the same tree without .git" % COMMITS,
            round(with_git - plain, 3), "s", round(plain, 3), "start without .git", "<= 0.2 s",
            with_git - plain <= 0.2, runs, found["starts"]["git"], found["starts"]["plain"]),
        row("project_git", "bringing back %d new commits on two branches (bundle container, verify, fetch)" % NEW,
            round(median(seconds), 3), "s", target="< 1 s", met=median(seconds) < 1, runs=len(seconds),
            samples=seconds),
    ]


if __name__ == "__main__":
    run_alone(measure, 5)
