# SPDX-License-Identifier: GPL-3.0-or-later
"""Tripwires for the bypass battery: TCP and UDP listeners that log every connection and
datagram, a TLS listener that also logs the SNI it was asked for and the first record as
it arrived (a ClientHello its TLS library refuses is still seen), and a DNS server that
answers the battery's names and logs every query. One JSON line per event, so a leak is
seen, not inferred.

usage: tripwire.py LOGFILE CONFIG_JSON
CONFIG_JSON: {"tcp": [[address, port], ...], "udp": [[address, port], ...],
              "tls": [[address, port, certfile, keyfile], ...],
              "dns": [address, port], "zone": {name: {"A": [...], "AAAA": [...]}}}
"""
import ipaddress
import json
import socket
import ssl
import struct
import sys
import threading
import time

LOCK = threading.Lock()
TYPES = {1: "A", 28: "AAAA"}


def log(handle, **event):
    with LOCK:
        handle.write(json.dumps(event) + "\n")
        handle.flush()


def family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def serve_tcp(handle, listener, address, port, tls=None):
    while True:
        conn, peer = listener.accept()
        threading.Thread(target=tcp_client, args=(handle, conn, peer, address, port, tls), daemon=True).start()


def tcp_client(handle, conn, peer, address, port, tls):
    """One event per connection, with the first bytes (and the SNI) if any arrive: a
    bare connect is a leak too."""
    event = {"kind": "tcp", "address": address, "port": port, "client": peer[0], "data": ""}
    conn.settimeout(2)
    try:
        if tls is not None and conn.recv(1, socket.MSG_PEEK) == b"\x16":
            event["kind"] = "tls"
            event["hello"] = first_record(conn).decode("latin-1")
            conn = tls.wrap_socket(conn, server_side=True)
            event["sni"] = getattr(conn, "sni", None)
        data = conn.recv(1024)
        event["data"] = data.decode("latin-1")[:200]
        if data:
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nleak\n")
    except (OSError, ssl.SSLError):
        pass
    finally:
        log(handle, **event)
        conn.close()


def first_record(conn):
    """The first TLS record CONN received, peeked (the handshake reads it after), or as
    much of it as came within the connection's timeout."""
    data, deadline = b"", time.monotonic() + conn.gettimeout()
    while time.monotonic() < deadline:
        data = conn.recv(5 + 16384, socket.MSG_PEEK)
        if len(data) >= 5 and len(data) >= 5 + struct.unpack("!H", data[3:5])[0]:
            break
        time.sleep(0.02)
    return data


def tls_context(certfile, keyfile):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)

    def remember(sock, name, _context):
        sock.sni = name

    context.sni_callback = remember
    return context


def serve_udp(handle, sock, address, port):
    while True:
        data, peer = sock.recvfrom(4096)
        log(handle, kind="udp", address=address, port=port, client=peer[0], data=data.decode("latin-1")[:200])


def question(packet):
    """(name, qtype, end offset) of a DNS query's first question."""
    labels, offset = [], 12
    while packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1:offset + 1 + length].decode("latin-1"))
        offset += 1 + length
    qtype = struct.unpack("!H", packet[offset + 1:offset + 3])[0]
    return ".".join(labels).lower(), qtype, offset + 5


def answer(packet, zone):
    name, qtype, end = question(packet)
    records = zone.get(name)
    rtype = TYPES.get(qtype)
    addresses = (records or {}).get(rtype, [])
    # NXDOMAIN for unknown names; an empty NOERROR when the name exists without this type.
    flags = 0x8180 if records is not None else 0x8183
    reply = packet[:2] + struct.pack("!HHHHH", flags, 1, len(addresses), 0, 0) + packet[12:end]
    for address in addresses:
        data = ipaddress.ip_address(address).packed
        reply += struct.pack("!HHHIH", 0xC00C, qtype, 1, 5, len(data)) + data
    return name, rtype or str(qtype), reply


def serve_dns(handle, sock, zone):
    while True:
        packet, peer = sock.recvfrom(4096)
        try:
            name, rtype, reply = answer(packet, zone)
        except (IndexError, struct.error, UnicodeDecodeError):
            log(handle, kind="dns-garbage", client=peer[0], data=packet.decode("latin-1")[:200])
            continue
        log(handle, kind="dns", name=name, type=rtype, client=peer[0])
        sock.sendto(reply, peer)


def bound(address, port, kind):
    sock = socket.socket(family(address), kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    return sock


def main(logfile, config_json):
    config = json.loads(config_json)
    handle = open(logfile, "a")
    threads = []
    for address, port in config.get("tcp", []):
        listener = bound(address, port, socket.SOCK_STREAM)
        listener.listen(64)
        threads.append(threading.Thread(target=serve_tcp, args=(handle, listener, address, port)))
    for address, port, certfile, keyfile in config.get("tls", []):
        listener = bound(address, port, socket.SOCK_STREAM)
        listener.listen(64)
        context = tls_context(certfile, keyfile)
        threads.append(threading.Thread(target=serve_tcp, args=(handle, listener, address, port, context)))
    for address, port in config.get("udp", []):
        sock = bound(address, port, socket.SOCK_DGRAM)
        threads.append(threading.Thread(target=serve_udp, args=(handle, sock, address, port)))
    if config.get("dns"):
        zone = {name.lower(): records for name, records in config["zone"].items()}
        sock = bound(*config["dns"], socket.SOCK_DGRAM)
        threads.append(threading.Thread(target=serve_dns, args=(handle, sock, zone)))
    for thread in threads:
        thread.daemon = True
        thread.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(*sys.argv[1:])
