# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's side of bringing the agent's refs back, against real git repositories:
the list of refs is the agent's data, so each ref arrives only at an object the host
has after the bundle's objects are fetched, of the type its kind allows."""

import os
import subprocess

from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute
from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_commits

IDENTITY = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd, *args):
    env = dict(os.environ, **IDENTITY)
    return subprocess.run(["git"] + list(args), cwd=str(cwd), env=env, check=True, universal_newlines=True,
                          stdout=subprocess.PIPE).stdout.strip()


def test_listed_refs_arrive_only_at_objects_the_host_has_of_the_right_type(tmp_path):
    host, agent = tmp_path / "host", tmp_path / "agent"
    git(tmp_path, "init", "-q", "-b", "main", str(host))
    for n in range(3):
        (host / "f").write_text("%d\n" % n)
        git(host, "add", "f")
        git(host, "commit", "-q", "-m", "c%d" % n)
    git(tmp_path, "clone", "-q", str(host), str(agent))
    old = git(agent, "rev-parse", "HEAD~2")
    (agent / "f").write_text("new\n")
    git(agent, "commit", "-q", "-am", "new")
    new = git(agent, "rev-parse", "HEAD")
    blob = git(agent, "rev-parse", "HEAD:f")
    git(agent, "bundle", "create", "-q", str(tmp_path / "b.bundle"), "refs/heads/main", "^" + old)
    missing = "1" * 40
    listed = ("%s refs/heads/main\n%s refs/heads/old\n%s refs/tags/blob\n%s refs/tags/gone\n%s refs/heads/x:y\n"
              % (new, old, blob, missing, new))
    before = git(host, "for-each-ref", "refs/heads", "refs/tags"), (host / ".git" / "config").read_bytes()
    run = Runner(subprocess_execute())
    refs, error = _project_commits.fetch(run, "git", str(host), ".git", str(tmp_path / "b.bundle"), listed, "S")
    assert refs == {"refs/aisb/S/heads/main": new, "refs/aisb/S/heads/old": old}
    assert error == ("not brought back: refs/heads/x:y (not a plain branch or tag name), refs/tags/blob (%s is a "
                     "blob, not a commit or tag), refs/tags/gone (object %s is neither in the bundle nor in this "
                     "repository)" % (blob, missing))
    # The host's own refs and configuration are as they were; only refs/aisb/S/ is new.
    assert git(host, "for-each-ref", "refs/heads", "refs/tags") == before[0]
    assert (host / ".git" / "config").read_bytes() == before[1]
    # No bundle (nothing new): a ref at a commit the host has still arrives.
    refs, error = _project_commits.fetch(run, "git", str(host), ".git", None, "%s HEAD\n" % old, "T")
    assert refs == {"refs/aisb/T/HEAD": old} and error is None
