# SPDX-License-Identifier: GPL-3.0-or-later
"""The usage a provider's response reports, read piece by piece as the injector relays
it: every API's JSON body and stream, cut anywhere, and garbage that must read as none."""

import gzip
import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._provider_usage import (
    KEPT, MAX_REWRITTEN, UsageMeter, counted_request, free_request)


def sse(*events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())
                    for name, data in events)


ANTHROPIC_STREAM = sse(
    ("message_start", {"type": "message_start", "message": {"id": "m", "content": [], "usage": {
        "input_tokens": 1000, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 30,
        "output_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 200}}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": 'say "usage": {"output_tokens": 0}'}}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 4000}}),
    ("message_stop", {"type": "message_stop"}))
CHAT_STREAM = b"".join(b"data: %s\n\n" % json.dumps(chunk).encode() for chunk in (
    {"choices": [{"delta": {"content": "hi"}}], "usage": None},
    {"choices": [], "usage": {"prompt_tokens": 700, "completion_tokens": 80, "total_tokens": 780,
                              "prompt_tokens_details": {"cached_tokens": 600}}})) + b"data: [DONE]\n\n"
RESPONSES_STREAM = sse(
    ("response.created", {"type": "response.created", "response": {"id": "r", "usage": None}}),
    ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "x" * 20000}),
    ("response.completed", {"type": "response.completed", "response": {
        "id": "r", "output": [{"content": [{"text": "x" * 20000}]}],
        "usage": {"input_tokens": 300, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 90,
                  "output_tokens_details": {"reasoning_tokens": 60}, "total_tokens": 390}}}))
GOOGLE_CHUNKS = [{"candidates": [{"content": {"parts": [{"text": "a"}]}}],
                  "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": count, "thoughtsTokenCount": 7,
                                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 50}]}}
                 for count in (1, 9, 20)]

SHAPES = {
    "anthropic json": (json.dumps({"content": [{"type": "text", "text": "usage"}], "usage": {
        "input_tokens": 12, "output_tokens": 34, "cache_read_input_tokens": 5}}).encode(), 17, 34),
    "anthropic stream": (ANTHROPIC_STREAM, 1230, 4000),
    "openai chat json": (json.dumps({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}},
                                    indent=2).encode(), 9, 3),
    "openai chat stream": (CHAT_STREAM, 700, 80),
    "openai responses json": (json.dumps({"output": [], "usage": {"input_tokens": 8, "output_tokens": 2}}).encode(),
                              8, 2),
    "openai responses stream": (RESPONSES_STREAM, 300, 90),
    "google sse": (b"".join(b"data: %s\r\n\r\n" % json.dumps(c).encode() for c in GOOGLE_CHUNKS), 50, 27),
    "google json array": (json.dumps(GOOGLE_CHUNKS, indent=1).encode(), 50, 27),
}


def metered(body, size):
    meter = UsageMeter()
    for start in range(0, len(body), size):
        meter.feed(body[start:start + size])
    return meter


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("size", [1, 7, 64, 65536])
def test_every_shape_in_pieces_of_any_size(shape, size):
    body, tokens_in, tokens_out = SHAPES[shape]
    meter = metered(body, size)
    assert (meter.input, meter.output, meter.reported) == (tokens_in, tokens_out, True)
    assert meter.size == len(body)


def test_a_stream_cut_short_keeps_what_it_said():
    cut = ANTHROPIC_STREAM[:ANTHROPIC_STREAM.index(b"event: message_delta")]
    meter = metered(cut, 100)
    assert (meter.input, meter.output) == (1230, 1)
    # Cut inside the last report: the earlier one stands.
    inside = ANTHROPIC_STREAM[:ANTHROPIC_STREAM.index(b'"output_tokens": 4000') + 18]
    assert (metered(inside, 50).input, metered(inside, 50).output) == (1230, 1)


def test_the_model_text_cannot_report_usage():
    # A model's words are inside JSON strings: their quotes are escaped.
    text = 'the usage: "usage": {"input_tokens": 99999999, "output_tokens": 99999999}'
    body = json.dumps({"content": [{"type": "text", "text": text}], "usage": {"input_tokens": 1,
                                                                              "output_tokens": 2}}).encode()
    assert (metered(body, 3).input, metered(body, 3).output) == (1, 2)


@pytest.mark.parametrize("garbage", [
    b"", b"\x00\xff" * 50000, b'"usage": {', b'"usage": {"input_tokens": "12", "output_tokens": -5, "x": true}',
    b'"usage": {"input_tokens": 1e999, "output_tokens": true}', b'"usage": [1, 2]', b'"usage": {' + b"[" * 100000,
    b'"usage"' * 100000, b'"usage": {"input_tokens": ' + b"9" * 5000 + b"}", b'"usageMetadata": {"\xff\xfe": 3}',
    gzip.compress(json.dumps({"usage": {"input_tokens": 5, "output_tokens": 5}}).encode(), mtime=0),
])
def test_garbage_reads_as_no_usage(garbage):
    meter = metered(garbage, 4096)
    assert (meter.input, meter.output, meter.reported) == (0, 0, False)


def test_garbage_before_a_report_does_not_hide_it():
    body = b'"usage": {"input_tokens": [' + b"x" * (2 * KEPT) + b'\ndata: {"usage": {"input_tokens": 3, ' \
        b'"output_tokens": 4}}\n\n'
    meter = metered(body, 1000)
    assert (meter.input, meter.output) == (3, 4)


def test_a_huge_line_is_read_in_bounded_memory():
    meter = UsageMeter()
    piece = b'data: {"delta": "' + b"y" * 65000 + b'"}\n'
    for _index in range(200):  # 13 MB without a newline's relief
        meter.feed(piece.replace(b"\n", b""))
        assert len(meter._kept) <= KEPT + 100  # pylint: disable=protected-access
    meter.feed(b'data: {"usage": {"prompt_tokens": 11, "completion_tokens": 22}}\n\n')
    assert (meter.input, meter.output) == (11, 22)


def test_a_chat_stream_is_asked_for_its_usage():
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "é"}]}).encode()
    sent = json.loads(counted_request("v1/chat/completions", body))
    assert sent["stream_options"] == {"include_usage": True} and sent["messages"][0]["content"] == "é"
    refused = json.dumps({"stream": True, "stream_options": {"include_usage": False, "x": 1}}).encode()
    assert json.loads(counted_request("v1/chat/completions?a=b", refused))["stream_options"] == {
        "include_usage": True, "x": 1}
    # An escaped key is the same key to the provider's parser.
    sneaky = b'{"stream": true, "stream\\u005foptions": {"include_usage": false}}'
    assert json.loads(counted_request("v1/chat/completions", sneaky))["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("path, body", [
    ("v1/chat/completions", b'{"stream": false}'), ("v1/chat/completions", None),
    ("v1/messages", b'{"stream": true}'), ("v1/chat/completions", b'{"stream": true' + b" " * MAX_REWRITTEN + b"}"),
    ("v1/chat/completions", b"[" * 100000 + b'"stream"'), ("v1/chat/completions", b'["stream", true]'),
    ("v1/chat/completions", b'{"stream": true, "stream_options": {"include_usage": true}}'),
])
def test_other_requests_go_as_they_are(path, body):
    assert counted_request(path, body) is body


def test_token_counting_is_free():
    assert free_request("v1/messages/count_tokens") and free_request("v1beta/models/g:countTokens?x=1")
    assert not free_request("v1/messages") and not free_request("v1beta/models/g:generateContent")
