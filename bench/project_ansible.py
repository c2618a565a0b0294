# SPDX-License-Identifier: GPL-3.0-or-later
"""What direct mode's Ansible findings at any depth cost (issue 28): the walk that
looks for Ansible's files (_project_ansible.snapshot, run once at the session's start
and once at its end) on a 10,000-file project, beside the top-only lookup it replaced
(a fingerprint of each watched name at the project's top); and what review mode's end
adds to find the project's repositories (_project_git.project_repositories).

usage: PYTHONPATH=DIR python3 bench/project_ansible.py [RUNS]   (DIR holds
ansible_collections/aisb/sandbox, this collection; default 5 runs)

In a temporary directory: FILES files in 40 directories of 25 subdirectories each,
with a roles/ and a library/ two levels down. Medians of RUNS, each after one untimed
run (a warm page cache, as a project in use is). A measurement, not a test.
"""

import os
import statistics
import sys
import tempfile
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_ansible, _project_git

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


def timed(function, root, runs):
    function(root)
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        function(root)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as root:
        make_tree(root)
        found = _project_ansible.snapshot(root)["found"]
        assert sorted(found) == ["d00/s00/library", "d00/s00/roles"], found
        for label, function in (("snapshot at any depth", _project_ansible.snapshot), ("top only", top_only),
                                ("review's repositories", lambda path: _project_git.project_repositories(path, {}))):
            median, low, high = timed(function, root, runs)
            print("%s: median %.4f s (%.4f to %.4f s), %d runs, %d files" % (label, median, low, high, runs, FILES))


if __name__ == "__main__":
    main()
