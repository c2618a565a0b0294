# SPDX-License-Identifier: GPL-3.0-or-later
"""The one ensure-built flow (content_image and the probe image): tagged by the hash of
every input, built from exactly the hashed base, only when the tag is missing."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _content_hash
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _images


def image_run(present, build_rc=0, pullable=()):
    """A RUN for image handling: PRESENT is the set of references podman has, PULLABLE
    what a registry would give."""
    present = set(present)
    calls = []

    def run(argv, timeout=None):
        calls.append((argv, timeout))
        if argv[1:3] == ["image", "exists"]:
            return (0 if argv[3] in present else 1), "", ""
        if argv[1:3] == ["image", "inspect"]:
            return (0, "sha256:base\n", "") if argv[-1] in present else (125, "", "Error: no such image")
        if argv[1] == "pull":
            if argv[-1] in pullable:
                present.add(argv[-1])
                return 0, "", ""
            return 125, "", "Trying to pull...\nError: initializing source: no such host"
        if argv[1] == "build":
            if "--logfile" in argv:
                with open(argv[argv.index("--logfile") + 1], "w") as log:
                    log.write("".join("STEP %d/30\n" % step for step in range(1, 31)))
            return build_rc, "STEP 1/2", "" if build_rc == 0 else "Error: apt failed"
        raise AssertionError(argv)

    run.calls = calls
    run.argv = lambda: [argv for argv, _timeout in calls]
    return run


def build_of(run):
    [build] = [argv for argv in run.argv() if argv[1] == "build"]
    return build


def labels_of(build):
    return dict(build[i + 1].split("=", 1) for i, arg in enumerate(build) if arg == "--label")


def test_probe_image_given_but_absent():
    assert _images.ensure_probe_image(image_run(set()), "podman", None, "localhost/p:1", False) == \
        (None, False, "the probe image localhost/p:1 is not present")
    assert _images.ensure_probe_image(image_run({"localhost/p:1"}), "podman", None, "localhost/p:1", False) == \
        ("localhost/p:1", False, None)


def test_local_base_image_is_never_pulled():
    run = image_run(set())
    image, changed, error = _images.ensure_probe_image(run, "podman", "localhost/base:1", None, False)
    assert (image, changed, error) == (None, False, "the base image localhost/base:1 is not present")
    assert not any(argv[1] == "pull" for argv in run.argv())


def test_probe_image_built_from_the_base_image_id_and_tagged_by_hash():
    run = image_run({"localhost/base:1"})
    image, changed, error = _images.ensure_probe_image(run, "podman", "localhost/base:1", None, False)
    # The tag the probe image had before the flow was shared: provisioned hosts keep theirs.
    assert (image, changed, error) == ("localhost/aisb-probe:b825e7e5b62bfefa", True, None)
    build = build_of(run)
    assert build[build.index("--from") + 1] == "sha256:base" and build[build.index("--tag") + 1] == image
    assert "--pull=never" in build
    labels = labels_of(build)
    assert labels["aisb.sandbox.role"] == "probe" and labels["io.aisb.base-image"] == "localhost/base:1"
    assert image.endswith(":" + labels["io.aisb.content-hash"][:_content_hash.TAG_LENGTH])
    assert json.loads(labels["io.aisb.inputs"])["files"] == _content_hash.file_digests(
        {"Containerfile": _images.PROBE_CONTAINERFILE.format(base="localhost/base:1").encode()})
    # Built once: the same inputs name the same tag, which now exists.
    again = image_run({"localhost/base:1", image})
    assert _images.ensure_probe_image(again, "podman", "localhost/base:1", None, False) == (image, False, None)
    assert not any(argv[1] == "build" for argv in again.argv())


def test_check_mode_builds_and_pulls_nothing():
    run = image_run({"localhost/base:1"})
    image, _changed, error = _images.ensure_probe_image(run, "podman", "localhost/base:1", None, True)
    assert image is None and error.startswith("the probe image localhost/aisb-probe:")
    assert error.endswith(" is not built (check mode builds nothing)")
    run = image_run(set(), pullable={"docker.io/library/debian:13"})
    assert _images.ensure_probe_image(run, "podman", "docker.io/library/debian:13", None, True) == \
        (None, False, "the base image docker.io/library/debian:13 is not present (check mode pulls nothing)")
    assert not any(argv[1] in ("build", "pull") for argv in run.argv())


def test_a_registry_base_is_pulled_once_within_the_timeout():
    run = image_run(set(), pullable={"docker.io/library/debian:13"})
    image, changed, error = _images.ensure_probe_image(run, "podman", "docker.io/library/debian:13", None, False)
    assert error is None and changed is True and image.startswith("localhost/aisb-probe:")
    assert [argv[1] for argv in run.argv()] == ["image", "pull", "image", "image", "build"]
    assert [timeout for argv, timeout in run.calls if argv[1] in ("pull", "build")] == [900, 900]


def test_failures_name_the_image_in_podmans_words():
    run = image_run(set())
    assert _images.ensure_probe_image(run, "podman", "docker.io/library/debian:13", None, False) == \
        (None, False, "pulling docker.io/library/debian:13 failed: Error: initializing source: no such host")
    run = image_run({"localhost/base:1"}, build_rc=1)
    assert _images.ensure_probe_image(run, "podman", "localhost/base:1", None, False) == \
        (None, False, "building the probe image from localhost/base:1 failed after 0 s: Error: apt failed")


def test_ensure_hashes_every_input_and_builds_in_the_given_context():
    files = {"Containerfile": b"FROM base\n", "entrypoint": b"#!/bin/sh\n"}
    run = image_run({"localhost/base:1"})
    image = _images.ensure(run, "podman", "localhost/aisb-sandbox", files, "localhost/base:1", False,
                           context="/ctx", build_args={"ARG": "v"}, extra={"recipe": {"command": ["pi"]}})
    inputs = _content_hash.build_inputs(files, "sha256:base", {"ARG": "v"}, {"recipe": {"command": ["pi"]}})
    assert (image.digest, image.inputs, image.built, image.pulled) == (
        _content_hash.content_hash(inputs), inputs, True, False)
    assert image.tag == _content_hash.image_tag("localhost/aisb-sandbox", image.digest)
    build = build_of(run)
    assert build[-1] == "/ctx" and build[build.index("--build-arg") + 1] == "ARG=v"
    assert labels_of(build) == {"io.aisb.content-hash": image.digest, "io.aisb.base-image": "localhost/base:1",
                                "io.aisb.inputs": json.dumps(inputs, sort_keys=True, separators=(",", ":"))}


def test_ensure_in_check_mode_names_the_tag_or_nothing():
    files = {"Containerfile": b"FROM base\n"}
    run = image_run({"localhost/base:1"})
    planned = _images.ensure(run, "podman", "localhost/x", files, "localhost/base:1", True, context="/ctx")
    assert planned.tag.startswith("localhost/x:") and planned.built is True
    assert not any(argv[1] == "build" for argv in run.argv())
    missing = _images.ensure(image_run(set()), "podman", "localhost/x", files, "docker.io/library/debian:13", True)
    assert (missing.tag, missing.built, missing.inputs) == (None, False, {})


def test_a_failed_build_is_an_image_error_with_podmans_output():
    with pytest.raises(_images.ImageError) as raised:
        _images.ensure(image_run({"localhost/base:1"}, build_rc=2), "podman", "localhost/x",
                       {"Containerfile": b"FROM base\n"}, "localhost/base:1", False, context="/ctx")
    assert str(raised.value).startswith("building localhost/x:") and str(raised.value).endswith(
        " from localhost/base:1 failed after 0 s: Error: apt failed")
    assert (raised.value.rc, raised.value.stdout, raised.value.stderr) == (2, "STEP 1/2", "Error: apt failed")


def test_a_build_writes_its_log_by_content_hash_and_says_how_long_it_took(tmp_path):
    logs = tmp_path / "logs"
    files = {"Containerfile": b"FROM base\n"}
    planned = _images.ensure(image_run({"localhost/base:1"}), "podman", "localhost/aisb-x", files, "localhost/base:1",
                             True, context="/ctx", log_dir=str(logs))
    assert planned.log == str(logs / ("aisb-x-%s.log" % planned.tag.rsplit(":", 1)[1])) and not logs.exists()
    run = image_run({"localhost/base:1"})
    image = _images.ensure(run, "podman", "localhost/aisb-x", files, "localhost/base:1", False, context="/ctx",
                           log_dir=str(logs))
    build = build_of(run)
    assert image.log == planned.log and build[build.index("--logfile") + 1] == image.log
    assert open(image.log).read().startswith("STEP 1/30\n") and image.seconds == 0
    # Present now: nothing built, no log named.
    again = _images.ensure(image_run({"localhost/base:1", image.tag}), "podman", "localhost/aisb-x", files,
                           "localhost/base:1", False, context="/ctx", log_dir=str(logs))
    assert (again.built, again.log, again.seconds) == (False, None, None)


def test_progress_is_followed_around_a_build_only(tmp_path):
    events = []

    class Progress(object):
        def __init__(self, log):
            events.append(("follow", log))

        def __enter__(self):
            events.append("enter")

        def __exit__(self, *_exc):
            events.append("exit")

    def noting(run):
        def traced(argv, timeout=None):
            if argv[1] == "build":
                events.append("build")
            return run(argv, timeout)
        return traced

    files = {"Containerfile": b"FROM base\n"}
    image = _images.ensure(noting(image_run({"localhost/base:1"})), "podman", "localhost/aisb-x", files,
                           "localhost/base:1", False, context="/ctx", log_dir=str(tmp_path), progress=Progress)
    assert events == [("follow", image.log), "enter", "build", "exit"]
    # A warm run (the tag exists) and check mode follow nothing.
    del events[:]
    _images.ensure(image_run({"localhost/base:1", image.tag}), "podman", "localhost/aisb-x", files,
                   "localhost/base:1", False, context="/ctx", log_dir=str(tmp_path), progress=Progress)
    _images.ensure(image_run({"localhost/base:1"}), "podman", "localhost/aisb-x", files, "localhost/base:1", True,
                   context="/ctx", log_dir=str(tmp_path), progress=Progress)
    assert events == []


def test_a_failed_build_names_its_log_and_shows_its_last_lines(tmp_path):
    with pytest.raises(_images.ImageError) as raised:
        _images.ensure(image_run({"localhost/base:1"}, build_rc=1), "podman", "localhost/aisb-x",
                       {"Containerfile": b"FROM base\n"}, "localhost/base:1", False, context="/ctx",
                       log_dir=str(tmp_path))
    [log] = tmp_path.glob("aisb-x-*.log")
    message = str(raised.value)
    assert "failed after 0 s: Error: apt failed; build log %s, its last lines:\n" % log in message
    assert message.endswith("\n".join("STEP %d/30" % step for step in range(16, 31)))
    assert "STEP 15/30" not in message


# --- refresh: a new tag from an unchanged context, kept by every later run ---------------

def test_a_refresh_builds_a_new_tag_without_the_layer_cache_and_later_runs_find_it(tmp_path):
    files = {"Containerfile": b"FROM base\n"}
    records = str(tmp_path / "images")
    first = _images.ensure(image_run({"localhost/base:1"}), "podman", "localhost/aisb-x", files, "localhost/base:1",
                           False, context="/ctx", records_dir=records)
    assert "refreshed" not in first.inputs  # never refreshed: the tag it had before refreshes existed
    assert first.tag == _content_hash.image_tag(
        "localhost/aisb-x", _content_hash.content_hash(_content_hash.build_inputs(files, "sha256:base")))
    run = image_run({"localhost/base:1", first.tag})
    refreshed = _images.ensure(run, "podman", "localhost/aisb-x", files, "localhost/base:1", False, context="/ctx",
                               records_dir=records, refresh_stamp="2026-12-01T05:30:00Z")
    assert refreshed.built and refreshed.tag != first.tag and refreshed.inputs["refreshed"] == "2026-12-01T05:30:00Z"
    assert "--no-cache" in build_of(run)
    assert not any(argv[1] == "pull" for argv in run.argv())  # a localhost/ base is never pulled
    # A later ordinary run hashes the stored stamp: the refreshed tag, nothing built.
    later_run = image_run({"localhost/base:1", first.tag, refreshed.tag})
    later = _images.ensure(later_run, "podman", "localhost/aisb-x", files, "localhost/base:1", False, context="/ctx",
                           records_dir=records)
    assert (later.tag, later.built) == (refreshed.tag, False)
    assert sorted(p.name for p in (tmp_path / "images" / "used").iterdir()) == sorted(
        _images.used_mark(tag) for tag in (first.tag, refreshed.tag))


def test_a_refresh_pulls_a_registry_base_again_and_a_failed_one_keeps_the_last_stamp(tmp_path):
    files = {"Containerfile": b"FROM base\n"}
    records = str(tmp_path / "images")
    base = "docker.io/library/debian:13"
    run = image_run({base}, pullable={base})
    _images.ensure(run, "podman", "localhost/aisb-x", files, base, False, context="/ctx", records_dir=records,
                   refresh_stamp="2026-12-01T05:30:00Z")
    assert [argv[1] for argv in run.argv()][:2] == ["image", "pull"]
    assert _images.stored_refresh_stamp(records, "localhost/aisb-x") == "2026-12-01T05:30:00Z"
    with pytest.raises(_images.ImageError):
        _images.ensure(image_run({base}, build_rc=1, pullable={base}), "podman", "localhost/aisb-x", files, base,
                       False, context="/ctx", records_dir=records, refresh_stamp="2026-12-02T05:30:00Z")
    assert _images.stored_refresh_stamp(records, "localhost/aisb-x") == "2026-12-01T05:30:00Z"
    # Check mode plans the refresh, pulls nothing and records nothing.
    planned_run = image_run({base}, pullable={base})
    planned = _images.ensure(planned_run, "podman", "localhost/aisb-x", files, base, True, context="/ctx",
                             records_dir=records, refresh_stamp="2026-12-03T05:30:00Z")
    assert planned.built and not any(argv[1] in ("pull", "build") for argv in planned_run.argv())
    assert _images.stored_refresh_stamp(records, "localhost/aisb-x") == "2026-12-01T05:30:00Z"


@pytest.mark.parametrize("stamp", ["yesterday", "2026-12-01 05:30:00", "2026-12-01T05:30:00Z\nx", ""])
def test_a_malformed_refresh_stamp_is_refused_naming_where_it_came_from(tmp_path, stamp):
    with pytest.raises(ValueError, match="refresh_stamp: refresh stamp"):
        _images.ensure(image_run({"localhost/base:1"}), "podman", "localhost/x", {"Containerfile": b"F\n"},
                       "localhost/base:1", False, context="/ctx", refresh_stamp=stamp)
    stored = tmp_path / "refreshed" / "x"
    stored.parent.mkdir()
    stored.write_text(stamp + "junk")
    with pytest.raises(ValueError, match=str(stored)):
        _images.stored_refresh_stamp(str(tmp_path), "localhost/x")


def test_only_content_hash_tags_are_marked_used(tmp_path):
    for reference in ("localhost:5000/img", "sha256:" + "a" * 64, "localhost/x:latest", "../x:0123456789abcdef"):
        _images.mark_used(str(tmp_path), reference)
    assert not (tmp_path / "used").exists()
    _images.mark_used(str(tmp_path), "localhost/aisb-gate:0123456789abcdef")
    assert (tmp_path / "used" / "aisb-gate-0123456789abcdef").read_text() == "localhost/aisb-gate:0123456789abcdef\n"
