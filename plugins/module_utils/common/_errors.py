# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The errors that end a task, each with the status its result (or the session's record)
carries: their base TaskError, RefusedError (what a task refuses before anything starts),
SessionError (a session that could not start or did not end cleanly), and the one task
result a refusal makes.
"""

REFUSED = "refused"


class TaskError(Exception):
    """An error that ends a task; the message says why. STATUS: its result's status."""

    status = "failed"


class RefusedError(TaskError, ValueError):
    """An input, setting or entry a task must not act on; the message names it and what
    is allowed."""

    status = REFUSED


class SessionError(TaskError, RuntimeError):
    """The session could not start or did not end cleanly; the message says why."""


def refused_result(reason, **extra):
    """The failed task result of a refusal: REASON (a RefusedError or a sentence) as its
    msg, its status, and EXTRA (more keys of the result)."""
    return dict(extra, failed=True, status=getattr(reason, "status", REFUSED), msg=str(reason))
