# SPDX-License-Identifier: GPL-3.0-or-later
"""The commits the git broker reads from a pushed pack, checked against git itself: packs
git's pack-objects writes, and packs written here byte by byte (deltas, bad framing)
that git's index-pack is asked to read too."""

import hashlib
import os
import struct
import subprocess
import zlib

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_pack import (
    MAX_COMMIT, apply_delta, commit_parents, descends, pack_commits)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import PushError

ENV = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="a",
           GIT_COMMITTER_EMAIL="a@example.org", GIT_CONFIG_NOSYSTEM="1", HOME="/nonexistent",
           GIT_AUTHOR_DATE="2026-12-03T00:00:00Z", GIT_COMMITTER_DATE="2026-12-03T00:00:00Z")


def git(repo, *args, stdin=None):
    return subprocess.run(["git", "-C", str(repo)] + list(args), env=ENV, check=True, input=stdin,
                          stdout=subprocess.PIPE).stdout


def commit(repo, message, parent=None):
    tree = git(repo, "write-tree").strip().decode()
    return git(repo, "commit-tree", tree, "-m", message, *(["-p", parent] if parent else [])).strip().decode()


@pytest.fixture(name="repo")
def repo_fixture(tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "f").write_text("one\n" * 1000)
    git(tmp_path, "add", "f")
    return tmp_path


def pack_of(repo, *revs, thin=False):
    return git(repo, "pack-objects", "--stdout", "--revs", *(["--thin"] if thin else []),
               stdin="\n".join(revs).encode() + b"\n")


def test_a_fast_forward_git_packs_is_proven_and_a_rewind_is_not(repo):
    base = commit(repo, "base")
    first = commit(repo, "first", base)
    second = commit(repo, "second", first)
    side = commit(repo, "side", base)
    pushed = pack_commits(pack_of(repo, second, "^" + base), 40)
    assert pushed == {second: (first,), first: (base,)}
    assert descends(pushed, second, base) and descends(pushed, second, first)
    rewound = pack_commits(pack_of(repo, side, "^" + first), 40)
    assert not descends(rewound, side, first)
    # The old id's own commit, pushed again, proves nothing about the new one.
    assert not descends(pack_commits(pack_of(repo, side, first, "^" + base), 40), side, first)


def test_a_merge_is_proven_through_either_parent(repo):
    base = commit(repo, "base")
    left = commit(repo, "left", base)
    right = commit(repo, "right", base)
    merge = git(repo, "commit-tree", git(repo, "write-tree").strip().decode(), "-p", left, "-p", right,
                "-m", "merge").strip().decode()
    pushed = pack_commits(pack_of(repo, merge, "^" + left), 40)
    assert pushed[merge] == (left, right) and descends(pushed, merge, left)


def test_a_sha256_repository_is_read_with_its_hash(tmp_path):
    git(tmp_path, "init", "-q", "--object-format=sha256")
    base = commit(tmp_path, "base")
    top = commit(tmp_path, "top", base)
    assert pack_commits(pack_of(tmp_path, top, "^" + base), 64) == {top: (base,)}


def entry(kind, data, base=b""):
    """One pack entry: its type and size header, the base (ofs or ref), the zlib stream."""
    size = len(data)
    header = bytearray([(kind << 4) | (size & 15) | (0x80 if size > 15 else 0)])
    size >>= 4
    while size:
        header.append((size & 0x7f) | (0x80 if size > 127 else 0))
        size >>= 7
    return bytes(header) + base + zlib.compress(data)


def ofs(distance):
    """git's offset encoding of DISTANCE back to a delta's base."""
    out = [distance & 0x7f]
    distance >>= 7
    while distance:
        distance -= 1
        out.insert(0, 0x80 | (distance & 0x7f))
        distance >>= 7
    return bytes(out)


def varint(number):
    out = bytearray()
    while True:
        out.append((number & 0x7f) | (0x80 if number > 127 else 0))
        number >>= 7
        if not number:
            return bytes(out)


def delta(base, target):
    """TARGET as a delta on BASE: a copy of what they start with, then the rest inserted."""
    same = 0
    while same < min(len(base), len(target), 255) and base[same] == target[same]:
        same += 1
    assert same
    out = varint(len(base)) + varint(len(target)) + bytes([0x90, same])
    rest = target[same:]
    for start in range(0, len(rest), 127):
        out += bytes([len(rest[start:start + 127])]) + rest[start:start + 127]
    return out


def pack(*entries, count=None, version=2):
    body = b"PACK" + struct.pack(">II", version, len(entries) if count is None else count) + b"".join(entries)
    return body + hashlib.sha1(body).digest()


def commit_text(parents, message="m", tree="4b825dc642cb6eb9a060e54bf8d69288fbee4904"):
    return ("tree %s\n%sauthor a <a@example.org> 0 +0000\ncommitter a <a@example.org> 0 +0000\n\n%s\n" % (
        tree, "".join("parent %s\n" % parent for parent in parents), message)).encode()


def object_id(content):
    return hashlib.sha1(b"commit %d\0" % len(content) + content).hexdigest()


def git_reads(repo, data):
    """Whether git's own index-pack reads DATA (into REPO)."""
    done = subprocess.run(["git", "-C", str(repo), "index-pack", "--stdin", "--fix-thin"], env=ENV, input=data,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return done.returncode == 0


OLD = "1" * 40


def test_commits_as_deltas_are_read_as_git_reads_them(repo):
    first = commit_text([OLD], "first " * 40)
    second = commit_text([object_id(first)], "first " * 40 + "second")
    third = commit_text([object_id(second)], "first " * 40 + "third")
    ofs_entry = entry(1, first)
    second_entry = entry(6, delta(first, second), ofs(12 + len(ofs_entry) - 12))
    third_entry = entry(7, delta(second, third), bytes.fromhex(object_id(second)))
    data = pack(ofs_entry, second_entry, third_entry)
    read = pack_commits(data, 40)
    assert read == {object_id(first): (OLD,), object_id(second): (object_id(first),),
                    object_id(third): (object_id(second),)}
    assert descends(read, object_id(third), OLD)
    # git reads the same three commits, with the same parents, from the same bytes.
    assert git_reads(repo, data)
    for content in (first, second, third):
        assert git(repo, "cat-file", "commit", object_id(content)) == content


def test_a_ref_delta_before_its_base_is_resolved(repo):
    first = commit_text([OLD], "x" * 300)
    second = commit_text([object_id(first)], "x" * 300 + "y")
    data = pack(entry(7, delta(first, second), bytes.fromhex(object_id(first))), entry(1, first))
    assert pack_commits(data, 40)[object_id(second)] == (object_id(first),)
    assert git_reads(repo, data)


def test_a_delta_on_an_object_the_pack_lacks_proves_nothing():
    first = commit_text([OLD], "x" * 300)
    second = commit_text([object_id(first)], "x" * 300 + "y")
    thin = pack(entry(7, delta(first, second), bytes.fromhex(object_id(first))))
    assert pack_commits(thin, 40) == {}


def test_a_delta_on_a_blob_is_no_commit():
    blob = commit_text([OLD], "looks like a commit")
    data = pack(entry(3, blob), entry(6, delta(blob, blob + b"more"), ofs(12)))
    assert pack_commits(data, 40) == {}


@pytest.mark.parametrize("text, parents", [
    (commit_text([OLD, "2" * 40]), (OLD, "2" * 40)),
    (commit_text([]), ()),
    # A parent line after the author, or in the message, is no parent to git.
    (b"tree %s\nauthor a <a> 0 +0000\nparent %s\n\nm\n" % (b"4" * 40, OLD.encode()), ()),
    (commit_text([], "parent %s" % OLD), ()),
    (b"tree %s\nparent %s\n" % (b"4" * 40, OLD[:-1].encode()), None),
    (b"tree %s\nparent %s\n" % (b"4" * 40, OLD.encode() + b"0"), None),
    (b"tree 44\nparent %s\n" % OLD.encode(), None),
    (b"parent %s\ntree %s\n" % (OLD.encode(), b"4" * 40), None),
    (b"", None),
])
def test_commit_parents_are_read_as_git_reads_them(text, parents):
    assert commit_parents(text, 40) == parents


def test_descends_follows_only_what_the_pack_holds():
    commits = {"n": ("m",), "m": ("x", "o"), "x": ("n",)}
    assert descends(commits, "n", "o") and not descends(commits, "n", "z")
    assert descends({}, "o", "o") and not descends({}, "n", "o")


@pytest.mark.parametrize("data, why", [
    (b"PACK", "does not start with PACK"),
    (b"KCAP" + b"\0" * 28, "does not start with PACK"),
    (pack(version=4), "pack version 4"),
    (pack(entry(1, commit_text([])))[:-1] + b"\0", "checksum"),
    (pack(entry(1, commit_text([])), count=2), "fewer entries"),
    (pack(entry(1, commit_text([])), b"junk", count=1), "bytes after its last entry"),
    (pack(entry(5, b"x")), "type 5"),
    (pack(entry(0, b"x")), "type 0"),
    (pack(entry(1, b"x")[:1] + zlib.compress(b"xy")), "past its stated size"),
    (pack(b"\x15" + zlib.compress(b"xyzw")), "less than its stated size"),
    (pack(b"\x15" + b"not zlib"), "does not inflate"),
    (pack(b"\x15" + zlib.compress(b"xyzw")[:-3]), "ends inside an entry"),
    (pack(b"\x95" + b"\xff" * 9 + b"\x01"), "header is cut or too long"),
    (pack(entry(6, b"x", ofs(100))), "outside the pack"),
    (pack(entry(6, b"x", b"\xff" * 10)), "cut or too long"),
    (pack(entry(7, b"x")[:1] + b"\x01" * 5), "inside a delta's base id"),
])
def test_malformed_packs_are_refused(data, why):
    with pytest.raises(PushError, match=why):
        pack_commits(data, 40)


@pytest.mark.parametrize("base, instructions, why", [
    (b"abcd", varint(5) + varint(1) + b"\x01x", "does not fit its base"),
    (b"abcd", varint(4) + varint(MAX_COMMIT + 1), "does not fit its base"),
    (b"abcd", varint(4) + varint(2) + b"\x91\x03\x02", "copies past its base"),
    (b"abcd", varint(4) + varint(2) + b"\x91", "copy instruction is cut"),
    (b"abcd", varint(4) + varint(2) + b"\x05ab", "insert is cut"),
    (b"abcd", varint(4) + varint(2) + b"\x00", "reserved instruction"),
    (b"abcd", varint(4) + varint(3) + b"\x02ab", "not its stated size"),
    (b"abcd", varint(4) + b"\x80", "size is cut"),
])
def test_malformed_deltas_are_refused(base, instructions, why):
    with pytest.raises(PushError, match=why):
        apply_delta(base, instructions)


def test_a_delta_copies_and_inserts():
    assert apply_delta(b"abcdef", varint(6) + varint(5) + b"\x91\x02\x03\x02xy") == b"cdexy"
    assert apply_delta(b"a" * 0x10000, varint(0x10000) + varint(0x10000) + b"\x80") == b"a" * 0x10000
