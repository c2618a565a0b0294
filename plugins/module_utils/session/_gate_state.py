# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's gate as the host sees it from outside, without entering it: its one
job. The enforcement watch (_enforcement_watch) compares each reading with what the
session started.

The gate is squid, the first process of the gate's container: podman writes its host PID
to the session's directory (GateStarted.pidfile). Its identity is that PID and its start
time (clock ticks after boot: a PID reused by another process has another). Its
configuration is read as squid reads it, through /proc/PID/root, the container's own
root: the session's part and the policy's part (bind mounts of files in the host's state
directory; a host file replaced by another, rather than written in place, is not what
the mount shows, and squid never reads it) and the ClientHello check it runs (GATE_FILES,
hashed). Only squid reads them again (a reconfigure), and nothing in a session asks it to:
a hash other than the session's is a configuration squid may be running, whether it has
been told to read it yet or not. Its logs go to the container's standard output: no
rotation touches a file here.

Once that process has gone, the gate has died (the session stops the sandbox for that:
status gate-died), unless something else listens on the gate's port: a gate replaced.
"""

from __future__ import annotations

import hashlib
import os
from typing import Dict, NamedTuple

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _squid
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _netns_state

# Inside the gate's container: what squid reads its configuration and ClientHello check from.
GATE_FILES = (_podman.GATE_SESSION_CONF, _podman.GATE_POLICY_CONF, _squid.SNI_HELPER)
# /proc/net's TCP tables: a listening socket's state.
TCP_TABLES = ("tcp", "tcp6")
TCP_LISTEN = "0A"
# squid's process names (its argv[0] once podman's runtime has executed it).
SQUID_NAME = "squid"


class GateStarted(NamedTuple):
    """What the session started its gate with: where podman writes squid's host PID, the
    gate's loopback port, and the sha256 of the files the session wrote for it ({path
    inside the gate: hex digest})."""
    pidfile: str
    port: int
    files: Dict[str, str]


def digest(data):
    """The sha256 of DATA (bytes or text, as UTF-8), in hex."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def squid_line(identity):
    return "squid pid %d started %d" % (identity["pid"], identity["started"])


def file_line(path, hexdigest):
    return "gate file %s sha256 %s" % (path, hexdigest)


def started_lines(started):
    """The lines a first reading's files must hold for what the session wrote (STARTED)."""
    return sorted(file_line(path, hexdigest) for path, hexdigest in started.files.items())


def read(pid, proc="/proc"):
    """(None, None) while process PID is not squid yet or has gone; else (sorted lines:
    its identity and each of GATE_FILES' hashes as it reads them, None) or (None, why
    they cannot be read)."""
    identity = _netns_state.process_identity(pid, proc)
    if identity is None or os.path.basename(identity["argv"][0] if identity["argv"] else "") != SQUID_NAME:
        return None, None
    lines = [squid_line(identity)]
    for path in GATE_FILES:
        try:
            # The last component never followed: a link there would lead out of its root.
            fd = os.open("%s/%d/root%s" % (proc, pid, path), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                lines.append(file_line(path, digest(handle.read())))
        except OSError as error:
            if _netns_state.process_identity(pid, proc) != identity:
                return None, None  # it went meanwhile
            return None, "the gate's %s cannot be read (%s)" % (path, error.strerror)
    return sorted(lines), None


def listeners(port, proc="/proc"):
    """The lines of every socket listening on PORT, any address, IPv4 or IPv6, in this
    process's network namespace (the gate's: it runs with the host's network)."""
    found = []
    for table in TCP_TABLES:
        try:
            with open("%s/self/net/%s" % (proc, table)) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # sl, local address:port, remote, state, queues, ..., uid, timeout, inode.
            if len(fields) > 9 and fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append("listener %s %s uid %s inode %s" % (table, fields[1], fields[7], fields[9]))
    return sorted(found)
