# SPDX-License-Identifier: GPL-3.0-or-later
"""A module's work runs in the task's process only when the host is this process's own:
a local connection, no become, no task environment; its arguments checked as the module
checks them."""

import importlib
import inspect
import os
import re
import select
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.aisb.sandbox.plugins.plugin_utils._in_process import forked_result, module_result, runs_here

SPEC = dict(name=dict(type="str", required=True), count=dict(type="int", default=3))


def action(transport="local", become=False, environment=None, args=None, check_mode=False):
    sent = []
    fake = SimpleNamespace(
        _connection=SimpleNamespace(transport=transport), _play_context=SimpleNamespace(become=become),
        _task=SimpleNamespace(environment=environment, args=args or {}, check_mode=check_mode,
                              resolved_action="aisb.sandbox.example"),
        _execute_module=lambda **kwargs: sent.append(kwargs) or {"ran": "on the host"})
    return fake, sent


@pytest.mark.parametrize("transport, become, environment, here", [
    ("local", False, None, True),
    ("ansible.builtin.local", False, [], True),
    ("local", False, [{}], True),
    ("ssh", False, None, False),
    ("local", True, None, False),
    ("local", False, [{"TMPDIR": "/scratch"}], False),
])
def test_only_a_local_connection_as_this_user_without_a_task_environment_runs_here(transport, become,
                                                                                   environment, here):
    assert runs_here(action(transport, become, environment)[0]) is here


def test_here_the_arguments_are_checked_and_defaulted_as_the_module_would():
    seen = []
    fake, sent = action(args={"name": "x", "count": "5"}, check_mode=True)
    result = module_result(fake, {}, SPEC, lambda params, check_mode, run, environ: seen.append(
        (params, check_mode)) or {"changed": False})
    assert result == {"changed": False} and sent == []
    assert seen == [({"name": "x", "count": 5}, True)]
    fake, _sent = action(args={"count": 1})
    with pytest.raises(AnsibleActionFail, match="name"):
        module_result(fake, {}, SPEC, lambda *args: {})


def test_elsewhere_the_module_runs_on_the_host_with_the_given_arguments():
    fake, sent = action(transport="ssh", args={"name": "x"})
    assert module_result(fake, {"v": 1}, SPEC, lambda *args: pytest.fail("ran here"),
                         module_args={"name": "y"}) == {"ran": "on the host"}
    assert sent == [{"module_name": "aisb.sandbox.example", "module_args": {"name": "y"}, "task_vars": {"v": 1}}]


def modules_run_here():
    """The modules whose execute() an action plugin, or a plugin_utils file it uses, gives
    module_result (or a ModuleAction): those the file imports, or whose execute it imports,
    from plugins.modules."""
    plugins = Path(__file__).resolve().parents[2] / "plugins"
    names = set()
    for path in sorted((plugins / "action").glob("*.py")) + sorted((plugins / "plugin_utils").glob("*.py")):
        text = path.read_text()
        if "module_result(" in text or "(ModuleAction)" in text:
            names |= set(re.findall(r"plugins\.modules\.(\w+) import [^\n]*\bexecute\b", text))
            for listed in re.findall(r"plugins\.modules import ([\w, ]+?)(?: as \w+)?$", text, re.MULTILINE):
                names |= set(name.strip() for name in listed.split(","))
    return names


def test_every_module_run_here_takes_what_module_result_passes():
    here = modules_run_here()
    assert {"team_settings", "session_inputs", "host_capabilities", "content_image", "gate_policy",
            "session_images"} <= here
    for name in here:
        execute = importlib.import_module("ansible_collections.aisb.sandbox.plugins.modules." + name).execute
        assert len(inspect.signature(execute).parameters) == 4, name


def test_a_forked_result_comes_back_whole_without_the_blank_lines_a_session_writes():
    def work():
        os.write(1, b"\n\n")  # what _controller.Watch writes to find out whether its reader is there
        return {"changed": True, "answer": "ü" * 100000, "child": os.getpid()}
    result = forked_result(work)
    assert result["answer"] == "ü" * 100000 and result["changed"] is True
    assert result["child"] != os.getpid()


def test_a_forked_child_that_raises_or_dies_gives_a_failed_result():
    def raises():
        raise KeyError("boom")
    result = forked_result(raises)
    assert result["failed"] is True and "KeyError: 'boom'" in result["msg"]
    result = forked_result(lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert result["failed"] is True and "without a result" in result["msg"], result


def test_a_forked_child_sees_its_output_lose_its_reader_when_this_process_goes():
    """The shape the session's controller watch relies on: the pipe's only reader is the
    process that forked the child (here a middle process killed with SIGKILL)."""
    report_read, report_write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(report_read)

        def work():
            os.write(report_write, b"started\n")
            poller = select.poll()
            poller.register(1, 0)
            events = poller.poll(20000)
            os.write(report_write, b"gone\n" if events and events[0][1] & select.POLLERR else b"still\n")
            return {}
        forked_result(work)
        os._exit(0)
    os.close(report_write)
    with os.fdopen(report_read, "rb") as report:
        assert report.readline() == b"started\n"
        os.kill(middle, signal.SIGKILL)
        os.waitpid(middle, 0)
        assert report.readline() == b"gone\n"
