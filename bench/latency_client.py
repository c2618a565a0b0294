# SPDX-License-Identifier: GPL-3.0-or-later
"""Times COUNT small plain-HTTP requests one after another, directly or through a proxy;
prints the seconds each took as a JSON list.

usage: latency_client.py URL COUNT MODE [PROXY_HOST:PORT]
MODE: "new" opens a connection per request (as curl does), "reuse" keeps one open.
"""

import http.client
import json
import sys
import time
from urllib.parse import urlsplit


def connect(url, proxy):
    host, port = proxy.rsplit(":", 1) if proxy else (url.hostname, url.port or 80)
    return http.client.HTTPConnection(host, int(port), timeout=10)


def main(url, count, mode, proxy=None):
    parts = urlsplit(url)
    # Through a proxy the request line carries the absolute URL.
    target = url if proxy else (parts.path or "/")
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
