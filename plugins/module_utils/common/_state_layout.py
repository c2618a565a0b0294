# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The state directory, ${XDG_STATE_HOME:-~/.local/state}/aisb, and where each thing the
collection keeps lies in it: every place that reads or writes there takes its paths here.

Functions of the environment or of the state directory, and new_session_id (of the clock).
"""

import os
import re
import time
import uuid

# The host's capability facts (host_capabilities) and the fingerprint they were taken on.
FACTS = "host_capabilities.json"
FINGERPRINT_CACHE = "fingerprint-cache.json"
# sessions/<id>/: a session's record and its working files; <id> is what new_session_id
# makes: its start (UTC, SESSION_TIME_FORMAT), "-" and 8 random hex digits.
SESSIONS = "sessions"
SESSION_TIME_FORMAT = "%Y%m%dT%H%M%S"
SESSION_ID = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{8}$")
# A headless session's output, written as it comes (aisb run follows it).
TRANSCRIPT = "transcript.log"
# The record every session directory ends with.
RECORD = "record.json"
# The workstation's key that signs every session record (_record_seal), mode 0600: in the
# state directory's top, which no sandbox mounts (only directories below it).
RECORD_KEY = "record.key"
# sessions/<id>/review/: a review-mode session's overlays and manifest (_review_session),
# what keeps the session directory from retention until review.yml decides.
REVIEW = "review"
# images/: the roles' build contexts, refresh stamps and last-use marks (_images); images/logs/:
# the builds' logs.
IMAGES = "images"
IMAGE_LOGS = "logs"
# policies/<policy hash>/: rendered policies (gate_policy), squid's part in SQUID_POLICY_CONF.
POLICIES = "policies"
SQUID_POLICY_CONF = "squid-policy.conf"
# harness-state/<project hash>/: the harness's state kept per project.
HARNESS_STATE = "harness-state"
# gates/<policy hash>/: a long-lived gate's configuration (gate_service).
GATES = "gates"


def state_dir(environ):
    """${XDG_STATE_HOME:-~/.local/state}/aisb for ENVIRON: everything the collection keeps."""
    state = environ.get("XDG_STATE_HOME") or os.path.join(environ.get("HOME", "~"), ".local", "state")
    return os.path.join(state, "aisb")


def facts_path(environ):
    """${XDG_STATE_HOME:-~/.local/state}/aisb/host_capabilities.json for ENVIRON."""
    return os.path.join(state_dir(environ), FACTS)


def fingerprint_cache_path(environ):
    """Where the fingerprint as of _host_facts.host_key() is cached for ENVIRON."""
    return os.path.join(state_dir(environ), FINGERPRINT_CACHE)


def new_session_id():
    return time.strftime(SESSION_TIME_FORMAT, time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def record_key_path(state):
    """STATE/record.key: the key that signs this workstation's session records."""
    return os.path.join(state, RECORD_KEY)


def sessions_dir(state):
    return os.path.join(state, SESSIONS)


def session_ids(state):
    """The session ids under STATE, oldest first (an id begins with its start)."""
    try:
        names = os.listdir(sessions_dir(state))
    except FileNotFoundError:
        return []
    return sorted(name for name in names if SESSION_ID.match(name))


def session_directory(state, session_id):
    """STATE/sessions/SESSION_ID: the session's record and working files."""
    return os.path.join(sessions_dir(state), session_id)


def review_directory(session_dir):
    """SESSION_DIR/review: a review-mode session's overlays and manifest."""
    return os.path.join(session_dir, REVIEW)


def images_dir(state):
    return os.path.join(state, IMAGES)


def image_logs_dir(state):
    return os.path.join(images_dir(state), IMAGE_LOGS)


def policies_dir(state):
    return os.path.join(state, POLICIES)


def harness_state_dir(state):
    return os.path.join(state, HARNESS_STATE)


def gate_directory(policy_dir):
    """STATE/gates/<policy hash> for the rendered policy POLICY_DIR, STATE/policies/<policy
    hash>: a long-lived gate's configuration, in the state directory of the policy it serves."""
    policy_dir = policy_dir.rstrip("/")
    return os.path.join(os.path.dirname(os.path.dirname(policy_dir)), GATES, os.path.basename(policy_dir))
