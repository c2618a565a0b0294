# SPDX-License-Identifier: GPL-3.0-or-later
"""The credential injector against a local HTTPS provider: the key replaces the header,
only with the placeholder, streams pass as they come, refusals are kept for the record."""

import http.client
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import certificates
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import CredentialInjector
from hostile_requests import exchange, malformed_requests, status_of

KEY = "sk-unit-real-key"
PLACEHOLDER = "aisb-placeholder-unit"


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: the injector must reuse its connection
    seen = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Provider.seen.append({"path": self.path, "headers": dict(self.headers.items()), "body": body,
                              "client_port": self.client_address[1]})
        if self.path.startswith("/spend/"):
            # /spend/INPUT/OUTPUT: an Anthropic answer reporting those tokens.
            tokens_in, tokens_out = (int(n) for n in self.path.split("/")[2:4])
            self._json({"content": [], "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}})
            return
        if self.path.startswith("/cut/"):
            # /cut/SECONDS: a stream's start (its usage: 30000 input tokens), SECONDS of
            # deltas, then its end (4000 output tokens) or, with 0, the connection dropped.
            self._start_stream()
            self.wfile.write(b'event: message_start\ndata: {"message": {"usage": {"input_tokens": 30000, '
                             b'"output_tokens": 1}}}\n\n')
            self.wfile.flush()
            seconds = float(self.path.split("/")[2])
            for _index in range(int(seconds * 10)):
                self.wfile.write(b'event: content_block_delta\ndata: {"delta": {"text": "word"}}\n\n')
                self.wfile.flush()
                time.sleep(0.1)
            if seconds:
                self.wfile.write(b'event: message_delta\ndata: {"usage": {"output_tokens": 4000}}\n\n')
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.path.startswith("/stream"):
            self._start_stream()
            for index in range(3):
                self.wfile.write(b"data: %d\n\n" % index)
                self.wfile.flush()
                time.sleep(0.2)
            self.close_connection = True
            return
        reply = b"ok " + body
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def _start_stream(self):
        """A stream's head; its end is the connection's."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

    def _json(self, value):
        reply = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST

    def log_message(self, *_args):
        pass


def serve(work, name):
    """An HTTPS server for NAME on 127.0.0.1 with a certificate of a CA made in WORK:
    (server, {port, ca})."""
    certificates.make(work, name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "server.crt", work / "server.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, {"port": server.server_address[1], "ca": str(work / "ca.crt")}


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    """An HTTPS server for 'localhost' on 127.0.0.1."""
    server, where = serve(tmp_path_factory.mktemp("provider"), "localhost")
    yield where
    server.shutdown()


def serving(provider, budget=None):
    entry = {"host": "localhost", "port": provider["port"], "header": "Authorization", "prefix": "Bearer ",
             "variable": "OPENAI_API_KEY", "key": KEY}
    injector = CredentialInjector([entry], {"OPENAI_API_KEY": PLACEHOLDER},
                                  context=ssl.create_default_context(cafile=provider["ca"]),
                                  refused=lambda _address: None, budget=budget).start()
    Provider.seen.clear()
    yield injector, "/localhost:%d" % provider["port"]
    injector.close()


@pytest.fixture
def injector(provider):
    yield from serving(provider)


@pytest.fixture
def budgeted(provider):
    """The injector with a budget of 50,000 tokens."""
    yield from serving(provider, 50000)


def request(injector, path, headers, body=None, method="POST"):
    connection = http.client.HTTPConnection("127.0.0.1", injector.port, timeout=10)
    connection.request(method, path, body=body, headers=headers)
    return connection, connection.getresponse()


def test_the_key_replaces_the_placeholder(injector):
    injector, prefix = injector
    _connection, response = request(injector, prefix + "/v1/chat?x=1", {"Authorization": "Bearer " + PLACEHOLDER,
                                                                        "X-Other": "kept"}, b"{}")
    assert response.status == 200 and response.read() == b"ok {}"
    seen = Provider.seen[-1]
    assert seen["path"] == "/v1/chat?x=1"
    assert seen["headers"]["Authorization"] == "Bearer " + KEY and seen["headers"]["X-Other"] == "kept"
    assert seen["headers"]["Host"] == prefix[1:]
    assert [d["status"] for d in injector.decisions["injected"]] == [200]
    assert KEY not in json.dumps(injector.decisions)


def test_without_the_placeholder_nothing_is_relayed(injector):
    injector, prefix = injector
    for headers in ({}, {"Authorization": "Bearer something-else"}):
        _connection, response = request(injector, prefix + "/v1/chat", headers, b"{}")
        assert response.status == 403
    _connection, response = request(injector, "/elsewhere.example/v1", {"Authorization": PLACEHOLDER})
    assert response.status == 404
    assert Provider.seen == []
    assert [d["status"] for d in injector.decisions["refused"]] == [403, 403, 404]


def test_a_stream_passes_piece_by_piece(injector):
    injector, prefix = injector
    _connection, response = request(injector, prefix + "/stream", {"Authorization": "Bearer " + PLACEHOLDER}, b"")
    assert response.getheader("Transfer-Encoding") == "chunked"
    arrivals = []
    while True:
        piece = response.read1(100)
        if not piece:
            break
        arrivals.append((time.monotonic(), piece))
    assert b"".join(p for _t, p in arrivals) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    # The provider sends an event every 0.2 s: a relay that held the stream would hand
    # over all of it at once.
    assert b"data: 2" not in arrivals[0][1], "the first event came as it was sent, not with the last"


def test_keep_alive_reuses_both_connections(injector):
    injector, prefix = injector
    connection = http.client.HTTPConnection("127.0.0.1", injector.port, timeout=10)
    for index in range(3):
        connection.request("POST", prefix + "/n", body=b"%d" % index,
                           headers={"Authorization": "Bearer " + PLACEHOLDER})
        assert connection.getresponse().read() == b"ok %d" % index
    assert len(set(seen["client_port"] for seen in Provider.seen)) == 1


def test_an_unverifiable_provider_is_refused(provider):
    entry = {"host": "localhost", "port": provider["port"], "header": "x-api-key", "prefix": "",
             "variable": "ANTHROPIC_API_KEY", "key": KEY}
    injector = CredentialInjector([entry], {"ANTHROPIC_API_KEY": PLACEHOLDER}, refused=lambda _a: None).start()
    try:
        _connection, response = request(injector, "/localhost:%d/v1" % provider["port"], {"x-api-key": PLACEHOLDER})
        assert response.status == 502 and b"CERTIFICATE_VERIFY_FAILED" in response.read()
    finally:
        injector.close()


def test_a_refused_destination_is_not_connected_to(provider):
    entry = {"host": "localhost", "port": provider["port"], "header": "x-api-key", "prefix": "",
             "variable": "ANTHROPIC_API_KEY", "key": KEY}
    injector = CredentialInjector([entry], {"ANTHROPIC_API_KEY": PLACEHOLDER}).start()
    try:
        _connection, response = request(injector, "/localhost:%d/v1" % provider["port"], {"x-api-key": PLACEHOLDER})
        assert response.status == 502 and b"refused destinations" in response.read()
    finally:
        injector.close()


# A name no resolver knows: only the pin can take the injector to the server.
PRIVATE_NAME = "models.aisb-unresolvable.lan"


def test_a_private_entry_takes_the_key_to_its_pinned_address_only(tmp_path_factory):
    """An entry whose host and port are a private entry's: the injector connects to the
    pinned address (a refused destination, 127.0.0.1 here) without resolving the name,
    verifies the certificate for the name, and records the address; the same name on
    another port, or a pin for another port, is not pinned and stays refused."""
    server, where = serve(tmp_path_factory.mktemp("private"), PRIVATE_NAME)
    entries = [{"host": PRIVATE_NAME, "port": port, "header": "x-api-key", "prefix": "", "variable": variable,
                "key": KEY} for port, variable in ((where["port"], "ANTHROPIC_API_KEY"), (1, "OPENAI_API_KEY"))]
    private = ((PRIVATE_NAME, where["port"], "127.0.0.1"), (PRIVATE_NAME, 2, "127.0.0.1"))
    injector = CredentialInjector(entries, {"ANTHROPIC_API_KEY": PLACEHOLDER, "OPENAI_API_KEY": PLACEHOLDER},
                                  context=ssl.create_default_context(cafile=where["ca"]), private=private).start()
    Provider.seen.clear()
    try:
        path = "/%s:%d/v1" % (PRIVATE_NAME, where["port"])
        _connection, response = request(injector, path, {"x-api-key": PLACEHOLDER}, b"{}")
        assert response.status == 200 and response.read() == b"ok {}"
        _connection, response = request(injector, "/%s:1/v1" % PRIVATE_NAME, {"x-api-key": PLACEHOLDER}, b"{}")
        assert response.status == 502, response.read()
    finally:
        injector.close()
        server.shutdown()
    assert [seen["headers"]["x-api-key"] for seen in Provider.seen] == [KEY]
    assert [(d["host"], d["address"]) for d in injector.decisions["injected"]] == [
        ("%s:%d" % (PRIVATE_NAME, where["port"]), "127.0.0.1")]
    assert [d["host"] for d in injector.decisions["refused"]] == ["%s:1" % PRIVATE_NAME]


# The agent writes every byte the injector reads: what follows is sent raw.

def head(prefix, *lines, target="/v1/chat"):
    """A request head for PREFIX + TARGET with the placeholder and LINES (CRLF-joined)."""
    return ("POST %s%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n"
            % (prefix, target, PLACEHOLDER, "".join(line + "\r\n" for line in lines))).encode("latin-1")


@pytest.mark.parametrize("lines, rest", [
    (["Content-Length: -1"], b"{}"),
    (["Transfer-Encoding: chunked"], b"-1\r\n{}"),
    (["Transfer-Encoding: chunked"], b"-fffffff\r\n{}"),
], ids=["negative Content-Length", "negative chunk size", "negative chunk size, long"])
def test_a_negative_length_is_refused_not_read_to_the_end(injector, lines, rest):
    """rfile.read(-1) reads until the client closes: the host process would hold whatever
    it sends. The connection stays open here; the answer must come without its end."""
    injector, prefix = injector
    try:
        answer = exchange(injector.port, head(prefix, *lines) + rest, half_close=False, timeout=3)
    except socket.timeout:
        pytest.fail("no answer: the injector is reading the body until the client closes")
    assert status_of(answer) == 400, answer
    assert Provider.seen == []


def test_a_planted_key_beside_the_placeholder_is_refused(injector):
    injector, prefix = injector
    for value in ("Bearer sk-attacker aisb " + PLACEHOLDER, "Bearer " + PLACEHOLDER + " sk-attacker",
                  "Bearer " + PLACEHOLDER + "x", "Bearer  " + PLACEHOLDER, "bearer " + PLACEHOLDER):
        _connection, response = request(injector, prefix + "/v1/chat", {"Authorization": value}, b"{}")
        assert response.status == 403, value
    _connection, response = request(injector, prefix + "/v1/chat", {"Authorization": PLACEHOLDER}, b"{}")
    assert response.status == 200, "the placeholder alone (without the prefix) is the harness's to choose"
    assert [seen["headers"]["Authorization"] for seen in Provider.seen] == ["Bearer " + KEY]


@pytest.mark.parametrize("headers, target", [
    ({"X-Api-Key": "sk-attacker"}, "/v1/chat"),
    ({"x-goog-api-key": "sk-attacker"}, "/v1/chat"),
    ({"Api-Key": "Bearer sk-attacker"}, "/v1/chat"),
    ({}, "/v1/models?key=sk-attacker"),
    ({}, "/v1/models?alt=sse&Access_Token=sk-attacker"),
    ({}, "/v1/models#/../files"),
    ({}, "/v1/models/%252e%252e%252ffiles"),
], ids=["x-api-key", "x-goog-api-key", "api-key", "key in the query", "access_token in the query", "fragment",
        "double escape"])
def test_a_key_of_the_agents_own_beside_the_placeholder_or_a_target_some_server_reads_otherwise_is_refused(
        injector, headers, target):
    injector, prefix = injector
    answer = exchange(injector.port, ("GET %s%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n" % (
        prefix, target, PLACEHOLDER, "".join("%s: %s\r\n" % item for item in headers.items()))).encode())
    assert status_of(answer) == 403, answer
    assert Provider.seen == []


def test_another_key_header_holding_the_placeholder_is_dropped_not_relayed(injector):
    injector, prefix = injector
    _connection, response = request(injector, prefix + "/v1/chat", {"Authorization": "Bearer " + PLACEHOLDER,
                                                                    "X-Api-Key": PLACEHOLDER}, b"{}")
    assert response.status == 200
    assert "X-Api-Key" not in Provider.seen[-1]["headers"]


@pytest.mark.parametrize("lines, body", [
    (["Content-Length: 2", "Transfer-Encoding: chunked"], b"2\r\n{}\r\n0\r\n\r\n"),
    (["transfer-encoding: chunked", "content-length: 2"], b"{}"),
    (["Content-Length: 2", "Content-Length: 2"], b"{}"),
    (["Content-Length: +2"], b"{}"),
    (["Content-Length: 0x2"], b"{}"),
    (["Content-Length:  2"], b"{}"),
    (["Content-Length: 2 "], b"{}"),
    (["Transfer-Encoding: gzip, chunked"], b"2\r\n{}\r\n0\r\n\r\n"),
    (["Transfer-Encoding: chunked"], b"+2\r\n{}\r\n0\r\n\r\n"),
    (["Transfer-Encoding: chunked"], b"2\r\n{}XX0\r\n\r\n"),
    (["X-A: b\rX-Smuggled: yes", "Content-Length: 2"], b"{}"),
    (["X-A: b\nX-Smuggled: yes", "Content-Length: 2"], b"{}"),
    (["X-A: b", " folded", "Content-Length: 2"], b"{}"),
    (["X-A : b", "Content-Length: 2"], b"{}"),
    (["X-A: b\x00c", "Content-Length: 2"], b"{}"),
    (["X-A: " + "b" * 8193, "Content-Length: 2"], b"{}"),
    (["X-%d: b" % n for n in range(100)] + ["Content-Length: 2"], b"{}"),
], ids=["CL then TE", "te then cl", "two equal CLs", "plus-signed CL", "hex CL", "CL after two spaces",
        "CL with a trailing space", "TE gzip, chunked", "plus-signed chunk", "chunk not ended by CRLF",
        "bare CR in a header", "bare LF in a header", "obs-fold", "space before the colon", "NUL in a value",
        "header line over 8 KiB", "101 headers"])
def test_ambiguous_framing_is_refused_and_not_relayed(injector, lines, body):
    injector, prefix = injector
    answer = exchange(injector.port, head(prefix, *lines) + body)
    assert status_of(answer) == 400, answer
    assert answer.endswith(b"\n") and b"Connection: close" in answer or b"connection" not in answer.lower()
    assert Provider.seen == []


def test_the_request_line_is_strict(injector):
    injector, prefix = injector
    for line in ("POST %s/v1/chat HTTP/1.1 " % prefix, "POST  %s/v1/chat HTTP/1.1" % prefix,
                 "POST %s/v1/chat\rx HTTP/1.1" % prefix, "POST %s/v1/chat\x0bHTTP/1.1" % prefix,
                 "POST %s/v1/%s HTTP/1.1" % (prefix, "a" * 8192), "POST http://x%s/v1/chat HTTP/1.1" % prefix,
                 "POST %s/v1/chat HTTP/2.0" % prefix, "POST %s/v1/chat" % prefix, "",
                 "P\x00ST %s/v1 HTTP/1.1" % prefix):
        data = ("%s\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}" % (line, PLACEHOLDER)).encode("latin-1")
        assert status_of(exchange(injector.port, data)) == 400, line
    assert Provider.seen == []


def test_forwarding_and_connection_named_headers_are_dropped(injector):
    injector, prefix = injector
    sent = {"Authorization": "Bearer " + PLACEHOLDER, "Forwarded": "for=1.2.3.4;host=evil.test",
            "X-Forwarded-Host": "evil.test", "X-Forwarded-For": "1.2.3.4", "x-forwarded-anything": "a",
            "Via": "1.1 evil", "Connection": "keep-alive, X-Secret-Hop", "X-Secret-Hop": "dropped",
            "X-HTTP-Method-Override": "DELETE", "X-Kept": "kept"}
    _connection, response = request(injector, prefix + "/v1/chat", sent, b"{}")
    assert response.status == 200
    relayed = set(name.lower() for name in Provider.seen[-1]["headers"])
    assert relayed == {"host", "authorization", "x-kept", "content-length", "accept-encoding"}, relayed


def test_after_a_refusal_the_next_request_is_served(injector):
    injector, prefix = injector
    assert status_of(exchange(injector.port, head(prefix, "Content-Length: -1") + b"{}")) == 400
    _connection, response = request(injector, prefix + "/v1/chat", {"Authorization": "Bearer " + PLACEHOLDER}, b"{}")
    assert response.status == 200 and response.read() == b"ok {}"
    assert [seen["body"] for seen in Provider.seen] == [b"{}"]


def test_fuzzed_framing_is_refused_nothing_relayed_and_the_next_request_served(injector):
    """3000 malformed requests, each carrying the placeholder: every one answered 400 or
    413 (or, cut short, closed), the provider sees none, and then a plain request is
    served."""
    injector, prefix = injector
    outcomes = {}
    for kind, data in malformed_requests(prefix, "Authorization: Bearer " + PLACEHOLDER, 3000):
        status = status_of(exchange(injector.port, data))
        assert status in (None, 400, 413), (kind, data[:300], status)
        outcomes.setdefault(kind, []).append(status)
    assert Provider.seen == [] and injector.decisions["injected"] == []
    answered = sum(1 for statuses in outcomes.values() for status in statuses if status is not None)
    assert len(outcomes) == 15 and answered >= 2900, dict((kind, len(s)) for kind, s in outcomes.items())
    _connection, response = request(injector, prefix + "/v1/chat", {"Authorization": "Bearer " + PLACEHOLDER}, b"{}")
    assert response.status == 200 and response.read() == b"ok {}"
    assert len(Provider.seen) == 1


def test_expect_100_continue_comes_only_for_a_request_that_will_be_relayed(injector):
    """curl sends a large body only after "100 Continue": the injector says it once the
    placeholder and the path are checked, so a refused request's body is never sent."""
    injector, prefix = injector
    with socket.create_connection(("127.0.0.1", injector.port), timeout=5) as sock:
        sock.sendall(head(prefix, "Expect: 100-continue", "Content-Length: 2"))
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"{}")
        assert status_of(sock.recv(1000)) == 200
    wrong = head(prefix, "Expect: 100-continue", "Content-Length: 2").replace(PLACEHOLDER.encode(), b"other")
    assert status_of(exchange(injector.port, wrong, half_close=False)) == 403
    assert [seen["body"] for seen in Provider.seen] == [b"{}"]


AUTHORIZED = {"Authorization": "Bearer " + PLACEHOLDER}


def test_the_request_after_the_budget_is_spent_never_reaches_the_provider(budgeted):
    injector, prefix = budgeted
    for _index in range(2):
        _connection, response = request(injector, prefix + "/spend/5000/20000", AUTHORIZED, b"{}")
        assert response.status == 200, response.read()
        response.read()
    _connection, response = request(injector, prefix + "/spend/5000/20000", AUTHORIZED, b"{}")
    why = response.read().decode()
    assert response.status == 429 and response.getheader("x-should-retry") == "false"
    assert "token budget is spent: aisb_token_budget 50000, used 50000" in why, why
    assert len(Provider.seen) == 2
    assert injector.usage_report() == {prefix[1:]: {"input": 10000, "output": 40000, "requests": 2, "unmetered": 0,
                                                    "budget": 50000, "exceeded": True}}
    assert [(d["status"], d["why"]) for d in injector.decisions["refused"]] == [(429, why.split(": ", 1)[1].strip())]


def test_a_stream_the_provider_cuts_counts_what_it_carried(budgeted):
    injector, prefix = budgeted
    _connection, response = request(injector, prefix + "/cut/0", AUTHORIZED, b"{}")
    assert b"message_start" in response.read() and b"message_delta" not in Provider.seen[-1]["body"]
    assert injector.tokens[prefix[1:]]["input"] == 30000
    _connection, response = request(injector, prefix + "/spend/5000/20000", AUTHORIZED, b"{}")
    assert response.status == 200 and response.read()
    _connection, response = request(injector, prefix + "/spend/5000/20000", AUTHORIZED, b"{}")
    assert response.status == 429 and b"used 55001" in response.read()


def test_a_stream_the_harness_leaves_is_read_to_its_end(injector):
    injector, prefix = injector
    connection, response = request(injector, prefix + "/cut/1", AUTHORIZED, b"{}")
    assert b"message_start" in response.read1(1000)
    connection.sock.shutdown(socket.SHUT_RDWR)
    connection.close()
    # The provider ends its stream a second after it began.
    deadline = time.monotonic() + 10
    while injector.tokens[prefix[1:]]["output"] < 4000 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (injector.tokens[prefix[1:]]["input"], injector.tokens[prefix[1:]]["output"]) == (30000, 4000)


def test_an_answer_without_usage_counts_by_its_size(injector):
    injector, prefix = injector
    _connection, response = request(injector, prefix + "/v1/chat", AUTHORIZED, b"x" * 1000)
    assert response.read() == b"ok " + b"x" * 1000
    _connection, response = request(injector, prefix + "/v1/models", AUTHORIZED, method="GET")
    response.read()
    _connection, response = request(injector, prefix + "/v1/messages/count_tokens", AUTHORIZED, b"{}")
    response.read()
    assert injector.tokens[prefix[1:]] == {"input": 1000, "output": 1003, "requests": 3, "unmetered": 1}


def test_the_provider_is_asked_for_what_can_be_counted(injector):
    injector, prefix = injector
    body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
    _connection, response = request(injector, prefix + "/v1/chat/completions",
                                    dict(AUTHORIZED, **{"Accept-Encoding": "gzip, br"}), body)
    response.read()
    seen = Provider.seen[-1]
    assert seen["headers"]["Accept-Encoding"] == "identity"
    assert json.loads(seen["body"])["stream_options"] == {"include_usage": True}
