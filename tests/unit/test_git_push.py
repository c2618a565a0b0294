# SPDX-License-Identifier: GPL-3.0-or-later
"""The git broker's reading of a push (pkt-lines, commands, capabilities) and its decision
on each ref, as an agent that writes every byte would try them."""

import itertools

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import (
    DEFAULT_PATTERN, MAX_COMMANDS, MAX_PKT, MAX_SHALLOW, Command, PushError, branch_matches, check_pattern,
    decide, parse_update_request, pkt_line, pkt_lines, ref_name_problem, refusal_report,
    report_status)

ZERO = "0" * 40
A, B, C = "a" * 40, "b" * 40, "c" * 40
ADVERTISED = frozenset(["report-status", "report-status-v2", "side-band-64k", "quiet", "atomic", "ofs-delta",
                        "no-thin"])
CAPS = b" report-status  side-band-64k agent=git/2.39.5"
SESSION = "20261203T211500-ab12"
MINE = "refs/heads/aisb/%s/fix" % SESSION


def request(*lines, pack=b"PACK...", caps=CAPS):
    """A receive-pack body: LINES (text) as commands, capabilities on the first."""
    packets = [pkt_line(line.encode() + (b"\0" + caps if index == 0 else b"")) for index, line in enumerate(lines)]
    return b"".join(packets) + b"0000" + pack


def parsed(body, hexsz=40):
    return parse_update_request(body, hexsz, ADVERTISED)


def refusal(body, hexsz=40):
    with pytest.raises(PushError) as raised:
        parsed(body, hexsz)
    return str(raised.value)


def test_a_push_of_two_branches_is_read_whole():
    body = request("%s %s %s" % (ZERO, A, MINE), "%s %s refs/heads/aisb/x/y\n" % (B, C))
    read = parsed(body)
    assert read.commands == (Command(ZERO, A, MINE), Command(B, C, "refs/heads/aisb/x/y"))
    assert read.capabilities == frozenset(["report-status", "side-band-64k", "agent=git/2.39.5"])
    assert body[read.pack_offset:] == b"PACK..."
    assert read.shallow == ()


def test_shallow_lines_are_read_wherever_git_reads_them():
    body = b"".join([pkt_line(b"shallow " + C.encode()), pkt_line(("%s %s %s\0" % (ZERO, A, MINE)).encode() + CAPS),
                     pkt_line(b"shallow " + B.encode() + b"\n"), b"0000"])
    read = parsed(body)
    assert read.shallow == (C, B) and read.commands == (Command(ZERO, A, MINE),)


@pytest.mark.parametrize("body, why", [
    (b"", "four lowercase hex"),
    (b"00", "four lowercase hex"),
    (b"000Ahello1", "four lowercase hex"),
    (b"004G", "four lowercase hex"),
    (b"+004", "four lowercase hex"),
    (b" 0a1", "four lowercase hex"),
    (b"0001", "length 1"),
    (b"0002", "length 2"),
    (b"0003", "length 3"),
    # git's receive-pack ends the command list at an empty packet as at a flush.
    (b"0004", "length 4"),
    (b"fff1" + b"x" * (MAX_PKT - 3), "length %d" % (MAX_PKT + 1)),
    (b"0010abc", "past the request's end"),
])
def test_pkt_line_length_tricks_are_refused(body, why):
    assert why in refusal(body)


def test_the_longest_pkt_line_is_read_and_one_byte_more_is_not():
    payload = b"x" * (MAX_PKT - 4)
    assert list(itertools.islice(pkt_lines(pkt_line(payload) + b"0000"), 2)) == [(payload, MAX_PKT),
                                                                                 (None, MAX_PKT + 4)]
    assert "length %d" % (MAX_PKT + 1) in refusal(pkt_line(payload + b"x"))


def test_an_empty_packet_inside_the_command_list_is_refused_not_skipped():
    # Read as git reads it, the second command would be the pack; read as an empty line
    # skipped, it would be a command the broker decides on and git never sees.
    body = pkt_line(("%s %s %s\0" % (ZERO, A, MINE)).encode() + CAPS) + b"0004" + \
        pkt_line(("%s %s refs/heads/main" % (B, C)).encode()) + b"0000"
    assert "length 4" in refusal(body)


def test_a_body_without_a_flush_is_refused():
    assert "four lowercase hex" in refusal(pkt_line(("%s %s %s\0" % (ZERO, A, MINE)).encode() + CAPS))


@pytest.mark.parametrize("lines, why", [
    (["%s %s %s" % (ZERO, A, MINE)], "first command carries the capabilities"),
    (["%s %s %s\0%s" % (ZERO, A, MINE, CAPS.decode()), "%s %s refs/heads/aisb/o\0push-options" % (ZERO, B)],
     "capabilities after the first command"),
    (["%s %s %s\0%s" % (ZERO, A, MINE, CAPS.decode()), "%s %s refs/heads/aisb/o\0" % (ZERO, B)],
     "capabilities after the first command"),
    (["%s %s %s\0report-status push-options" % (ZERO, A, MINE)], "push-options"),
    (["%s %s %s\0report-status push-cert=123" % (ZERO, A, MINE)], "push-cert"),
    (["%s %s %s\0report-status delete-refs" % (ZERO, A, MINE)], "delete-refs"),
    (["%s %s %s\0report-status\tquiet" % (ZERO, A, MINE)], "'report-status\\tquiet'"),
    (["%s %s %s\0report-status agent" % (ZERO, A, MINE)], "'agent'"),
    (["%s %s %s\0report-status quiet=1" % (ZERO, A, MINE)], "'quiet=1'"),
    (["%s %s %s\0report-status object-format=sha256" % (ZERO, A, MINE)], "object format"),
    (["%s %s %s\0side-band-64k" % (ZERO, A, MINE)], "asks report-status"),
    (["push-cert\0report-status", "certificate version 0.1"], "push-cert"),
    (["%s  %s %s\0report-status" % (ZERO, A, MINE)], "OLD-ID NEW-ID REF-NAME"),
    (["%s %s %s extra\0report-status" % (ZERO, A, MINE)], "OLD-ID NEW-ID REF-NAME"),
    (["%s %s\0report-status" % (ZERO, A)], "OLD-ID NEW-ID REF-NAME"),
    (["%s %s %s\tx\0report-status" % (ZERO, A, MINE)], "visible ASCII"),
    (["%s %s %s\n\0report-status" % (ZERO, A, MINE)], "visible ASCII"),
    (["%s %s %s\0report-status" % (ZERO, A.upper(), MINE)], "40 lowercase hex"),
    (["%s %s %s\0report-status" % (ZERO, A[:-1], MINE)], "40 lowercase hex"),
    (["%s %s %s\0report-status" % (ZERO, "g" * 40, MINE)], "40 lowercase hex"),
    (["%s %s %s\0report-status" % (ZERO, A, MINE), "shallow " + "A" * 40], "shallow"),
    (["%s %s %s\0report-status" % (ZERO, A, MINE), "%s %s %s" % (ZERO, B, MINE)], "more than one command"),
    (["%s %s refs/heads/aisb/\u00e9\0report-status" % (ZERO, A)], "not ASCII"),
])
def test_command_lines_outside_the_grammar_are_refused(lines, why):
    body = b"".join(pkt_line(line.encode()) for line in lines) + b"0000"
    assert why in refusal(body)


def test_a_capability_the_broker_did_not_advertise_is_refused():
    body = request("%s %s %s" % (ZERO, A, MINE), caps=b"report-status atomic")
    with pytest.raises(PushError, match="atomic was not advertised"):
        parse_update_request(body, 40, frozenset(["report-status"]))


def test_sha256_ids_are_read_in_a_sha256_repository_only():
    long_a = "a" * 64
    body = request("%s %s %s" % ("0" * 64, long_a, MINE), caps=b"report-status object-format=sha256")
    assert parsed(body, 64).commands == (Command("0" * 64, long_a, MINE),)
    assert "not the repository's object format" in refusal(body, 40)
    assert "40 lowercase hex" in refusal(request("%s %s %s" % ("0" * 64, long_a, MINE)), 40)


def test_the_bounds_on_commands_and_shallow_lines_hold():
    names = ["refs/heads/aisb/n%d" % index for index in range(MAX_COMMANDS + 1)]
    body = request(*("%s %s %s" % (ZERO, A, name) for name in names[:MAX_COMMANDS]))
    assert len(parsed(body).commands) == MAX_COMMANDS
    too_many = request(*("%s %s %s" % (ZERO, A, name) for name in names))
    assert "more than %d commands" % MAX_COMMANDS in refusal(too_many)
    shallow = pkt_line(b"shallow " + A.encode()) * (MAX_SHALLOW + 1)
    assert "shallow lines" in refusal(shallow + request("%s %s %s" % (ZERO, A, MINE)))
    assert "without commands" in refusal(b"0000PACK")


@pytest.mark.parametrize("name", [
    "refs/heads/aisb/x", "refs/heads/a.b/c_d-e", "refs/heads/x.y",
])
def test_plain_ref_names_pass(name):
    assert ref_name_problem(name) == ""


@pytest.mark.parametrize("name", [
    "refs/heads/aisb/s/../../main", "refs/heads/aisb/s/..", "refs/heads//main", "refs/heads/main/",
    "refs/heads/.hidden", "refs/heads/x.lock", "refs/heads/x.", "refs/heads/a@{1}", "refs/heads/a*",
    "refs/heads/a:b", "refs/heads/a~1", "refs/heads/a^", "refs/heads/a?", "refs/heads/a[b", "refs/heads/a\\b",
    "main", "/refs/heads/x", "refs/heads/\u0430isb/x", "refs/heads/a b", "HEAD",
])
def test_names_git_would_refuse_or_read_otherwise_are_refused(name):
    assert ref_name_problem(name)


@pytest.mark.parametrize("pattern", [DEFAULT_PATTERN, "aisb/*", "*", "agent/{session}", "team.x/bot-1/*"])
def test_operator_patterns_pass(pattern):
    assert check_pattern(pattern, "p") == pattern


@pytest.mark.parametrize("pattern", [
    "", "refs/heads/x", "aisb/*/x", "aisb/x*", "aisb/**", "aisb//x", "../main", "aisb/{id}/*", "aisb/{session",
    "aisb/x.lock/*", None, 3, "aisb/\u00e9/*", "/aisb/*", "aisb/",
])
def test_bad_patterns_are_refused_with_the_option_named(pattern):
    with pytest.raises(ValueError, match="^aisb_git_remotes\\[0\\] branches"):
        check_pattern(pattern, "aisb_git_remotes[0] branches")


@pytest.mark.parametrize("name, pattern, expected", [
    (MINE, DEFAULT_PATTERN, True),
    ("refs/heads/aisb/%s/a/b" % SESSION, DEFAULT_PATTERN, True),
    ("refs/heads/aisb/%s/" % SESSION, DEFAULT_PATTERN, False),
    ("refs/heads/aisb/%s" % SESSION, DEFAULT_PATTERN, False),
    ("refs/heads/aisb/%sx/fix" % SESSION, DEFAULT_PATTERN, False),
    ("refs/heads/aisb/other/fix", DEFAULT_PATTERN, False),
    ("refs/heads/AISB/%s/fix" % SESSION, DEFAULT_PATTERN, False),
    ("refs/heads/aisb/%s/../../main" % SESSION, DEFAULT_PATTERN, False),
    ("refs/tags/aisb/%s/fix" % SESSION, DEFAULT_PATTERN, False),
    ("refs/heads/main", DEFAULT_PATTERN, False),
    ("refs/heads/main", "*", True),
    ("refs/tags/v1", "*", False),
    ("refs/heads/agent/%s" % SESSION, "agent/{session}", True),
    ("refs/heads/agent/%s/x" % SESSION, "agent/{session}", False),
])
def test_branch_matches(name, pattern, expected):
    assert branch_matches(name, pattern, SESSION) is expected


def decided(commands, upstream=None, proven=lambda old, new: True):
    return [decision.refused for decision in decide(commands, DEFAULT_PATTERN, SESSION, upstream or {}, ZERO,
                                                    proven)]


ONLY = "aisb: only aisb/%s/* may be pushed" % SESSION


def test_a_create_and_a_proven_fast_forward_are_relayed():
    upstream = {"refs/heads/main": A, "refs/heads/aisb/%s/old" % SESSION: B}
    asked = []
    assert decided([Command(ZERO, A, MINE), Command(B, C, "refs/heads/aisb/%s/old" % SESSION)], upstream,
                   lambda old, new: asked.append((old, new)) or True) == ["", ""]
    assert asked == [(B, C)]


@pytest.mark.parametrize("command, upstream, why", [
    (Command(A, B, "refs/heads/main"), {"refs/heads/main": A}, ONLY),
    (Command(ZERO, B, "refs/tags/v1"), {}, ONLY),
    (Command(ZERO, B, "refs/tags/aisb/%s/x" % SESSION), {}, ONLY),
    (Command(ZERO, B, "refs/heads/aisb/other/x"), {}, ONLY),
    (Command(ZERO, B, "refs/notes/commits"), {}, ONLY),
    (Command(ZERO, B, "refs/heads/aisb/%s/../../main" % SESSION), {}, ONLY),
    (Command(A, ZERO, MINE), {MINE: A}, "aisb: deleting a ref is refused"),
    (Command(ZERO, B, MINE), {MINE: A}, "aisb: the upstream already has this ref"),
    (Command(C, B, MINE), {MINE: A}, "stale old id"),
    (Command(C, B, MINE), {}, "stale old id"),
    (Command(A, A, MINE), {MINE: A}, "changes nothing"),
    (Command(A, B, MINE), {MINE: A}, "not a fast-forward"),
])
def test_refused_updates(command, upstream, why):
    refused = decided([command], upstream, lambda old, new: False)
    assert why in refused[0]


def test_one_refused_ref_refuses_the_whole_push():
    refused = decided([Command(ZERO, A, MINE), Command(A, B, "refs/heads/main")], {"refs/heads/main": A})
    assert refused == ["aisb: another ref in this push was refused", ONLY]


def test_the_report_is_git_report_status():
    decisions = decide([Command(ZERO, A, MINE), Command(A, B, "refs/heads/main")], DEFAULT_PATTERN, SESSION,
                       {"refs/heads/main": A}, ZERO, lambda old, new: True)
    plain = report_status(decisions, False)
    other = pkt_line(("ng %s aisb: another ref in this push was refused\n" % MINE).encode())
    assert plain == (b"000eunpack ok\n" + other + pkt_line(("ng refs/heads/main %s\n" % ONLY).encode()) + b"0000")
    assert report_status(decisions, True) == pkt_line(b"\x01" + plain) + b"0000"
    ok = decide([Command(ZERO, A, MINE)], DEFAULT_PATTERN, SESSION, {}, ZERO, None)
    assert report_status(ok, False) == b"000eunpack ok\n" + pkt_line(("ok %s\n" % MINE).encode()) + b"0000"


def test_a_long_report_is_split_into_side_band_packets():
    names = ["refs/heads/aisb/%s/%s" % (SESSION, "n" * 200 + str(index)) for index in range(400)]
    decisions = decide([Command(ZERO, A, name) for name in names] + [Command(A, B, "refs/heads/main")],
                       DEFAULT_PATTERN, SESSION, {"refs/heads/main": A}, ZERO, None)
    plain = report_status(decisions, False)
    banded = report_status(decisions, True)
    packets = [payload for payload, _offset in _until_flush(banded)]
    assert len(packets) > 1 and all(packet[:1] == b"\x01" and len(packet) + 4 <= MAX_PKT for packet in packets)
    assert b"".join(packet[1:] for packet in packets) == plain


def _until_flush(data):
    for payload, offset in pkt_lines(data):
        if payload is None:
            assert offset == len(data)
            return
        yield payload, offset


def refused_request(capabilities):
    """A request parse_update_request refuses (a name outside ASCII, options asked) asking CAPABILITIES."""
    return (pkt_line(b"shallow %s\n" % A.encode())
            + pkt_line(b"%s %s %s\0 %s push-options\n" % (ZERO.encode(), A.encode(), MINE.encode(), capabilities))
            + pkt_line(b"%s %s refs/heads/\xc3\xbc\n" % (A.encode(), B.encode())) + b"0000PACK...")


def test_a_refused_request_is_reported_per_ref_where_the_protocol_allows():
    plain = refusal_report(refused_request(b"report-status"), "aisb: why")
    assert plain == (b"000eunpack ok\n" + pkt_line(b"ng %s aisb: why\n" % MINE.encode())
                     + pkt_line(b"ng refs/heads/\xc3\xbc aisb: why\n") + b"0000")
    assert refusal_report(refused_request(b"report-status-v2 side-band-64k"), "aisb: why") \
        == pkt_line(b"\x01" + plain) + b"0000"


@pytest.mark.parametrize("body", [
    pkt_line(b"%s %s refs/heads/x\0 quiet\n" % (ZERO.encode(), A.encode())) + b"0000",  # no report asked
    pkt_line(b"push-cert\0 report-status\n") + b"0000",  # no command line
    pkt_line(b"%s refs/heads/x\0 report-status\n" % ZERO.encode()) + b"0000",
    b"0000",
    b"zzzz",
    pkt_line(b"%s %s refs/heads/x\0 report-status\n" % (ZERO.encode(), A.encode())),  # no flush
    pkt_line(b"%s %s %s\0 report-status\n" % (ZERO.encode(), A.encode(), b"n" * 65400)) + b"0000",  # too long
])
def test_a_request_the_protocol_allows_no_report_for_gets_none(body):
    assert refusal_report(body, "aisb: " + "w" * 200) is None
