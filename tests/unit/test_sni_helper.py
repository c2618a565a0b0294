# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's ClientHello check (roles/gate/files/sni-is-connect-host, perl) run as squid
runs it: lines of channel, CONNECT host and squid's %>handshake (base64), answered in
squid's concurrency protocol, an OK tagging the connection (clt_conn_tag). The
ClientHellos are OpenSSL's own (Python's ssl), taken apart and rebuilt with the
server_name extensions an attacker would send."""

import base64
import re
import ssl
import struct
import subprocess
from pathlib import Path

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import HELLO_CHECKED, SNI_REFUSALS

SNI_HELPER = Path(__file__).resolve().parents[2] / "roles" / "gate" / "files" / "sni-is-connect-host"
HOST = "b-tls.test"
OTHER = b"b-unlisted.test"
OK = "OK clt_conn_tag=" + HELLO_CHECKED


def openssl_hello(name=HOST):
    """The ClientHello record OpenSSL sends for NAME."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def taken_apart(record):
    """(the ClientHello body up to its extensions, [(type, data), ...]) of RECORD."""
    body = record[9:]
    at = 2 + 32
    at += 1 + body[at]
    at += 2 + struct.unpack("!H", body[at:at + 2])[0]
    at += 1 + body[at]
    head, extensions, end = body[:at], [], len(body)
    at += 2
    while at < end:
        kind, length = struct.unpack("!HH", body[at:at + 4])
        extensions.append((kind, body[at + 4:at + 4 + length]))
        at += 4 + length
    return head, extensions


def vector16(data):
    return struct.pack("!H", len(data)) + data


def server_name(*entries):
    """server_name extension data holding ENTRIES, (name type, name bytes) each."""
    return vector16(b"".join(bytes([kind]) + vector16(name) for kind, name in entries))


def rebuilt(*sni_extensions, records=None, after=b"", extra=None, inside=b""):
    """OpenSSL's ClientHello with its server_name extension replaced by SNI_EXTENSIONS
    (data each, in that place), an EXTRA extension (a GREASE type) first if given, INSIDE
    after the extensions, in RECORDS pieces (sizes; default one record), then AFTER."""
    head, extensions = taken_apart(openssl_hello())
    block = b"" if extra is None else b"\x0a\x0a" + vector16(extra)
    for kind, data in extensions:
        for one in (sni_extensions if kind == 0 else [data]):
            block += struct.pack("!H", kind) + vector16(one)
    body = head + vector16(block) + inside
    message = b"\x01" + struct.pack("!I", len(body))[1:] + body
    sizes, pieces, at = records or [len(message)], [], 0
    for size in sizes:
        pieces.append(b"\x16\x03\x01" + vector16(message[at:at + size]))
        at += size
    assert at == len(message)
    return b"".join(pieces) + after


def answers(*lines):
    """The helper's answers to LINES, each (host, handshake as squid gives it)."""
    given = "".join("%d %s %s -\n" % (channel, host, handshake) for channel, (host, handshake) in enumerate(lines))
    done = subprocess.run(["perl", str(SNI_HELPER), HELLO_CHECKED], input=given, capture_output=True, text=True, check=True,
                          timeout=10)
    assert done.stderr == ""
    return done.stdout.splitlines()


def answer(hello, host=HOST):
    return answers((host, base64.b64encode(hello).decode()))[0][len("0 "):]


def name(text):
    return server_name((0, text.encode("latin-1")))


@pytest.mark.parametrize("host,sent", [
    (HOST, HOST), (HOST, "B-TLS.Test"), (HOST, HOST + "."), (HOST + ".", HOST), ("B-TLS.TEST", HOST),
    ("a" * 63 + "." + HOST, "A" * 63 + "." + HOST),
])
def test_one_host_name_equal_to_the_connect_host_is_ok(host, sent):
    assert answer(rebuilt(name(sent)), host) == OK


@pytest.mark.parametrize("records", [[1, 10000], [3, 1, 10000], [4, 10000], [200, 10000]])
def test_a_client_hello_over_several_records_is_read_whole(records):
    hello = rebuilt(name(HOST))
    sizes = records[:-1] + [len(hello) - 5 - sum(records[:-1])]
    assert answer(rebuilt(name(HOST), records=sizes)) == OK


def test_every_base64_ending_is_read():
    """Hellos whose lengths leave each remainder modulo 3 (base64's "==", "=" and none)."""
    hellos = [rebuilt(name(HOST), extra=b"x" * size) for size in range(3)]
    assert sorted(len(hello) % 3 for hello in hellos) == [0, 1, 2]
    assert [answer(hello) for hello in hellos] == [OK] * 3


@pytest.mark.parametrize("sni,reason", [
    ([server_name((0, OTHER), (0, HOST.encode()))], "sni-several-names"),
    ([server_name((0, HOST.encode()), (0, OTHER))], "sni-several-names"),
    ([server_name((0, HOST.encode()), (0, HOST.encode()))], "sni-several-names"),
    ([name(OTHER.decode()), name(HOST)], "sni-extension-twice"),
    ([name(HOST), name(OTHER.decode())], "sni-extension-twice"),
    ([name(HOST), name(HOST)], "sni-extension-twice"),
    ([server_name((1, HOST.encode()))], "sni-name-type"),
    ([server_name((1, OTHER), (0, HOST.encode()))], "sni-name-type"),
    ([server_name((0, HOST.encode()), (255, OTHER))], "sni-name-type"),
    ([name(HOST + "\x00.b-unlisted.test")], "sni-not-a-dns-name"),
    ([name(HOST + "\x00")], "sni-not-a-dns-name"),
    ([name(HOST + " b-unlisted.test")], "sni-not-a-dns-name"),
    ([name(HOST + "\n")], "sni-not-a-dns-name"),
    ([name(HOST + "..")], "sni-not-a-dns-name"),
    ([name("." + HOST)], "sni-not-a-dns-name"),
    ([name("b..tls.test")], "sni-not-a-dns-name"),
    ([name("b_tls.test")], "sni-not-a-dns-name"),
    ([name("b-tls.tést")], "sni-not-a-dns-name"),
    ([name("")], "sni-not-a-dns-name"),
    ([name(".")], "sni-not-a-dns-name"),
    ([name("x" * 64 + "." + HOST)], "sni-not-a-dns-name"),
    ([name(".".join(["a" * 62] * 4) + "." + HOST)], "sni-not-a-dns-name"),
    ([name(OTHER.decode())], "sni-differs"),
    ([name("a." + HOST)], "sni-differs"),
    ([name(HOST[2:])], "sni-differs"),
    ([], "sni-absent"),
    ([b""], "client-hello-malformed"),
    ([vector16(b"")], "client-hello-malformed"),
    ([name(HOST) + b"\x00"], "client-hello-malformed"),
    ([name(HOST)[:-1]], "client-hello-malformed"),
    ([server_name((0, HOST.encode()))[:2] + b"\x00\x00\x05" + HOST.encode()], "client-hello-malformed"),
])
def test_anything_but_one_good_name_is_refused_with_its_reason(sni, reason):
    assert answer(rebuilt(*sni)) == "ERR log=" + reason


def test_a_name_of_253_characters_is_the_longest():
    longest = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert len(longest) == 253
    assert answer(rebuilt(name(longest)), longest) == OK
    assert answer(rebuilt(name(longest + ".")), longest) == OK
    assert answer(rebuilt(name("a" + longest)), "a" + longest) == "ERR log=sni-not-a-dns-name"


def truncated_lengths(hello):
    """HELLO with its record length one short: the record ends before the message."""
    return hello[:3] + struct.pack("!H", struct.unpack("!H", hello[3:5])[0] - 1) + hello[5:-1]


@pytest.mark.parametrize("handshake", [
    "-", "", "not base64!", "AAA", "AAAA=", "====",
    base64.b64encode(b"SSH-2.0-OpenSSH_9.6\r\n").decode(),
    base64.b64encode(b"GET / HTTP/1.1\r\n\r\n").decode(),
])
def test_what_is_not_base64_of_a_client_hello_is_refused(handshake):
    assert answers((HOST, handshake))[0] == "0 ERR log=client-hello-malformed"


@pytest.mark.parametrize("hello", [
    lambda: rebuilt(name(HOST))[:-1],
    lambda: truncated_lengths(rebuilt(name(HOST))),
    # Another record after the ClientHello's (another ClientHello the server would read).
    lambda: rebuilt(name(HOST), after=rebuilt(name(OTHER.decode()))),
    lambda: rebuilt(name(HOST), after=b"\x17\x03\x03\x00\x01x"),
    # Another handshake message in the ClientHello's record.
    lambda: rebuilt(name(HOST))[:3] + vector16(rebuilt(name(HOST))[5:] + b"\x01\x00\x00\x00"),
    # Not a ClientHello (a ServerHello's type), not a handshake record, an SSL 2 record.
    lambda: rebuilt(name(HOST))[:5] + b"\x02" + rebuilt(name(HOST))[6:],
    lambda: b"\x17" + rebuilt(name(HOST))[1:],
    lambda: b"\x16\x02\x00" + rebuilt(name(HOST))[3:],
    lambda: b"\x16\x03\x01\x00\x00" + rebuilt(name(HOST))[5:],
    # Bytes after the extensions, inside the ClientHello.
    lambda: rebuilt(name(HOST), inside=b"\x00\x00"),
    # An empty handshake record first; a legacy_version below TLS 1.0.
    lambda: b"\x16\x03\x01\x00\x00" + rebuilt(name(HOST)),
    lambda: rebuilt(name(HOST))[:9] + b"\x03\x00" + rebuilt(name(HOST))[11:],
    # A message length past every record.
    lambda: rebuilt(name(HOST))[:5] + b"\x01\xff\xff\xff" + rebuilt(name(HOST))[9:],
])
def test_records_that_are_not_one_client_hello_are_refused(hello):
    assert answer(hello()) == "ERR log=client-hello-malformed"


def test_answers_keep_their_channels():
    good, bad = base64.b64encode(rebuilt(name(HOST))).decode(), base64.b64encode(rebuilt()).decode()
    assert answers((HOST, good), (HOST, bad), ("other.test", good), (HOST, good)) == [
        "0 " + OK, "1 ERR log=sni-absent", "2 ERR log=sni-differs", "3 " + OK]


def test_without_its_tag_the_helper_does_not_start():
    done = subprocess.run(["perl", str(SNI_HELPER)], input="0 b-tls.test - -\n", capture_output=True, text=True,
                          check=False, timeout=10)
    assert (done.returncode, done.stdout) == (255, "")
    assert "usage: sni-is-connect-host CONNECTION-TAG" in done.stderr


def test_every_reason_the_helper_gives_is_explained():
    """_squid.SNI_REFUSALS (the words of docs/reference-refusals.md) names every reason the
    helper can give (a quoted lower-case hyphenated word in it), and no other."""
    assert set(re.findall(r'"([a-z]+(?:-[a-z]+)+)(?:\\n)?"', SNI_HELPER.read_text())) == set(SNI_REFUSALS)
