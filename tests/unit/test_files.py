# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing a file whole: its mode, the old file kept when writing fails, nothing left
behind, a link at the target replaced and never written through."""

import os
import stat

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _files

# A lone surrogate: UTF-8 cannot encode it, so the write itself fails, half-way through.
UNWRITABLE = "a" * 100000 + "\udc80"


@pytest.fixture
def umask():
    """Set the process's umask for one test, and put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode_of(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


@pytest.mark.parametrize("mask, mode, expected", [
    (0o022, 0o600, 0o600),
    (0o077, 0o600, 0o600),
    (0o000, 0o600, 0o600),
    # An explicit mode is the mode whatever the umask: a report or the team file others read.
    (0o077, 0o644, 0o644),
    # None: what open() gives, 0666 less the umask.
    (0o022, None, 0o644),
    (0o077, None, 0o600),
    (0o002, None, 0o664),
])
def test_the_file_has_the_mode_asked_for(tmp_path, umask, mask, mode, expected):
    umask(mask)
    target = tmp_path / "file"
    _files.write_whole(str(target), "text\n", mode)
    assert target.read_text() == "text\n"
    assert mode_of(target) == expected


def test_an_existing_file_takes_the_new_mode_and_content(tmp_path):
    target = tmp_path / "file"
    target.write_text("old")
    os.chmod(str(target), 0o666)
    _files.write_whole(str(target), "new", 0o600)
    assert target.read_text() == "new" and mode_of(target) == 0o600
    assert os.listdir(str(tmp_path)) == ["file"]


def test_text_is_written_as_utf_8(tmp_path):
    target = tmp_path / "file"
    _files.write_whole(str(target), "caf\u00e9 \u2713\n")
    assert target.read_bytes() == "caf\u00e9 \u2713\n".encode("utf-8")


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "file"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        _files.write_whole(str(target), UNWRITABLE, 0o600)
    assert target.read_text() == "old"
    assert os.listdir(str(tmp_path)) == ["file"]


def test_a_failed_write_of_a_new_file_leaves_nothing(tmp_path):
    with pytest.raises(UnicodeEncodeError):
        _files.write_whole(str(tmp_path / "file"), UNWRITABLE)
    assert os.listdir(str(tmp_path)) == []


def test_a_failed_rename_leaves_the_target_and_no_new_file(tmp_path):
    # A directory at the target: the file cannot be renamed over it.
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "inside").write_text("kept")
    with pytest.raises(IsADirectoryError):
        _files.write_whole(str(tmp_path / "target"), "text")
    assert sorted(os.listdir(str(tmp_path))) == ["target"]
    assert (tmp_path / "target" / "inside").read_text() == "kept"


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not this one")
    target = tmp_path / "file"
    target.symlink_to(elsewhere)
    _files.write_whole(str(target), "text", 0o600)
    assert not target.is_symlink() and target.read_text() == "text" and mode_of(target) == 0o600
    assert elsewhere.read_text() == "not this one"


def test_a_link_where_the_new_file_would_go_is_not_written_through(tmp_path, monkeypatch):
    # The first name tried is taken by a link: the next one is used, the link's file untouched.
    names = iter([b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(_files.os, "urandom", lambda size: next(names))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not this one")
    (tmp_path / ".file.000000000000").symlink_to(elsewhere)
    _files.write_whole(str(tmp_path / "file"), "text")
    assert (tmp_path / "file").read_text() == "text"
    assert elsewhere.read_text() == "not this one"
    assert sorted(os.listdir(str(tmp_path))) == [".file.000000000000", "elsewhere", "file"]


def test_no_free_name_is_an_error_naming_the_target(tmp_path, monkeypatch):
    monkeypatch.setattr(_files.os, "urandom", lambda size: b"\x00" * size)
    (tmp_path / ".file.000000000000").write_text("someone else's")
    with pytest.raises(FileExistsError) as raised:
        _files.write_whole(str(tmp_path / "file"), "text")
    assert str(tmp_path / "file") in str(raised.value)
    assert sorted(os.listdir(str(tmp_path))) == [".file.000000000000"]


def test_the_owner_is_given_before_the_file_takes_its_name(tmp_path):
    target = tmp_path / "file"
    target.write_text("old")
    owner = (os.getuid() + 1000, os.getgid() + 1000)
    if os.geteuid() == 0:
        _files.write_whole(str(target), "text", 0o644, owner=owner)
        info = os.lstat(str(target))
        assert (info.st_uid, info.st_gid) == owner and mode_of(target) == 0o644
    else:
        # Only root gives a file away: the write fails whole.
        with pytest.raises(PermissionError):
            _files.write_whole(str(target), "text", 0o644, owner=owner)
        assert target.read_text() == "old"
    assert os.listdir(str(tmp_path)) == ["file"]
