# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A refusal: the error base of what a task refuses before anything starts (RefusedError,
whose status the task result carries) and the one task result a refusal makes.
"""

REFUSED = "refused"


class RefusedError(ValueError):
    """An input, setting or entry a task must not act on; the message names it and what
    is allowed. STATUS: the task result's status when it ends the task."""

    status = REFUSED


def refused_result(reason, **extra):
    """The failed task result of a refusal: REASON (a RefusedError or a sentence) as its
    msg, its status, and EXTRA (more keys of the result)."""
    return dict(extra, failed=True, status=getattr(reason, "status", REFUSED), msg=str(reason))
