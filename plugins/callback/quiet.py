# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The quiet stdout callback the aisb command selects: one line per step of the play,
a refusal as its sentence, what a play says (debug) as it is."""

from __future__ import annotations

DOCUMENTATION = r"""
name: quiet
type: stdout
author: aisb developers (@aisb)
short_description: One line per step, refusals as sentences, the session's answer as it is
description:
  - The output the C(aisb) command selects for the collection's playbooks. No banners and no
    recap; each task of the play itself (not a role's inner tasks, checks or messages) is one
    line on stderr as it starts; a failed task is one line on stderr, its message; a debug
    message of the play is printed as it is on stdout (a list one item a line), a role's
    (an image build's progress) and one whose task sets the variable C(quiet_callback_stderr)
    to true (the play's own status line, like run_agent.yml's record line) on stderr, so
    that stdout holds only the answer.
  - Warnings are shown as Ansible shows them.
  - With C(AISB_RESULT_FILE) in its environment, the session task's result (rc, status,
    session_id, record, transcript) is written there as JSON; C(aisb run) takes its exit code
    from it, and the transcript to finish printing.
"""

import json
import os

from ansible.plugins.callback import CallbackBase

from ansible_collections.aisb.sandbox.plugins.plugin_utils._aisb_command import RESULT_VARIABLE

# Tasks that are no step of their own: checks, messages and what they read.
NOT_STEPS = ("ansible.builtin.assert", "assert", "ansible.builtin.debug", "debug", "ansible.builtin.set_fact",
             "set_fact", "ansible.builtin.meta", "meta")
# A debug task with this variable true is what the play says itself (run_agent.yml's
# record line): on stderr, so that stdout holds the answer alone.
STDERR_VARIABLE = "quiet_callback_stderr"
SESSION_ACTIONS = ("aisb.sandbox.session",)
RESULT_KEYS = ("rc", "status", "session_id", "record", "transcript")


def shown(message):
    """A debug task's MSG as lines of text."""
    if isinstance(message, list):
        return "\n".join(str(item) for item in message)
    return message if isinstance(message, str) else json.dumps(message, indent=2, sort_keys=True)


def status_message(task):
    """Whether TASK's debug message is aisb's own word (stderr), not the answer (stdout)."""
    return task._role is not None or (task.vars or {}).get(STDERR_VARIABLE) is True


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "aisb.sandbox.quiet"

    def v2_playbook_on_task_start(self, task, is_conditional):
        if task.implicit or task._role is not None or task.action in NOT_STEPS:
            return
        self._display.display("· %s" % task.get_name().strip(), stderr=True)

    def _keep_session_result(self, result):
        path = os.environ.get(RESULT_VARIABLE)
        if path and result.task.action in SESSION_ACTIONS:
            with open(path, "w") as handle:
                json.dump(dict((key, result.result.get(key)) for key in RESULT_KEYS), handle)

    def v2_runner_on_ok(self, result):
        self._handle_warnings(result.result)
        self._keep_session_result(result)
        if result.task.action in ("ansible.builtin.debug", "debug") and "msg" in result.result:
            # A role's messages are progress (an image building), and a status line is the
            # play's own word; the play's other messages are its answer.
            self._display.display(shown(result.result["msg"]), stderr=status_message(result.task))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        # The message is the sentence; Ansible's error display (the task's origin, its
        # source lines) is left out.
        self._handle_warnings(result.result)
        self._keep_session_result(result)
        if not ignore_errors:
            message = result.result.get("msg") or result.result.get("stderr") or "failed"
            self._display.display("aisb: %s" % " ".join(str(message).split()), stderr=True)

    def v2_runner_on_unreachable(self, result):
        self._display.display("aisb: %s unreachable: %s" % (result.host.get_name(), result.result.get("msg")),
                              stderr=True)

    def v2_playbook_on_no_hosts_matched(self):
        self._display.display("aisb: no host matched", stderr=True)
