# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's seccomp profile: podman's default profile on this host (containers-common's
file) less the kernel surface a coding agent never needs, rendered here and nowhere else.

render_profile is pure; load_profile reads the host's default and renders it. The session
writes the result into its directory and gives it to podman (_podman.SandboxOptions
.seccomp_profile); the host probes run their sandbox-shaped container under it too.
"""

import hashlib
import json

# containers-common's default profile: what podman applies when given none. Deriving from
# it keeps every rule podman's maintainers keep for this podman (architectures,
# capabilities, new syscalls) and only takes away.
HOST_DEFAULT_PROFILE = "/usr/share/containers/seccomp.json"
# The rendered profile, in the session's directory.
PROFILE_FILE = "seccomp.json"
EPERM = 1
ENOSYS = 38
# Refused whatever their arguments, with EPERM: joining namespaces, the kernel keyring,
# eBPF, perf, userfaultfd, io_uring, the new mount API, kexec and module loading.
REFUSED = (
    "setns",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
    "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module",
)
# Refused with ENOSYS: its flags are in memory a filter cannot read, and on ENOSYS the C
# libraries fall back to clone, whose flags are filtered.
REFUSED_AS_ABSENT = ("clone3",)
# Each flag that makes a new namespace; clone and unshare carrying any of them are refused.
CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# unshare only: for clone, this bit is part of the exit signal (CSIGNAL).
CLONE_NEWTIME = 0x00000080
# The syscalls whose flags argument is filtered, the architectures where that argument is
# not the first (s390: clone(stack, flags, ...)), and the flags each may not carry.
FILTERED = (("clone", tuple(CLONE_NEW.values())), ("unshare", tuple(CLONE_NEW.values()) + (CLONE_NEWTIME,)))
SECOND_ARGUMENT_ARCHES = {"clone": ["s390", "s390x"]}
# /proc/PID/status's Seccomp: for a process under a filter (SECCOMP_MODE_FILTER).
FILTER_MODE = 2


class SeccompError(ValueError):
    """The host's default profile cannot be the base of the sandbox's."""


def digest(text):
    """The sha256 of TEXT (a profile), as the record keeps it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _flag_rules(name, flags, index, arches):
    """NAME allowed while its flags argument (INDEX) carries none of FLAGS, refused with
    EPERM when it carries any; ARCHES: the architectures these rules are for, as
    {"includes": ...} or {"excludes": ...} ({} for all)."""
    mask = 0
    for flag in flags:
        mask |= flag
    rules = [dict({"names": [name], "action": "SCMP_ACT_ALLOW",
                   "args": [{"index": index, "value": mask, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]}, **arches)]
    # One rule a flag: a rule's arguments must all match, so "any of" is one rule each.
    rules += [dict({"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                    "args": [{"index": index, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}, **arches)
              for flag in flags]
    return rules


def own_rules():
    """The rules the sandbox's profile adds to the host's default, for every syscall it
    takes from it (taken_names)."""
    rules = [{"names": list(REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM},
             {"names": list(REFUSED_AS_ABSENT), "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS}]
    for name, flags in FILTERED:
        second = SECOND_ARGUMENT_ARCHES.get(name)
        if second:
            rules += _flag_rules(name, flags, 0, {"excludes": {"arches": second}})
            rules += _flag_rules(name, flags, 1, {"includes": {"arches": second}})
        else:
            rules += _flag_rules(name, flags, 0, {})
    return rules


def taken_names():
    """Every syscall the sandbox's own rules decide, which no rule of the host's keeps."""
    return set(REFUSED) | set(REFUSED_AS_ABSENT) | set(name for name, _flags in FILTERED)


def render_profile(default_text, source=HOST_DEFAULT_PROFILE):
    """The sandbox's profile (JSON text) from DEFAULT_TEXT, podman's default profile
    (read from SOURCE): every syscall of taken_names() removed from its rules (a rule
    left with none goes), then own_rules() appended. SeccompError naming SOURCE when it
    is not a profile of that shape, or allows every syscall by default."""
    try:
        profile = json.loads(default_text)
    except ValueError as error:
        raise SeccompError("%s is not JSON (%s): the sandbox's seccomp profile is derived from podman's default "
                           "profile; reinstall containers-common" % (source, error))
    rules = profile.get("syscalls") if isinstance(profile, dict) else None
    if not isinstance(rules, list) or not all(isinstance(r, dict) and isinstance(r.get("names"), list)
                                              for r in rules):
        raise SeccompError("%s is not a seccomp profile (an object whose syscalls is a list of rules, each with "
                           "its names): the sandbox's profile is derived from podman's default profile; reinstall "
                           "containers-common" % source)
    if profile.get("defaultAction") in (None, "SCMP_ACT_ALLOW", "SCMP_ACT_LOG"):
        raise SeccompError("%s allows every syscall it does not name (defaultAction %s): the sandbox's profile "
                           "is derived from podman's default profile, which refuses them; reinstall "
                           "containers-common" % (source, profile.get("defaultAction")))
    taken = taken_names()
    kept = []
    for rule in rules:
        names = [name for name in rule["names"] if name not in taken]
        if names:
            kept.append(dict(rule, names=names))
    profile["syscalls"] = kept + own_rules()
    return json.dumps(profile, indent=1) + "\n"


def load_profile(path=HOST_DEFAULT_PROFILE):
    """(the sandbox's profile rendered from the host's default at PATH, None) or (None,
    the sentence why there is none)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        return None, ("podman's default seccomp profile %s cannot be read (%s): the sandbox's own profile is "
                      "derived from it; run provision.yml (the host role installs podman and containers-common)"
                      % (path, error.strerror))
    try:
        return render_profile(text, path), None
    except SeccompError as error:
        return None, str(error)


# What /proc/PID/status says of a process's seccomp state.
STATUS_FIELDS = ("Seccomp", "Seccomp_filters")
# The filters podman's runtime (crun) adds for a profile, over those its caller is under.
FILTERS_PER_PROFILE = 1


def status_fields(status_text):
    """{field: value} of STATUS_FIELDS in STATUS_TEXT, a /proc/PID/status (a field the
    kernel does not show is absent)."""
    found = {}
    for line in status_text.splitlines():
        name, _sep, value = line.partition(":")
        if name in STATUS_FIELDS:
            found[name] = value.strip()
    return found


def wanted_status(own_status_text):
    """The seccomp fields of a sandbox under its profile, started by a process whose
    /proc/self/status is OWN_STATUS_TEXT: in filter mode, under one filter more than that
    process (the kernel shows no count before Linux 5.9: then only the mode)."""
    wanted = {"Seccomp": str(FILTER_MODE)}
    own = status_fields(own_status_text)
    if "Seccomp_filters" in own:
        wanted["Seccomp_filters"] = str(int(own["Seccomp_filters"]) + FILTERS_PER_PROFILE)
    return wanted


def status_difference(wanted, status_text):
    """{"removed": [...], "added": [...]}: the "FIELD: value" lines of WANTED that STATUS_TEXT
    (the sandbox's /proc/PID/status) does not show, and what it shows instead."""
    actual = status_fields(status_text)
    differing = sorted(name for name in wanted if actual.get(name) != wanted[name])
    return {"removed": ["%s: %s" % (name, wanted[name]) for name in differing],
            "added": ["%s: %s" % (name, actual[name]) for name in differing if name in actual]}
