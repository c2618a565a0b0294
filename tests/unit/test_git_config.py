# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's git configuration read as git reads it (the environment, ~user/ paths,
includes), what a command's words name in the project, the one rule both modes use
(_project_guard.git_reads), and a differential test against git itself: every entry
git reads, the guard reads too."""

import os
import pwd
import subprocess

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _git_config, _project_guard, _project_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _project_review

from builders import write

ROOT = "/home/dev/src/app"
HOME = "/home/dev"
GITDIR = ["HEAD", "config", "hooks", "objects", "refs"]
ME = pwd.getpwuid(os.getuid())


def layout(configs, global_configs=(), command_line=()):
    return {"root": ROOT, "home": HOME, "links": [], "gitfiles": {},
            "gitdirs": {".git": {"entries": GITDIR, "commondir": None}}, "configs": dict(configs),
            "global_configs": list(global_configs), "command_line": list(command_line), "config_refusals": []}


def kinds(files=(), directories=()):
    table = dict((os.path.join(ROOT, p), "file") for p in files)
    table.update((os.path.join(ROOT, p), "dir") for p in directories)
    return table.get


def reads(configs, files=(), directories=(), **extra):
    return _project_guard.git_reads(layout(configs, **extra), kinds(files, directories))


# -- paths as git's interpolate_path() reads them

def test_home_user_homes_and_the_prefix_are_expanded_as_git_does():
    homes = {"dev": "/home/dev", "ops": "/srv/ops"}.get
    assert _git_config.expand_path("~/x", HOME, homes) == HOME + "/x"
    assert _git_config.expand_path("~", HOME, homes) == HOME
    assert _git_config.expand_path("~ops/x/y", HOME, homes) == "/srv/ops/x/y"
    assert _git_config.expand_path("~ops", HOME, homes) == "/srv/ops"
    assert _git_config.expand_path("~nobody-here/x", HOME, homes) is None
    assert _git_config.expand_path("%(prefix)/share/x", HOME) == "/usr/share/x"
    assert _git_config.expand_path("rel/x", HOME) == "rel/x"
    # The password database by default.
    assert _git_config.expand_path("~%s/x" % ME.pw_name, HOME) == os.path.join(ME.pw_dir, "x")


def test_include_targets_follow_git_and_the_command_line_has_no_relative_include():
    assert _git_config.include_target("~%s/inc" % ME.pw_name, ROOT + "/.git/config", HOME) == ME.pw_dir + "/inc"
    assert _git_config.include_target("inc", ROOT + "/.git/config", HOME) == ROOT + "/.git/inc"
    assert _git_config.include_target("inc", _git_config.COMMAND_LINE, HOME) is None
    assert _git_config.include_target("/abs/inc", _git_config.COMMAND_LINE, HOME) == "/abs/inc"


# -- what the environment adds

def test_numbered_entries_and_git_c_parameters_are_read_in_gits_order():
    environ = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "Core.HooksPath", "GIT_CONFIG_VALUE_0": ".githooks",
               "GIT_CONFIG_KEY_1": "diff.My.Sub.TextConv", "GIT_CONFIG_VALUE_1": "sh conv.sh",
               "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "beyond the count",
               "GIT_CONFIG_PARAMETERS": "'core.editor'='vi '\\''x'\\''' 'old.style=a=b' 'flag.only'"}
    assert _git_config.command_line(environ) == [
        ("core.hookspath", ".githooks"), ("diff.My.Sub.textconv", "sh conv.sh"),
        ("core.editor", "vi 'x'"), ("old.style", "a=b"), ("flag.only", None)]
    assert _git_config.command_line({"GIT_CONFIG_COUNT": "x", "GIT_CONFIG_KEY_0": "a.b"}) == []


@pytest.mark.parametrize("environ, files", [
    ({}, ["/etc/gitconfig", HOME + "/.config/git/config", HOME + "/.gitconfig"]),
    ({"XDG_CONFIG_HOME": "/xdg"}, ["/etc/gitconfig", "/xdg/git/config", HOME + "/.gitconfig"]),
    ({"XDG_CONFIG_HOME": ""}, ["/etc/gitconfig", HOME + "/.config/git/config", HOME + "/.gitconfig"]),
    ({"GIT_CONFIG_GLOBAL": "/alt/cfg"}, ["/etc/gitconfig", "/alt/cfg"]),
    ({"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/sys.cfg"}, ["/sys.cfg", "/dev/null"]),
    ({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": "/sys.cfg"}, [HOME + "/.config/git/config",
                                                                     HOME + "/.gitconfig"]),
    ({"GIT_CONFIG_NOSYSTEM": "no"}, ["/etc/gitconfig", HOME + "/.config/git/config", HOME + "/.gitconfig"]),
])
def test_the_files_git_reads_follow_its_environment(environ, files):
    assert _project_layout.global_configs(HOME, environ) == (files, [])


def test_a_relative_configuration_path_in_the_environment_is_refused():
    files, refusals = _project_layout.global_configs(HOME, {"GIT_CONFIG_GLOBAL": "cfg", "XDG_CONFIG_HOME": "x"})
    assert files == ["/etc/gitconfig"]
    assert [r.split(" names ")[0] for r in refusals] == ["GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME"]
    assert "make it absolute" in refusals[0]


# -- what a command's words name

@pytest.mark.parametrize("command, words", [
    ("sh conv.sh", [("sh", "if-file"), ("conv.sh", "named")]),
    ("gcloud.sh", [("gcloud.sh", "if-file")]),
    ("sh -c 'sh conv.sh; ./x'", [("sh", "if-file"), ("conv.sh", "named"), ("./x", "named"),
                                 ("sh conv.sh; ./x", "if-file")]),
    ("git-lfs filter-process", [("git-lfs", "if-file"), ("filter-process", "if-file")]),
    ("tool --file=z.py -x", [("tool", "if-file"), ("z.py", "named")]),
    ('cat "$(cat ${PWD}/y)" `./w`', [("cat", "if-file"), ("./y", "named"), ("./w", "named"),
                                     ("$(cat ./y)", "if-file")]),
    ("$TOOLS/bin/run c'o'nv.sh", [("bin/run", "if-file"), ("conv.sh", "named")]),
    ("sh conv\\.sh x*", [("sh", "if-file"), ("conv.sh", "named"), ("x*", "pattern")]),
    ("[ -t 1 ] && less ..", [("[", "if-file"), ("1", "if-file"), ("]", "if-file"), ("less", "if-file")]),
])
def test_every_word_the_shell_would_see_is_found(command, words):
    assert _project_guard.command_words(command) == words


def test_a_bare_word_naming_a_project_file_is_protected_where_git_runs_it():
    config = {ROOT + "/.git/config": "[diff \"x\"]\n\ttextconv = sh conv.sh\n[filter \"f\"]\n\tclean = run tools\n"}
    paths, refusals = reads(config, files=["conv.sh", "sh"], directories=["tools"])
    assert (paths, refusals) == ({"conv.sh", "sh"}, [])


def test_a_script_or_path_that_does_not_exist_yet_is_refused_and_other_words_are_not():
    config = {ROOT + "/.git/config": "[diff \"x\"]\n\ttextconv = sh conv.sh\n"
                                     "[filter \"lfs\"]\n\tprocess = git-lfs filter-process\n"
                                     "[core]\n\tpager = sh -c \"$PWD/p\"\n"}
    paths, refusals = reads(config)
    assert paths == set()
    assert [r.split(" (in ")[0] for r in refusals] == ["diff.x.textconv", "core.pager"]
    assert "names conv.sh inside the project, which does not exist" in refusals[0]


def test_a_glob_naming_project_files_is_refused():
    paths, refusals = reads({ROOT + "/.git/config": "[core]\n\tfsmonitor = sh hooks/*.sh\n"})
    assert paths == set() and "by a pattern (hooks/*.sh)" in refusals[0]


def test_the_developers_environment_and_user_homes_name_project_files():
    global_config = HOME + "/alt.gitconfig"
    planned = reads({global_config: "[include]\n\tpath = ~%s/x\n[core]\n\thooksPath = .githooks\n" % ME.pw_name,
                     ROOT + "/inc": "[core]\n\tpager = ./pager.sh\n"},
                    files=["pager.sh", "inc"], directories=[".githooks"], global_configs=[global_config],
                    command_line=[("include.path", ROOT + "/inc"), ("include.path", "relative-ignored"),
                                  ("gpg.program", "./sign.sh")])
    assert planned == ({".githooks", "inc", "pager.sh"},
                       ["gpg.program (in command line:) names sign.sh inside the project, which does not exist: "
                        "the agent could create it and the host's git would run it; create it or point gpg.program "
                        "outside the project"])


def test_the_developers_own_file_inside_the_project_is_protected_or_refused():
    inside, missing = ROOT + "/.gitconfig", ROOT + "/.config/git/config"
    paths, refusals = reads({inside: "[core]\n\tpager = less\n"}, files=[".gitconfig"],
                            global_configs=[inside, missing])
    assert paths == {".gitconfig"}
    assert refusals == ["the developer's git configuration %s is inside the project and does not exist: the agent "
                        "could create it and the host's git would read it; create it or point GIT_CONFIG_GLOBAL, "
                        "GIT_CONFIG_SYSTEM or XDG_CONFIG_HOME outside the project" % missing]


# -- review mode flags by the same rule

def repository(project, config):
    """A git directory in PROJECT as git's is_git_directory() sees one, with CONFIG."""
    for name in ("objects", "refs"):
        os.makedirs(os.path.join(project, ".git", name))
    write(project + "/.git/HEAD", "ref: refs/heads/main\n")
    write(project + "/.git/config", config)


def flagged_by_rule(upper, project, home):
    """{path: flags} of the flagged changes, with the developer's HOME and no system file."""
    items = _project_review.changes(upper, project, {"HOME": home, "GIT_CONFIG_NOSYSTEM": "1"})
    return dict((item["path"], item["flags"]) for item in items if item["flags"])


def test_review_flags_what_the_hosts_git_would_read_or_run(tmp_path):
    project, upper, home = str(tmp_path / "app"), str(tmp_path / "upper"), str(tmp_path / "home")
    repository(project, "[include]\n\tpath = ../.gitconfig\n\tpath = ../.gitconfig.local\n")
    write(project + "/.gitconfig", "[core]\n\thooksPath = .githooks\n")
    write(project + "/.githooks/pre-commit", "exit 0\n", 0o755)
    write(project + "/conv.sh", "cat\n")
    write(home + "/.gitconfig", "[diff \"x\"]\n\ttextconv = sh conv.sh\n")
    write(upper + "/.gitconfig", "[core]\n\thooksPath = .githooks\n\tfsmonitor = ./mon\n")
    write(upper + "/.gitconfig.local", "[core]\n\tpager = sh pager.sh\n")
    write(upper + "/pager.sh", "touch /tmp/x\n")
    write(upper + "/mon", "touch /tmp/x\n")
    write(upper + "/.githooks/pre-commit", "touch /tmp/x\n", 0o755)
    write(upper + "/conv.sh", "touch /tmp/x\n")
    write(upper + "/README", "hello\n")
    flagged = flagged_by_rule(upper, project, home)
    assert sorted(flagged) == [".gitconfig", ".gitconfig.local", ".githooks/pre-commit", "conv.sh", "mon",
                               "pager.sh"]
    assert flagged[".githooks/pre-commit"] == ["the host's git reads or runs it: the configuration names .githooks"]
    # Without the developer's global file, its textconv script is an ordinary file.
    assert "conv.sh" not in flagged_by_rule(upper, project, str(tmp_path / "nohome"))


def test_review_reads_a_worktree_configuration_the_agent_added(tmp_path):
    project, upper = str(tmp_path / "app"), str(tmp_path / "upper")
    repository(project, "[extensions]\n\tworktreeConfig = true\n")
    write(upper + "/.git/config.worktree", "[core]\n\thooksPath = .wt\n")
    write(upper + "/.wt/post-checkout", "touch /tmp/x\n")
    flagged = flagged_by_rule(upper, project, str(tmp_path / "nohome"))
    assert flagged[".wt/post-checkout"] == ["the host's git reads or runs it: the configuration names .wt"]


# -- differential: what git reads, the guard reads

def git_entries(cwd, environ):
    """[(origin file or "command line:", key, value)] as git itself lists them."""
    output = subprocess.run(["git", "config", "--list", "--show-origin", "--show-scope", "-z", "--includes"],
                            cwd=cwd, env=environ, check=True, stdout=subprocess.PIPE).stdout.decode()
    fields = output.split("\0")[:-1]
    entries = []
    for index in range(0, len(fields), 3):
        _scope, origin, item = fields[index:index + 3]
        key, newline, value = item.partition("\n")
        origin = origin[len("file:"):] if origin.startswith("file:") else origin
        entries.append((os.path.normpath(os.path.join(cwd, origin)) if origin != "command line:" else origin,
                        key, value if newline else None))
    return entries


def guard_entries(project, environ):
    """The same, as the guard reads it: the host's files and environment, the repository's."""
    home = environ["HOME"]
    read = _project_layout.read(project, home, environ)
    entries, refusals = _project_guard._entries(read, read["global_configs"], read["command_line"])
    own, own_refusals = _project_guard._repository_entries(read, ".git", read["gitdirs"][".git"])
    assert refusals + own_refusals == []
    return [(source, key, value) for key, value, source in entries + own]


@pytest.fixture
def corpus(tmp_path):
    """A developer's home, system file, alternative global file and XDG directory, a
    repository, and include chains through every form git knows, each file naming
    itself in an entry."""
    home, repo = tmp_path / "home", tmp_path / "home" / "src" / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True,
                   env={"HOME": str(home), "PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1"})
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://example.org/x.git"], check=True,
                   env={"HOME": str(home), "PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1"})
    # ~user/ reaches the password database's home of the user running the tests.
    user_dir = os.path.join(ME.pw_dir, ".aisb-test-%d" % os.getpid())
    os.makedirs(user_dir)
    files = {
        str(tmp_path / "system"): "[sys]\n\tname = system\n[include]\n\tpath = sys.inc\n",
        str(tmp_path / "sys.inc"): "[sys]\n\tinc = 1\n",
        str(home / ".gitconfig"): ('[user]\n\tname = dev\n[include]\n\tpath = ~/inc/a.inc\n'
                                   '\tpath = ~%s/%s/user.inc\n[includeIf "gitdir:~/src/"]\n\tpath = inc/gitdir.inc\n'
                                   '[includeIf "gitdir/i:~/SRC/"]\n\tpath = inc/gitdir-i.inc\n'
                                   '[includeIf "onbranch:main"]\n\tpath = inc/branch.inc\n'
                                   '[includeIf "hasconfig:remote.*.url:https://example.org/**"]\n'
                                   '\tpath = inc/remote.inc\n'
                                   % (ME.pw_name, os.path.basename(user_dir))),
        str(home / "inc" / "a.inc"): '[a]\n\tchained = "yes # not a comment"\n[include]\n\tpath = b.inc\n',
        str(home / "inc" / "b.inc"): "[b]\n\tdeep = 1\n\tflag\n[filter \"f\"]\n\tclean = sh conv.sh\n",
        os.path.join(user_dir, "user.inc"): "[tilde]\n\tuser = 1\n",
        str(home / "inc" / "gitdir.inc"): "[cond]\n\tgitdir = 1\n",
        str(home / "inc" / "gitdir-i.inc"): "[cond]\n\tgitdiri = 1\n",
        str(home / "inc" / "branch.inc"): "[cond]\n\tbranch = 1\n",
        str(home / "inc" / "remote.inc"): "[cond]\n\tremote = 1\n",
        str(repo / ".git" / "no.inc"): "[cond]\n\tnever = 1\n",
        str(home / ".config" / "git" / "config"): "[xdg]\n\tdefault = 1\n",
        str(tmp_path / "xdg" / "git" / "config"): "[xdg]\n\tother = 1\n",
        str(tmp_path / "alt"): '[alt]\n\tglobal = 1\n[include]\n\tpath = alt.inc\n',
        str(tmp_path / "alt.inc"): '[core]\n\thooksPath = .githooks\n',
        str(tmp_path / "cmd.inc"): "[cmd]\n\tinc = 1\n",
        str(repo / ".git" / "repo.inc"): '[diff "x"]\n\ttextconv = sh conv.sh\n',
    }
    for path, text in files.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as handle:
            handle.write(text)
    with open(repo / ".git" / "config", "a") as handle:
        handle.write('[include]\n\tpath = repo.inc\n[includeIf "gitdir:/elsewhere/"]\n\tpath = no.inc\n')
    yield {"home": str(home), "repo": str(repo), "tmp": str(tmp_path)}
    for name in os.listdir(user_dir):
        os.unlink(os.path.join(user_dir, name))
    os.rmdir(user_dir)


ENVIRONMENTS = {
    "default": {},
    "system": {"GIT_CONFIG_SYSTEM": "{tmp}/system"},
    "nosystem": {"GIT_CONFIG_SYSTEM": "{tmp}/system", "GIT_CONFIG_NOSYSTEM": "true"},
    "global": {"GIT_CONFIG_GLOBAL": "{tmp}/alt", "GIT_CONFIG_SYSTEM": "{tmp}/system"},
    "xdg": {"XDG_CONFIG_HOME": "{tmp}/xdg"},
    "command-line": {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "Include.Path", "GIT_CONFIG_VALUE_0": "{tmp}/cmd.inc",
                     "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "sh mon.sh",
                     "GIT_CONFIG_PARAMETERS": "'diff.y.textconv'='sh '\\''a b'\\''' 'p.q=r'"},
}


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_entry_git_reads_the_guard_reads(corpus, name):
    environ = {"HOME": corpus["home"], "PATH": os.environ["PATH"]}
    environ.update((key, value.format(tmp=corpus["tmp"])) for key, value in ENVIRONMENTS[name].items())
    environ.setdefault("GIT_CONFIG_SYSTEM", corpus["tmp"] + "/no-system")
    by_git = git_entries(corpus["repo"], environ)
    by_guard = guard_entries(corpus["repo"], environ)
    assert len(by_git) > 5
    assert [entry for entry in by_git if entry not in by_guard] == []
    # The guard reads more (every includeIf branch), never a file git reads that it does not.
    assert set(source for source, _key, _value in by_git) <= set(source for source, _key, _value in by_guard)
    assert (corpus["repo"] + "/.git/no.inc", "cond.never", "1") in by_guard
