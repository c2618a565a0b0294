# SPDX-License-Identifier: GPL-3.0-or-later
"""The state directory's layout: one place derives it and every path in it."""

import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.retention import _retention


def test_facts_path_follows_xdg():
    assert _state_layout.facts_path({"HOME": "/home/u"}) == "/home/u/.local/state/aisb/host_capabilities.json"
    assert _state_layout.facts_path({"HOME": "/home/u", "XDG_STATE_HOME": "/s"}) == "/s/aisb/host_capabilities.json"


def test_the_paths_under_the_state_directory():
    state = _state_layout.state_dir({"HOME": "/home/u"})
    assert state == "/home/u/.local/state/aisb"
    assert _state_layout.fingerprint_cache_path({"HOME": "/home/u"}) == state + "/fingerprint-cache.json"
    assert _state_layout.session_directory(state, "20261201T000000-00000000") == \
        state + "/sessions/20261201T000000-00000000"
    assert _state_layout.review_directory(state + "/sessions/20261201T000000-00000000") == \
        state + "/sessions/20261201T000000-00000000/review"
    assert _state_layout.sessions_dir(state) == state + "/sessions"
    assert _state_layout.images_dir(state) == state + "/images"
    assert _state_layout.image_logs_dir(state) == state + "/images/logs"
    assert _state_layout.policies_dir(state) == state + "/policies"
    assert _state_layout.harness_state_dir(state) == state + "/harness-state"
    assert _state_layout.gate_directory(state + "/policies/5e1f0c2a9b3d4e6f/") == state + "/gates/5e1f0c2a9b3d4e6f"


def test_a_new_session_id_is_what_review_and_retention_accept_as_one():
    session_id = _state_layout.new_session_id()
    assert _state_layout.SESSION_ID.match(session_id)
    assert abs(_retention.session_started(session_id) - time.time()) < 5
