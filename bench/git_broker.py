# SPDX-License-Identifier: GPL-3.0-or-later
"""What a push pays for going through the session's git broker instead of straight to the
git server: a branch whose one new commit carries a 50 MiB file of random bytes (a pack
of about 50 MiB, incompressible), pushed as a create by real git.

usage: python3 bench/git_broker.py [RUNS]   (on the build machine)

All on this machine's loopback: git's own http-backend behind an HTTPS server
(tests/git_server.py, a certificate from a CA made here) that wants a token; the broker
(plugins/module_utils/credentials/_git_broker.py, as the session runs it, a thread
server in this process) adding that token; git pushing to each in turn, the direct one
with the token in http.extraHeader and its pack sent with a length, not chunked (the
test server reads no chunks; the broker sends the upstream a length too). Each round pushes a new branch to each (in turn,
alternating which goes first), timed from git's start to its exit. Medians over RUNS
rounds (default 3) and the broker's figure over the direct one. The broker reads the
whole body, parses the commands and, for a create, never the pack: an update's
fast-forward proof inflates the pack too, measured as a second figure (a fast-forward
of the same size on the branch the first round created). A measurement, not a test: it
asserts nothing.
"""

import base64
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import git_server  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_broker import (  # noqa: E402
    GitBroker)
from measure import row  # noqa: E402  pylint: disable=wrong-import-position

TOKEN = "ghp_bench-token"
SESSION = "bench"
SIZE = 50 * 1024 * 1024
ENV = dict((name, value) for name, value in os.environ.items() if "proxy" not in name.lower())
ENV.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="a",
           GIT_COMMITTER_EMAIL="a@example.org", GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")


def git(cwd, *args, env=None):
    subprocess.run(["git"] + list(args), cwd=str(cwd), env=dict(ENV, HOME=str(cwd), **(env or {})), check=True,
                   stdout=subprocess.DEVNULL)


def commit_big(work, name):
    (work / name).write_bytes(os.urandom(SIZE))
    git(work, "add", name)
    git(work, "commit", "-qm", name)


def timed_push(work, url, ref, env=None, extra=()):
    start = time.monotonic()
    git(work, *extra, "push", "-q", url, "HEAD:refs/heads/" + ref, env=env)
    return time.monotonic() - start


def measure(runs=3):
    with tempfile.TemporaryDirectory() as temp:
        temp = Path(temp)
        root = temp / "root"
        root.mkdir()
        git(root, "init", "-q", "--bare", "-b", "main", "repo.git")
        server, where = git_server.serve(temp, "localhost", root, "x-access-token", TOKEN)
        remote = {"url": "https://localhost:%d/repo.git" % where["port"], "host": "localhost",
                  "port": where["port"], "path": "/repo.git", "branches": "aisb/{session}/*",
                  "username": "x-access-token", "token": TOKEN}
        broker = GitBroker([remote], SESSION, context=ssl.create_default_context(cafile=where["ca"]),
                           refused=lambda _address: None).start()
        work = temp / "work"
        git(temp, "init", "-q", "-b", "main", str(work))
        git(work, "commit", "-q", "--allow-empty", "-m", "root")
        auth = "Authorization: Basic " + base64.b64encode(("x-access-token:" + TOKEN).encode()).decode()
        # The test server reads a Content-Length body only: the direct push sends its pack
        # whole (http.postBuffer), as the broker does upstream.
        direct = ["-c", "http.extraHeader=" + auth, "-c", "http.postBuffer=%d" % (2 * SIZE)]
        brokered_url = "http://127.0.0.1:%d/r0" % broker.port
        creates = {"direct": [], "broker": []}
        forwards = {"direct": [], "broker": []}
        try:
            for index in range(runs):
                order = ["direct", "broker"] if index % 2 == 0 else ["broker", "direct"]
                for step, times in (("create", creates), ("forward", forwards)):
                    for way in order:
                        # Commits of each way's own: a commit the upstream already has
                        # (pushed the other way) would travel in no pack.
                        branch = "%s-%d" % (way, index)
                        git(work, "checkout", "-q", *((branch,) if step == "forward" else ("-b", branch, "main")))
                        commit_big(work, "%s-%s-%d" % (step, way, index))
                        ref = "aisb/%s/%s-%d" % (SESSION, way, index)
                        times[way].append(timed_push(
                            work, brokered_url if way == "broker" else remote["url"], ref,
                            env={"GIT_SSL_CAINFO": where["ca"]}, extra=() if way == "broker" else direct))
        finally:
            broker.close()
            server.shutdown()
    figures = {}
    for name, times in (("create", creates), ("fast-forward", forwards)):
        direct_median, broker_median = statistics.median(times["direct"]), statistics.median(times["broker"])
        figures[name] = {"direct_s": round(direct_median, 2), "broker_s": round(broker_median, 2),
                         "ratio": round(broker_median / direct_median, 2)}
    return figures


def rows(runs):
    """measure()'s figures as bench/run's rows: the broker's push beside the direct one."""
    return [row("git_broker", "a 50 MiB push (%s) through the session's git broker" % name, figure["broker_s"], "s",
                figure["direct_s"], "the same push straight to the git server", "<= 1.2x floor",
                figure["ratio"] <= 1.2, runs)
            for name, figure in sorted(measure(runs).items())]


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
