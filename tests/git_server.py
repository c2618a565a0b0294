# SPDX-License-Identifier: GPL-3.0-or-later
"""A git server over HTTPS for tests: git's own http-backend behind a small server that
answers 401 unless the request carries Basic auth with its token. Each request's
Authorization header is kept (seen), so a test can tell what reached it."""

import base64
import os
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import certificates


def handler_for(root, user, token, seen):
    expected = "Basic " + base64.b64encode(("%s:%s" % (user, token)).encode()).decode()

    class Backend(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def _cgi(self):
            seen.append({"method": self.command, "path": self.path,
                         "authorization": self.headers.get("Authorization")})
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path, _mark, query = self.path.partition("?")
            env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
                   "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
                   "CONTENT_TYPE": self.headers.get("Content-Type") or "", "CONTENT_LENGTH": str(len(body)),
                   "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1", "GIT_CONFIG_NOSYSTEM": "1",
                   "HOME": str(root)}
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run(["git", "http-backend"], input=body, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, check=False).stdout
            head, _blank, rest = out.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _colon, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(rest)))
            self.end_headers()
            self.wfile.write(rest)

        do_GET = do_POST = _cgi

        def log_message(self, *_args):
            pass

    return Backend


def serve(work, name, root, user, token, address="127.0.0.1", port=0):
    """An HTTPS git server for NAME at ADDRESS:PORT (a free port by default) serving the
    bare repositories under ROOT, its CA made in WORK: (server, {port, ca, seen})."""
    certificates.make(work, name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "server.crt", work / "server.key")
    seen = []
    server = ThreadingHTTPServer((address, port), handler_for(root, user, token, seen))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, {"port": server.server_address[1], "ca": str(work / "ca.crt"), "seen": seen}
