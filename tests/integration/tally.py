# SPDX-License-Identifier: GPL-3.0-or-later
"""What the bypass battery really did, for the summary line conftest prints: a case is
counted only once its traffic was seen to be sent (its result line is in the
transcript) and the tripwires' logs were read for it."""

CASES = {}


def record(case_id, leaked):
    """CASE_ID sent real traffic; LEAKED says whether any listener saw it."""
    CASES[case_id] = bool(leaked)


def summary():
    """The summary line, or None when no real-traffic case ran."""
    if not CASES:
        return None
    return "bypass battery: %d real-traffic cases ran, %d leaks seen" % (len(CASES), sum(CASES.values()))
