# SPDX-License-Identifier: GPL-3.0-or-later
"""content_image's files option: the build context written from given contents (_images)."""

import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.images._images import context_files, read_context, write_context


def entry(path, content="x\n", mode="0644"):
    return {"path": path, "content": content, "mode": mode}


def test_the_context_holds_exactly_the_given_files(tmp_path):
    (tmp_path / "ca").mkdir()
    (tmp_path / "ca" / "0-old.crt").write_text("stale")
    (tmp_path / "Containerfile").write_text("FROM old\n")
    files = context_files([entry("Containerfile", "FROM base\n"), entry("entrypoint", "#!/bin/sh\n", "0755"),
                           entry("ca/1-new.crt", "PEM\n")])
    write_context(str(tmp_path), files)
    assert read_context(str(tmp_path)) == {"Containerfile": b"FROM base\n", "entrypoint": b"#!/bin/sh\n",
                                           "ca/1-new.crt": b"PEM\n"}
    assert os.stat(tmp_path / "entrypoint").st_mode & 0o777 == 0o755
    assert os.stat(tmp_path / "Containerfile").st_mode & 0o777 == 0o644


def test_a_file_already_right_is_not_rewritten(tmp_path):
    files = context_files([entry("Containerfile", "FROM base\n")])
    write_context(str(tmp_path), files)
    inode = os.stat(tmp_path / "Containerfile").st_ino
    os.utime(tmp_path / "Containerfile", (1, 1))
    write_context(str(tmp_path), files)
    assert os.stat(tmp_path / "Containerfile").st_mtime == 1
    assert os.stat(tmp_path / "Containerfile").st_ino == inode


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "."])
def test_paths_outside_the_context_are_refused(path):
    with pytest.raises(ValueError, match="stay inside the context"):
        context_files([entry(path)])


def test_a_mode_that_is_not_octal_is_refused():
    with pytest.raises(ValueError, match="not an octal mode"):
        context_files([entry("entrypoint", mode="rwx")])


def test_a_symlink_in_the_context_is_replaced_not_written_through(tmp_path):
    context, outside = tmp_path / "context", tmp_path / "outside"
    context.mkdir()
    outside.write_text("not the collection's")
    (context / "Containerfile").symlink_to(outside)
    write_context(str(context), context_files([entry("Containerfile", "FROM base\n")]))
    assert outside.read_text() == "not the collection's"
    assert not (context / "Containerfile").is_symlink()
    assert (context / "Containerfile").read_text() == "FROM base\n"
