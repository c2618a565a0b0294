# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's files in its directory: a write that fails (a full disk) ends the
session with a sentence naming the file and why, never a traceback."""

import os
from types import SimpleNamespace

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import SessionError
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session_runner import SessionRunner

TOOLS = {"podman": "/usr/bin/podman", "setpriv": "/usr/bin/setpriv", "bash": "/bin/bash"}
# write() reads nothing of the plan; the runner keeps the sandbox's pid file from it.
PLAN = SimpleNamespace(sandbox_options=SimpleNamespace(pidfile="/nonexistent/pid"))


def test_a_session_file_is_written_with_its_mode(tmp_path):
    runner = SessionRunner(PLAN, str(tmp_path), TOOLS, environ={})
    path = runner.write("sub/policy.json", "{}", 0o644)
    assert open(path).read() == "{}" and os.stat(path).st_mode & 0o777 == 0o644


def test_a_full_disk_while_writing_a_session_file_is_a_session_error_naming_it(tmp_path):
    # /dev/full answers every write with ENOSPC, as a full file system does.
    os.symlink("/dev/full", str(tmp_path / "seccomp.json"))
    runner = SessionRunner(PLAN, str(tmp_path), TOOLS, environ={})
    with pytest.raises(SessionError, match=r"could not be written to .*seccomp\.json: No space left on device"):
        runner.write("seccomp.json", "x" * 100000, 0o644)
