# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's seccomp profile rendered from podman's default: what it takes away, what
it keeps, and the refusal of a base that is no such profile."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _seccomp

from builders import SECCOMP_DEFAULT, SECCOMP_PROFILE

PROFILE = json.loads(SECCOMP_PROFILE)


def rules_naming(name, profile=PROFILE):
    return [rule for rule in profile["syscalls"] if name in rule["names"]]


def test_the_defaults_own_settings_and_unrelated_rules_are_kept():
    default = json.loads(SECCOMP_DEFAULT)
    assert dict((k, v) for k, v in PROFILE.items() if k != "syscalls") == dict(
        (k, v) for k, v in default.items() if k != "syscalls")
    assert rules_naming("read") == [{"names": ["read", "write", "mount"], "action": "SCMP_ACT_ALLOW"}]
    assert rules_naming("personality") == [default["syscalls"][2]]
    assert rules_naming("bdflush") == [{"names": ["bdflush"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]


@pytest.mark.parametrize("name", _seccomp.REFUSED)
def test_each_refused_syscall_is_refused_with_eperm_whatever_the_capabilities(name):
    # The default's rules allowing bpf with CAP_BPF, modules with CAP_SYS_MODULE are gone.
    assert rules_naming(name) == [{"names": list(_seccomp.REFUSED), "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]


def test_clone3_is_refused_as_absent():
    assert rules_naming("clone3") == [{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]


def masked(index, value, expected):
    return [{"index": index, "value": value, "valueTwo": expected, "op": "SCMP_CMP_MASKED_EQ"}]


def test_clone_is_allowed_without_a_namespace_flag_and_refused_with_any():
    flags = sorted(_seccomp.CLONE_NEW.values())
    assert 0x10000000 in flags and _seccomp.CLONE_NEWTIME not in flags
    mask = sum(flags)
    assert mask == 0x7E020000  # every CLONE_NEW* flag clone(2) takes
    rules = rules_naming("clone")
    for index, arches in ((0, {"excludes": {"arches": ["s390", "s390x"]}}),
                          (1, {"includes": {"arches": ["s390", "s390x"]}})):
        mine = [dict((k, v) for k, v in r.items() if k not in ("includes", "excludes")) for r in rules
                if dict((k, r[k]) for k in ("includes", "excludes") if k in r) == arches]
        assert mine[0] == {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": masked(index, mask, 0)}
        assert sorted(r["args"][0]["value"] for r in mine[1:]) == flags
        assert all(r == {"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                         "args": masked(index, r["args"][0]["value"], r["args"][0]["value"])} for r in mine[1:])
    assert len(rules) == 2 * (1 + len(flags))


def test_unshare_is_refused_with_any_namespace_flag_time_included():
    rules = rules_naming("unshare")
    flags = sorted(list(_seccomp.CLONE_NEW.values()) + [_seccomp.CLONE_NEWTIME])
    assert rules[0] == {"names": ["unshare"], "action": "SCMP_ACT_ALLOW", "args": masked(0, sum(flags), 0)}
    assert sorted(r["args"][0]["value"] for r in rules[1:]) == flags
    assert all(r["action"] == "SCMP_ACT_ERRNO" and r["errnoRet"] == 1 for r in rules[1:])


def test_no_rule_of_the_default_keeps_a_taken_syscall():
    default_rules = len(json.loads(SECCOMP_DEFAULT)["syscalls"])
    inherited = PROFILE["syscalls"][:len(PROFILE["syscalls"]) - len(_seccomp.own_rules())]
    assert len(inherited) == default_rules - 2  # bpf's and init_module's rules named nothing else
    assert not [rule for rule in inherited if set(rule["names"]) & _seccomp.taken_names()]
    assert PROFILE["syscalls"][len(inherited):] == _seccomp.own_rules()


def test_rendering_is_stable_and_the_digest_is_its_sha256():
    assert _seccomp.render_profile(SECCOMP_DEFAULT) == SECCOMP_PROFILE
    assert len(_seccomp.digest(SECCOMP_PROFILE)) == 64


@pytest.mark.parametrize("text, says", [
    ("{", "/usr/share/containers/seccomp.json is not JSON"),
    ("[]", "/usr/share/containers/seccomp.json is not a seccomp profile"),
    ('{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"name": "read"}]}', "is not a seccomp profile"),
    ('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}',
     "allows every syscall it does not name (defaultAction SCMP_ACT_ALLOW)"),
    ('{"syscalls": []}', "(defaultAction None)"),
])
def test_a_base_that_is_no_default_profile_is_refused(text, says):
    with pytest.raises(_seccomp.SeccompError) as error:
        _seccomp.render_profile(text)
    assert says in str(error.value) and "containers-common" in str(error.value)


def test_load_profile_reads_and_renders_or_says_why_not(tmp_path):
    path = tmp_path / "seccomp.json"
    assert _seccomp.load_profile(str(path))[0] is None
    assert "cannot be read (No such file or directory)" in _seccomp.load_profile(str(path))[1]
    path.write_text(SECCOMP_DEFAULT)
    assert _seccomp.load_profile(str(path)) == (_seccomp.render_profile(SECCOMP_DEFAULT, str(path)), None)
    path.write_text("{")
    profile, problem = _seccomp.load_profile(str(path))
    assert profile is None and problem.startswith("%s is not JSON" % path)


STATUS = "Name:\tcatatonit\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nSpeculation_Store_Bypass:\tx\n"


def test_the_status_fields_are_read_from_proc_status():
    assert _seccomp.status_fields(STATUS) == {"Seccomp": "2", "Seccomp_filters": "1"}
    assert _seccomp.status_fields("Name:\tx\n") == {}


def test_a_sandbox_is_wanted_in_filter_mode_under_one_filter_more_than_its_starter():
    assert _seccomp.wanted_status("Seccomp:\t0\nSeccomp_filters:\t0\n") == {"Seccomp": "2", "Seccomp_filters": "1"}
    assert _seccomp.wanted_status("Seccomp:\t2\nSeccomp_filters:\t3\n") == {"Seccomp": "2", "Seccomp_filters": "4"}
    # Before Linux 5.9 the kernel shows no count: only the mode is wanted.
    assert _seccomp.wanted_status("Seccomp:\t0\n") == {"Seccomp": "2"}


def test_the_difference_names_what_is_wanted_and_what_is_there():
    wanted = {"Seccomp": "2", "Seccomp_filters": "1"}
    assert _seccomp.status_difference(wanted, STATUS) == {"removed": [], "added": []}
    assert _seccomp.status_difference(wanted, "Seccomp:\t0\nSeccomp_filters:\t0\n") == {
        "removed": ["Seccomp: 2", "Seccomp_filters: 1"], "added": ["Seccomp: 0", "Seccomp_filters: 0"]}
    assert _seccomp.status_difference(wanted, "Seccomp:\t2\n") == {"removed": ["Seccomp_filters: 1"], "added": []}
