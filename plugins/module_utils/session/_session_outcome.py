# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""How a session ended, as one value (pure): Outcome(status, rc, reason), decided from
how the sandbox's run returned and what the runner saw around it (SessionRunner.outcome)."""

from __future__ import annotations

from typing import NamedTuple, Optional

# The exit code of a session stopped because its enforcement was lost or never reported
# (the entrypoint's own code for enforcement it could not install or verify).
ENFORCEMENT_RC = 77
EXIT_STATUS = {ENFORCEMENT_RC: "enforcement could not be installed or verified",
               78: "the sandbox's policy was missing or unreadable",
               79: "the gate never answered the sandbox",
               # podman's own exit codes: it, not the harness, failed.
               125: "podman could not run the sandbox",
               126: "podman could not execute the harness command",
               127: "podman did not find the harness command"}


class Outcome(NamedTuple):
    """STATUS (exited, interrupted, failed, enforcement-lost, enforcement-unreported,
    gate-died, controller-lost), RC (the sandbox's exit code, or None when it never
    returned one) and REASON (one sentence, "" for a harness's own exit)."""
    status: str
    rc: Optional[int]
    reason: str


class Seen(NamedTuple):
    """What the runner saw around the sandbox's run, each None (or False) when it did not
    happen: the enforcement watch's loss (_enforcement_watch), why the entrypoint never
    reported, why the gate did not start, whether it died, why the controller went away."""
    enforcement_lost: Optional[dict] = None
    unreported: Optional[str] = None
    gate_error: Optional[str] = None
    gate_died: bool = False
    controller_lost: Optional[str] = None


def exit_reason(rc):
    """What an exit code of the sandbox's podman says beyond the harness's own result."""
    if rc in EXIT_STATUS:
        return EXIT_STATUS[rc]
    if rc is not None and rc > 128:
        # podman exits 128+N when signal N ended the sandbox's first process.
        return "the sandbox was killed by signal %d" % (rc - 128)
    return ""


def enforcement_lost_reason(lost):
    """One sentence for the record and the task: what changed in the sandbox's table."""
    changes = ["-" + line for line in lost["removed"]] + ["+" + line for line in lost["added"]]
    shown = "; ".join(changes[:6]) + ("; ..." if len(changes) > 6 else "")
    return "%s at %s%s; the sandbox was stopped" % (lost["what"], lost["at_text"], (": " + shown) if shown else "")


def decide(ended, seen):
    """The session's Outcome from ENDED (the Outcome of the sandbox's run as it returned:
    exited with its rc, or interrupted or failed with a reason) and SEEN: a lost or
    unreported enforcement outranks everything (the sandbox was stopped for it), then the
    gate, then a controller that went away while the sandbox exited on its own."""
    if seen.enforcement_lost:
        return Outcome("enforcement-lost", ENFORCEMENT_RC, enforcement_lost_reason(seen.enforcement_lost))
    if seen.unreported:
        return Outcome("enforcement-unreported", ENFORCEMENT_RC, seen.unreported)
    if seen.gate_error:
        return Outcome("failed", ended.rc, seen.gate_error)
    if seen.gate_died:
        return Outcome("gate-died", ended.rc, "the gate exited while the sandbox ran; the sandbox was stopped")
    if ended.status != "exited":
        return ended
    if seen.controller_lost:
        return Outcome("controller-lost", ended.rc, seen.controller_lost + "; the sandbox was stopped")
    return Outcome("exited", ended.rc, exit_reason(ended.rc))
