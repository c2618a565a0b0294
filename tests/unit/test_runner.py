# SPDX-License-Identifier: GPL-3.0-or-later
"""The Runner: every command recorded, a checked failure reported with them, a command
that outlives its timeout killed and reported as rc None, in a module and without one."""

import subprocess
import sys
import time

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, module_execute, module_runner, subprocess_execute

SLEEP = [sys.executable, "-c", "import sys, time; print('started', flush=True); time.sleep(30)"]


class Failed(Exception):
    pass


class FakeModule(object):
    """run_command as AnsibleModule's contract has it, executed with subprocess."""

    run_command_environ_update = {}

    def __init__(self):
        self.calls = []

    def run_command(self, args, expand_user_and_vars=True, handle_exceptions=True, before_communicate_callback=None):
        self.calls.append(dict(args=args, expand_user_and_vars=expand_user_and_vars,
                               handle_exceptions=handle_exceptions))
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if before_communicate_callback:
            before_communicate_callback(process)
        out, err = process.communicate()
        return process.returncode, out, err

    def fail_json(self, **result):
        raise Failed(result)


def test_every_command_is_recorded_in_order():
    run = Runner(lambda argv, timeout: (0, " ".join(argv), ""))
    assert run(("podman", "info")) == (0, "podman info", "")
    run(["podman", "ps"], timeout=5)
    assert run.commands == [["podman", "info"], ["podman", "ps"]]


def test_a_checked_failure_names_the_command_and_carries_the_record():
    failures = []
    run = Runner(lambda argv, timeout: (125, "out", "Error: no such image\n"), lambda **kw: failures.append(kw))
    run.checked(["podman", "rm", "--force", "x"])
    [failure] = failures
    assert failure["msg"] == "podman rm --force failed (rc=125): Error: no such image"
    assert failure["commands"] == [["podman", "rm", "--force", "x"]] and failure["stdout"] == "out"
    assert Runner(lambda argv, timeout: (0, " id\n", "")).checked(["podman", "x"]) == "id"


def test_in_a_module_arguments_go_to_run_command_as_given():
    module = FakeModule()
    run = module_runner(module)
    assert run(["echo", "$HOME", "~"]) == (0, "$HOME ~\n", "")
    assert module.calls == [dict(args=["echo", "$HOME", "~"], expand_user_and_vars=False, handle_exceptions=False)]
    with pytest.raises(Failed):
        run.checked(["false"])


def test_in_a_module_a_missing_program_is_rc_127():
    rc, out, err = module_execute(FakeModule())(["/nonexistent/podman", "info"])
    assert (rc, out) == (127, "") and "nonexistent" in err


@pytest.mark.parametrize("execute", [module_execute(FakeModule()), subprocess_execute()], ids=["module", "local"])
def test_a_command_that_outlives_its_timeout_is_killed_and_reported_as_none(execute):
    start = time.monotonic()
    rc, out, _err = execute(SLEEP, 0.5)
    assert rc is None and out == "started\n" and time.monotonic() - start < 10
    assert execute([sys.executable, "-c", "import sys; sys.exit(3)"], 10)[0] == 3


def test_without_a_module_stdin_is_closed_and_a_missing_program_is_rc_127():
    execute = subprocess_execute()
    assert execute([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"]) == (0, "''\n", "")
    assert execute(["/nonexistent/podman"])[0] == 127


def test_with_an_environment_a_command_gets_that_one_and_no_other():
    execute = subprocess_execute({"ONLY": "this"})
    rc, out, _err = execute([sys.executable, "-c", "import os; print(sorted(os.environ))"])
    assert rc == 0 and out.strip() in ("['ONLY']", "['LC_CTYPE', 'ONLY']")
