# SPDX-License-Identifier: GPL-3.0-or-later
"""Malformed requests for the credential injector, generated deterministically, and a raw
exchange with it: the unit tests' fuzz and the benchmark's memory figure send the same."""

import random
import socket

from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._credential_injector import MAX_BODY, MAX_HEADERS, MAX_LINE


def exchange(port, data, half_close=True, timeout=5):
    """DATA sent on a new connection to the injector (its sending side then closed unless
    HALF_CLOSE is false): all the injector sent back before closing it. A socket timeout
    means the injector neither answered nor closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the injector closed before reading all of it: what it answered is still there
        received = b""
        while True:
            try:
                piece = sock.recv(65536)
            except ConnectionResetError:
                return received
            if not piece:
                return received
            received += piece


def status_of(answer):
    """The status of ANSWER, None when there was none."""
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


def malformed_requests(prefix, key_line, count, seed=27):
    """COUNT requests (kind, bytes) for PREFIX, each with KEY_LINE (the entry's header
    carrying the placeholder) and each
    outside the injector's grammar in one way chosen by a generator seeded with SEED:
    a lenient parser would relay every one."""
    rng = random.Random(seed)

    def digits(low, high):
        return str(rng.randint(low, high))

    def pad():
        return rng.choice([" ", "\t", "  ", " \t", "\x0b", "\x0c", "\xa0"])

    def casing(text):
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)

    chunked = b"2\r\n{}\r\n0\r\n\r\n"

    def lengths():
        value = rng.choice([
            lambda: "-" + digits(0, 10 ** rng.randint(1, 30)),
            lambda: "+" + digits(0, 99),
            lambda: digits(MAX_BODY + 1, 10 ** rng.randint(9, 40)),
            lambda: digits(0, 99) + rng.choice("xX.,;eE_/ab\xb2\xb9") + digits(0, 9),
            lambda: rng.choice(["", "0x2", "2.0", "1e3", "2, 2", "\xb2", "--2", "0-2"]),
        ])()
        return ["Content-Length: " + value], b"{}"

    def padded_length():
        before, after = rng.choice([(pad(), ""), ("", pad()), (pad(), pad())])
        return ["Content-Length: " + before + "2" + after], b"{}"

    def duplicated():
        first, second = rng.choice([("2", "2"), ("2", "3"), ("0", "2"), ("2", "02")])
        lines = ["Content-Length: " + first, casing("content-length") + ": " + second]
        if rng.random() < 0.5:
            lines.insert(1, "X-Between: 1")
        return lines, b"{}"

    def cl_te():
        lines = [casing("Content-Length") + ": " + rng.choice(["2", "0", "14"]),
                 casing("Transfer-Encoding") + ": " + casing("chunked")]
        return lines[::rng.choice([1, -1])], rng.choice([chunked, b"{}"])

    def te():
        value = rng.choice(["chunked, chunked", "gzip, chunked", "chunked, gzip", "identity", "chunked;q=1",
                            "xchunked", "chunk", "", " chunked", "chunked ", "chunked\t", "\tchunked", "chunked\x00",
                            "chunked,"])
        lines = ["Transfer-Encoding: " + value]
        if rng.random() < 0.2:
            lines = ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"]
        return lines, chunked

    def chunk_size():
        size = rng.choice(["-1", "-%x" % rng.randint(1, 2 ** 40), "+2", " 2", "2 ", "\t2", "0x2", "", "g", "2_0",
                           "1\x00", "%x" % rng.randint(MAX_BODY + 1, 2 ** 64), "f" * 26, "2\n", "2\r\r",
                           "2;ext\nX", "2;e\rx", "2;\x00", "2 ;ext"])
        return ["Transfer-Encoding: chunked"], size.encode("latin-1") + b"\r\n{}\r\n0\r\n\r\n"

    def chunk_end():
        after_data = [b"2\r\n{}" + end + b"0\r\n\r\n" for end in (b"", b"\n", b"\r", b"XX", b"\r\r", b"\n\r", b" \r\n")]
        # The last chunk's line or its trailers; the last two end too soon (then closed, not answered).
        last = [b"2\r\n{}\r\n" + end for end in (
            b"0\n\r\n", b"0\r\nBad Trailer: t\r\n\r\n", b"0\r\n folded\r\n\r\n", b"0\r\nT: v\r\n", b"0\r\n")]
        return ["Transfer-Encoding: chunked"], rng.choice(after_data + last)

    def fold():
        return ["X-A: b", rng.choice([" ", "\t"]) + rng.choice(["folded", "Content-Length: 2", "x: y"]),
                "Content-Length: 2"], b"{}"

    def inside(char):
        def mutate():
            lines = ["X-A: %s" % "".join(rng.choice("abc xyz") for _index in range(rng.randint(0, 20))).strip(),
                     "Content-Length: 2"]
            where = rng.randrange(len(lines))
            position = rng.randint(0, len(lines[where]))
            lines[where] = lines[where][:position] + char + lines[where][position:]
            return lines, b"{}"
        return mutate

    def overlong():
        return ["X-Long: " + "v" * rng.randint(MAX_LINE - 7, 3 * MAX_LINE), "Content-Length: 2"], b"{}"

    def many():
        # With the placeholder's and Content-Length: MAX_HEADERS + 1 at least.
        return ["X-H%d: v" % n for n in range(rng.randint(MAX_HEADERS - 1, MAX_HEADERS + 50))] + [
            "Content-Length: 2"], b"{}"

    def bad_name():
        name = rng.choice(["X A", "X(A)", "", "X-A ", " X-A", "X\x7fA", "X\xe9A", "X/A", "X@A", "X[A]", "X\"A\"",
                           "X{A}"])
        return [name + ": v", "Content-Length: 2"], b"{}"

    request_lines = [
        lambda: "POST  %s/v1 HTTP/1.1", lambda: "POST %s/v1  HTTP/1.1", lambda: "POST %s/v1 HTTP/1.1 ",
        lambda: "POST\t%s/v1 HTTP/1.1", lambda: "POST %s/v1 http/1.1", lambda: "POST %s/v1 HTTP/2.0",
        lambda: "POST %s/v1 HTTP/1.2", lambda: "POST %s/v1", lambda: "POST http://h%s/v1 HTTP/1.1",
        lambda: "\r\nPOST %s/v1 HTTP/1.1",
        lambda: "POST %s/" + "a" * rng.randint(MAX_LINE, 2 * MAX_LINE) + " HTTP/1.1",
        lambda: "POST %s/v\x00 HTTP/1.1", lambda: "POST %s/v\r1 HTTP/1.1", lambda: "P\xd6ST %s/v1 HTTP/1.1",
        lambda: "POST %s/v\xe91 HTTP/1.1",
    ]
    kinds = {"length": lengths, "padded length": padded_length, "duplicated length": duplicated, "CL+TE": cl_te,
             "transfer-encoding": te, "chunk size": chunk_size, "chunk end": chunk_end, "obs-fold": fold,
             "bare CR": inside("\r"), "bare LF": inside("\n"), "NUL": inside("\x00"), "overlong": overlong,
             "too many headers": many, "header name": bad_name}
    for index in range(count):
        noise = ["X-Noise-%d: %s" % (n, rng.choice(["a", "b c", "1"])) for n in range(rng.randint(0, 3))]
        if index % (len(kinds) + 1) == len(kinds):
            line, lines, body = rng.choice(request_lines)() % prefix, ["Content-Length: 2"], b"{}"
            kind = "request line"
        else:
            kind = rng.choice(sorted(kinds))
            line = "POST %s/v1/chat HTTP/1.1" % prefix
            lines, body = kinds[kind]()
        lines = noise + [key_line] + lines
        yield kind, ("%s\r\n%s\r\n" % (line, "".join(one + "\r\n" for one in lines))).encode("latin-1") + body
