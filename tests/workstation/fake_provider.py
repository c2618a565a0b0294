# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake model provider in the test internet: HTTPS with a test CA's certificate, or
plain HTTP (a local or self-hosted model server) when CERT is "-", Anthropic-compatible
enough for pi (POST /v1/messages, streamed as server-sent events when asked). It logs
every request's headers (one JSON line each), so what reached the provider is seen, not
inferred. A request whose body holds FAIL_MARK gets an Anthropic error answer (HTTP 400,
which harnesses do not retry): a failing run.

usage: fake_provider.py ADDRESS PORT CERT|- KEY|- LOGFILE ANSWER
"""
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAIL_MARK = b"AISB-FAKE-PROVIDER-FAIL"


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

        def do_GET(self):
            self._log(b"")
            body = ("fake provider saw %s\n" % self.path).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self._body()
            self._log(body)
            if FAIL_MARK in body:
                reply = json.dumps({"type": "error", "error": {
                    "type": "invalid_request_error", "message": "fake provider refused: %s" % FAIL_MARK.decode()}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                return
            try:
                stream = bool(json.loads(body or b"{}").get("stream"))
            except ValueError:
                stream = False
            if not stream:
                reply = json.dumps({"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
                                    "content": [{"type": "text", "text": answer}], "stop_reason": "end_turn",
                                    "usage": {"input_tokens": 1, "output_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                return
            # Close-delimited, one event at a time: the relay must pass a stream on as it comes.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in events(answer):
                self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
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
