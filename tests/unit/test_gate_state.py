# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate as the host reads it (_gate_state): squid's identity and its files' hashes
through its /proc root, and who listens on its port; from a /proc tree the test writes
(the kernel's formats) and from this machine's own /proc."""

import hashlib
import os
import socket

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _squid
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _gate_state

PID = 4343
# /proc/PID/stat: the name in parentheses (which may hold anything), then the state; the
# start time is the 22nd field.
STAT = "4343 (squid) S 1 4343 4343 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n"
FILES = {_podman.GATE_SESSION_CONF: "http_port 127.0.0.1:41234\n", _podman.GATE_POLICY_CONF: "acl a\n",
         _squid.SNI_HELPER: "#!/usr/bin/perl\n"}


def proc_tree(tmp_path, argv=("squid", "-N", "-f", _podman.GATE_SESSION_CONF), started=777, files=None):
    process = tmp_path / str(PID)
    process.mkdir(parents=True, exist_ok=True)
    (process / "cmdline").write_text("".join(arg + "\0" for arg in argv))
    (process / "stat").write_text(STAT % started)
    for path, text in (FILES if files is None else files).items():
        inside = process / "root" / path.lstrip("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.write_text(text)
    return str(tmp_path)


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_squid_and_its_files_are_read_through_its_root(tmp_path):
    lines, error = _gate_state.read(PID, proc_tree(tmp_path))
    assert error is None
    assert lines == sorted(["squid pid %d started 777" % PID] + [
        "gate file %s sha256 %s" % (path, sha(text)) for path, text in FILES.items()])
    # What the session wrote is what a first reading must hold.
    started = _gate_state.GateStarted("/x/gate.pid", 41234, dict((path, sha(text)) for path, text in FILES.items()))
    assert set(_gate_state.started_lines(started)) <= set(lines)


def test_a_file_changed_or_a_squid_started_again_reads_otherwise(tmp_path):
    first = _gate_state.read(PID, proc_tree(tmp_path / "a"))[0]
    changed = _gate_state.read(PID, proc_tree(tmp_path / "b", files=dict(FILES, **{
        _podman.GATE_POLICY_CONF: "miss_access allow all\nacl a\n"})))[0]
    again = _gate_state.read(PID, proc_tree(tmp_path / "c", started=778))[0]
    assert len(set(first) ^ set(changed)) == 2 and len(set(first) ^ set(again)) == 2


def test_a_process_that_is_not_squid_yet_or_has_gone_is_not_read(tmp_path):
    # podman writes the PID before its runtime has executed squid.
    assert _gate_state.read(PID, proc_tree(tmp_path / "a", argv=("crun", "init"))) == (None, None)
    assert _gate_state.read(PID + 1, proc_tree(tmp_path / "b")) == (None, None)


def test_a_file_that_cannot_be_read_while_squid_runs_is_named(tmp_path):
    proc = proc_tree(tmp_path, files={})
    lines, error = _gate_state.read(PID, proc)
    assert lines is None and _podman.GATE_SESSION_CONF in error and "No such file" in error


def test_a_link_in_place_of_a_file_is_not_followed(tmp_path):
    proc = proc_tree(tmp_path)
    target = tmp_path / str(PID) / "root" / _podman.GATE_POLICY_CONF.lstrip("/")
    target.unlink()
    target.symlink_to("/etc/hostname")
    lines, error = _gate_state.read(PID, proc)
    assert lines is None and _podman.GATE_POLICY_CONF in error


TCP = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
       "   0: 0100007F:A0D2 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5551 1\n"
       "   1: 0100007F:A0D2 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 5552 1\n"
       "   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5553 1\n")
TCP6 = ("  sl  local_address                         remote_address                        st tx_queue rx_queue "
        "tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000000000000:A0D2 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000  1001        0 6661 1\n")


def test_every_listener_on_the_port_is_found_on_any_address_v4_or_v6(tmp_path):
    net = tmp_path / "self" / "net"
    net.mkdir(parents=True)
    (net / "tcp").write_text(TCP)
    (net / "tcp6").write_text(TCP6)
    assert _gate_state.listeners(0xA0D2, str(tmp_path)) == [
        "listener tcp 0100007F:A0D2 uid 1000 inode 5551",
        "listener tcp6 00000000000000000000000000000000:A0D2 uid 1001 inode 6661"]
    assert _gate_state.listeners(0xA0D3, str(tmp_path)) == []


def test_this_machines_own_listener_is_found():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        inode = os.fstat(server.fileno()).st_ino
        assert any(line.endswith("inode %d" % inode) for line in _gate_state.listeners(port))
    assert _gate_state.listeners(port) == []
