# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A push as the git broker reads it before anything reaches the upstream: the
receive-pack request's pkt-lines parsed (parse_update_request), each ref update decided
against the remote's branch pattern and the upstream's own refs (decide), and git's
report-status written for the client when the push is refused (report_status), or when
its request is (refusal_report). Pure.

The reading is narrower than git's receive-pack and never wider, so no byte is read two
ways: a pkt-line's length is four lowercase hex digits, 5 to 65520; the command list ends
at a flush packet only (git's receive-pack also ends it at an empty 0004 packet, which is
refused here, as are the delim and response-end packets); capabilities follow a NUL on
the first command only (receive-pack honours them after a NUL on any command); object
ids are lowercase hex of the repository's length; a ref name is checked against a
strict ASCII grammar (ref_name_problem) before its pattern. Push certificates and push
options are refused: the options a forge reads (GitLab's merge_request.target,
merge_when_pipeline_succeeds, ci.variable) would act beyond the pushed branch.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# git's LARGE_PACKET_MAX: the longest pkt-line, its four length digits included.
MAX_PKT = 65520
MAX_COMMANDS = 1000
MAX_SHALLOW = 10000
# The capabilities a client may ask of a push through the broker; what it asks must also
# have been advertised (the broker advertises only these, advertised_capabilities).
CLIENT_CAPABILITIES = frozenset(["report-status", "report-status-v2", "side-band-64k", "quiet", "atomic",
                                 "ofs-delta", "no-thin"])
VALUED_CAPABILITIES = frozenset(["agent", "object-format"])
HEX_LENGTHS = {"sha1": 40, "sha256": 64}
HEX = re.compile(r"\A[0-9a-f]+\Z")
PKT_LENGTH = re.compile(rb"\A[0-9a-f]{4}\Z")
# A ref name component: ASCII letters, digits, dot, underscore, hyphen; not starting with
# a dot nor ending with .lock (check_ref_format's rules, narrowed to one plain alphabet so
# no name looks like another: no unicode, no '@{', no control or glob characters).
COMPONENT = re.compile(r"\A(?!\.)[A-Za-z0-9._-]+\Z")
BRANCHES = "refs/heads/"
# A pattern from the operator, '{session}' replaced: a branch name whose last component
# may be '*'.
PATTERN = re.compile(r"\A([A-Za-z0-9._-]+/)*([A-Za-z0-9._-]+|\*)\Z")
# What a command's ref name may hold before ref_name_problem reads it: visible ASCII.
VISIBLE = re.compile(r"\A[\x21-\x7e]+\Z")
DEFAULT_PATTERN = "aisb/{session}/*"


class PushError(Exception):
    """A request the broker answers without relaying it: why, for the record and the client."""


class Command(NamedTuple):
    old: str
    new: str
    name: str


class UpdateRequest(NamedTuple):
    """A receive-pack request: its shallow lines' ids, its commands, the capabilities the
    first command asks, and where the pack starts in the body."""
    shallow: tuple
    commands: tuple
    capabilities: frozenset
    pack_offset: int


class Decision(NamedTuple):
    command: Command
    refused: str  # why, or "" when relayed


def pkt_lines(body, offset=0):
    """(payload or None for a flush, offset after it) for each pkt-line of BODY from OFFSET.
    PushError for a length that is not four lowercase hex digits, one of 0001 to 0004 (git
    reads 0004 as the end of a list, a broker reading it as an empty line would not), one
    over MAX_PKT or past the body's end."""
    while True:
        digits = body[offset:offset + 4]
        if len(digits) < 4 or not PKT_LENGTH.match(digits):
            raise PushError("a pkt-line's length is four lowercase hex digits")
        length = int(digits, 16)
        if length == 0:
            offset += 4
            yield None, offset
            continue
        if length <= 4 or length > MAX_PKT:
            raise PushError("a pkt-line of length %d (from 5 to %d, or 0000 for a flush)" % (length, MAX_PKT))
        if offset + length > len(body):
            raise PushError("a pkt-line runs past the request's end")
        payload = bytes(body[offset + 4:offset + length])
        offset += length
        yield payload, offset


def ref_name_problem(name):
    """Why NAME (text) is not a plain ref name, or "". Components of COMPONENT joined by
    single slashes, at least two, none ending in .lock, no '..'."""
    parts = name.split("/")
    if len(parts) < 2 or any(not COMPONENT.match(part) or part.endswith(".lock") for part in parts) \
            or ".." in name or name.endswith("."):
        return "not a plain ref name (ASCII letters, digits, '.', '_', '-' in components, no '..', " \
               "no component starting with '.' or ending in '.lock')"
    return ""


def _oid(text, hexsz, what):
    if len(text) != hexsz or not HEX.match(text):
        raise PushError("%s is not %d lowercase hex digits" % (what, hexsz))
    return text


def _capabilities(text, advertised, hexsz):
    asked = set()
    # git writes each capability after a space, the first too; receive-pack reads words
    # between spaces (nothing else separates them).
    for word in filter(None, text.split(" ")):
        name = word.split("=", 1)[0]
        if (name in VALUED_CAPABILITIES) != ("=" in word) \
                or (word not in CLIENT_CAPABILITIES and name not in VALUED_CAPABILITIES):
            raise PushError("capability %r is not relayed (only %s)"
                            % (word[:64], ", ".join(sorted(CLIENT_CAPABILITIES | VALUED_CAPABILITIES))))
        if name in CLIENT_CAPABILITIES and name not in advertised:
            raise PushError("capability %s was not advertised" % name)
        if name == "object-format" and HEX_LENGTHS.get(word[len(name) + 1:]) != hexsz:
            raise PushError("%s is not the repository's object format" % word[:64])
        asked.add(word)
    if not asked & {"report-status", "report-status-v2"}:
        raise PushError("a push through the broker asks report-status")
    return frozenset(asked)


def parse_update_request(body, hexsz, advertised):
    """BODY (bytes) of a git-receive-pack POST read as an UpdateRequest: shallow lines and
    commands up to a flush, capabilities after a NUL on the first command only, each from
    ADVERTISED (the capability names the broker advertised); ids HEXSZ lowercase hex
    digits. PushError names the first thing outside that grammar."""
    shallow, commands, capabilities, offset = [], [], None, 0
    # pkt_lines raises at the body's end, so the loop ends at a flush packet only.
    for payload, offset in pkt_lines(body):
        if payload is None:
            break
        if payload.endswith(b"\n"):
            payload = payload[:-1]
        try:
            line = payload.decode("ascii")
        except UnicodeDecodeError:
            raise PushError("a command line holds a byte that is not ASCII")
        if line.startswith("shallow "):
            if len(shallow) == MAX_SHALLOW:
                raise PushError("more than %d shallow lines" % MAX_SHALLOW)
            shallow.append(_oid(line[8:], hexsz, "a shallow line's id"))
            continue
        if line.startswith("push-cert"):
            raise PushError("signed pushes (push-cert) are not relayed")
        line, nul, asked = line.partition("\0")
        if nul and commands:
            raise PushError("capabilities after the first command")
        if not commands:
            if not nul:
                raise PushError("the first command carries the capabilities after a NUL")
            capabilities = _capabilities(asked, advertised, hexsz)
        if len(commands) == MAX_COMMANDS:
            raise PushError("more than %d commands" % MAX_COMMANDS)
        parts = line.split(" ")
        if len(parts) != 3 or not VISIBLE.match(parts[2]):
            raise PushError("a command is OLD-ID NEW-ID REF-NAME, single spaces, the name visible ASCII")
        commands.append(Command(_oid(parts[0], hexsz, "an old id"), _oid(parts[1], hexsz, "a new id"), parts[2]))
    if not commands:
        raise PushError("a push without commands")
    names = [command.name for command in commands]
    if len(set(names)) != len(names):
        raise PushError("a ref is named by more than one command")
    return UpdateRequest(tuple(shallow), tuple(commands), capabilities, offset)


def check_pattern(pattern, what):
    """PATTERN (an operator's branch pattern) checked: a branch name (not refs/...: a branch is
    under refs/heads/ already) whose last component may
    be '*' (any branch when it is '*' alone); '{session}' stands for the session's id.
    ValueError names WHAT."""
    literal = pattern.replace("{session}", "s") if isinstance(pattern, str) else ""
    if not PATTERN.match(literal) or literal.startswith("refs/") \
            or ref_name_problem(BRANCHES + literal.replace("*", "x")):
        raise ValueError("%s %r must be a branch name whose last component may be '*' (such as %s); "
                         "'{session}' stands for the session's id" % (what, pattern, DEFAULT_PATTERN))
    return pattern


def branch_matches(name, pattern, session_id):
    """Whether ref NAME is a branch PATTERN (check_pattern's) allows for SESSION_ID: the same
    bytes up to a trailing '*', which stands for one or more plain components."""
    if ref_name_problem(name) or not name.startswith(BRANCHES):
        return False
    branch = name[len(BRANCHES):]
    literal = pattern.replace("{session}", session_id)
    if literal.endswith("*"):
        return branch.startswith(literal[:-1]) and len(branch) > len(literal) - 1
    return branch == literal


def decide(commands, pattern, session_id, upstream_refs, zero, proven):
    """A Decision for each of COMMANDS: relayed only if all are. A command is relayed when
    its ref is a branch PATTERN allows (branch_matches) and it creates the ref (old id ZERO,
    the ref absent from UPSTREAM_REFS, the upstream's advertisement read for this push:
    {name: id}), or updates it from the id UPSTREAM_REFS holds to one PROVEN(old, new)
    says descends from it (a fast-forward). Deletes, rewinds, stale old ids and every other
    ref are refused, with the reason the client is shown."""
    shown = pattern.replace("{session}", session_id)
    reasons = []
    for command in commands:
        if not branch_matches(command.name, pattern, session_id):
            reasons.append("aisb: only %s may be pushed" % shown)
        elif command.new == zero:
            reasons.append("aisb: deleting a ref is refused")
        elif command.old == zero:
            reasons.append("aisb: the upstream already has this ref" if command.name in upstream_refs else "")
        elif upstream_refs.get(command.name) != command.old:
            reasons.append("aisb: stale old id: the upstream's ref is not at it (fetch first)")
        elif command.old == command.new:
            reasons.append("aisb: the update changes nothing")
        elif not proven(command.old, command.new):
            reasons.append("aisb: not a fast-forward the pushed pack proves (forced updates are refused)")
        else:
            reasons.append("")
    if any(reasons):
        reasons = [reason or "aisb: another ref in this push was refused" for reason in reasons]
    return tuple(Decision(command, reason) for command, reason in zip(commands, reasons))


def pkt_line(payload):
    """PAYLOAD (bytes) as one pkt-line."""
    return b"%04x" % (len(payload) + 4) + payload


def report_status(decisions, sideband):
    """git's report-status for DECISIONS (the pack unpacked, each ref ok or ng with its
    reason), on side-band channel 1 when SIDEBAND (the client asked side-band-64k), as the
    body of the receive-pack response; None when a line would not fit in a pkt-line."""
    return _report([(decision.command.name.encode("ascii"), decision.refused) for decision in decisions], sideband)


def refusal_report(body, why):
    """The receive-pack response refusing each command of BODY, a request
    parse_update_request refused (WHY, shown for every ref), as git's report-status, so
    that the client prints '! [remote rejected] REF (WHY)' rather than an HTTP error; None
    where the protocol allows no report: the lines up to the first flush do not frame, one
    is no OLD NEW REF command (a push certificate, say), or the client asked none. The
    names go back as the client wrote them (git matches its refs by them)."""
    names, asked = [], None
    try:
        for payload, _offset in pkt_lines(body):
            if payload is None:
                break
            line = payload[:-1] if payload.endswith(b"\n") else payload
            if line.startswith(b"shallow "):
                continue
            line, _nul, capabilities = line.partition(b"\0")
            if asked is None:
                asked = set(capabilities.split(b" "))
            parts = line.split(b" ")
            if len(parts) != 3 or not parts[2]:
                return None
            names.append(parts[2])
    except PushError:
        return None
    if not names or not asked & {b"report-status", b"report-status-v2"}:
        return None
    return _report([(name, why) for name in names], b"side-band-64k" in asked)


def _report(results, sideband):
    """report-status for RESULTS ((ref name as bytes, why refused or "") each); None when a
    line would not fit in a pkt-line."""
    lines = [b"unpack ok\n"] + [b"ng %s %s\n" % (name, why.encode("utf-8")) if why else b"ok %s\n" % name
                                for name, why in results]
    if any(len(line) + 4 > MAX_PKT for line in lines):
        return None
    report = b"".join(pkt_line(line) for line in lines) + b"0000"
    if not sideband:
        return report
    room = MAX_PKT - 5
    return b"".join(pkt_line(b"\x01" + report[start:start + room])
                    for start in range(0, len(report), room)) + b"0000"
