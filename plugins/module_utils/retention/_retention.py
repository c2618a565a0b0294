# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What retention removes: old images of this collection's repositories and old session
directories. Pure functions over what the retention module read; it removes.

An image goes when all of these hold: it is in one of REPOSITORIES; its tag is not the
repository's current one (the most recently used: _images' last-use marks, else the
image's creation time) nor the probe alias; no container (running or stopped) uses its
image; no kept tag names the same image (removing it would only untag); and it was last
used more than DAYS ago.
A session directory goes when its name is a session id, it is not among the newest
KEEP_SESSIONS, it ended (or started, without a record) more than DAYS ago, no container
of that session exists, and it holds no review waiting for a decision (review.yml).
A policy directory goes when it is not the one used last, no container is labelled with
it, no long-lived gate's unit names it, no kept session's record names it, and it was
last used (rendered, or found rendered by the gate role) more than DAYS ago.
"""

import calendar
import re
import time

from ansible_collections.aisb.sandbox.plugins.module_utils.common._content_hash import TAG_LENGTH
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_facts import PROBE_IMAGE_ALIAS
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SESSION_TIME_FORMAT

REPOSITORIES = ("localhost/aisb-sandbox", "localhost/aisb-gate", "localhost/aisb-probe")
DAY = 86400
# prune.yml's and the team file's values when neither the team nor the developer gives one.
DEFAULT_DAYS = 30
DEFAULT_KEEP_SESSIONS = 20
# policies/<hash>/: anything else there (the gate role's staging) is not retention's.
POLICY_NAME = re.compile(r"\A[0-9a-f]{%d}\Z" % TAG_LENGTH)


def check_count(value, where):
    """VALUE, a whole number of days or of sessions (0 or more); ValueError naming WHERE."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a whole number, 0 or more, got %r" % (where, value))
    return value


def image_tags(images):
    """[(tag, image id, created)] of this collection's repositories in IMAGES (podman
    images' JSON: Id, Names, Created in seconds since the epoch), the probe alias left out."""
    tags = []
    for image in images:
        for name in image.get("Names") or []:
            if name.rsplit(":", 1)[0] in REPOSITORIES and name != PROBE_IMAGE_ALIAS:
                tags.append((name, image["Id"], int(image.get("Created") or 0)))
    return sorted(tags)


def alias_ids(images):
    """IDs of the images the probe alias names (the host facts' fingerprint reads it)."""
    return set(image["Id"] for image in images if PROBE_IMAGE_ALIAS in (image.get("Names") or []))


def images_to_remove(tags, last_used, container_image_ids, protected_ids, now, days):
    """[(tag, why kept or None)] for each of TAGS ([(tag, id, created)]): None means
    remove. LAST_USED: {tag: seconds since the epoch} (a tag without one: its creation);
    CONTAINER_IMAGE_IDS: images any container uses; PROTECTED_IDS: images kept anyway."""
    used = dict((tag, last_used.get(tag, created)) for tag, _id, created in tags)
    current = {}
    for tag, _id, _created in tags:
        repository = tag.rsplit(":", 1)[0]
        if repository not in current or used[tag] > used[current[repository]]:
            current[repository] = tag
    verdicts = {}
    for tag, image_id, _created in tags:
        if tag in current.values():
            verdicts[tag] = "current"
        elif image_id in container_image_ids:
            verdicts[tag] = "a container uses it"
        elif image_id in protected_ids:
            verdicts[tag] = "the probe alias names it"
        elif now - used[tag] <= days * DAY:
            verdicts[tag] = "used within %d days" % days
        else:
            verdicts[tag] = None
    kept_ids = set(image_id for tag, image_id, _created in tags if verdicts[tag])
    for tag, image_id, _created in tags:
        if verdicts[tag] is None and image_id in kept_ids:
            verdicts[tag] = "a kept tag names the same image"
    return [(tag, verdicts[tag]) for tag, _id, _created in tags]


def session_started(session_id):
    """Seconds since the epoch at which SESSION_ID (20261201T053000-<hex>) started."""
    return calendar.timegm(time.strptime(session_id.split("-", 1)[0], SESSION_TIME_FORMAT))


def sessions_to_remove(sessions, container_names, now, days, keep):
    """[(session id, why kept or None)] for SESSIONS ([(id, ended or None, has review)]),
    newest first; None means remove. CONTAINER_NAMES: every container's name."""
    ordered = sorted(sessions, key=lambda entry: entry[1] or session_started(entry[0]), reverse=True)
    verdicts = []
    for index, (session_id, ended, review) in enumerate(ordered):
        age = now - (ended or session_started(session_id))
        if index < keep:
            why = "among the newest %d" % keep
        elif any(name.endswith("-" + session_id) for name in container_names):
            why = "its container exists"
        elif review:
            why = "its review waits for review.yml"
        elif age <= days * DAY:
            why = "within %d days" % days
        else:
            why = None
        verdicts.append((session_id, why))
    return verdicts


def policies_to_remove(policies, in_use, now, days):
    """[(policy hash, why kept or None)] for POLICIES ([(hash, last used)]); None means
    remove. IN_USE: {hash: why} for the policies something still names."""
    current = max(policies, key=lambda entry: entry[1])[0] if policies else None
    verdicts = []
    for name, used in sorted(policies):
        if name == current:
            why = "current"
        elif name in in_use:
            why = in_use[name]
        elif now - used <= days * DAY:
            why = "used within %d days" % days
        else:
            why = None
        verdicts.append((name, why))
    return verdicts
