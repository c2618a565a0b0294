# SPDX-License-Identifier: GPL-3.0-or-later
"""The project's git guard: git's config syntax, the layout read from disk, the
overlays, read-only mounts and refusals planned from it, the findings after a session,
and how the agent's commits come back (the refs listed, the bundle container's command)."""

import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.project import (
    _git_config, _project_commits, _project_git, _project_guard, _project_layout)

ROOT = "/home/dev/src/app"
HOME = "/home/dev"
GITDIR = ["HEAD", "config", "description", "hooks", "index", "info", "logs", "objects", "refs"]


def layout(gitdirs=None, gitfiles=None, links=(), configs=None, global_configs=(), unreadable=(), bound=None,
           head="file"):
    gitdirs = gitdirs if gitdirs is not None else {".git": (GITDIR, None)}
    return {"root": ROOT, "home": HOME, "links": list(links), "gitfiles": dict(gitfiles or {}),
            "gitdirs": dict((path, {"entries": entries, "commondir": commondir, "head": head})
                            for path, (entries, commondir) in gitdirs.items()),
            "configs": dict(configs or {}), "global_configs": list(global_configs),
            "unreadable": list(unreadable), "bound": bound}


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

def test_a_plain_repository_is_overlaid_whole():
    planned = _project_guard.plan(layout(), kinds())
    assert planned == {"gitdirs": [".git"], "read_only": [], "pinned": [], "refusals": []}


def test_no_git_directory_means_nothing_to_mount():
    assert _project_guard.plan(layout(gitdirs={}), kinds()) == {
        "gitdirs": [], "read_only": [], "pinned": [], "refusals": []}


def test_submodules_are_inside_the_overlaid_git_directory_and_their_pointer_is_read_only():
    planned = _project_guard.plan(layout(
        gitdirs={".git": (GITDIR + ["modules"], None), ".git/modules/libs/sub": (GITDIR, None),
                 "vendor/nested/.git": (GITDIR, None)},
        gitfiles={"libs/sub/.git": "gitdir: ../../.git/modules/libs/sub\n"}), kinds())
    assert planned == {"gitdirs": [".git", "vendor/nested/.git"], "read_only": ["libs/sub/.git"],
                       "pinned": ["libs", "libs/sub", "vendor", "vendor/nested"], "refusals": []}


def test_a_linked_worktrees_git_directory_is_inside_the_overlaid_one():
    planned = _project_guard.plan(layout(gitdirs={
        ".git": (GITDIR + ["worktrees"], None),
        ".git/worktrees/feature": (["HEAD", "commondir", "gitdir", "index", "config.worktree"], "../..\n")}),
        kinds())
    assert planned == {"gitdirs": [".git"], "read_only": [], "pinned": [], "refusals": []}


def test_a_project_that_is_a_linked_worktree_keeps_its_pointer_read_only():
    planned = _project_guard.plan(layout(gitdirs={}, gitfiles={".git": "gitdir: /home/dev/src/main/.git/worktrees/app"}),
                                  kinds())
    assert planned == {"gitdirs": [], "read_only": [".git"], "pinned": [], "refusals": []}


def test_a_head_that_is_not_a_file_a_linked_modules_directory_and_a_bare_project_are_refused():
    planned = _project_guard.plan(layout(head="link", gitdirs={"sub/.git": (GITDIR + ["modules"], None)}),
                                  kinds(links=["sub/.git/modules"]))
    assert planned["refusals"] == [
        "sub/.git/HEAD is a symbolic link, not the file git writes: the host's git would still use this repository "
        "but the session would not read it as git does; replace it with a file (echo 'ref: refs/heads/main' > "
        "sub/.git/HEAD)",
        "sub/.git/modules is a symbolic link: the host's git would use the git directories where it points; "
        "replace it with the directory it points at"]
    bare = _project_guard.plan(layout(gitdirs={".": (GITDIR, None)}), kinds())
    assert bare["refusals"][0].startswith("the project is itself a git directory")


def test_what_the_walk_could_not_read_or_reach_is_refused_naming_the_path():
    planned = _project_guard.plan(layout(unreadable=[("vendor/locked", "Permission denied")],
                                         bound=("a/a/a", "more than 256 directories deep")), kinds())
    assert planned["refusals"] == [
        "vendor/locked cannot be read (Permission denied): whether it holds a git repository is not known; make it "
        "readable (chmod u+rx) or remove it",
        "a/a/a: more than 256 directories deep, so the project is not read whole; remove or flatten that directory"]


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


def test_worktree_configuration_is_read_when_git_would_read_it():
    config = {ROOT + "/.git/config": "[extensions]\n\tworktreeConfig = true\n"}
    present = _project_guard.plan(layout(gitdirs={".git": (GITDIR + ["config.worktree"], None)}, configs=dict(
        config, **{ROOT + "/.git/config.worktree": "[core]\n\thooksPath = .githooks\n"})), kinds(".githooks"))
    assert present["read_only"] == [".githooks"]
    assert present["refusals"] == []


def test_husky_hooks_and_the_scripts_they_run_are_read_only():
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": "[core]\n\thooksPath = .husky/_\n"}),
                                  kinds(".husky/_", ".husky"))
    assert planned["read_only"] == [".husky"]


def test_includes_inside_the_project_are_read_only_and_followed():
    configs = {ROOT + "/.git/config": "[include]\n\tpath = ../.gitconfig.project\n",
               ROOT + "/.gitconfig.project": '[includeIf "onbranch:main"]\n\tpath = tools/more.inc\n',
               ROOT + "/tools/more.inc": "[core]\n\tpager = tools/pager.sh -R\n"}
    planned = _project_guard.plan(layout(configs=configs),
                                  kinds(".gitconfig.project", "tools/more.inc", "tools/pager.sh"))
    assert planned["read_only"] == [".gitconfig.project", "tools/more.inc", "tools/pager.sh"]
    assert planned["pinned"] == ["tools"]


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
    assert planned["read_only"] == []
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
    assert elsewhere["refusals"] == [] and elsewhere["read_only"] == []


def test_a_configuration_that_cannot_be_parsed_is_refused():
    planned = _project_guard.plan(layout(configs={ROOT + "/.git/config": "[core\n"}), kinds())
    assert "cannot be read as a git configuration" in planned["refusals"][0]


def test_symbolic_links_and_unmountable_names_are_refused():
    planned = _project_guard.plan(layout(gitdirs={".git": (GITDIR, None), "a,b/.git": (GITDIR, None),
                                                  "c/.git": (GITDIR, None)}), kinds(links=["c"]))
    assert planned["refusals"] == [
        "'a,b/.git' holds ':', ',' or a newline, so podman cannot mount it read-only; rename it",
        "'a,b' holds ':', ',' or a newline, so podman cannot mount it read-only; rename it",
        "c is a symbolic link: a mount would protect where it points, and the agent could point it elsewhere; "
        "replace it with what it points at"]


def test_mounts_are_podman_volumes_over_the_same_paths_parents_first():
    assert _podman.project_mounts(ROOT, ["sub/.git"], ["sub"], [(".git", "/s/git/0/upper", "/s/git/0/work")],
                                  "z") == [
        "--volume", ROOT + "/.git:/project/.git:O,upperdir=/s/git/0/upper,workdir=/s/git/0/work",
        "--volume", ROOT + "/sub:/project/sub:rw,z",
        "--volume", ROOT + "/sub/.git:/project/sub/.git:ro,z"]
    argv = _podman.sandbox_run("podman", _podman.SandboxOptions(
        "s", "img", ROOT, "", "/p", "pasta", {}, {}, [], False, 0, ["true"],
        project_mounts=["--volume", "a:/project/a:ro"]))
    assert argv[argv.index(ROOT + ":/project") + 1:][:2] == ["--volume", "a:/project/a:ro"]


# -- after the session

def snapshot(**gitdirs):
    return _project_guard.snapshot(layout(gitdirs=gitdirs))


def test_repositories_the_agent_made_and_what_could_not_be_read_are_found():
    before = snapshot(**{".git": (GITDIR, None)})
    after = _project_guard.snapshot(layout(
        gitdirs={".git": (GITDIR + ["ORIG_HEAD", "commondir"], None), "vendor/lib/.git": (GITDIR, None)},
        gitfiles={"x/.git": "gitdir: ../y"}, links=["z/.git"], unreadable=[("locked", "Permission denied")]))
    assert [f["path"] for f in _project_guard.findings(before, after)] == [
        "locked", "vendor/lib/.git", "x/.git", "z/.git"]
    assert _project_guard.findings(before, before) == []


# -- the layout, read from disk

def test_the_layout_is_read_from_disk_without_git(tmp_path):
    root = tmp_path / "app"
    for directory in [".git/objects", ".git/refs", ".git/hooks", ".git/modules/sub/objects",
                      ".git/modules/sub/refs", "sub", "node_modules/dep/.git/objects", "node_modules/dep/.git/refs",
                      "bare.git/objects", "bare.git/refs", "linked-head.git/objects", "linked-head.git/refs",
                      "empty/.git"]:
        (root / directory).mkdir(parents=True)
    for path, text in [(".git/HEAD", "ref: refs/heads/main\n"), (".git/config", "[include]\n\tpath = ../inc\n"),
                       ("inc", "[core]\n\tpager = cat\n"), (".git/modules/sub/HEAD", "x"),
                       ("sub/.git", "gitdir: ../.git/modules/sub\n"), ("node_modules/dep/.git/HEAD", "x"),
                       ("bare.git/HEAD", "x")]:
        (root / path).write_text(text)
    (root / "linked-head.git" / "HEAD").symlink_to("refs/heads/main")
    (root / "linked").mkdir()
    (root / "linked" / ".git").symlink_to("/elsewhere")
    read = _project_layout.read(str(root), str(tmp_path), {})
    assert sorted(read["gitdirs"]) == [".git", ".git/modules/sub", "bare.git", "empty/.git", "linked-head.git",
                                       "node_modules/dep/.git"]
    assert read["gitdirs"][".git"]["entries"] == ["HEAD", "config", "hooks", "modules", "objects", "refs"]
    assert [read["gitdirs"][p]["head"] for p in (".git", "empty/.git", "linked-head.git")] == ["file", None, "link"]
    assert read["gitfiles"] == {"sub/.git": "gitdir: ../.git/modules/sub\n"} and read["links"] == ["linked/.git"]
    assert read["configs"][str(root / "inc")] == "[core]\n\tpager = cat\n"
    assert read["unreadable"] == [] and read["bound"] is None
    assert _project_layout.kind(str(root / "linked" / ".git")) == "link"
    assert _project_layout.kind(str(root / "missing")) is None


def test_the_walk_is_iterative_and_bounded_and_says_what_it_could_not_read(tmp_path):
    deep = tmp_path / "app"
    os.makedirs(deep)
    # Deeper than a recursive walk's stack (1,000 frames): made by file descriptor, as
    # the path grows past what one system call takes.
    fd = os.open(str(deep), os.O_RDONLY)
    for _level in range(1100):
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.close(fd)
    read = _project_layout.read(str(deep), str(tmp_path), {})
    while (deep / "d").exists():
        # Taken apart a level at a time: pytest's own clean-up would recurse.
        if (deep / "d" / "d").exists():
            os.rename(str(deep / "d" / "d"), str(deep / "next"))
        os.rmdir(str(deep / "d"))
        if (deep / "next").exists():
            os.rename(str(deep / "next"), str(deep / "d"))
    assert tuple(read["bound"]) == ("/".join(["d"] * (_project_layout.MAX_DEPTH + 1)), "more than 256 directories deep")
    locked = tmp_path / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner").chmod(0o311)
    try:
        read = _project_layout.read(str(locked), str(tmp_path), {})
    finally:
        (locked / "inner").chmod(0o755)
    assert read["unreadable"] == ([("inner", "Permission denied")] if os.geteuid() != 0 else [])


def test_the_session_gets_overlays_before_and_a_finding_naming_the_full_path_after(tmp_path):
    root = tmp_path / "app"
    for directory in [".git/objects", ".git/refs", ".git/hooks"]:
        (root / directory).mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    protection, problems = _project_git.protect(str(root), {"HOME": str(tmp_path)})
    assert problems == [] and protection["repositories"] == [".git"]
    session = tmp_path / "session"
    assert _project_git.mounts(protection, str(session), "z") == [
        "--volume", "%s/.git:/project/.git:O,upperdir=%s/git/0/upper,workdir=%s/git/0/work" % (root, session, session)]
    assert not session.exists()  # the plan's mounts come first, the directories after
    _project_git.make_overlays(protection, str(session))
    assert (session / "git" / "0" / "upper").is_dir()
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    record = {"project": str(root), "project_git": _project_git.report(protection, {})}
    assert [f["path"] for f in record["project_git"]["findings"]] == ["vendor/lib/.git"]
    assert _project_git.warning(record).startswith(
        "the agent made new git repositories (the host's git takes configuration and commands from them); look at "
        "each before running git in or below it, or remove it: %s/vendor/lib/.git (a new git directory" % root)
    (root / ".git" / "commondir").write_text("../.evil\n")
    refused = _project_git.protect(str(root), {"HOME": str(tmp_path)})
    assert refused[0] is None and refused[1][0].startswith("project %s is refused: .git/commondir exists" % root)


# -- the agent's commits, back as data

def test_branches_tags_stash_and_head_come_back_each_under_the_sessions_refs():
    listed = ("%s HEAD\n%s refs/heads/main\n%s refs/heads/feature/x\n%s refs/tags/v1\n%s refs/stash\n"
              "%s refs/heads/a..b\n%s refs/tags/odd$(id)\n%s refs/notes/x\nrefs/heads/no-object\n" % tuple(["1" * 40] * 8))
    wanted, skipped = _project_commits.targets(listed, "S")
    assert [(target, kind) for target, _name, _obj, kind in wanted] == [
        ("refs/aisb/S/HEAD", "HEAD"), ("refs/aisb/S/heads/main", "heads"), ("refs/aisb/S/heads/feature/x", "heads"),
        ("refs/aisb/S/tags/v1", "tags"), ("refs/aisb/S/stash", "stash")]
    assert skipped == ["%s (not a plain branch or tag name)" % name for name in (
        "refs/heads/a..b", "refs/tags/odd$(id)", "refs/notes/x", "refs/heads/no-object")]


def test_a_ref_points_only_at_an_object_the_host_has_of_its_kinds_type():
    assert _project_commits.type_refusal("heads", "commit", "a") is None
    assert _project_commits.type_refusal("tags", "tag", "a") is None
    assert _project_commits.type_refusal("stash", "tag", "a") == "a is a tag, not a commit"
    assert _project_commits.type_refusal("tags", "blob", "a") == "a is a blob, not a commit or tag"
    assert _project_commits.type_refusal("HEAD", None, "a") == "object a is neither in the bundle nor in this repository"


def test_more_refs_than_the_bound_are_listed_not_brought_back():
    listed = "".join("%s refs/tags/t%d\n" % ("1" * 40, n) for n in range(_project_commits.MAX_REFS + 30))
    wanted, skipped = _project_commits.targets(listed, "S")
    assert len(wanted) == _project_commits.MAX_REFS and len(skipped) == 30
    sentence = _project_commits.not_brought_back(skipped)
    assert sentence.startswith("not brought back: refs/tags/t1000 (more than 1000 refs), ")
    assert sentence.endswith(" and 10 more")


def test_the_bundle_container_has_no_network_no_capability_and_the_hosts_git_directories_read_only():
    argv = _podman.commits_bundle("podman", "img", ROOT, ["--volume", "m"], None, "/s/bundles",
                                  [(ROOT + "/.git", "/aisb/host/0")], [".git"])
    assert argv[:9] == ["podman", "run", "--rm", "--network=none", "--cap-drop=ALL", "--security-opt=no-new-privileges",
                        "--userns=keep-id:uid=1000,gid=1000", "--user=1000:1000", "--entrypoint"]
    assert argv[argv.index("img") - 6:argv.index("img")] == [
        "--volume", ROOT + "/.git:/aisb/host/0:ro", "--volume", "/s/bundles:/aisb/out:rw", "--workdir", "/project"]
    assert argv[-2:] == ["aisb-bundle", ".git"]


def test_the_play_line_names_the_refs_that_arrived_and_what_did_not():
    assert _project_commits.summary([
        {"repository": ".git", "refs": {"refs/aisb/S/HEAD": "a", "refs/aisb/S/heads/main": "a"}, "error": None},
        {"repository": "sub/.git", "refs": {}, "error": "the bundle of sub/.git did not verify: x"}]) == (
        "refs/aisb/S/HEAD, refs/aisb/S/heads/main; not brought back in sub/.git: the bundle of sub/.git did not "
        "verify: x")
    assert _project_commits.summary([{"repository": ".git", "refs": {}, "error": None}]) == ""
