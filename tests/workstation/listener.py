# SPDX-License-Identifier: GPL-3.0-or-later
"""A test "internet" server: answers HTTP on every port it is given, and HTTPS on the same
ports to a client whose first byte is a TLS handshake (the gate relays only TLS through a
CONNECT tunnel), and logs every request it sees (one JSON line each), so a leak is seen,
not inferred.

usage: listener.py ADDRESS LOGFILE CERTFILE KEYFILE PORT...
"""
import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TLS_HANDSHAKE = b"\x16"


def handler_for(log, lock):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                log.write(json.dumps({"port": self.server.server_port, "host": self.headers.get("Host"),
                                      "path": self.path, "client": self.client_address[0], "at": time.time()}) + "\n")
                log.flush()
            body = ("hello from %s port %d\n" % (self.headers.get("Host"), self.server.server_port)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    return Handler


class Server(ThreadingHTTPServer):
    """Plain HTTP, or HTTPS when the client's first byte says so."""

    tls = None

    def finish_request(self, request, client_address):
        request.settimeout(10)
        try:
            if request.recv(1, socket.MSG_PEEK) == TLS_HANDSHAKE:
                request = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        super().finish_request(request, client_address)


def main(address, logfile, certfile, keyfile, *ports):
    Server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    Server.tls.load_cert_chain(certfile, keyfile)
    lock = threading.Lock()
    with open(logfile, "a") as log:
        servers = [Server((address, int(port)), handler_for(log, lock)) for port in ports]
        for server in servers[1:]:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        print("ready", flush=True)
        servers[0].serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
