# SPDX-License-Identifier: GPL-3.0-or-later
"""A test "internet" server: answers HTTP on every port it is given and logs every
request it sees (one JSON line each), so a leak is seen, not inferred.

usage: listener.py ADDRESS LOGFILE PORT...
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler_for(log, lock):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            with lock:
                log.write(json.dumps({"port": self.server.server_port, "host": self.headers.get("Host"),
                                      "path": self.path, "client": self.client_address[0]}) + "\n")
                log.flush()
            body = ("hello from %s port %d\n" % (self.headers.get("Host"), self.server.server_port)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    return Handler


def main(address, logfile, *ports):
    lock = threading.Lock()
    with open(logfile, "a") as log:
        servers = [ThreadingHTTPServer((address, int(port)), handler_for(log, lock)) for port in ports]
        for server in servers[1:]:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        print("ready", flush=True)
        servers[0].serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
