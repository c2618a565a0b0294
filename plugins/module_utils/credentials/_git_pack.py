# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The commits a pushed pack carries, read by the git broker to prove a fast-forward
without running git on the agent's objects: pack_commits reads the pack (version 2 or 3,
its trailing checksum checked), inflates each entry, keeps the commits, whole or as
deltas against commits in the same pack, each under the id git gives its content, with
its parents; descends walks them. Pure.

The proof is one way only: an update is a fast-forward when the old id is reached from
the new one through commits of this pack. What the pack does not hold (a thin pack's
delta against the upstream's objects, commits the upstream has already) is not
guessed at, so such a push is refused, never relayed on a guess; the broker advertises
no-thin so git does not send thin packs. The ids are the content's own hashes, so the
upstream, reading the same bytes, sees the same parents.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import PushError

COMMIT, OFS_DELTA, REF_DELTA = 1, 6, 7
TYPES = frozenset([1, 2, 3, 4, OFS_DELTA, REF_DELTA])
HASHES = {40: hashlib.sha1, 64: hashlib.sha256}
# A commit larger than this is not read (its push is then not proven): far above any
# real commit's header and message.
MAX_COMMIT = 1024 * 1024
CHUNK = 65536


def _varint_header(pack, offset):
    """(type, size, offset after) of the entry header at OFFSET: the type and the size's low
    four bits in its first byte, the size's rest a varint after it when its top bit is set."""
    byte = pack[offset]
    kind, size = (byte >> 4) & 7, byte & 15
    if not byte & 0x80:
        return kind, size, offset + 1
    rest, offset = _varint(pack, offset + 1, "the pack's entry header")
    return kind, size | rest << 4, offset


def _ofs_base(pack, offset):
    """(distance back to the base, offset after) of an ofs-delta's base offset encoding."""
    byte = pack[offset]
    distance = byte & 0x7f
    offset += 1
    while byte & 0x80:
        if offset >= len(pack) or distance >> 56:
            raise PushError("the pack's delta base offset is cut or too long")
        byte = pack[offset]
        distance = ((distance + 1) << 7) | (byte & 0x7f)
        offset += 1
    return distance, offset


def _inflate(pack, offset, end, size, keep):
    """(the entry's inflated bytes when KEEP else None, offset after its zlib stream),
    SIZE the length its header states."""
    inflater = zlib.decompressobj()
    kept, length, position = [], 0, offset
    while not inflater.eof:
        if position >= end:
            raise PushError("the pack ends inside an entry")
        chunk = pack[position:min(position + CHUNK, end)]
        position += len(chunk)
        try:
            out = inflater.decompress(chunk)
        except zlib.error:
            raise PushError("an entry of the pack does not inflate")
        length += len(out)
        if length > size:
            raise PushError("an entry of the pack inflates past its stated size")
        if keep:
            kept.append(out)
    if length != size:
        raise PushError("an entry of the pack inflates to less than its stated size")
    return (b"".join(kept) if keep else None), position - len(inflater.unused_data)


def _varint(data, offset, what):
    """(the little-endian base-128 number at OFFSET of DATA, offset after); WHAT names it."""
    size, shift = 0, 0
    while True:
        if offset >= len(data) or shift > 56:
            raise PushError("%s is cut or too long" % what)
        byte = data[offset]
        size |= (byte & 0x7f) << shift
        shift += 7
        offset += 1
        if not byte & 0x80:
            return size, offset


def apply_delta(base, delta):
    """DELTA (git's copy and insert instructions) applied to BASE; PushError when it does
    not fit its base or its stated result."""
    source, offset = _varint(delta, 0, "a delta's size")
    target, offset = _varint(delta, offset, "a delta's size")
    if source != len(base) or target > MAX_COMMIT:
        raise PushError("a delta does not fit its base")
    out = bytearray()
    while offset < len(delta):
        byte = delta[offset]
        offset += 1
        if byte & 0x80:
            start = length = 0
            for bit in range(7):
                if byte & (1 << bit):
                    if offset >= len(delta):
                        raise PushError("a delta's copy instruction is cut")
                    if bit < 4:
                        start |= delta[offset] << (8 * bit)
                    else:
                        length |= delta[offset] << (8 * (bit - 4))
                    offset += 1
            length = length or 0x10000
            if start + length > len(base):
                raise PushError("a delta copies past its base")
            out += base[start:start + length]
        elif byte:
            if offset + byte > len(delta):
                raise PushError("a delta's insert is cut")
            out += delta[offset:offset + byte]
            offset += byte
        else:
            raise PushError("a delta holds the reserved instruction 0")
    if len(out) != target:
        raise PushError("a delta's result is not its stated size")
    return bytes(out)


def commit_parents(content, hexsz):
    """The parent ids of a commit's CONTENT, read as git reads them: a first line 'tree
    ID', then the 'parent ID' lines that follow it; None when it does not start so."""
    lines = content.split(b"\n")
    if len(lines) < 2 or not lines[0].startswith(b"tree ") or len(lines[0]) != 5 + hexsz:
        return None
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        if len(line) != 7 + hexsz:
            return None
        parents.append(line[7:].decode("ascii", "replace"))
    return tuple(parents)


def pack_commits(pack, hexsz):
    """{commit id: parent ids} for the commits of PACK (bytes-like, a whole pack), whole or
    deltas against other commits in it. PushError when PACK is not a well-formed pack whose
    checksum is its trailer's."""
    digest = HASHES[hexsz]
    trailer = hexsz // 2
    # A view: the pack (50 MiB, say) is sliced and hashed without a copy.
    pack = memoryview(pack)
    if len(pack) < 12 + trailer or pack[:4] != b"PACK":
        raise PushError("the push's pack does not start with PACK")
    version, count = struct.unpack(">II", pack[4:12])
    if version not in (2, 3):
        raise PushError("pack version %d (2 or 3)" % version)
    end = len(pack) - trailer
    if digest(pack[:end]).digest() != pack[end:]:
        raise PushError("the pack's checksum is not its trailer's")
    whole = {}      # offset -> content, commits only
    deltas = []     # (offset, base offset or None, base id or None, delta bytes)
    offset = 12
    for _index in range(count):
        if offset >= end:
            raise PushError("the pack holds fewer entries than its header states")
        start = offset
        kind, size, offset = _varint_header(pack, offset)
        if kind not in TYPES:
            raise PushError("an entry of the pack has type %d" % kind)
        base_offset = base_id = None
        if kind == OFS_DELTA:
            distance, offset = _ofs_base(pack, offset)
            if not 0 < distance <= start - 12:
                raise PushError("a delta's base offset is outside the pack")
            base_offset = start - distance
        elif kind == REF_DELTA:
            if offset + trailer > end:
                raise PushError("the pack ends inside a delta's base id")
            base_id = pack[offset:offset + trailer].hex()
            offset += trailer
        keep = size <= MAX_COMMIT and kind in (COMMIT, OFS_DELTA, REF_DELTA)
        content, offset = _inflate(pack, offset, end, size, keep)
        if kind == COMMIT:
            whole[start] = content
        elif keep:
            deltas.append((start, base_offset, base_id, content))
    if offset != end:
        raise PushError("the pack holds bytes after its last entry")
    ids = {}
    for start, content in whole.items():
        ids[digest(b"commit %d\0" % len(content) + content).hexdigest()] = start
    # Resolve deltas whose base is a commit already known, until none more resolves; a
    # delta on anything else (a tree, a blob, the upstream's object) is no commit here.
    pending = deltas
    while pending:
        left = []
        for start, base_offset, base_id, delta in pending:
            base = whole.get(base_offset) if base_id is None else whole.get(ids.get(base_id))
            if base is None:
                left.append((start, base_offset, base_id, delta))
                continue
            content = apply_delta(base, delta)
            whole[start] = content
            ids[digest(b"commit %d\0" % len(content) + content).hexdigest()] = start
        if len(left) == len(pending):
            break
        pending = left
    commits = {}
    for commit_id, start in ids.items():
        parents = commit_parents(whole[start], hexsz)
        if parents is not None:
            commits[commit_id] = parents
    return commits


def descends(commits, new, old):
    """Whether OLD is reached from NEW through the parents COMMITS ({id: parent ids}) hold."""
    seen, todo = set(), [new]
    while todo:
        current = todo.pop()
        if current == old:
            return True
        if current in seen or current not in commits:
            continue
        seen.add(current)
        todo.extend(commits[current])
    return False
