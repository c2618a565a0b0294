# SPDX-License-Identifier: GPL-3.0-or-later
"""What retention removes: only this collection's unused old images and old sessions."""

import json
import os
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.retention import _retention

NOW = 1_800_000_000
DAY = _retention.DAY


def verdicts(pairs):
    return dict(pairs)


def test_only_this_collections_repositories_and_never_the_probe_alias():
    images = [
        {"Id": "a", "Names": ["localhost/aisb-sandbox:1111", "localhost/aisb-sandbox-copy:1"], "Created": 5},
        {"Id": "b", "Names": ["localhost/aisb-probe:2222", "localhost/aisb-probe:current"], "Created": 6},
        {"Id": "c", "Names": ["docker.io/library/debian:13", "localhost/other:aisb-gate"], "Created": 7},
        {"Id": "d", "Names": None, "Created": 8},
    ]
    assert _retention.image_tags(images) == [("localhost/aisb-probe:2222", "b", 6),
                                             ("localhost/aisb-sandbox:1111", "a", 5)]
    assert _retention.alias_ids(images) == {"b"}


def test_images_kept_current_in_use_aliased_recent_and_the_rest_removed():
    old = NOW - 40 * DAY
    tags = [
        ("localhost/aisb-sandbox:old1", "i1", old),         # removed
        ("localhost/aisb-sandbox:used", "i2", old),         # a stopped container uses it
        ("localhost/aisb-sandbox:recent", "i3", old),       # used 3 days ago
        ("localhost/aisb-sandbox:current", "i4", old - DAY),  # created earliest, used last
        ("localhost/aisb-sandbox:twin", "i4", old),         # the current image's other tag
        ("localhost/aisb-probe:p1", "p1", old),             # the alias names it
        ("localhost/aisb-probe:p2", "p2", old - 5),         # removed
        ("localhost/aisb-gate:only", "g1", old - 100 * DAY),  # the only gate tag: current
    ]
    last_used = {"localhost/aisb-sandbox:recent": NOW - 3 * DAY, "localhost/aisb-sandbox:current": NOW - DAY}
    result = verdicts(_retention.images_to_remove(tags, last_used, {"i2"}, {"p1"}, NOW, 30))
    assert result == {
        "localhost/aisb-sandbox:old1": None,
        "localhost/aisb-sandbox:used": "a container uses it",
        "localhost/aisb-sandbox:recent": "used within 30 days",
        "localhost/aisb-sandbox:current": "current",
        "localhost/aisb-sandbox:twin": "a kept tag names the same image",
        "localhost/aisb-probe:p1": "current",
        "localhost/aisb-probe:p2": None,
        "localhost/aisb-gate:only": "current",
    }
    # Zero days: only the current, the used and the aliased stay.
    assert verdicts(_retention.images_to_remove(tags, last_used, {"i2"}, {"p1"}, NOW, 0))[
        "localhost/aisb-sandbox:recent"] is None


def test_sessions_kept_newest_running_reviewed_recent():
    def sid(days_ago, suffix):
        return time.strftime("%Y%m%dT%H%M%S", time.gmtime(NOW - days_ago * DAY)) + "-" + suffix
    sessions = [
        (sid(1, "00000001"), NOW - DAY, False),      # newest
        (sid(50, "00000002"), None, False),          # a container with its id exists
        (sid(51, "00000003"), NOW - 51 * DAY, True),  # a review waits
        (sid(52, "00000004"), NOW - 2 * DAY, False),  # started long ago, ended 2 days ago
        (sid(60, "00000005"), NOW - 60 * DAY, False),  # removed
        (sid(61, "00000006"), None, False),          # no record, started 61 days ago: removed
    ]
    result = _retention.sessions_to_remove(sessions, ["aisb-sandbox-" + sessions[1][0], "unrelated"], NOW, 30, 1)
    assert [why for _session, why in result] == [
        "among the newest 1", "within 30 days", "its container exists", "its review waits for review.yml", None, None]
    assert [session for session, _why in result][4:] == [sessions[4][0], sessions[5][0]]
    # keep=0, days=0: only the running and the reviewed stay.
    assert [why for _s, why in _retention.sessions_to_remove(sessions, ["aisb-gate-" + sessions[1][0]], NOW, 0, 0)] \
        == [None, None, "its container exists", "its review waits for review.yml", None, None]


def test_the_module_reads_marks_and_only_session_named_real_directories(tmp_path):
    from ansible_collections.aisb.sandbox.plugins.modules import retention
    used = tmp_path / "used"
    used.mkdir()
    (used / "aisb-gate-0123456789abcdef").write_text("localhost/aisb-gate:0123456789abcdef\n")
    os.utime(used / "aisb-gate-0123456789abcdef", (1000, 1000))
    assert retention.last_used(str(used)) == {"localhost/aisb-gate:0123456789abcdef": 1000}
    assert retention.last_used(str(tmp_path / "none")) == {}
    sessions = tmp_path / "sessions"
    (sessions / "20261101T090000-0000000a" / "review").mkdir(parents=True)
    (sessions / "20261102T090000-0000000b").mkdir()
    (sessions / "20261102T090000-0000000b" / "record.json").write_text("{}")
    os.utime(sessions / "20261102T090000-0000000b" / "record.json", (2000, 2000))
    (sessions / "notes").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (sessions / "20261103T090000-0000000c").symlink_to(tmp_path / "elsewhere")
    assert sorted(retention.sessions(str(sessions))) == [("20261101T090000-0000000a", None, True),
                                                         ("20261102T090000-0000000b", 2000, False)]


def test_policies_kept_current_named_recent_and_the_rest_removed():
    policies = [("%016x" % n, NOW - days * DAY) for n, days in enumerate([40, 1, 50, 60, 70, 35])]
    in_use = {"%016x" % 3: "a container uses it", "%016x" % 4: "a long-lived gate's unit names it"}
    assert _retention.policies_to_remove(policies, in_use, NOW, 30) == [
        ("%016x" % 0, None), ("%016x" % 1, "current"), ("%016x" % 2, None),
        ("%016x" % 3, "a container uses it"), ("%016x" % 4, "a long-lived gate's unit names it"),
        ("%016x" % 5, None)]
    assert _retention.policies_to_remove(policies, {}, NOW, 36)[5] == ("%016x" % 5, "used within 36 days")
    # Zero days: the one used last stays, even when nothing names it.
    assert [why for _name, why in _retention.policies_to_remove(policies, {}, NOW, 0)] == \
        [None, "current", None, None, None, None]
    assert _retention.policies_to_remove([], {}, NOW, 0) == []


def test_the_module_reads_policies_and_what_names_them(tmp_path):
    from ansible_collections.aisb.sandbox.plugins.modules import retention
    policies = tmp_path / "policies"
    for name in ("0123456789abcdef", "fedcba9876543210", ".staging-x", "0123456789ABCDEF", "0123"):
        (policies / name).mkdir(parents=True)
    os.utime(policies / "0123456789abcdef", (3000, 3000))
    (tmp_path / "elsewhere").mkdir()
    (policies / "aaaaaaaaaaaaaaaa").symlink_to(tmp_path / "elsewhere")
    (policies / "bbbbbbbbbbbbbbbb").write_text("")
    assert sorted(retention.policies(str(policies)))[0] == ("0123456789abcdef", 3000)
    assert [name for name, _mtime in sorted(retention.policies(str(policies)))] == \
        ["0123456789abcdef", "fedcba9876543210"]

    sessions = tmp_path / "sessions"
    for session, record in [("s1", {"policy_dir": str(policies / "1111111111111111") + "/"}),
                            ("s2", {"policy_dir": None}), ("s3", "not json"), ("s4", ["a list"]),
                            ("dropped", {"policy_dir": str(policies / "2222222222222222")})]:
        (sessions / session).mkdir(parents=True)
        (sessions / session / "record.json").write_text(record if isinstance(record, str) else json.dumps(record))
    units = tmp_path / "systemd"
    units.mkdir()
    (units / "aisb-gate-policy-3333333333333333.container").write_text("")
    (units / "aisb-gate-policy-4444444444444444.service").write_text("")
    (units / "other-5555555555555555.container").write_text("")
    containers = [{"Labels": {"aisb.policy": "6666666666666666"}}, {"Labels": None}, {}]
    assert retention.policies_in_use(containers, str(units), str(sessions), ["s1", "s2", "s3", "s4", "gone"]) == {
        "1111111111111111": "a kept session's record names it",
        "3333333333333333": "a long-lived gate's unit names it",
        "6666666666666666": "a container uses it",
    }
    assert retention.policies_in_use([], str(tmp_path / "none"), str(sessions), []) == {}


def test_a_session_with_what_the_user_cannot_remove_is_removed_inside_podman_s_user_namespace(tmp_path, monkeypatch):
    """An overlay's work directory is the user namespace root's: rmtree fails on it, and
    podman unshare rm removes the rest; when that fails too the session is kept, with why."""
    from ansible_collections.aisb.sandbox.plugins.modules import retention
    session = tmp_path / "20261101T090000-0000000a"
    (session / "git" / "0" / "work" / "work").mkdir(parents=True)
    real_rmtree, calls = retention.shutil.rmtree, []

    def rmtree_as_the_user(path):
        raise PermissionError(13, "Permission denied", os.path.join(path, "git/0/work/work"))

    def unshare(argv):
        calls.append(argv)
        real_rmtree(argv[-1])
        return 0, "", ""

    monkeypatch.setattr(retention.shutil, "rmtree", rmtree_as_the_user)
    assert retention.remove_session(unshare, "/usr/bin/podman", str(session)) is None
    assert not session.exists()
    assert calls == [["/usr/bin/podman", "unshare", "rm", "-rf", "--one-file-system", "--", str(session)]]
    why = retention.remove_session(lambda argv: (1, "", "Error: cannot remove\n"), "/usr/bin/podman", str(session))
    assert why == "podman unshare rm failed: Error: cannot remove"
