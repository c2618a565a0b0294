# SPDX-License-Identifier: GPL-3.0-or-later
"""The far end of the gate benchmark: an origin server in the test internet that sends
as many bytes as asked, over plain HTTP and over HTTPS (HTTP/1.1, keep-alive).

usage: payload_server.py ADDRESS HTTP_PORT HTTPS_PORT CERTFILE KEYFILE
GET /bytes/N answers N bytes; any other path answers 2 bytes. PUT reads its body
(Content-Length) and answers 2 bytes.
"""

import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = memoryview(b"\0" * (1 << 20))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY on every connection, as web servers set it (nginx's tcp_nodelay is on by
    # default): TLS 1.3 session tickets follow the handshake in writes of their own, and
    # with Nagle the second waited for the client's delayed ACK, 40 ms in every HTTPS
    # round, gate or direct.
    disable_nagle_algorithm = True

    def do_GET(self):  # pylint: disable=invalid-name
        size = int(self.path.rsplit("/", 1)[1]) if self.path.startswith("/bytes/") else 2
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % size
        # Head and the first bytes in one write: a small answer is one segment, so no
        # Nagle/delayed-ACK stall is measured as the gate's latency.
        first = min(size, len(CHUNK))
        self.wfile.write(head + CHUNK[:first].tobytes())
        size -= first
        while size:
            sent = min(size, len(CHUNK))
            self.wfile.write(CHUNK[:sent])
            size -= sent

    def do_PUT(self):  # pylint: disable=invalid-name
        left = int(self.headers.get("Content-Length", "0"))
        while left:
            got = self.rfile.read(min(left, len(CHUNK)))
            if not got:
                return
            left -= len(got)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def log_message(self, *_args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # The gate benchmark's burst opens 32 connections at once.
    request_queue_size = 64

    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()


def main(address, http_port, https_port, certfile, keyfile):
    plain = Server((address, int(http_port)), Handler)
    secure = Server((address, int(https_port)), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)
    # The handshake happens in each connection's own thread, not in accept().
    secure.socket = context.wrap_socket(secure.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=secure.serve_forever, daemon=True).start()
    print("ready", flush=True)
    plain.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
