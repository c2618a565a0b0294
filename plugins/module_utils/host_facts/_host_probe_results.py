# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a host probe hands back, and how it sees a leak: the entry it returns, the
outcome of one command, and the listener a blocked connection must never reach.

No probe sends a packet to an address outside the workstation. A negative probe aims at
a Listener of its own (a thread on the host's loopback, reached from the container
through a pasta mapping, or on the host's own address), so a leak is seen by that
listener instead of being inferred from a timeout.
"""

import socket
import threading

from ansible_collections.aisb.sandbox.plugins.module_utils.common._podman import error_line

STDERR_EXCERPT = 400


def result(ok, detail, outcome=None, **values):
    """One probe's entry: ok, a plain sentence, its evidence and any measured values."""
    entry = {"ok": bool(ok), "detail": detail, "evidence": outcome.evidence() if outcome else {}}
    entry.update(values)
    return entry


def unmeasured(names, why, outcome=None):
    """Entries for probes that could not run at all: failed, and marked measured=false so
    the verdict blames the cause instead of the probe."""
    return dict((name, result(False, "not measured: " + why, outcome, measured=False)) for name in names)


class Outcome(object):
    """A command that ran: argv, rc (None: it hung and was stopped), stdout, stderr."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out or "", err or ""

    def evidence(self):
        return {"command": self.argv, "rc": self.rc, "stderr": self.err.strip()[-STDERR_EXCERPT:]}

    def values(self):
        """KEY=VALUE lines a probe script printed."""
        return dict(line.split("=", 1) for line in self.out.splitlines() if "=" in line)

    def started(self):
        return "started" in self.out.splitlines()

    def failure(self, timeout):
        """Why the container did not get to run its script, or None when it did."""
        if self.rc is None:
            return "hung: no exit within %d s (container removed)" % timeout
        if not self.started():
            return "the container did not start (rc %s): %s" % (self.rc, error_line(self.err))
        return None


class Listener(object):
    """A TCP or UDP socket a probe owns, recording who reached it: a leak is seen here."""

    def __init__(self, address, udp=False):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.udp = udp
        self.sock = socket.socket(family, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
        self.sock.bind((address, 0))
        self.port = self.sock.getsockname()[1]
        if not udp:
            self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.hits = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve)
        self._thread.daemon = True
        self._thread.start()

    def _serve(self):
        # After close() is asked for, keep going until the socket has been idle for one
        # timeout: a connection still queued in the backlog is a leak too.
        while True:
            stopping = self._stop.is_set()
            try:
                if self.udp:
                    self.hits.append(self.sock.recvfrom(512)[1][0])
                else:
                    conn, peer = self.sock.accept()
                    conn.close()
                    self.hits.append(peer[0])
            except socket.timeout:
                if stopping:
                    return
            except OSError:
                return

    def stop(self):
        """Let the listener end once it has been idle for one timeout; close() waits for that."""
        self._stop.set()

    def close(self):
        self.stop()
        self._thread.join()
        self.sock.close()
        return self.hits

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()


def host_address():
    """The host's address that podman's host.containers.internal leads to (the source of
    the default route). connect() on a UDP socket only looks the route up: nothing is sent."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return probe.getsockname()[0]
    finally:
        probe.close()
