# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Images by content: a build context, and the one ensure-built flow that tags an image
by the hash of its inputs and builds it only when that tag does not exist yet.

The content_image module (sandbox and gate images) and the host probes' image both go
through ensure(). Commands go through RUN, a _runner.Runner.
A build writes its log to LOG_DIR/<repository name>-<hash>.log as it runs (build_log),
kept after it: a failure names it and shows its last lines.

A refresh (ensure's REFRESH_STAMP) pulls the base again unless it is a localhost/ one,
builds without podman's layer cache (so apt installs today's packages) and records its
stamp in RECORDS_DIR/refreshed/<repository name>; every later ensure hashes that stamp
too, so the refreshed image has a tag of its own and every later run finds it. An
ensure outside check mode, and every session start, marks the tags it uses in
RECORDS_DIR/used/ (mark_used: the mtime is the last use), which retention reads.
"""

import contextlib
import json
import os
import re
import shutil
import tempfile
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _content_hash, _files, _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _session_images

# The base of every image the collection builds unless the operator names another
# (aisb_base_image). The roles' defaults and the modules' documentation repeat it:
# tests/unit/test_enforcement_copies.py fails when a copy differs.
DEFAULT_BASE_IMAGE = "docker.io/library/ubuntu:24.04"
LABEL_PREFIX = "io.aisb."
PROBE_REPOSITORY = "localhost/aisb-probe"
# A tag this flow makes: <repository>:<the hash's first TAG_LENGTH hex digits>.
CONTENT_TAG = re.compile(r"\A[a-z0-9][a-z0-9._/-]*:[0-9a-f]{%d}\Z" % _content_hash.TAG_LENGTH)
# A refresh stamp: the UTC time of the refresh, to the second.
REFRESH_STAMP = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
# In RECORDS_DIR: the last-use marks (mark_used; retention reads them) and the refresh stamps.
USED_MARKS = "used"
REFRESH_STAMPS = "refreshed"
# Lines of a failed build's log shown in its error.
LOG_TAIL_LINES = 15
PROBE_CONTAINERFILE = """FROM {base}
RUN apt-get update -q \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nftables \\
 && rm -rf /var/lib/apt/lists/*
"""


class ImageError(Exception):
    """A pull, inspect or build that failed: the message names it, with podman's own words;
    RC, STDOUT and STDERR are podman's, PULLED: the base image was pulled before it failed."""

    def __init__(self, message, rc=None, stdout="", stderr="", pulled=False):
        super(ImageError, self).__init__(message)
        self.rc, self.stdout, self.stderr, self.pulled = rc, stdout, stderr, pulled


class Image(object):
    """What ensure() found or did. TAG is None when the base image is missing and was not
    pulled (then nothing else is known). BUILT: this call built TAG (check mode: would).
    PULLED: this call pulled the base image. LOG: TAG's build log (build_log; check mode:
    where it would go), None without a log directory. SECONDS: how long the build took."""

    def __init__(self, tag=None, digest=None, inputs=None, built=False, pulled=False, log=None, seconds=None):
        self.tag, self.digest, self.inputs = tag, digest, inputs or {}
        self.built, self.pulled, self.log, self.seconds = built, pulled, log, seconds


def build_log(log_dir, tag):
    """Where TAG's build writes its log in LOG_DIR: one file per image and content hash."""
    repository, digest = tag.rsplit(":", 1)
    return os.path.join(log_dir, "%s-%s.log" % (repository.rsplit("/", 1)[-1], digest))


def log_tail(path, lines=LOG_TAIL_LINES):
    """The last LINES lines of the log at PATH, "" when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def read_context(directory):
    """Every regular file under DIRECTORY as {relative path: bytes}.

    A symlink is refused: the hash would then depend on what it points at build time.
    """
    files = {}
    for root, dirs, names in os.walk(directory):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                raise ValueError("%s: only regular files belong in a build context" % path)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = handle.read()
    return files


def context_files(entries):
    """{relative path: (bytes, mode)} from content_image's files option; ValueError on a
    path that leaves the context or a mode that is not octal."""
    files = {}
    for entry in entries:
        path = os.path.normpath(entry["path"])
        if os.path.isabs(path) or path == "." or path.split(os.sep)[0] == "..":
            raise ValueError("files: path %r must be relative and stay inside the context" % entry["path"])
        try:
            mode = int(entry["mode"], 8)
        except ValueError:
            raise ValueError("files: mode %r of %s is not an octal mode" % (entry["mode"], entry["path"]))
        files[path] = (entry["content"].encode("utf-8"), mode)
    return files


def write_context(directory, files):
    """Make DIRECTORY hold exactly FILES ({relative path: (bytes, mode)}): files whose
    content and mode already match are left alone, any other file is removed."""
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            if os.path.relpath(path, directory) not in files:
                os.remove(path)
    for relative, (data, mode) in files.items():
        path = os.path.join(directory, relative)
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        if os.path.islink(path):
            os.remove(path)  # writing would go through it, to wherever it points
        if not os.path.isfile(path) or _read(path) != data:
            with open(path, "wb") as handle:
                handle.write(data)
        os.chmod(path, mode)


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def repository_name(repository):
    """The last part of REPOSITORY (localhost/aisb-sandbox: aisb-sandbox), naming its files."""
    return repository.rsplit("/", 1)[-1]


def check_refresh_stamp(stamp, where):
    """STAMP when it is a refresh stamp (REFRESH_STAMP); ValueError naming WHERE otherwise."""
    if not REFRESH_STAMP.match(stamp):
        raise ValueError("%s: refresh stamp %r is not a UTC time like 2026-12-01T05:30:00Z" % (where, stamp))
    return stamp


def stored_refresh_stamp(records_dir, repository):
    """The stamp of REPOSITORY's last refresh in RECORDS_DIR, None when it was never
    refreshed (or RECORDS_DIR is None); ValueError when the file holds anything else."""
    if records_dir is None:
        return None
    path = os.path.join(records_dir, REFRESH_STAMPS, repository_name(repository))
    try:
        with open(path) as handle:
            return check_refresh_stamp(handle.read().strip(), path)
    except FileNotFoundError:
        return None


def write_record(records_dir, kind, name, text):
    """Write TEXT to RECORDS_DIR/KIND/NAME whole (a reader sees the old or the new file)."""
    directory = os.path.join(records_dir, kind)
    os.makedirs(directory, 0o700, exist_ok=True)
    _files.write_whole(os.path.join(directory, name), text, 0o600)


def used_mark(tag):
    """The name of TAG's last-use mark in RECORDS_DIR/used: <repository name>-<tag's hash>."""
    repository, digest = tag.rsplit(":", 1)
    return "%s-%s" % (repository_name(repository), digest)


def mark_used(records_dir, tag):
    """Mark TAG as used now in RECORDS_DIR/used (its mtime: the last use; retention reads
    it). Only a content-hash tag (<repository>:<hash>) is marked: a session may be given
    any image reference."""
    if CONTENT_TAG.match(tag):
        write_record(records_dir, USED_MARKS, used_mark(tag), tag + "\n")


def base_image_id(run, podman, reference, pull=True, timeout=None, fresh=False):
    """(ID, pulled) of REFERENCE, pulled once first when it is missing, PULL allows it and
    it is not a localhost/ image; (None, False) when it is missing and was not pulled.
    FRESH: pulled again even when present (a refresh), unless it is a localhost/ image."""
    rc, out, _err = run(_podman.image_id(podman, reference))
    if rc == 0 and not (fresh and pull and not _podman.is_local(reference)):
        return out.strip(), False
    if not pull or _podman.is_local(reference):
        return None, False
    rc, out, err = run(_podman.pull(podman, reference), timeout=timeout)
    if rc != 0:
        raise ImageError("pulling %s failed: %s" % (reference, _podman.error_line(err)), rc, out, err)
    rc, out, err = run(_podman.image_id(podman, reference))
    if rc != 0:
        raise ImageError("reading the ID of %s failed: %s" % (reference, _podman.error_line(err)), rc, out, err,
                         pulled=True)
    return out.strip(), True


@contextlib.contextmanager
def _no_progress():
    yield


def ensure(run, podman, repository, files, base_image, check_mode, context=None, build_args=None, extra=None,
           labels=None, what=None, timeout=None, log_dir=None, records_dir=None, refresh_stamp=None, progress=None):
    """REPOSITORY:<hash>, built when no image has that tag: the one ensure-built flow.

    The hash covers FILES ({context path: bytes}), the base image's ID, BUILD_ARGS,
    EXTRA and the refresh stamp (_content_hash.build_inputs). The build runs with
    --pull=never from exactly the hashed base (--from its ID), in CONTEXT (a directory
    holding FILES; None: FILES are written to a temporary one), labelled
    io.aisb.content-hash, io.aisb.inputs, io.aisb.base-image and LABELS. Check mode
    pulls, builds and writes nothing. WHAT names the image in messages (default: its
    tag). LOG_DIR: where the build writes its log (build_log), made when missing.
    RECORDS_DIR: refresh stamps and last-use marks (None: neither is read or written).
    REFRESH_STAMP: refresh (see the module's docstring), recording this stamp once built.
    PROGRESS: called with the log's path when a build runs, a context manager around it
    (the action plugin shows the build's step from the log; plugin_utils/_build_progress).
    Raises ImageError, or ValueError for a malformed stamp.
    """
    stored = stored_refresh_stamp(records_dir, repository)
    if refresh_stamp is not None:
        check_refresh_stamp(refresh_stamp, "refresh_stamp")
    refreshed = stored if refresh_stamp is None else refresh_stamp
    # The same stamp again (a second role run in one refresh) is that refresh, done.
    fresh = refresh_stamp is not None and refresh_stamp != stored
    base_id, pulled = base_image_id(run, podman, base_image, pull=not check_mode, timeout=timeout, fresh=fresh)
    if base_id is None:
        return Image()
    inputs = _content_hash.build_inputs(files, base_id, build_args, extra, refreshed)
    digest = _content_hash.content_hash(inputs)
    tag = _content_hash.image_tag(repository, digest)
    if run(_podman.image_exists(podman, tag))[0] == 0:
        if records_dir and not check_mode:
            mark_used(records_dir, tag)
        return Image(tag, digest, inputs, built=False, pulled=pulled)
    log = build_log(log_dir, tag) if log_dir else None
    if check_mode:
        return Image(tag, digest, inputs, built=True, pulled=pulled, log=log)
    if log:
        os.makedirs(log_dir, 0o700, exist_ok=True)
    all_labels = {LABEL_PREFIX + "content-hash": digest,
                  LABEL_PREFIX + "inputs": json.dumps(inputs, sort_keys=True, separators=(",", ":")),
                  LABEL_PREFIX + "base-image": base_image}
    all_labels.update(labels or {})
    directory = context or tempfile.mkdtemp(prefix="aisb-image-")
    try:
        if context is None:
            write_context(directory, dict((path, (data, 0o644)) for path, data in files.items()))
        started = time.time()
        with progress(log) if progress and log else _no_progress():
            rc, out, err = run(_podman.build(podman, tag, directory, base_id, all_labels, build_args, log,
                                             no_cache=refresh_stamp is not None), timeout=timeout)
        seconds = int(round(time.time() - started))
    finally:
        if context is None:
            shutil.rmtree(directory, ignore_errors=True)
    if rc != 0:
        tail = log_tail(log) if log else ""
        raise ImageError("building %s from %s failed after %d s: %s%s" % (
            what or tag, base_image, seconds, _podman.error_line(err),
            "; build log %s, its last lines:\n%s" % (log, tail) if log else ""), rc, out, err, pulled)
    if records_dir:
        # Only once built: a failed refresh leaves the last good stamp, and its tag, in use.
        if refresh_stamp is not None:
            write_record(records_dir, REFRESH_STAMPS, repository_name(repository), refresh_stamp + "\n")
        mark_used(records_dir, tag)
        # Another image may be current now for what sessions remembered: forget it all.
        _session_images.forget(records_dir)
    return Image(tag, digest, inputs, built=True, pulled=pulled, log=log, seconds=seconds)


def ensure_probe_image(run, podman, base_image, probe_image, check_mode, timeout=900, log_dir=None):
    """(image, changed, error) for the host probes: PROBE_IMAGE as given, or one built
    from BASE_IMAGE with nftables (PROBE_CONTAINERFILE), its log in LOG_DIR. Check mode
    pulls and builds nothing."""
    if probe_image:
        present = run(_podman.image_exists(podman, probe_image))[0] == 0
        return (probe_image, False, None) if present else \
            (None, False, "the probe image %s is not present" % probe_image)
    containerfile = PROBE_CONTAINERFILE.format(base=base_image).encode("utf-8")
    try:
        image = ensure(run, podman, PROBE_REPOSITORY, {"Containerfile": containerfile}, base_image, check_mode,
                       labels={"aisb.sandbox.role": "probe"}, what="the probe image", timeout=timeout,
                       log_dir=log_dir)
    except ImageError as error:
        return None, error.pulled, str(error)
    if image.tag is None:
        return None, False, "the base image %s is not present%s" % (
            base_image, " (check mode pulls nothing)" if check_mode else "")
    if image.built and check_mode:
        return None, image.pulled, "the probe image %s is not built (check mode builds nothing)" % image.tag
    return image.tag, image.pulled or image.built, None
