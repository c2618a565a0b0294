# SPDX-License-Identifier: GPL-3.0-or-later
"""Times COUNT small requests one after another, directly or through a proxy; prints
the seconds each took as a JSON list.

usage: latency_client.py URL COUNT MODE [PROXY_HOST:PORT]
MODE: "new" opens a connection per request (as curl does), "reuse" keeps one open.
An https URL goes through the proxy in a CONNECT tunnel, with the URL's name as SNI;
its certificate is not checked (the cost measured is the path's, not the client's).
"""

import http.client
import json
import ssl
import sys
import time
from urllib.parse import urlsplit


def connect(url, proxy):
    if url.scheme == "https":
        host, port = proxy.rsplit(":", 1) if proxy else (url.hostname, url.port or 443)
        conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=ssl._create_unverified_context())
        if proxy:
            conn.set_tunnel(url.hostname, url.port or 443)
        return conn
    host, port = proxy.rsplit(":", 1) if proxy else (url.hostname, url.port or 80)
    return http.client.HTTPConnection(host, int(port), timeout=10)


def main(url, count, mode, proxy=None):
    parts = urlsplit(url)
    # Through a plain HTTP proxy the request line carries the absolute URL.
    target = url if proxy and parts.scheme == "http" else (parts.path or "/")
    times, conn = [], None
    for _request in range(int(count)):
        start = time.perf_counter()
        if conn is None:
            conn = connect(parts, proxy)
        conn.request("GET", target, headers={"Host": parts.netloc})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit("%s answered %d" % (url, response.status))
        if mode == "new":
            conn.close()
            conn = None
        times.append(time.perf_counter() - start)
    print(json.dumps(times))


if __name__ == "__main__":
    main(*sys.argv[1:])
