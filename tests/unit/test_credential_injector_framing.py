# SPDX-License-Identifier: GPL-3.0-or-later
"""The credential injector's request parser as pure functions over a byte stream: what
read_head and read_body accept, where each bound falls, and relayed_headers' filter."""

import io

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import (
    MAX_BODY, MAX_HEADERS, MAX_LINE, Incomplete, InjectorError, read_body, read_head, relayed_headers)


def head_of(data):
    return read_head(io.BytesIO(data))


def refusal(function, data, *args):
    with pytest.raises(InjectorError) as raised:
        function(io.BytesIO(data), *args)
    return raised.value.args[0]


def test_a_plain_head_is_read():
    data = b"POST /h/v1?q=1 HTTP/1.1\r\nA: b c\r\nEmpty:\r\nSpace: \r\nNo-Space:x\r\nContent-Length: 012\r\n\r\n"
    assert head_of(data) == ("POST", "/h/v1?q=1", "HTTP/1.1", [
        ("A", "b c"), ("Empty", ""), ("Space", ""), ("No-Space", "x"), ("Content-Length", "012")], 12)
    data = b"GET / HTTP/1.0\r\nTransfer-Encoding: Chunked\r\n\r\n"
    assert head_of(data)[3:] == ([("Transfer-Encoding", "Chunked")], None)
    assert head_of(b"") is None


def test_the_bounds_fall_where_they_are_stated():
    longest = b"GET /" + b"a" * (MAX_LINE - len(b"GET / HTTP/1.1")) + b" HTTP/1.1"
    assert len(longest) == MAX_LINE and head_of(longest + b"\r\n\r\n")[1].endswith("a")
    assert refusal(read_head, longest.replace(b"/", b"/a", 1) + b"\r\n\r\n") == 400
    field = b"X: " + b"v" * (MAX_LINE - 3)
    assert head_of(b"GET / HTTP/1.1\r\n" + field + b"\r\n\r\n")[3] == [("X", "v" * (MAX_LINE - 3))]
    assert refusal(read_head, b"GET / HTTP/1.1\r\n" + field + b"v\r\n\r\n") == 400
    many = b"".join(b"H%d: v\r\n" % n for n in range(MAX_HEADERS))
    assert len(head_of(b"GET / HTTP/1.1\r\n" + many + b"\r\n")[3]) == MAX_HEADERS
    assert refusal(read_head, b"GET / HTTP/1.1\r\n" + many + b"One-More: v\r\n\r\n") == 400
    assert head_of(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % MAX_BODY)[4] == MAX_BODY
    assert refusal(read_head, b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)) == 413
    assert refusal(read_head, b"POST / HTTP/1.1\r\nContent-Length: 1%s\r\n\r\n" % (b"0" * 5000)) == 413


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nA: b\r\n",
    b"GET / HTTP/1.1\r\nA: b",
    b"GET / HTT",
])
def test_a_stream_ending_inside_a_head_is_incomplete(data):
    with pytest.raises(Incomplete):
        head_of(data)


@pytest.mark.parametrize("data, length, body", [
    (b"abc", 3, b"abc"),
    (b"", 0, None),
    (b"3\r\nabc\r\n0\r\n\r\n", None, b"abc"),
    (b"3;ext=\"x\"\r\nabc\r\nA\r\n0123456789\r\n000\r\nTrailer: t\r\n\r\n", None, b"abc0123456789"),
    (b"0\r\n\r\n", None, b""),
])
def test_a_body_is_read(data, length, body):
    assert read_body(io.BytesIO(data), length) == body


@pytest.mark.parametrize("data", [
    b"-1\r\nabc\r\n0\r\n\r\n", b"+3\r\nabc\r\n0\r\n\r\n", b" 3\r\nabc\r\n0\r\n\r\n", b"3 \r\nabc\r\n0\r\n\r\n",
    b"0x3\r\nabc\r\n0\r\n\r\n", b"\r\nabc\r\n0\r\n\r\n", b"3\nabc\r\n0\r\n\r\n", b"3\r\nabcXX0\r\n\r\n",
    b"3\r\nabc\n0\r\n\r\n", b"3\r\nabc\r\n0\r\nBad Trailer: t\r\n\r\n", b"3\r\nabc\r\n0\r\n folded\r\n\r\n",
    b"3;a\nXX\r\nabc\r\n0\r\n\r\n", b"3;a\rb\r\nabc\r\n0\r\n\r\n", b"3;a\x00\r\nabc\r\n0\r\n\r\n",
])
def test_bad_chunks_are_refused(data):
    assert refusal(read_body, data, None) == 400


def test_chunks_are_bounded_in_all():
    assert refusal(read_body, b"%x\r\n" % (MAX_BODY + 1), None) == 413
    assert refusal(read_body, b"ffffffffffffffffffffffff\r\n", None) == 413
    assert refusal(read_body, b"1\r\na\r\n%x\r\n" % MAX_BODY, None) == 413


@pytest.mark.parametrize("data, length", [(b"ab", 3), (b"3\r\nab", None), (b"3\r\nabc\r\n", None),
                                          (b"0\r\nT: v\r\n", None)])
def test_a_body_cut_short_is_incomplete(data, length):
    with pytest.raises(Incomplete):
        read_body(io.BytesIO(data), length)


def test_relayed_headers_drop_hop_by_hop_forwarding_and_the_key_header():
    headers = [("Connection", "keep-alive, X-Named"), ("connection", "x-also"), ("X-Named", "1"), ("X-Also", "2"),
               ("Forwarded", "for=x"), ("X-Forwarded-Host", "evil"), ("X-FORWARDED-PROTO", "http"), ("Via", "1.1 x"),
               ("Keep-Alive", "5"), ("Proxy-Connection", "keep-alive"), ("X-HTTP-Method-Override", "DELETE"),
               ("X-Api-Key", "planted"), ("Content-Type", "application/json"), ("X-Kept", "a"), ("X-Kept", "b")]
    assert relayed_headers(headers, "x-api-key") == [("Content-Type", "application/json"), ("X-Kept", "a"),
                                                     ("X-Kept", "b")]
