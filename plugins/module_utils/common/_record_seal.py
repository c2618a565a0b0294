# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A session record's seal: a hash chain over its events and an HMAC-SHA256 over the whole
with the workstation's key, and the check of both.

The standard library only: the watchdog, a program of its own, seals the record it writes
with this file's functions (its source goes before the watchdog's). Pure but for the key
file's functions (workstation_key, read_key).
"""

import hashlib
import hmac
import json
import os

KEY_BYTES = 32
KEY_MODE = 0o600
MAC_ALGORITHM = "HMAC-SHA256"
CHAIN_ALGORITHM = "sha256"
# The first version whose every record is sealed; an older one says it has no seal.
SEALED_SINCE = 2
SEAL_FIELDS = ("chain", "mac")
# The record's fields by the event they belong to; every other field is the start's.
GATE_DECISIONS = ("allowed", "denied", "answered")
FINDINGS = ("enforcement_watch", "project_git", "commits", "credentials", "tokens", "review")
END_FIELDS = ("ended_at", "exit_code", "status", "reason", "record_error", "ruleset", "image", "gate", "commands")
CHAIN_ORIGIN = b"aisb session record chain\n"


class KeyFileError(ValueError):
    """A key file this collection does not use; the message names it and what is allowed."""


def text(record):
    """The record file's exact text: what the collection writes, byte for byte."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def events(record):
    """RECORD's events, in the order they happened, each [kind, value]: its start (every
    field no later event holds), each of the gate's decisions as its log had them, each
    finding, its end, and each step review took after it."""
    later = set(SEAL_FIELDS + FINDINGS + END_FIELDS)
    found = [["start", dict((k, v) for k, v in record.items() if k not in later)]]
    gate = record.get("gate")
    gate = gate if isinstance(gate, dict) else {}
    for kind in GATE_DECISIONS:
        found += [["gate " + kind, entry] for entry in gate.get(kind) or []]
    for section in FINDINGS:
        value = record.get(section)
        if section == "review" and isinstance(value, dict):
            value = dict((k, v) for k, v in value.items() if k != "history")
        if section in record:
            found.append(["finding " + section, value])
    end = dict((k, record[k]) for k in END_FIELDS if k in record)
    if isinstance(record.get("gate"), dict):
        end["gate"] = dict((k, v) for k, v in gate.items() if k not in GATE_DECISIONS)
    found.append(["end", end])
    review = record.get("review")
    history = review.get("history") if isinstance(review, dict) else None
    found += [["review", entry] for entry in history or []]
    return found


def chain(found):
    """The chain over FOUND (events()): each event's hash covers its kind, its value and
    the hash before it, so none can be changed, moved or left out without every later
    one changing."""
    previous = hashlib.sha256(CHAIN_ORIGIN).hexdigest()
    links = []
    for kind, value in found:
        previous = hashlib.sha256(previous.encode("ascii") + canonical([kind, value])).hexdigest()
        links.append([kind, previous])
    return {"algorithm": CHAIN_ALGORITHM, "events": links, "head": previous}


def key_id(key):
    """A name for KEY that says nothing of it: which workstation's key signed a record."""
    return hmac.new(key, b"aisb record key id", hashlib.sha256).hexdigest()[:16]


def mac(record, key):
    """The MAC of RECORD (its mac field left out) with KEY."""
    unsealed = dict((k, v) for k, v in record.items() if k != "mac")
    return hmac.new(key, canonical(unsealed), hashlib.sha256).hexdigest()


def seal(record, key):
    """RECORD with its chain and MAC, a new dict; one of a version before SEALED_SINCE
    as it is (sealing it would vouch for content this collection never checked)."""
    if record.get("schema_version", 1) < SEALED_SINCE:
        return record
    sealed = dict((k, v) for k, v in record.items() if k not in SEAL_FIELDS)
    sealed["chain"] = chain(events(sealed))
    sealed["mac"] = {"algorithm": MAC_ALGORITHM, "key_id": key_id(key), "value": mac(sealed, key)}
    return sealed


def chain_problems(record):
    """Where RECORD's events and its chain part: the first event whose hash differs, and
    a count that differs."""
    stored = record.get("chain")
    if not isinstance(stored, dict) or not isinstance(stored.get("events"), list):
        return ["it has no hash chain"]
    links = chain(events(record))["events"]
    problems = []
    for number, (link, kept) in enumerate(zip(links, stored["events"]), 1):
        if link != kept:
            problems.append("event %d (%s) does not match its chain: changed, moved or another left out before it"
                            % (number, link[0]))
            break
    if len(links) != len(stored["events"]):
        problems.append("it holds %d events where its chain has %d: events were removed or added"
                        % (len(links), len(stored["events"])))
    if stored.get("head") != (stored["events"][-1][1] if stored["events"] else None):
        problems.append("its chain's head is not its last event's hash")
    return problems


def enforcement_problems(record):
    """A session whose watch saw its enforcement lost and that still ended as if it held
    (status exited: the harness's own end). A session ended otherwise (interrupted, its
    controller lost, its gate dead) says so in its status; its watch's helpers end with it
    and may be read as a loss."""
    watch = record.get("enforcement_watch")
    lost = watch.get("lost") if isinstance(watch, dict) else None
    if not lost or record.get("status") != "exited":
        return []
    what = "%s at %s" % (lost.get("what"), lost.get("at_text")) if isinstance(lost, dict) else str(lost)
    return ["its enforcement watch saw enforcement lost (%s) but its status is %s, exit %s"
            % (what, record.get("status"), record.get("exit_code"))]


def check(data, key):
    """(state, problems, note) for a record file's bytes DATA and the workstation's KEY (None
    when it has none): state "signed" (intact, by this workstation's key), "unsigned" (a
    record from before seals, NOTE says so) or "failed" (PROBLEMS say why, each a phrase
    that follows the record's path and a colon)."""
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError as error:
        return "failed", ["not a session record: %s" % error], ""
    if not isinstance(record, dict):
        return "failed", ["not a session record: it holds no JSON object"], ""
    version = record.get("schema_version", 1)
    if not isinstance(version, int):
        return "failed", ["its schema_version %r is no number" % (version,)], ""
    if "mac" not in record and version < SEALED_SINCE:
        problems = enforcement_problems(record)
        return ("failed" if problems else "unsigned", problems,
                "written before records were sealed (schema_version %d): whether it was changed cannot be checked"
                % version)
    if "mac" not in record:
        return "failed", ["no MAC, which every record of schema_version %d has: its seal was taken off"
                          % version], ""
    seal_value = record["mac"] if isinstance(record["mac"], dict) else {}
    if key is None:
        return "failed", ["signed, but this host has no record key: its MAC cannot be checked"], ""
    problems = chain_problems(record)
    if sorted(seal_value) != ["algorithm", "key_id", "value"] or seal_value["algorithm"] != MAC_ALGORITHM:
        problems.append("its MAC is not %s's {algorithm, key_id, value}: %s" % (MAC_ALGORITHM, json.dumps(seal_value)))
    if seal_value.get("key_id") != key_id(key):
        problems.insert(0, "signed with another key (key id %s; this workstation's is %s): not written here, "
                           "or this workstation's key was replaced" % (seal_value.get("key_id"), key_id(key)))
    elif not hmac.compare_digest(str(seal_value.get("value")), mac(record, key)):
        problems.append("its MAC does not match its content: it was changed after the collection wrote it")
    if not problems and data != text(record).encode("utf-8"):
        problems.append("its content is intact but its bytes are not as the collection wrote them (an edit that "
                        "kept the JSON's meaning)")
    problems += enforcement_problems(record)
    return ("failed" if problems else "signed"), problems, ""


def read_key(path):
    """The key in PATH, None when there is none; KeyFileError when another user may read
    it or it is not a key."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise KeyFileError("the record key %s cannot be read: %s" % (path, error.strerror))
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if status.st_mode & 0o077 or status.st_uid != os.getuid():
            raise KeyFileError("the record key %s must be this user's, mode 0600 (it is mode %04o): whoever else "
                               "reads it can sign a record" % (path, status.st_mode & 0o7777))
        key = handle.read()
    if len(key) != KEY_BYTES:
        raise KeyFileError("the record key %s holds %d bytes, not %d: remove it and a new one is made (records "
                           "signed with it then fail their check)" % (path, len(key), KEY_BYTES))
    return key


def workstation_key(path):
    """The key in PATH, made first (KEY_BYTES random bytes, mode 0600) when there is none."""
    key = read_key(path)
    if key is not None:
        return key
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    key = os.urandom(KEY_BYTES)
    partial = "%s.%d" % (path, os.getpid())
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_MODE), "wb") as handle:
        handle.write(key)
    try:
        # Never over a key another process made meanwhile: its records are signed with that one.
        os.link(partial, path)
    except FileExistsError:
        key = read_key(path)
    finally:
        os.unlink(partial)
    return key
