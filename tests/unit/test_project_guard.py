# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's git guard: git's config syntax, the layout read from disk, the
read-only mounts and refusals planned from it, and the findings after a session."""

import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils import (
    _git_config, _podman, _project_git, _project_guard, _project_layout)

ROOT = "/home/dev/src/app"
HOME = "/home/dev"
GITDIR = ["HEAD", "config", "description", "hooks", "index", "info", "logs", "objects", "refs"]


def layout(gitdirs=None, gitfiles=None, links=(), configs=None, global_configs=()):
    return {"root": ROOT, "home": HOME, "links": list(links), "gitfiles": dict(gitfiles or {}),
            "gitdirs": dict((path, {"entries": entries, "commondir": commondir})
                            for path, (entries, commondir) in (gitdirs if gitdirs is not None else {".git": (GITDIR, None)}).items()),
            "configs": dict(configs or {}), "global_configs": list(global_configs)}


def kinds(*present, links=()):
    """KIND for a tree holding PRESENT (relative to ROOT) and the symbolic links LINKS."""
    table = dict((os.path.join(ROOT, p), "file") for p in present)
    table.update((os.path.join(ROOT, p), "link") for p in links)
    return table.get


# -- git's configuration syntax

def test_sections_subsections_and_names_are_keyed_as_git_compares_them():
    text = ('[Core]\n\tFSMonitor = x\n[remote "Origin"]\n\turl = u\n[Section.Sub]\nName\n'
            '[includeIf "gitdir:~/src/"] path = inc\n')
    assert _git_config.parse(text) == [("core.fsmonitor", "x"), ("remote.Origin.url", "u"),
                                       ("section.sub.name", None), ("includeif.gitdir:~/src/.path", "inc")]


def test_values_are_unquoted_unescaped_and_trimmed_as_git_does():
    text = ('[a]\n'
            'one = "touch /x; false"  # comment\n'
            'two =   spaced  out   ; comment\n'
            'three = "with # hash" and\\ttab\n'
            'four = continued \\\n line\n'
            'five = "quote \\" inside"\n'
            'six =\n')
    assert dict(_git_config.parse(text)) == {
        "a.one": "touch /x; false", "a.two": "spaced  out", "a.three": "with # hash and\ttab",
        "a.four": "continued  line", "a.five": 'quote " inside', "a.six": ""}


def test_a_byte_order_mark_and_windows_line_ends_are_read_as_git_does():
    assert _git_config.parse('\ufeff[core]\r\n\tpager = less\r\n') == [("core.pager", "less")]


def test_a_subsection_keeps_its_case_and_escapes():
    assert _git_config.parse('[filter "E\\"vil"]\n clean = c\n') == [('filter.E"vil.clean', "c")]


@pytest.mark.parametrize("text", ["[core\nx = 1\n", "x = 1\n", "[a]\n1x = 2\n", '[a]\nx = "open\n',
                                  "[a]\nx = bad\\q\n", "[a]\nx y\n"])
def test_what_git_would_refuse_is_refused(text):
    with pytest.raises(_git_config.ConfigSyntaxError):
        _git_config.parse(text)


def test_include_targets_are_relative_to_the_including_file_or_the_home():
    assert _git_config.include_target("../shared.inc", ROOT + "/.git/config", HOME) == ROOT + "/shared.inc"
    assert _git_config.include_target("~/x.inc", ROOT + "/.git/config", HOME) == HOME + "/x.inc"
    assert _git_config.is_include("include.path") and _git_config.is_include("includeif.onbranch:main.path")
    assert not _git_config.is_include("core.path")


# -- what is protected

def test_a_plain_repository_gets_its_config_hooks_and_info_read_only_and_its_git_directory_pinned():
    planned = _project_guard.plan(layout(), kinds())
    assert planned == {"read_only": [".git/config", ".git/hooks", ".git/info"], "pinned": [".git"], "refusals": []}


def test_no_git_directory_means_nothing_to_mount():
    assert _project_guard.plan(layout(gitdirs={}), kinds()) == {"read_only": [], "pinned": [], "refusals": []}


def test_submodules_get_the_same_protection_and_their_pointer_is_read_only():
    planned = _project_guard.plan(layout(
        gitdirs={".git": (GITDIR + ["modules"], None), ".git/modules/libs/sub": (GITDIR, None)},
        gitfiles={"libs/sub/.git": "gitdir: ../../.git/modules/libs/sub\n"}), kinds())
    assert planned["read_only"] == [".git/config", ".git/hooks", ".git/info", ".git/modules/libs/sub/config",
                                    ".git/modules/libs/sub/hooks", ".git/modules/libs/sub/info", "libs/sub/.git"]
    assert planned["pinned"] == [".git", ".git/modules", ".git/modules/libs", ".git/modules/libs/sub", "libs",
                                 "libs/sub"]
    assert planned["refusals"] == []


def test_a_linked_worktrees_common_directory_pointer_is_read_only():
    planned = _project_guard.plan(layout(gitdirs={
        ".git": (GITDIR + ["worktrees"], None),
        ".git/worktrees/feature": (["HEAD", "commondir", "gitdir", "index", "config.worktree"], "../..\n")}),
        kinds())
    assert ".git/worktrees/feature/commondir" in planned["read_only"]
    assert ".git/worktrees/feature/config.worktree" in planned["read_only"]
    assert planned["refusals"] == []


def test_a_project_that_is_a_linked_worktree_keeps_its_pointer_read_only():
    planned = _project_guard.plan(layout(gitdirs={}, gitfiles={".git": "gitdir: /home/dev/src/main/.git/worktrees/app"}),
                                  kinds())
    assert planned == {"read_only": [".git"], "pinned": [], "refusals": []}


def test_a_commondir_in_a_repositorys_own_git_directory_is_refused():
    planned = _project_guard.plan(layout(gitdirs={".git": (GITDIR + ["commondir"], "../.evil\n")}), kinds())
    assert planned["refusals"] == [
        ".git/commondir exists: git would take this repository's configuration from '../.evil', and git writes a "
        "commondir only for a linked worktree (under .git/worktrees/); remove it"]


def test_a_git_link_and_a_pointer_into_the_project_at_no_git_directory_are_refused():
    planned = _project_guard.plan(layout(gitdirs={}, links=[".git"], gitfiles={"sub/.git": "gitdir: ../.sub-git"}),
                                  kinds())
    assert [r.split(" ")[0] for r in planned["refusals"]] == [".git", "sub/.git"]
    assert "not a git directory" in planned["refusals"][1]


def test_worktree_configuration_git_would_read_must_exist_and_is_then_read_only():
    config = {ROOT + "/.git/config": "[extensions]\n\tworktreeConfig = true\n"}
    missing = _project_guard.plan(layout(configs=config), kinds())
    assert "config.worktree does not exist" in missing["refusals"][0]
    present = _project_guard.plan(layout(gitdirs={".git": (GITDIR + ["config.worktree"], None)}, configs=dict(
        config, **{ROOT + "/.git/config.worktree": "[core]\n\thooksPath = .githooks\n"})), kinds(".githooks"))
    assert ".git/config.worktree" in present["read_only"] and ".githooks" in present["read_only"]
    assert present["refusals"] == []


def test_husky_hooks_and_the_scripts_they_run_are_read_only():
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": "[core]\n\thooksPath = .husky/_\n"}),
                                  kinds(".husky/_", ".husky"))
    assert planned["read_only"] == [".git/config", ".git/hooks", ".git/info", ".husky"]


def test_includes_inside_the_project_are_read_only_and_followed():
    configs = {ROOT + "/.git/config": "[include]\n\tpath = ../.gitconfig.project\n",
               ROOT + "/.gitconfig.project": '[includeIf "onbranch:main"]\n\tpath = tools/more.inc\n',
               ROOT + "/tools/more.inc": "[core]\n\tpager = tools/pager.sh -R\n"}
    planned = _project_guard.plan(layout(configs=configs),
                                  kinds(".gitconfig.project", "tools/more.inc", "tools/pager.sh"))
    assert planned["read_only"] == [".git/config", ".git/hooks", ".git/info", ".gitconfig.project",
                                    "tools/more.inc", "tools/pager.sh"]
    assert planned["pinned"] == [".git", "tools"]


@pytest.mark.parametrize("key, value, path", [
    ("core.fsmonitor", ".githooks/fsmonitor", ".githooks/fsmonitor"),
    ("core.sshCommand", "ssh -F ./ssh/config", "ssh/config"),
    ("filter.x.clean", "sh tools/clean.sh %f", "tools/clean.sh"),
    ("credential.helper", "!./cred", "cred"),
    ("gpg.program", "/home/dev/src/app/bin/gpg", "bin/gpg"),
    ("diff.x.textconv", "conv --table=tables/t", "tables/t"),
])
def test_a_command_naming_a_file_in_the_project_makes_that_file_read_only(key, value, path):
    section, name = key.rsplit(".", 1)
    head, sub = (section.split(".", 1) + [""])[:2]
    text = "[%s%s]\n\t%s = %s\n" % (head, ' "%s"' % sub if sub else "", name, value)
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": text}), kinds(path))
    assert path in planned["read_only"] and planned["refusals"] == []


def test_a_command_naming_a_missing_file_in_the_project_is_refused_and_others_are_left_alone():
    text = ("[core]\n\tfsmonitor = tools/fsmonitor\n\tpager = less -R\n\teditor = /usr/bin/vim\n"
            '[alias]\n\tbuild = "!./build.sh"\n')
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": text}), kinds())
    assert planned["read_only"] == [".git/config", ".git/hooks", ".git/info"]
    assert planned["refusals"] == [
        "core.fsmonitor (in %s/.git/config) names tools/fsmonitor inside the project, which does not exist: the "
        "agent could create it and the host's git would run it; create it or point core.fsmonitor outside the "
        "project" % ROOT]


def test_the_developers_global_configuration_counts_for_every_repository_in_the_project():
    global_config = HOME + "/.gitconfig"
    planned = _project_guard.plan(layout(global_configs=[global_config],
                                         configs={global_config: "[core]\n\thooksPath = .githooks\n"}),
                                  kinds(".githooks"))
    assert ".githooks" in planned["read_only"]
    elsewhere = _project_guard.plan(layout(global_configs=[global_config],
                                           configs={global_config: "[core]\n\thooksPath = ~/.hooks\n"}), kinds())
    assert elsewhere["refusals"] == [] and elsewhere["read_only"] == [".git/config", ".git/hooks", ".git/info"]


def test_a_configuration_that_cannot_be_parsed_is_refused():
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": "[core\n"}), kinds())
    assert "cannot be read as a git configuration" in planned["refusals"][0]


def test_symbolic_links_and_unmountable_names_are_refused():
    planned = _project_guard.plan(layout(gitdirs={".git": (GITDIR, None), "a,b/.git": (GITDIR, None)}),
                                  kinds(links=[".git/hooks"]))
    assert any(r.startswith(".git/hooks is a symbolic link") for r in planned["refusals"])
    assert any(r.startswith("'a,b/.git/config' holds") for r in planned["refusals"])


def test_mounts_are_podman_volumes_over_the_same_paths_parents_first():
    assert _podman.project_mounts(ROOT, [".git/config", ".git/hooks"], [".git"], "z") == [
        "--volume", ROOT + "/.git:/project/.git:rw,z",
        "--volume", ROOT + "/.git/config:/project/.git/config:ro,z",
        "--volume", ROOT + "/.git/hooks:/project/.git/hooks:ro,z"]
    argv = _podman.sandbox_run("podman", "s", "img", ROOT, "", "/p", "pasta", {}, {}, [], False, 0, ["true"],
                               project_mounts=["--volume", "a:/project/a:ro"])
    assert argv[argv.index(ROOT + ":/project") + 1:][:2] == ["--volume", "a:/project/a:ro"]


# -- after the session

def snapshot(**gitdirs):
    return _project_guard.snapshot(layout(gitdirs=gitdirs))


def test_git_directories_and_entries_the_agent_made_are_found_and_state_is_not():
    before = snapshot(**{".git": (GITDIR, None)})
    after = _project_guard.snapshot(layout(
        gitdirs={".git": (GITDIR + ["ORIG_HEAD", "index.lock", "commondir", "rebase-merge"], None),
                 "vendor/lib/.git": (GITDIR, None)},
        gitfiles={"x/.git": "gitdir: ../y"}, links=["z/.git"]))
    assert [f["path"] for f in _project_guard.findings(before, after)] == [
        ".git/commondir", ".git/rebase-merge", "vendor/lib/.git", "x/.git", "z/.git"]
    assert _project_guard.findings(before, before) == []


# -- the layout, read from disk

def test_the_layout_is_read_from_disk_without_git(tmp_path):
    root = tmp_path / "app"
    for directory in [".git/objects", ".git/refs", ".git/hooks", ".git/modules/sub/objects",
                      ".git/modules/sub/refs", "sub", "node_modules/dep/.git/objects", "node_modules/dep/.git/refs",
                      "bare.git/objects", "bare.git/refs"]:
        (root / directory).mkdir(parents=True)
    for path, text in [(".git/HEAD", "ref: refs/heads/main\n"), (".git/config", "[include]\n\tpath = ../inc\n"),
                       ("inc", "[core]\n\tpager = cat\n"), (".git/modules/sub/HEAD", "x"),
                       ("sub/.git", "gitdir: ../.git/modules/sub\n"), ("node_modules/dep/.git/HEAD", "x"),
                       ("bare.git/HEAD", "x")]:
        (root / path).write_text(text)
    (root / "linked").mkdir()
    (root / "linked" / ".git").symlink_to("/elsewhere")
    read = _project_layout.read(str(root), str(tmp_path), {})
    assert sorted(read["gitdirs"]) == [".git", ".git/modules/sub", "bare.git", "node_modules/dep/.git"]
    assert read["gitdirs"][".git"]["entries"] == ["HEAD", "config", "hooks", "modules", "objects", "refs"]
    assert read["gitfiles"] == {"sub/.git": "gitdir: ../.git/modules/sub\n"} and read["links"] == ["linked/.git"]
    assert read["configs"][str(root / "inc")] == "[core]\n\tpager = cat\n"
    assert _project_layout.kind(str(root / "linked" / ".git")) == "link"
    assert _project_layout.kind(str(root / "missing")) is None


def test_the_session_gets_mounts_before_and_a_finding_naming_the_full_path_after(tmp_path):
    root = tmp_path / "app"
    for directory in [".git/objects", ".git/refs", ".git/hooks"]:
        (root / directory).mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    protection, problems = _project_git.protect(str(root), {"HOME": str(tmp_path)})
    assert problems == [] and protection["mounts"] == [
        "--volume", "%s/.git:/project/.git:rw" % root, "--volume", "%s/.git/hooks:/project/.git/hooks:ro" % root]
    (root / ".git" / "commondir").write_text("../.evil\n")
    record = {"project": str(root), "project_git": _project_git.report(protection, {})}
    assert [f["path"] for f in record["project_git"]["findings"]] == [".git/commondir"]
    assert _project_git.problem(record).startswith(
        "the agent created what the host's git would take commands from; look at each before running git in or "
        "below it: %s/.git/commondir (new in a git directory" % root)
    refused = _project_git.protect(str(root), {"HOME": str(tmp_path)})
    assert refused[0] is None and refused[1][0].startswith("project %s is refused: .git/commondir exists" % root)
