# SPDX-License-Identifier: GPL-3.0-or-later
"""Review mode's pure parts: the changes read from an overlay's upper directory (the
whiteout convention measured with podman 5.4's kernel overlay), their flags, applying
them without writing outside the project (hostile upper layers included), and the
project's manifest."""

import json
import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.review import _project_manifest
from ansible_collections.aisb.sandbox.plugins.module_utils.review._project_review import ReviewError, changes, text_diff
from ansible_collections.aisb.sandbox.plugins.module_utils.review._review_apply import apply, is_named

from builders import write

OPAQUE = "user.overlay.opaque"
# No configuration of the machine running the tests: only the project's own counts.
NO_GIT_CONFIG = {"HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


def whiteout(path):
    """What kernel overlay leaves for a deleted path: a character device 0/0."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


def opaque_dir(path):
    os.makedirs(path, exist_ok=True)
    os.setxattr(path, OPAQUE, b"y")


@pytest.fixture
def layers(tmp_path):
    project, upper = tmp_path / "project", tmp_path / "upper"
    project.mkdir()
    upper.mkdir()
    return str(project), str(upper)


def by_path(items):
    return {item["path"]: item for item in items}


def tree(root):
    """{path: (type, mode, content or link target)} of everything under ROOT."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                with open(path) as handle:
                    found[rel] = ("file", stat.S_IMODE(info.st_mode), handle.read())
            else:
                found[rel] = ("special",)
    return found


def test_adds_edits_deletes_renames_modes_and_links(layers):
    project, upper = layers
    for name in ["keep", "edit", "del", "mode", "same", "old-name", "dir/sub/f", "gone/x", "redo/old",
                 "redo/inner/y", "file2dir", "dir2file/z"]:
        write(os.path.join(project, name), name + "\n", 0o644)
    write(os.path.join(upper, "added"), "new\n", 0o644)
    write(os.path.join(upper, "edit"), "edited\n", 0o644)
    whiteout(os.path.join(upper, "del"))
    write(os.path.join(upper, "mode"), "mode\n", 0o755)
    write(os.path.join(upper, "same"), "same\n", 0o644)  # copied up, left as it was
    whiteout(os.path.join(upper, "old-name"))
    write(os.path.join(upper, "new-name"), "old-name\n", 0o644)
    whiteout(os.path.join(upper, "gone"))
    opaque_dir(os.path.join(upper, "redo"))  # rm -rf redo; mkdir -p redo/inner
    write(os.path.join(upper, "redo", "n"), "n\n", 0o644)
    os.mkdir(os.path.join(upper, "redo", "inner"))
    opaque_dir(os.path.join(upper, "file2dir"))
    write(os.path.join(upper, "file2dir", "x"), "in\n", 0o644)
    write(os.path.join(upper, "dir2file"), "now a file\n", 0o644)
    os.symlink("keep", os.path.join(upper, "link"))
    whiteout(os.path.join(upper, "never-there"))  # a whiteout over nothing changes nothing
    os.makedirs(os.path.join(upper, "dir", "sub"))  # a merged directory, nothing new in it
    items = by_path(changes(upper, project, NO_GIT_CONFIG))
    assert {path: item["change"] for path, item in items.items()} == {
        "added": "added", "edit": "changed", "del": "deleted", "mode": "changed", "old-name": "deleted",
        "new-name": "added", "gone": "deleted", "gone/x": "deleted", "redo/n": "added", "redo/old": "deleted",
        "redo/inner/y": "deleted", "file2dir": "changed", "file2dir/x": "added", "dir2file": "changed",
        "dir2file/z": "deleted", "link": "added"}
    assert items["file2dir"]["type"] == "dir" and items["file2dir"]["was"]["type"] == "file"
    assert items["dir2file"]["type"] == "file" and items["dir2file"]["was"]["type"] == "dir"
    assert items["mode"]["mode"] == "0755" and items["mode"]["was"]["mode"] == "0644"
    assert items["mode"]["flags"] == ["its exec bit changed"]
    assert items["link"]["target"] == "keep" and items["link"]["flags"] == []
    assert items["gone"]["type"] == "dir"


def test_flags_name_what_the_host_runs(layers):
    project, upper = layers
    write(os.path.join(project, "package.json"), json.dumps({"name": "a", "scripts": {"test": "jest"}}))
    write(os.path.join(project, "sub", "package.json"), json.dumps({"name": "b", "scripts": {"test": "jest"}}))
    write(os.path.join(upper, "package.json"), json.dumps({"name": "a", "scripts": {"postinstall": "sh x"}}))
    write(os.path.join(upper, "sub", "package.json"), json.dumps({"name": "b2", "scripts": {"test": "jest"}}))
    flagged = [".git/hooks/post-checkout", ".git/config", "vendor/lib/.git/config", ".envrc", ".vscode/tasks.json",
               ".idea/workspace.xml", ".github/workflows/ci.yml", "Makefile", "src/Makefile", ".gitattributes",
               ".gitmodules", "pyproject.toml", "setup.py", ".pre-commit-config.yaml", ".npmrc", ".husky/pre-commit",
               "app.desktop", "tests/conftest.py", ".pi/extensions/x.ts", ".claude/settings.json", ".mcp.json",
               ".codex/config.toml", "opencode.json", ".opencode/plugin/p.ts"]
    for path in flagged + ["src/main.py", ".github/README.md"]:
        write(os.path.join(upper, path))
    write(os.path.join(upper, "run.sh"), mode=0o755)
    os.symlink("/etc/passwd", os.path.join(upper, "out-abs"))
    os.symlink("../../outside", os.path.join(upper, "out-rel"))
    os.symlink("lib/../..", os.path.join(upper, "out-down-up"))  # lib may itself be a link
    os.makedirs(os.path.join(upper, "d"))
    os.symlink("../inside", os.path.join(upper, "d", "in-rel"))
    items = by_path(changes(upper, project, NO_GIT_CONFIG))
    for path in flagged + ["run.sh", "out-abs", "out-rel", "out-down-up", "package.json"]:
        assert items[path]["flags"], path
    for path in ["src/main.py", ".github/README.md", "d/in-rel", "sub/package.json"]:
        assert items[path]["flags"] == [], path
    assert "package.json scripts changed" in items["package.json"]["flags"][0]
    assert "pointing out of the project" in items["out-rel"]["flags"][0]
    assert items["run.sh"]["flags"] == ["a new executable file"]


def test_apply_applies_unflagged_only_and_flagged_when_named(layers):
    project, upper = layers
    write(os.path.join(project, "edit"), "old\n")
    write(os.path.join(project, "del"), "del\n")
    write(os.path.join(upper, "edit"), "new\n", 0o644)
    whiteout(os.path.join(upper, "del"))
    write(os.path.join(upper, "src", "new.py"), "print(1)\n", 0o644)
    write(os.path.join(upper, ".git", "hooks", "post-checkout"), "#!/bin/sh\ntouch /tmp/pwned\n", 0o755)
    write(os.path.join(upper, ".envrc"), "export X=1\n", 0o644)
    os.symlink("/etc", os.path.join(upper, "etc-link"))
    outcome = apply(upper, project, changes(upper, project, NO_GIT_CONFIG))
    assert sorted(outcome["applied"]) == ["del", "edit", "src", "src/new.py"]
    assert sorted(h["path"] for h in outcome["held"]) == [".envrc", ".git", ".git/hooks", ".git/hooks/post-checkout",
                                                          "etc-link"]
    assert tree(project) == {"edit": ("file", 0o644, "new\n"), "src": ("dir", 0o755),
                             "src/new.py": ("file", 0o644, "print(1)\n")}
    # What was applied no longer shows; the rest does, and applies when named.
    left = changes(upper, project, NO_GIT_CONFIG)
    assert sorted(item["path"] for item in left) == [".envrc", ".git", ".git/hooks", ".git/hooks/post-checkout",
                                                     "etc-link"]
    outcome = apply(upper, project, left, named=[".git/", "etc-link", "vendor"])
    # Named or not, nothing in or at a .git is ever applied.
    assert sorted(outcome["applied"]) == ["etc-link"]
    assert [h["path"] for h in outcome["held"]] == [".envrc", ".git", ".git/hooks", ".git/hooks/post-checkout"]
    assert all(h["why"].startswith("a git directory's content or pointer is never applied")
               for h in outcome["held"] if h["path"] != ".envrc")
    assert os.readlink(os.path.join(project, "etc-link")) == "/etc"
    assert not os.path.exists(os.path.join(project, ".git"))


def test_is_named_covers_a_directory_and_nothing_beside_it():
    assert is_named(".git/hooks/x", [".git"]) and is_named(".git/hooks/x", [".git/hooks/"])
    assert not is_named(".github/x", [".git"]) and not is_named("a", ["a/b"])


def test_type_changes_apply_in_order(layers):
    project, upper = layers
    write(os.path.join(project, "file2dir"), "f\n")
    write(os.path.join(project, "dir2file", "a", "b"), "b\n")
    opaque_dir(os.path.join(upper, "file2dir"))
    write(os.path.join(upper, "file2dir", "x"), "x\n", 0o644)
    write(os.path.join(upper, "dir2file"), "now\n", 0o600)
    outcome = apply(upper, project, changes(upper, project, NO_GIT_CONFIG))
    assert outcome["held"] == []
    assert tree(project) == {"file2dir": ("dir", 0o755), "file2dir/x": ("file", 0o644, "x\n"),
                             "dir2file": ("file", 0o600, "now\n")}


# Hostile upper layers: what the agent (or anything else) put there must not write
# outside the project when applied, even when every flagged path is named.

def test_symlink_out_of_the_project_is_only_a_link(layers, tmp_path):
    project, upper = layers
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(upper, "escape"))
    items = changes(upper, project, NO_GIT_CONFIG)
    assert "pointing out of the project" in items[0]["flags"][0]
    apply(upper, project, items, named=["escape"])
    assert os.readlink(os.path.join(project, "escape")) == str(outside) and list(outside.iterdir()) == []


def test_a_symlinked_parent_in_the_project_is_replaced_not_followed(layers, tmp_path):
    project, upper = layers
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(project, "lib"))
    write(os.path.join(upper, "lib", "evil"), "evil\n", 0o644)  # a directory where the project has a link
    items = by_path(changes(upper, project, NO_GIT_CONFIG))
    assert items["lib"]["type"] == "dir" and items["lib"]["was"]["type"] == "symlink"
    apply(upper, project, list(items.values()))
    assert list(outside.iterdir()) == []
    assert tree(project) == {"lib": ("dir", 0o755), "lib/evil": ("file", 0o644, "evil\n")}


def test_a_forged_change_list_cannot_reach_outside(layers, tmp_path):
    project, upper = layers
    write(os.path.join(upper, "x"), "x\n", 0o644)
    os.symlink(str(tmp_path), os.path.join(project, "up"))
    forged = [{"path": "../x", "change": "added", "type": "file", "mode": "0644", "flags": []},
              {"path": "up/x", "change": "added", "type": "file", "mode": "0644", "flags": []},
              {"path": "up/project", "change": "deleted", "type": "dir", "mode": "0755", "flags": []}]
    outcome = apply(upper, project, forged)
    assert outcome["applied"] == [] and len(outcome["held"]) == 3
    assert not (tmp_path / "x").exists() and (tmp_path / "project").is_dir()


def test_dot_dot_whiteout_names_are_files_not_deletions(layers, tmp_path):
    project, upper = layers
    write(os.path.join(tmp_path, "precious"), "keep\n")
    write(os.path.join(upper, ".wh..."), "")
    write(os.path.join(upper, ".wh.precious"), "")
    items = by_path(changes(upper, project, NO_GIT_CONFIG))
    assert set(items) == {".wh...", ".wh.precious"}
    assert all(item["change"] == "added" and "overlay whiteout" in item["flags"][0] for item in items.values())
    apply(upper, project, list(items.values()), named=[".wh...", ".wh.precious"])
    assert (tmp_path / "precious").read_text() == "keep\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_device_nodes_fifos_and_sockets_are_never_applied(layers):
    project, upper = layers
    os.mknod(os.path.join(upper, "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mkfifo(os.path.join(upper, "fifo"))
    items = changes(upper, project, NO_GIT_CONFIG)
    assert {item["type"] for item in items} == {"special"}
    outcome = apply(upper, project, items, named=["null", "fifo"])
    assert outcome["applied"] == [] and os.listdir(project) == []


def test_hard_links_to_files_outside_are_flagged_and_never_written_through(layers, tmp_path):
    project, upper = layers
    secret = tmp_path / "secret"
    secret.write_text("secret\n")
    os.link(str(secret), os.path.join(upper, "copy"))
    # The project's file is itself a hard link to a file outside: applying must replace
    # the name, never write the shared inode.
    shared = tmp_path / "shared"
    shared.write_text("shared\n")
    os.link(str(shared), os.path.join(project, "linked"))
    write(os.path.join(upper, "linked"), "changed\n", 0o644)
    items = by_path(changes(upper, project, NO_GIT_CONFIG))
    assert "hard link" in items["copy"]["flags"][0]
    assert items["linked"]["flags"] == []
    outcome = apply(upper, project, list(items.values()))
    assert outcome["applied"] == ["linked"]
    assert shared.read_text() == "shared\n" and secret.read_text() == "secret\n"
    assert (open(os.path.join(project, "linked")).read()) == "changed\n"


def test_whiteouts_cannot_delete_outside(layers, tmp_path):
    project, upper = layers
    outside = tmp_path / "outside"
    write(str(outside / "keep"), "keep\n")
    os.symlink(str(outside), os.path.join(project, "link"))
    os.makedirs(os.path.join(upper, "link"))  # the link replaced by a directory ...
    whiteout(os.path.join(upper, "link", "keep"))  # ... in which "keep" is deleted
    outcome = apply(upper, project, changes(upper, project, NO_GIT_CONFIG))
    assert (outside / "keep").read_text() == "keep\n"
    assert outcome["held"] == []


def test_metacopy_upper_files_are_refused(layers):
    project, upper = layers
    write(os.path.join(project, "f"), "data\n")
    write(os.path.join(upper, "f"), "", 0o755)
    os.setxattr(os.path.join(upper, "f"), "user.overlay.metacopy", b"")
    with pytest.raises(ReviewError, match="metacopy"):
        changes(upper, project, NO_GIT_CONFIG)


def test_setid_bits_are_flagged_and_dropped(layers):
    project, upper = layers
    write(os.path.join(upper, "tool"), "x\n", 0o4755)
    items = changes(upper, project, NO_GIT_CONFIG)
    assert any("setuid" in reason for reason in items[0]["flags"])
    apply(upper, project, items, named=["tool"])
    assert stat.S_IMODE(os.stat(os.path.join(project, "tool")).st_mode) == 0o755


def test_text_diff(layers):
    project, upper = layers
    write(os.path.join(project, "a.txt"), "one\ntwo\n")
    write(os.path.join(upper, "a.txt"), "one\nthree\n", 0o644)
    with open(os.path.join(upper, "bin"), "wb") as handle:
        handle.write(b"\xff\xfe\x00")
    diffs = {item["path"]: text_diff(upper, project, item) for item in changes(upper, project, NO_GIT_CONFIG)}
    assert "-two\n+three\n" in diffs["a.txt"] and "binary" in diffs["bin"]


def test_manifest_sees_any_change_even_with_the_old_mtime(tmp_path):
    write(str(tmp_path / "a" / "b"), "b\n")
    os.symlink("/nowhere", str(tmp_path / "link"))
    before = _project_manifest.take(str(tmp_path))
    assert sorted(before) == ["a", "a/b", "link"] and before["link"][0] == "symlink"
    assert _project_manifest.differences(before, _project_manifest.take(str(tmp_path))) == []
    info = os.stat(str(tmp_path / "a" / "b"))
    write(str(tmp_path / "a" / "b"), "c\n")
    os.utime(str(tmp_path / "a" / "b"), ns=(info.st_atime_ns, info.st_mtime_ns))
    write(str(tmp_path / "new"), "n\n")
    assert _project_manifest.differences(before, _project_manifest.take(str(tmp_path))) == ["a/b", "new"]
    first = _project_manifest.save(str(tmp_path.parent / "m1.json"), before)
    assert first == _project_manifest.save(str(tmp_path.parent / "m2.json"), dict(reversed(list(before.items()))))
    assert _project_manifest.load(str(tmp_path.parent / "m1.json")) == before


def test_a_repository_the_agent_made_is_flagged_whole_wherever_it_is(layers):
    project, upper = layers
    for name in ("HEAD", "config", "objects/info/packs", "refs/heads/main"):
        write(os.path.join(upper, "fixtures", "evil.git", name), "x\n", 0o644)
    write(os.path.join(upper, "src", "objects", "x.py"), "x\n", 0o644)
    flagged = dict((item["path"], item["flags"]) for item in changes(upper, project, NO_GIT_CONFIG))
    why = ("in a repository the agent made (fixtures/evil.git): git run inside it takes its configuration and "
           "hooks from it")
    assert flagged["fixtures/evil.git"] == [why] and flagged["fixtures/evil.git/config"] == [why]
    assert flagged["fixtures"] == [] and flagged["src/objects/x.py"] == []
