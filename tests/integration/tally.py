# SPDX-License-Identifier: GPL-3.0-or-later
"""What the bypass battery really did, for the summary line conftest prints: a case is
counted only once its traffic was seen to be sent (its result line is in the
transcript) and the tripwires' logs were read for it."""

CASES = {}


def record(case_id, leaked, gate_path="map-host-loopback"):
    """CASE_ID sent real traffic over GATE_PATH; LEAKED says whether any listener saw it."""
    CASES.setdefault(gate_path, {})[case_id] = bool(leaked)


def merge(cases):
    """Add CASES (another process's CASES: a pytest-xdist worker's) to this one's."""
    for path, results in cases.items():
        CASES.setdefault(path, {}).update(results)


def summary():
    """The summary line, one count per gate path, or None when no real-traffic case ran."""
    if not CASES:
        return None
    return "bypass battery: " + "; ".join("%s: %d real-traffic cases ran, %d leaks seen" % (
        path, len(cases), sum(cases.values())) for path, cases in sorted(CASES.items()))
