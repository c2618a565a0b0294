# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake model provider in the test internet: HTTPS with a test CA's certificate, or
plain HTTP (a local or self-hosted model server) when CERT is "-", compatible enough
for the harnesses' APIs: Anthropic Messages (POST .../messages, pi), OpenAI Responses
(POST .../responses, codex) and OpenAI chat completions (POST .../chat/completions,
opencode), each streamed as server-sent events when asked, and a model list (GET
.../models). An answer that is not streamed reports the request's max_tokens as its
output tokens (what a model may spend), 2 without one. A request whose body holds
FAIL_MARK gets a 400 error in that API's shape,
so a test can make a harness's run fail. It logs every request (one JSON line each), so
what reached the provider is seen, not inferred.

usage: fake_provider.py ADDRESS PORT CERT|- KEY|- LOGFILE ANSWER
"""
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def events(answer):
    """The Anthropic Messages stream for one text answer."""
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    for part in (answer[:len(answer) // 2], answer[len(answer) // 2:]):
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": part}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": 2}}
    yield "message_stop", {"type": "message_stop"}


FAIL_MARK = "AISB-FAKE-PROVIDER-FAIL"
MODELS = {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}], "models": []}


def responses_events(answer):
    """The OpenAI Responses stream for one text answer (what codex reads)."""
    response = {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "model": "fake-model", "output": []}
    item = {"id": "msg_fake", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    yield "response.created", {"type": "response.created", "response": response}
    yield "response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}
    yield "response.content_part.added", {"type": "response.content_part.added", "item_id": "msg_fake",
                                          "output_index": 0, "content_index": 0,
                                          "part": {"type": "output_text", "text": "", "annotations": []}}
    for part in (answer[:len(answer) // 2], answer[len(answer) // 2:]):
        yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_fake",
                                             "output_index": 0, "content_index": 0, "delta": part}
    text = {"type": "output_text", "text": answer, "annotations": []}
    yield "response.output_text.done", {"type": "response.output_text.done", "item_id": "msg_fake",
                                        "output_index": 0, "content_index": 0, "text": answer}
    yield "response.content_part.done", {"type": "response.content_part.done", "item_id": "msg_fake",
                                         "output_index": 0, "content_index": 0, "part": text}
    done = dict(item, status="completed", content=[text])
    yield "response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done}
    usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 3}
    yield "response.completed", {"type": "response.completed",
                                 "response": dict(response, status="completed", output=[done], usage=usage)}


def chat_events(answer):
    """The OpenAI chat completions stream for one text answer (what opencode reads)."""
    chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
             "model": "fake-model"}
    yield None, dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None}])
    for part in (answer[:len(answer) // 2], answer[len(answer) // 2:]):
        yield None, dict(chunk, choices=[{"index": 0, "delta": {"content": part}, "finish_reason": None}])
    yield None, dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})


def chat_reply(answer):
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}


def messages_reply(answer):
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 2}}


def error_reply(path):
    """A 400 in the shape of PATH's API, its message naming FAIL_MARK (the harness must
    report it, so a test sees the provider's own answer in the transcript, and fail)."""
    message = "fake provider refused: %s" % FAIL_MARK
    if path.rstrip("/").endswith("/messages"):
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "fake_refusal"}}


def handler_for(log, lock, answer):
    class Handler(BaseHTTPRequestHandler):
        def _log(self, body):
            with lock:
                log.write(json.dumps({"method": self.command, "path": self.path,
                                      "headers": [[k, v] for k, v in self.headers.items()],
                                      "body": body.decode("utf-8", "replace")}) + "\n")
                log.flush()

        def _body(self):
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _json(self, status, value):
            reply = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def do_GET(self):
            self._log(b"")
            if self.path.split("?")[0].rstrip("/").endswith("/models"):
                self._json(200, MODELS)
                return
            body = ("fake provider saw %s\n" % self.path).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self._body()
            self._log(body)
            path = self.path.split("?")[0].rstrip("/")
            if FAIL_MARK.encode() in body:
                self._json(400, error_reply(path))
                return
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            request = request if isinstance(request, dict) else {}
            stream = bool(request.get("stream"))
            if path.endswith("/responses"):
                stream, events_of, reply_of = True, responses_events, None
            elif path.endswith("/chat/completions"):
                events_of, reply_of = chat_events, chat_reply
            else:
                events_of, reply_of = events, messages_reply
            if not stream:
                reply = reply_of(answer)
                spent = request.get("max_tokens")
                if isinstance(spent, int) and spent > 0:
                    # A model may spend all of max_tokens: a budget's test sets what it is.
                    usage = reply["usage"]
                    usage["completion_tokens" if "completion_tokens" in usage else "output_tokens"] = spent
                self._json(200, reply)
                return
            # Close-delimited, one event at a time: the relay must pass a stream on as it comes.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in events_of(answer):
                named = "event: %s\n" % name if name else ""
                self.wfile.write(("%sdata: %s\n\n" % (named, json.dumps(data))).encode())
                self.wfile.flush()
            if events_of is chat_events:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            self.close_connection = True

        def log_message(self, *_args):
            pass

    return Handler


def main(address, port, cert, key, logfile, answer):
    with open(logfile, "a") as log:
        server = ThreadingHTTPServer((address, int(port)), handler_for(log, threading.Lock(), answer))
        if cert != "-":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        print("ready", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
