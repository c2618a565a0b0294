# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's network as the host sees it from outside, without entering it: its one
job. The enforcement watch (_enforcement_watch) compares each reading with the first.

The routes and addresses come from /proc/PID/net, which shows the network namespace of
process PID (the sandbox's first process): fib_trie holds every IPv4 route and local
address of every table, ipv6_route every IPv6 route, if_inet6 every IPv6 address. What
changes by itself is left out (the cached clones traffic makes of IPv6 routes, their use
and reference counts, an address's flags while duplicate detection runs, and the local
and anycast routes the kernel adds for an address once its detection ends: measured, a
link-local address's route came 1 to 2 s after the sandbox's start; the address itself
is in if_inet6); everything else is kept, so a route or an address added, removed or
changed is a difference.

pasta is the process podman started for the sandbox's network: the session's user's,
named pasta, holding the sandbox's network namespace open (it enters it for each spliced
connection; its descriptor's target is that namespace: podman's path for it exists only in
podman's mount namespace, so its command line cannot name it for the host). It is found once; every later reading is its command line and
start time again: pasta restarted or replaced is another process.
"""

from __future__ import annotations

import os

# fib_trie, ipv6_route and if_inet6 as the kernel prints them.
NETWORK_FILES = ("fib_trie", "ipv6_route", "if_inet6")
# An IPv6 route's flags for a clone made by traffic (a path MTU, a redirect), and for
# the routes of the sandbox's own addresses (local, anycast).
RTF_CACHE, RTF_LOCAL, RTF_ANYCAST = 0x01000000, 0x80000000, 0x00100000
# pasta's process names (the AVX2 build runs under its own name).
PASTA_NAMES = ("pasta", "pasta.avx2")


def _read(path):
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def network_lines(pid, proc="/proc"):
    """(sorted lines of PID's routes and addresses and its namespace's identity, None) or
    (None, why they cannot be read)."""
    try:
        identity = os.stat("%s/%d/ns/net" % (proc, pid))
        texts = dict((name, _read("%s/%d/net/%s" % (proc, pid, name))) for name in NETWORK_FILES)
    except OSError as error:
        return None, "the sandbox's network cannot be read (%s: %s)" % (error.filename, error.strerror)
    lines = ["netns %d:%d" % (identity.st_dev, identity.st_ino)]
    # fib_trie's text is a tree: each line as it is, numbered (its place is its meaning).
    lines += ["fib_trie %04d %s" % (number, line.rstrip())
              for number, line in enumerate(texts["fib_trie"].splitlines())]
    for line in texts["ipv6_route"].splitlines():
        fields = line.split()
        if len(fields) != 10:
            lines.append("ipv6_route ? %s" % line.strip())
        elif not int(fields[8], 16) & (RTF_CACHE | RTF_LOCAL | RTF_ANYCAST):
            # dest, its length, source, its length, next hop, metric; then flags and device.
            lines.append("ipv6_route %s" % " ".join(fields[:6] + fields[8:]))
    for line in texts["if_inet6"].splitlines():
        fields = line.split()
        if len(fields) != 6:
            lines.append("if_inet6 ? %s" % line.strip())
        else:
            # address, interface index, prefix length, scope; then the device.
            lines.append("if_inet6 %s" % " ".join(fields[:4] + fields[5:]))
    return sorted(lines), None


def process_identity(pid, proc="/proc"):
    """{"pid", "argv", "started"} of process PID (its command line and start time, in
    clock ticks after boot), or None when it does not exist or has exited."""
    try:
        argv = _read("%s/%d/cmdline" % (proc, pid)).split("\0")
        stat = _read("%s/%d/stat" % (proc, pid))
    except OSError:
        return None
    # The fields after the name (in parentheses, which may hold anything): the state is
    # the 3rd, the start time the 22nd. A zombie has exited (and has no command line).
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return {"pid": pid, "argv": argv[:-1] if argv and argv[-1] == "" else argv, "started": int(fields[19])}


def find_pasta(pid, proc="/proc"):
    """The identity (process_identity) of the pasta process that serves the network
    namespace of process PID, or None."""
    try:
        wanted = _identity("%s/%d/ns/net" % (proc, pid))
        entries = os.listdir(proc)
    except OSError:
        return None
    uid = os.getuid()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            if os.stat("%s/%s" % (proc, entry)).st_uid != uid or _read("%s/%s/comm" % (proc, entry)).strip() \
                    not in PASTA_NAMES:
                continue
            if any(_identity("%s/%s/fd/%s" % (proc, entry, fd)) == wanted
                   for fd in os.listdir("%s/%s/fd" % (proc, entry))):
                return process_identity(int(entry), proc)
        except OSError:
            continue
    return None


def _identity(path):
    """(device, inode) of what PATH leads to (a namespace, for /proc's links), or None."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
