# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's programs come from the system's directories, never from PATH."""

import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _host_tools


@pytest.fixture
def system(tmp_path, monkeypatch):
    """A system directory (tmp_path/system) whose files count as root's alone, and a
    project's bin/ first on PATH, each holding an executable pasta."""
    system, project = tmp_path / "system", tmp_path / "project" / "bin"
    for directory in (system, project):
        directory.mkdir(parents=True)
        (directory / "pasta").write_text("#!/bin/sh\n")
        (directory / "pasta").chmod(0o755)
    (project / "podman").write_text("#!/bin/sh\n")
    (project / "podman").chmod(0o755)
    monkeypatch.setattr(_host_tools, "SYSTEM_DIRS", (str(system),))
    monkeypatch.setattr(_host_tools, "not_root_alone", lambda path: None)
    monkeypatch.setenv("PATH", "%s:%s" % (project, os.environ.get("PATH", "")))
    return system, project


def test_a_program_first_on_path_is_never_the_one_resolved(system):
    assert _host_tools.resolve("pasta") == (str(system[0] / "pasta"), None)


def test_a_program_found_only_on_path_is_refused_with_where_it_is(system):
    path, problem = _host_tools.resolve("podman")
    assert path is None and problem.startswith("podman is not installed in the system's directories")
    assert "the one at %s is not used" % (system[1] / "podman") in problem


def test_a_path_outside_the_system_directories_is_refused_even_when_it_exists(system):
    for name in (str(system[1] / "pasta"), "bin/pasta", "./pasta"):
        path, problem = _host_tools.resolve(name)
        assert path is None and "is not installed in the system's directories" in problem, name
    assert _host_tools.resolve(str(system[0] / "pasta")) == (str(system[0] / "pasta"), None)


def test_resolve_all_names_each_refusal(system):
    found, problems = _host_tools.resolve_all({"podman": "podman", "pasta": "pasta", "nft": "nft"})
    assert found == {"pasta": str(system[0] / "pasta")}
    assert [p.split(" ")[0] for p in problems] == ["podman", "nft"]


def test_a_program_someone_but_root_could_change_is_refused(tmp_path, monkeypatch):
    # Under /tmp (sticky, writable by all): never root's alone.
    (tmp_path / "nft").write_text("#!/bin/sh\n")
    (tmp_path / "nft").chmod(0o755)
    monkeypatch.setattr(_host_tools, "SYSTEM_DIRS", (str(tmp_path),))
    path, problem = _host_tools.resolve("nft")
    assert path is None and problem.startswith("nft at %s is refused: " % (tmp_path / "nft"))
    assert _host_tools.not_root_alone(str(tmp_path / "nft")) is not None


def test_the_system_directories_leave_out_usr_local():
    assert all(not d.startswith("/usr/local") for d in _host_tools.SYSTEM_DIRS)
    assert _host_tools.SYSTEM_PATH.split(":") == list(_host_tools.SYSTEM_DIRS)
