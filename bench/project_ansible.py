# SPDX-License-Identifier: GPL-3.0-or-later
"""What direct mode's Ansible findings at any depth cost (issue 28): the walk that
looks for Ansible's files (_project_ansible.snapshot, run once at the session's start
and once at its end) on a 10,000-file project, beside the top-only lookup it replaced
(a fingerprint of each watched name at the project's top); and what review mode's end
adds to find the project's repositories (_project_git.project_repositories).

usage: python3 bench/project_ansible.py [RUNS]   (default 5 runs; bench/run runs it too)

In a temporary directory: FILES files in 40 directories of 25 subdirectories each,
with a roles/ and a library/ two levels down. Medians of RUNS, each after one untimed
run (a warm page cache, as a project in use is). A measurement, not a test.
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from ansible_collections.aisb.sandbox.plugins.module_utils.project import (  # noqa: E402
    _project_ansible, _project_git)
from measure import row  # noqa: E402  pylint: disable=wrong-import-position

FILES = 10000


def make_tree(root):
    for top in range(40):
        for sub in range(25):
            directory = os.path.join(root, "d%02d" % top, "s%02d" % sub)
            os.makedirs(directory)
            for number in range(FILES // 1000):
                with open(os.path.join(directory, "f%d.py" % number), "w") as handle:
                    handle.write("print(%d)\n" % number)
    for name in ("roles/web/tasks", "library"):
        os.makedirs(os.path.join(root, "d00", "s00", name))


def top_only(root):
    return dict((name, _project_ansible.fingerprint(os.path.join(root, name))) for name in _project_ansible.WATCHED)


def samples(function, root, runs):
    """RUNS timings of FUNCTION(ROOT), after one untimed run."""
    function(root)
    times = []
    for _run in range(runs):
        begin = time.perf_counter()
        function(root)
        times.append(time.perf_counter() - begin)
    return times


def measure(runs):
    """Figure rows, measured in this process on a project made for them."""
    with tempfile.TemporaryDirectory() as root:
        make_tree(root)
        found = _project_ansible.snapshot(root)["found"]
        assert sorted(found) == ["d00/s00/library", "d00/s00/roles"], found
        deep, top = samples(_project_ansible.snapshot, root, runs), samples(top_only, root, runs)
        repositories = samples(lambda path: _project_git.project_repositories(path, {}), root, runs)
    return [
        row("project_ansible", "direct mode's Ansible findings at any depth (run at the session's start and end), "
            "%d-file project" % FILES, round(statistics.median(deep), 4), "s", round(statistics.median(top), 4),
            "the top-only lookup it replaced", runs=runs, samples=deep, floor_samples=top),
        row("project_ansible", "review mode's end: the project's repositories, %d-file project" % FILES,
            round(statistics.median(repositories), 4), "s", runs=runs, samples=repositories),
    ]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for figure in measure(runs):
        print("%(what)s: median %(value)s s (floor %(floor)s s), %(runs)d runs" % figure)


if __name__ == "__main__":
    main()
