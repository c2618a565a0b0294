# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tokens a provider's response reports spent, read as the response is relayed.

One reading for every API and framing: a response's usage is a JSON object under the
key "usage" (Anthropic Messages, OpenAI chat completions and Responses) or
"usageMetadata" (Google generateContent/streamGenerateContent), in a JSON body, a JSON
array or any server-sent event, so UsageMeter looks for that key followed by ":" and
"{" wherever it occurs and parses the object after it. A key found that way is
structure, never a model's text: inside a JSON string every quote is escaped, so the
model's own words cannot make one. What is kept between pieces is the bytes from the
last possible key on, at most KEPT: a response of any length costs the same memory.

Within one response the reports are cumulative (Anthropic's message_start then
message_delta, Google's every chunk), so each field's largest value is the one spent;
input is INPUT_FIELDS' sum (cache writes and reads count: they are billed), output
OUTPUT_FIELDS' (reasoning counted as the APIs bill it). A response cut short keeps what
its reports said so far. Nothing fed in raises: garbage is read as no usage.

A generation whose answer says no usage at all (a body too large to ask for it, an
answer compressed although identity was asked) is counted by its size (unmetered):
its request's bytes as input, its answer's as output, more than its tokens for text.
"""

from __future__ import annotations

import json
import re

# Summed into a response's input and output tokens (each field's largest value).
INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",  # Anthropic, Responses
                "prompt_tokens",  # OpenAI chat completions
                "promptTokenCount", "toolUsePromptTokenCount")  # Google
OUTPUT_FIELDS = ("output_tokens", "completion_tokens", "candidatesTokenCount", "thoughtsTokenCount")
# The bytes kept for a usage object not yet complete (real ones are a few hundred).
KEPT = 4096
# "usage" or "usageMetadata" as an object's key, the object's "{" after it.
USAGE_KEY = re.compile(rb'"usage(?:Metadata)?"[ \t\r\n]{0,8}:[ \t\r\n]{0,8}\{')
# Where a key may begin: the bytes kept across pieces for a key split between them.
KEY_START = b'"usage'
LONGEST_KEY = len(b'"usageMetadata"') + 18
_DECODER = json.JSONDecoder()
# The largest request body parsed to ask a chat stream for its usage (counted_request).
MAX_REWRITTEN = 2 * 1024 * 1024
# Token counting (Anthropic's count_tokens, Google's countTokens): no generation, no usage.
FREE_PATHS = ("/count_tokens", ":countTokens")


def _escaped(data, index):
    """Whether the quote at INDEX in DATA follows an odd run of backslashes."""
    start = index
    while start > 0 and data[start - 1:start] == b"\\":
        start -= 1
    return (index - start) % 2 == 1


class UsageMeter(object):
    """Feed it a response's body as it is relayed (feed(piece)); .input and .output are
    the tokens its usage reports said so far (take() those not yet taken), .reported
    whether there was one, .size the bytes fed."""

    def __init__(self):
        self.largest = {}
        self.input = self.output = 0
        self.reported = False
        self.size = 0
        self._kept = b""
        self._taken = (0, 0)

    def take(self):
        """The (input, output) tokens reported since the last take()."""
        taken, self._taken = self._taken, (self.input, self.output)
        return self._taken[0] - taken[0], self._taken[1] - taken[1]

    def feed(self, piece):
        self.size += len(piece)
        try:
            self._feed(piece)
        except Exception:  # pylint: disable=broad-except
            # The relay must go on whatever the provider sent: this response's usage
            # stays what it was.
            self._kept = b""

    def _feed(self, piece):
        data = self._kept + piece if self._kept else piece
        position = 0
        while True:
            found = USAGE_KEY.search(data, position)
            if found is None:
                break
            if _escaped(data, found.start()):
                position = found.start() + 1
                continue
            end = self._read_object(data, found.end() - 1)
            if end is None:
                # The object goes on in the next piece: keep it from its key, if short.
                self._kept = data[found.start():]
                return
            position = end
        # A key may be cut at the piece's end: keep the last bytes that could begin one.
        tail = data[max(position, len(data) - LONGEST_KEY):]
        start = tail.find(KEY_START[:1])
        self._kept = tail[start:] if start >= 0 else b""

    def _read_object(self, data, brace):
        """The end of the object at BRACE (its usage noted), or None when DATA ends
        inside it; an object that is no JSON is passed over."""
        text = data[brace:brace + KEPT].decode("utf-8", "surrogateescape")
        try:
            value, length = _DECODER.raw_decode(text)
        except ValueError:
            if len(data) - brace < KEPT:
                return None
            return brace + 1
        self._note(value)
        return brace + len(text[:length].encode("utf-8", "surrogateescape"))

    def _note(self, usage):
        for name, value in usage.items():
            if name in INPUT_FIELDS or name in OUTPUT_FIELDS:
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    self.reported = True
                    self.largest[name] = max(self.largest.get(name, 0), value)
        self.input = sum(self.largest.get(name, 0) for name in INPUT_FIELDS)
        self.output = sum(self.largest.get(name, 0) for name in OUTPUT_FIELDS)


def counted_request(path, body):
    """BODY as sent to PATH (the provider's, without its leading "/"): an OpenAI chat
    completions stream is asked for its usage (stream_options.include_usage), which it
    leaves out unless asked. A body over MAX_REWRITTEN, or one that is not a JSON
    object, goes as it is (its answer, without usage, is counted by its size)."""
    if (body is None or len(body) > MAX_REWRITTEN or b'"stream' not in body
            or not path.split("?", 1)[0].rstrip("/").endswith("chat/completions")):
        return body
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(request, dict) or request.get("stream") is not True:
        return body
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body
    request["stream_options"] = dict(options if isinstance(options, dict) else {}, include_usage=True)
    return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def free_request(path):
    """Whether PATH (the provider's) only counts tokens: it spends none and says no usage."""
    return path.split("?", 1)[0].rstrip("/").endswith(FREE_PATHS)
