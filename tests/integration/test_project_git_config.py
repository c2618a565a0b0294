# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's git configuration read as git reads it: what the developer's global file
(through ~user/ includes, or GIT_CONFIG_GLOBAL) and the repository's own configuration
make git run from the project is out of the agent's reach in direct mode, and flagged
in review mode.

Each case: a repository on the workstation whose configuration names a project file,
a session whose agent rewrites that file to leave a marker, then the developer's git on
the host. A control writes the same files on the host without a sandbox and shows the
marker (the case can fail).
"""

import pytest

import test_project_git
from sessions import record_of, run_agent
from test_project_git import AGENT_IDENTITY, PWNED, SRC, case_markers, marker, new_repo, transcript
from test_review_mode import review

# The developer's workstation with git, shared with test_project_git.
git_host = test_project_git.git_host

# The developer's own alternative global file (GIT_CONFIG_GLOBAL), outside every project.
ALT_GLOBAL = "/home/dev/gitconfig-alt"
HOST_GIT = ["git status", "git diff", "git log -p -2", "script -qec 'git log -p -2' /dev/null",
            "script -qec 'git diff' /dev/null", "git add -A", "git commit -q -m host-commit"]

# Each case: (the developer's setup in the repository, the agent's script, the
# developer's environment for the session and for git afterwards).
CASES = {
    # The developer's ~/.gitconfig includes a project file by git's ~user/ form.
    "tilde-user": ("""
        printf '[diff]\\n\\trenames = true\\n' > shared.inc && git add shared.inc && git commit -q -m inc
        git config --global --add include.path '~dev/src/git-tilde-user/shared.inc'
        git config --global --get-all include.path | grep -qx '~dev/src/git-tilde-user/shared.inc'
        """, f"""
        printf '[core]\\n\\tfsmonitor = "{marker('tilde-user.fsmonitor')}; false"\\n' >> shared.inc
        echo change >> README
        """, {}),
    # The developer's GIT_CONFIG_GLOBAL sets a relative hooks path.
    "config-global": (f"""
        printf '[user]\\n\\tname = dev\\n\\temail = dev@workstation\\n[core]\\n\\thooksPath = .githooks\\n' \\
          > {ALT_GLOBAL}
        mkdir .githooks && printf '#!/bin/sh\\nexit 0\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit
        git add .githooks && git commit -q -m hooks
        """, f"""
        printf '#!/bin/sh\\n{marker('config-global.hook')}\\n' > .githooks/pre-commit
        echo change >> README
        """, {"GIT_CONFIG_GLOBAL": ALT_GLOBAL}),
    # The developer's GIT_CONFIG_GLOBAL is a file of the project (a direnv's $PWD/.gitconfig).
    "global-inside": ("""
        printf '[user]\\n\\tname = dev\\n\\temail = dev@workstation\\n' > dev.gitconfig
        git add dev.gitconfig && git commit -q -m 'developer config'
        """, f"""
        printf '[core]\\n\\tfsmonitor = "{marker('global-inside.fsmonitor')}; false"\\n' >> dev.gitconfig
        echo change >> README
        """, {"GIT_CONFIG_GLOBAL": f"{SRC}/git-global-inside/dev.gitconfig"}),
    # The repository's own textconv runs a project script named without a slash.
    "textconv": ("""
        printf '#!/bin/sh\\ncat "$1"\\n' > conv.sh && echo '*.txt diff=x' > .gitattributes && echo a > a.txt
        git add -A && git commit -q -m conv && echo b >> a.txt && git commit -q -am b
        git config diff.x.textconv 'sh conv.sh'
        """, f"""
        printf '#!/bin/sh\\n{marker('textconv.conv')}\\ncat "$1"\\n' > conv.sh
        echo change >> a.txt
        """, {}),
}
# What the control must see run, at least.
CONTROL_MARKERS = {"tilde-user": ["tilde-user.fsmonitor"], "config-global": ["config-global.hook"],
                   "global-inside": ["global-inside.fsmonitor"], "textconv": ["textconv.conv"]}


def host_uses_git(ws, repo, env):
    """The developer's everyday git in REPO, with a terminal for the pager where needed."""
    script = "; ".join(f"timeout -k 2 20 {c} >/dev/null 2>&1" for c in HOST_GIT) + "; true"
    ws.run(["bash", "-c", script], cwd=repo, check=False, timeout=300,
           env=dict({"PAGER": "cat", "EDITOR": "true"}, **env))


def undo_global_include(ws):
    ws.sh("git config --global --unset-all include.path 'git-tilde-user' || true")


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_the_configuration_names_never_runs_on_the_host(git_host, name):
    setup, attack, env = CASES[name]
    repo = new_repo(git_host, name, setup)
    try:
        result = run_agent(git_host, command=["bash", "-c", "set +e\n" + AGENT_IDENTITY + "\n" + attack +
                                              "\necho attack-done"], project=repo, env=env)
        record = record_of(git_host, result.stdout)
        assert record["status"] == "exited" and "attack-done" in transcript(git_host, record), result.stdout[-3000:]
        host_uses_git(git_host, repo, env)
    finally:
        undo_global_include(git_host)
    assert case_markers(git_host, name) == [], transcript(git_host, record)[-3000:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_control_the_same_files_written_on_the_host_do_run(git_host, name):
    setup, attack, env = CASES[name]
    # The same case in the control's repository (a path naming the case's names the control's).
    setup = setup.replace(f"git-{name}", f"git-control-{name}")
    env = dict((key, value.replace(f"git-{name}", f"git-control-{name}")) for key, value in env.items())
    repo = new_repo(git_host, "control-" + name, setup)
    try:
        git_host.run(["bash", "-c", AGENT_IDENTITY + "\n" + attack.replace(f"{PWNED}/", f"{PWNED}/control-")],
                     cwd=repo, check=False, env=env)
        host_uses_git(git_host, repo, env)
    finally:
        undo_global_include(git_host)
    ran = [m[len("control-"):] for m in case_markers(git_host, "control-" + name)]
    assert set(CONTROL_MARKERS[name]) <= set(ran), " ".join(ran)


# Review mode: the repository includes ../.gitconfig (which sets core.hooksPath) and
# ../.gitconfig.local (not there yet); the agent changes the first, the hook, and
# creates the second.
REVIEW_SETUP = """
printf '[core]\\n\\thooksPath = .githooks\\n' > .gitconfig
mkdir .githooks && printf '#!/bin/sh\\nexit 0\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit
git add -A && git commit -q -m 'project config and hooks'
git config include.path ../.gitconfig && git config --add include.path ../.gitconfig.local
"""
REVIEW_ATTACK = f"""
printf '[core]\\n\\thooksPath = .githooks\\n\\tfsmonitor = "{marker('review.fsmonitor')}; false"\\n' > .gitconfig
printf '#!/bin/sh\\n{marker('review.hook')}\\n' > .githooks/pre-commit
printf '[core]\\n\\tpager = "{marker('review.pager')}; cat"\\n' > .gitconfig.local
echo change >> README
"""
REVIEW_FLAGGED = [".gitconfig", ".gitconfig.local", ".githooks/pre-commit"]


def test_review_mode_holds_what_the_hosts_git_would_read_or_run(git_host):
    repo = new_repo(git_host, "review-config", REVIEW_SETUP)
    result = run_agent(git_host, "-e", "aisb_project_mode=review",
                       command=["bash", "-c", AGENT_IDENTITY + "\n" + REVIEW_ATTACK], project=repo)
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(git_host, result.stdout)
    assert record["review"]["flagged"] == REVIEW_FLAGGED, record["review"]["changes"]
    flags = {item["path"]: item["flags"] for item in record["review"]["changes"]}
    assert all("the host's git reads or runs it" in " ".join(flags[path]) for path in REVIEW_FLAGGED), flags
    applied = review(git_host, record["session_id"], "-e", "action=apply")
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert git_host.path(repo + "/README").read_text() == "hello\nchange\n"
    host_uses_git(git_host, repo, {})
    assert case_markers(git_host, "review") == []


def test_control_review_files_written_on_the_host_do_run(git_host):
    repo = new_repo(git_host, "control-review-config", REVIEW_SETUP)
    git_host.run(["bash", "-c", REVIEW_ATTACK.replace(f"{PWNED}/", f"{PWNED}/control-")], cwd=repo, check=False)
    host_uses_git(git_host, repo, {})
    ran = [m[len("control-"):] for m in case_markers(git_host, "control-review")]
    assert {"review.fsmonitor", "review.hook", "review.pager"} <= set(ran), " ".join(ran)
