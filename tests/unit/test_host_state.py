# SPDX-License-Identifier: GPL-3.0-or-later
"""The host_state module: the host role's reads in one run (packages missing, podman's
version, files' text, paths' type and mode), each as the task it replaced decided."""

import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.modules.host_state import argspec, execute

QUERY = ["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n"]


def given(**params):
    defaults = dict((name, spec.get("default")) for name, spec in argspec().items())
    return dict(defaults, **params)


def answering(answers):
    """A Runner whose command ARGV[0] answers ANSWERS[ARGV[0]] ((rc, out, err)); 127 for others."""
    return Runner(lambda argv, timeout=None: answers.get(argv[0], (127, "", "not found")))


def test_missing_packages_are_those_the_query_does_not_call_installed_in_their_order():
    run = answering({"dpkg-query": (1, "podman installed\ncrun not-installed\n", "no packages found matching uidmap"),
                     "podman": (0, "podman version 5.4.2\n", "")})
    result = execute(given(packages=["uidmap", "podman", "crun", "passt"], package_query=QUERY), False, run, {})
    assert result["missing_packages"] == ["uidmap", "crun", "passt"]
    assert result["podman_version"] == "5.4.2"
    assert run.commands == [QUERY + ["uidmap", "podman", "crun", "passt"], ["podman", "--version"]]
    assert "failed" not in result


def test_a_query_that_cannot_run_fails_naming_it():
    result = execute(given(packages=["podman"], package_query=QUERY),
                     False, answering({"dpkg-query": (2, "", "dpkg-query: error: database locked")}), {})
    assert result["failed"] is True and result["msg"] == "dpkg-query failed (rc=2): dpkg-query: error: database locked"


def test_packages_without_a_query_are_refused():
    result = execute(given(packages=["podman"]), False, answering({}), {})
    assert result["failed"] is True and "package_query is required with packages" in result["msg"]


def test_without_podman_its_version_is_empty_and_no_packages_means_no_query():
    run = answering({})
    result = execute(given(), True, run, {})
    assert result["podman_version"] == "" and result["missing_packages"] == []
    assert run.commands == [["podman", "--version"]]


def test_files_and_paths_as_they_are(tmp_path):
    subuid = tmp_path / "subuid"
    subuid.write_text("dev:100000:65536\n")
    device = tmp_path / "tun"
    device.write_text("")
    os.chmod(device, 0o600)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    result = execute(given(read=[str(subuid), str(tmp_path / "subgid")],
                           stat=[str(device), str(tmp_path), str(tmp_path / "absent"), str(link)]),
                     False, answering({}), {})
    assert result["contents"] == {str(subuid): "dev:100000:65536\n", str(tmp_path / "subgid"): None}
    assert result["stats"][str(device)] == {"exists": True, "isdir": False, "mode": "0600", "uid": os.getuid(),
                                            "gid": os.getgid()}
    assert result["stats"][str(tmp_path)]["isdir"] is True
    assert result["stats"][str(tmp_path / "absent")] == {"exists": False}
    # A link is not followed: a directory it names is not the role's directory.
    assert result["stats"][str(link)]["isdir"] is False
    assert result["changed"] is False
