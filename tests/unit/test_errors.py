# SPDX-License-Identifier: GPL-3.0-or-later
"""The errors that end a task, their statuses, and the one task result a refusal makes."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._errors import (
    RefusedError, SessionError, TaskError, refused_result)
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import InputError
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import RecipeError
from ansible_collections.aisb.sandbox.plugins.module_utils.team._team import TeamError


@pytest.mark.parametrize("error", [InputError, PolicyError, RecipeError, TeamError])
def test_what_a_session_refuses_carries_the_refused_status(error):
    # ValueError still: callers that catch a bad value catch these too.
    assert issubclass(error, RefusedError) and issubclass(error, ValueError)
    assert error("x").status == "refused"


def test_a_session_that_could_not_run_carries_the_failed_status():
    assert issubclass(SessionError, TaskError) and issubclass(SessionError, RuntimeError)
    assert not issubclass(SessionError, RefusedError)
    assert SessionError("x").status == "failed"


def test_a_refused_result_names_the_reason_and_keeps_the_extra_keys():
    assert refused_result(TeamError("team file says no"), path="/etc/aisb/team.json") == {
        "failed": True, "status": "refused", "msg": "team file says no", "path": "/etc/aisb/team.json"}
    assert refused_result("a sentence", problems=["a sentence"]) == {
        "failed": True, "status": "refused", "msg": "a sentence", "problems": ["a sentence"]}


def test_an_error_of_its_own_status_keeps_it():
    class Stopped(RefusedError):
        status = "stopped"

    assert refused_result(Stopped("why"))["status"] == "stopped"
