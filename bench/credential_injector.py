# SPDX-License-Identifier: GPL-3.0-or-later
"""The injecting path's cost: what a provider request pays for going through the
session's credential injector instead of straight to the provider, and the option not
taken (squid as a TLS-originating reverse proxy that adds the header) measured beside it.

usage: python3 bench/credential_injector.py [RUNS] [--squid]   (on the build machine;
bench/run runs it with the rest, without --squid)

All on this machine's loopback, each party a process of its own: a provider (HTTPS,
HTTP/1.1 keep-alive, a certificate from a CA made here) answering a small JSON request
and a stream of server-sent events; the injector (plugins/module_utils/
_credential_injector.py, as the session runs it: a thread server in one Python
process); a client that sends 1000 small POSTs one after another on one kept-alive
connection (as node's fetch does) and times each. The floor is the same client
straight to the provider over TLS on one kept-alive connection. The stream: 5 events
50 ms apart; the figure is when the first one reached the client (the relay must not
hold it). The answers report their usage as Anthropic's do, and the injector has a
token budget it never reaches: its usage accounting and budget check are measured with
the relay. With --squid, squid (the build machine's, `squid -N`) in accel mode with
`cache_peer ... originserver tls` and request_header_access/request_header_add, the
configuration that alternative needs, is measured the same way. Medians over RUNS
rounds (default 3). Then hostile requests: a client sends HOSTILE_REQUESTS malformed
requests (tests/hostile_requests.py, the unit tests' fuzz: bad lengths, chunks, smuggling
pairs, bare CR/LF, overlong lines...) to the injector, each on a new connection; the
figure is this process's resident memory (the injector's, as in the session's process)
after them beside before them. A measurement, not a test: it asserts nothing.
"""

import argparse
import collections
import gc
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import certificates  # noqa: E402  pylint: disable=wrong-import-position
import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import (  # noqa: E402
    CredentialInjector)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._providers import ANTHROPIC  # noqa: E402
from hostile_requests import (  # noqa: E402  pylint: disable=wrong-import-position
    exchange, malformed_requests, status_of)

SMALL_REQUESTS = 1000
BODY = json.dumps({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).encode()
EVENTS, EVENT_GAP = 5, 0.05
# Never reached: every request is checked against it, none refused.
BUDGET = 10 ** 12
USAGE = b'"usage": {"input_tokens": 1200, "cache_read_input_tokens": 0, "output_tokens": 16}'
KEY, PLACEHOLDER = "sk-bench-key", "aisb-placeholder-bench"
TARGET_ADDED_P50_MS = 0.5
HOSTILE_REQUESTS = 10000
TARGET_RSS_GROWTH_MB = 16


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for index in range(EVENTS):
                event = b'data: {"index": %d, %s}\n\n' % (index, USAGE)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                time.sleep(EVENT_GAP)
            self.wfile.write(b"0\r\n\r\n")
            return
        reply = b'{"ok": true, "key_seen": %s, %s}' % (b"true" if KEY in str(self.headers) else b"false", USAGE)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *_args):
        pass


def serve_provider(port_file, cert, key):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self):
            sock, address = super().get_request()
            return context.wrap_socket(sock, server_side=True), address

    server = Server(("127.0.0.1", 0), Provider)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


def client(mode, host, port, path_prefix, ca, header):
    """Times SMALL_REQUESTS POSTs, then the first event of a stream; prints JSON."""
    if mode == "tls":
        connection = http.client.HTTPSConnection(host, int(port), timeout=10,
                                                 context=ssl.create_default_context(cafile=ca))
    else:
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Content-Type": "application/json", header: PLACEHOLDER}
    times = []
    for _request in range(SMALL_REQUESTS):
        start = time.perf_counter()
        connection.request("POST", path_prefix + "/v1/messages", body=BODY, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        if response.status != 200 or (mode != "tls" and b'"key_seen": true' not in answer):
            raise SystemExit("%s: %d %r" % (mode, response.status, answer[:200]))
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    connection.request("POST", path_prefix + "/stream", body=b"{}", headers=headers)
    response = connection.getresponse()
    first = response.read1(100)
    first_event = time.perf_counter() - start
    rest = response.read()
    print(json.dumps({"times": times, "first_event": first_event, "whole_stream": time.perf_counter() - start,
                      "stream_ok": (first + rest).count(b"data:") == EVENTS}))


def hostile_client(port, prefix, count):
    """Sends COUNT malformed requests; prints how many got each answer (None: closed)."""
    requests = malformed_requests(prefix, "X-Api-Key: " + PLACEHOLDER, int(count))
    answers = collections.Counter(str(status_of(exchange(int(port), data))) for _kind, data in requests)
    print(json.dumps(answers))


def run_client(*args):
    done = subprocess.run([sys.executable, __file__, "--client", *map(str, args)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit("the client failed: %s" % done.stderr[-2000:])
    return json.loads(done.stdout)


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def start_squid(directory, provider_port, ca):
    """squid in accel mode in front of the provider, adding the key: the alternative."""
    port = free_port()
    conf = Path(directory, "squid.conf")
    conf.write_text("\n".join([
        "http_port 127.0.0.1:%d accel defaultsite=localhost" % port,
        "cache_peer localhost parent %d 0 no-query originserver tls tls-cafile=%s name=provider"
        % (provider_port, ca),
        "cache_peer_access provider allow all",
        "http_access allow all",
        "cache deny all",
        "request_header_access X-Api-Key deny all",
        'request_header_add X-Api-Key "%s" all' % KEY,
        "pid_filename %s/squid.pid" % directory,
        "access_log none", "cache_log %s/cache.log" % directory,
        "netdb_filename none", "pinger_enable off", "max_filedescriptors 4096",
        "coredump_dir %s" % directory, "shutdown_lifetime 1 seconds", "",
    ]))
    process = subprocess.Popen(["squid", "-N", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    return process, port


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nothing answered on port %d" % port)


def rss_kb(pid, field="VmHWM"):
    """PID's resident memory: its peak (VmHWM) or now (VmRSS), in KiB."""
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def hostile_growth(injector, prefix):
    """(this process's VmRSS before and after HOSTILE_REQUESTS malformed requests to
    INJECTOR, in KiB; the answers by status)."""
    gc.collect()
    before = rss_kb(os.getpid(), "VmRSS")
    done = subprocess.run([sys.executable, __file__, "--hostile", str(injector.port), prefix, str(HOSTILE_REQUESTS)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit("the hostile client failed: %s" % done.stderr[-2000:])
    gc.collect()
    return before, rss_kb(os.getpid(), "VmRSS"), json.loads(done.stdout)


def measure(runs, with_squid=False):
    from measure import row  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory(prefix="aisb-bench-injector-") as directory:
        certificates.make(directory, "localhost")
        ca = str(Path(directory, "ca.crt"))
        port_file = Path(directory, "provider.port")
        provider = subprocess.Popen([sys.executable, __file__, "--provider", str(port_file),
                                     str(Path(directory, "server.crt")), str(Path(directory, "server.key"))])
        squid = None
        try:
            while not port_file.exists() or not port_file.read_text():
                time.sleep(0.05)
            provider_port = int(port_file.read_text())
            # Anthropic's request rules (_providers), as an exported key's entry has them.
            entry = {"host": "localhost", "port": provider_port, "header": "X-Api-Key", "prefix": "",
                     "variable": "ANTHROPIC_API_KEY", "key": KEY, "paths": list(ANTHROPIC.paths) + ["POST /stream"]}
            injector = CredentialInjector([entry], {"ANTHROPIC_API_KEY": PLACEHOLDER},
                                          context=ssl.create_default_context(cafile=ca),
                                          refused=lambda _address: None, budget=BUDGET).start()
            paths = {"direct": ("tls", "localhost", provider_port, ""),
                     "injector": ("plain", "127.0.0.1", injector.port, "/localhost:%d" % provider_port)}
            if with_squid:
                squid, squid_port = start_squid(directory, provider_port, ca)
                paths["squid"] = ("plain", "127.0.0.1", squid_port, "")
            rounds = dict((name, []) for name in paths)
            for _round in range(runs):
                for name, (mode, host, port, prefix) in paths.items():
                    rounds[name].append(run_client(mode, host, port, prefix, ca, "X-Api-Key"))
            rss_before, rss_after, answers = hostile_growth(injector, paths["injector"][3])
            injector.close()
            counted = injector.tokens["localhost:%d" % provider_port]
            figures = {"counted_requests": counted["requests"], "unmetered": counted["unmetered"]}
            for name, results in rounds.items():
                figures[name] = {
                    "p50_ms": median([median(r["times"]) for r in results]) * 1000,
                    "p99_ms": median([sorted(r["times"])[int(0.99 * len(r["times"]))] for r in results]) * 1000,
                    "first_event_ms": median([r["first_event"] for r in results]) * 1000,
                    "stream_ok": all(r["stream_ok"] for r in results),
                }
            figures["hostile"] = {"requests": HOSTILE_REQUESTS, "rss_before_kb": rss_before, "rss_after_kb": rss_after,
                                  "answers": answers}
            if squid is not None:
                figures["squid"]["peak_rss_kb"] = rss_kb(squid.pid)
        finally:
            provider.kill()
            if squid is not None:
                squid.terminate()
                squid.wait()
    added = figures["injector"]["p50_ms"] - figures["direct"]["p50_ms"]
    figures["injector"]["added_p50_ms"] = added
    growth_mb = (figures["hostile"]["rss_after_kb"] - figures["hostile"]["rss_before_kb"]) / 1024.0
    rows = [
        row("credentials", "small request through the injector, p50 (kept-alive)",
            round(figures["injector"]["p50_ms"], 3), "ms", round(figures["direct"]["p50_ms"], 3),
            "straight to the provider over TLS", "added p50 <= %.1f ms" % TARGET_ADDED_P50_MS,
            added <= TARGET_ADDED_P50_MS, runs),
        row("credentials", "resident memory after %d malformed requests to the injector" % HOSTILE_REQUESTS,
            round(figures["hostile"]["rss_after_kb"] / 1024.0, 1), "MB",
            round(figures["hostile"]["rss_before_kb"] / 1024.0, 1), "before them",
            "growth <= %d MB" % TARGET_RSS_GROWTH_MB, growth_mb <= TARGET_RSS_GROWTH_MB, 1),
        row("credentials", "first event of a stream through the injector", round(figures["injector"]["first_event_ms"], 1),
            "ms", round(figures["direct"]["first_event_ms"], 1), "straight to the provider", None, None, runs),
    ]
    if with_squid:
        squid_added = figures["squid"]["p50_ms"] - figures["direct"]["p50_ms"]
        rows.append(row("credentials", "small request through squid accel + tls peer, p50 (the option not taken)",
                        round(figures["squid"]["p50_ms"], 3), "ms", round(figures["direct"]["p50_ms"], 3),
                        "straight to the provider over TLS", "added p50 <= %.1f ms" % TARGET_ADDED_P50_MS,
                        squid_added <= TARGET_ADDED_P50_MS, runs))
    return rows, figures


def main():
    if sys.argv[1:2] == ["--provider"]:
        serve_provider(*sys.argv[2:5])
        return
    if sys.argv[1:2] == ["--client"]:
        client(*sys.argv[2:8])
        return
    if sys.argv[1:2] == ["--hostile"]:
        hostile_client(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("runs", type=int, nargs="?", default=3)
    parser.add_argument("--squid", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    rows, figures = measure(args.runs, args.squid)
    print(json.dumps({"rows": rows, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
