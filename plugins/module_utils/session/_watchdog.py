# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's watchdog: the process that ends a session whose own process died first.

The session starts it (argv()) in its own session, holding the only write end of a pipe
that is the watchdog's stdin, and writes the session's record as prepared at start
(JSON, one line) to it. When the session has removed its containers itself it writes
DONE and closes the pipe. A session that dies any other way, SIGKILL included, closes
the pipe without DONE: the watchdog then runs the removal command and writes the
record, completed with status controller-lost and sealed with the workstation's key
(_record_seal), where the session would have.

It runs as its own program (python -I -c SOURCE, SOURCE being _record_seal's text then
this file's), so this file imports only the standard library and _record_seal, which does
too; the functions below are pure but for write_record() and main(). No __future__ import:
this file's text does not open the program.
"""

import json
import os
import subprocess
import sys
import time

try:
    from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal
except ImportError:
    # Run as its own program: _record_seal's functions were defined above this file's text.
    _record_seal = sys.modules[__name__]

NAME = "aisb-watchdog"
DONE = b"done"
STATUS = "controller-lost"
REASON = ("the session's process ended before the session did (SIGKILL, or its controller's death took it); "
          "the watchdog removed the session's containers")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def module_text(module):
    """MODULE's source text: Ansible's collection loader gives it as bytes, Python's own as str."""
    text = module.__loader__.get_source(module.__name__)
    return text.decode("utf-8") if isinstance(text, bytes) else text


def source():
    """The program's text, _record_seal's then this file's, for python -c (a module inside
    Ansible's payload zip has no path another process can run)."""
    return "\n".join(module_text(module) for module in (_record_seal, sys.modules[__name__]))


def argv(python, record_path, key_path, remove_argv):
    """The watchdog's command line: PYTHON runs the program isolated (-I: no environment
    variable or user directory changes what it imports); KEY_PATH: the record key's file."""
    return [python, "-I", "-c", source(), NAME, record_path, key_path, "--"] + list(remove_argv)


def parse_argv(args):
    """(record path, key path, removal argv) from the arguments after NAME."""
    if len(args) < 4 or args[2] != "--":
        raise ValueError("usage: %s RECORD KEY -- REMOVE_COMMAND..." % NAME)
    return args[0], args[1], args[3:]


def read_pipe(data):
    """(prepared record text, done) from everything the session wrote to the pipe."""
    prepared, _newline, rest = data.partition(b"\n")
    return prepared, rest == DONE


def complete(prepared, record_path, remove_argv, removed_rc, now):
    """The record the watchdog writes: the session's prepared record (or, when it never
    arrived whole, what the path says) with the end the session could not write."""
    try:
        record = json.loads(prepared.decode("utf-8"))
        if not isinstance(record, dict):
            raise ValueError("not an object")
    except ValueError:
        # What this holds reads the same in every version since records were sealed.
        record = {"schema_version": _record_seal.SEALED_SINCE,
                  "session_id": os.path.basename(os.path.dirname(record_path)), "record": record_path}
    record.update({
        "ended_at": time.strftime(TIME_FORMAT, time.gmtime(now)),
        "exit_code": None,
        "status": STATUS,
        "reason": REASON + ("" if removed_rc == 0 else " (its removal command exited %d)" % removed_rc),
        # Nobody read the gate's log: its decisions are not known.
        "gate": None,
        "commands": list(record.get("commands") or []) + [list(remove_argv)],
    })
    return record


def sealed(record, key_path):
    """RECORD sealed with the key in KEY_PATH; unsealed, saying why, when it cannot be read
    (the record's check then fails it: it has no MAC)."""
    try:
        key = _record_seal.read_key(key_path)
    except _record_seal.KeyFileError as error:
        return dict(record, seal_error=str(error))
    if key is None:
        return dict(record, seal_error="the record key %s is gone" % key_path)
    return _record_seal.seal(record, key)


def write_record(path, record):
    """Write RECORD to PATH as a whole or not at all."""
    partial = path + ".watchdog"
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write(_record_seal.text(record))
    os.rename(partial, path)


def main(args, stdin, run=subprocess.call, now=time.time):
    """Wait for the session's end of STDIN to close; clean up after it unless it said DONE."""
    record_path, key_path, remove_argv = parse_argv(args)
    prepared, done = read_pipe(stdin.read())
    if done:
        return 0
    # This program has no AnsibleModule (it outlives the module), so no run_command.
    removed_rc = run(remove_argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # pylint: disable=ansible-bad-function
                     stderr=subprocess.DEVNULL)
    write_record(record_path, sealed(complete(prepared, record_path, remove_argv, removed_rc, now()), key_path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[2:], sys.stdin.buffer))
