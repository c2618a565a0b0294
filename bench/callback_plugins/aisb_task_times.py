# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of each task of a playbook run, for bench/profile_session.py (ansible-core has
no profile_tasks of its own; ansible.posix's is not installed on the workstation).

Enabled with ANSIBLE_CALLBACKS_ENABLED=aisb_task_times; writes JSON to the file
AISB_TASK_TIMES names: {"tasks": [[name, action, seconds, skipped], ...], "loaded_to_end_s": ...}. A task's
time runs from its start to the next task's (or the play's end), so it includes what the
controller does between them.
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "aisb_task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.loaded = time.monotonic()
        self.current = None
        self.skipped = False
        self.tasks = []

    def _next(self, task):
        now = time.monotonic()
        if self.current:
            name, action, started = self.current
            self.tasks.append([name, action, round(now - started, 4), self.skipped])
        self.current = (task.get_name(), task.action, now) if task else None
        self.skipped = False

    def v2_runner_on_skipped(self, result):
        self.skipped = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._next(task)

    def v2_playbook_on_stats(self, stats):
        self._next(None)
        with open(os.environ["AISB_TASK_TIMES"], "w", encoding="utf-8") as out:
            json.dump({"tasks": self.tasks, "loaded_to_end_s": round(time.monotonic() - self.loaded, 4)}, out)
