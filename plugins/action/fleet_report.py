# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of aisb.sandbox.fleet_report: build the report (pure functions in
module_utils/fleet/_fleet_report.py) and write its two files on the controller."""

from __future__ import annotations

import os
import time

from ansible.plugins.action import ActionBase

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _files
from ansible_collections.aisb.sandbox.plugins.module_utils.fleet import _fleet_report


# The report's files: readable by all, whatever the controller's umask.
REPORT_MODE = 0o644


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=_fleet_report.argument_spec())
        report = _fleet_report.fleet_report(args["results"].items(),
                                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), args["records"])
        dest = os.path.abspath(args["dest"])
        paths = {"json_path": os.path.join(dest, "fleet-report.json"),
                 "markdown_path": os.path.join(dest, "fleet-report.md")}
        if not self._task.check_mode:
            if not os.path.isdir(dest):
                os.makedirs(dest)
            _files.write_whole(paths["json_path"], _fleet_report.render_json(report), REPORT_MODE)
            _files.write_whole(paths["markdown_path"], _fleet_report.render_markdown(report), REPORT_MODE)
        line = _fleet_report.summary_line(report["summary"])
        result.update(paths, changed=not self._task.check_mode, summary=report["summary"], summary_line=line,
                      hosts=dict((entry["host"], entry["status"]) for entry in report["hosts"]))
        # Records are the proof of what ran: one failing its check fails the play whatever require_all says.
        edited = [entry["host"] for entry in report["hosts"] if not _fleet_report.records_intact(entry)]
        problems = (["session records fail their check on %s" % ", ".join(edited)] if edited else []) + (
            ["the networking model does not hold on every host"]
            if args["require_all"] and not _fleet_report.all_hold(report) else [])
        if problems:
            result.update(failed=True, msg="%s (%s); see %s" % ("; ".join(problems), line, paths["markdown_path"]))
        else:
            result["msg"] = line
        return result
