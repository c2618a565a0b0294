# SPDX-License-Identifier: GPL-3.0-or-later
"""The agent's kernel surface (issue 32, item 1): inside a real session the agent cannot
make a user namespace (unshare, clone, clone3) nor reach keyctl, bpf, io_uring,
userfaultfd or the new mount API; the same probes reach the kernel in a control container
of the same image run without any seccomp filter, so the test can fail.

The probes are perl's raw syscall() (perl-base is in every Debian image) with x86_64's
syscall numbers, and util-linux's unshare.
"""

import hashlib
import json
import re

import pytest

from spike_host import FACTS
from sessions import (PROJECT, images_and_policy, left_running, provisioned_sandbox_image, record_of, run_agent,
                      session_containers, session_module)

EPERM, ENOSYS = 1, 38
# name -> the errno the sandbox's filter answers with.
REFUSED_WITH = {
    "unshare-Urn": EPERM, "unshare-U": EPERM, "unshare_newuser": EPERM, "clone_newuser": EPERM,
    "clone3_newuser": ENOSYS, "setns": EPERM, "keyctl": EPERM, "bpf": EPERM, "io_uring_setup": EPERM,
    "userfaultfd": EPERM, "fsopen": EPERM,
}
# One line per probe: "probe NAME rc ERRNO". Each runs in a child of its own (fork: clone
# without namespace flags), so that a namespace one made does not carry into the next.
PROBE = r"""
use strict;
sub probe {
  my ($name, $code) = @_;
  my $pid = fork();
  if ($pid == 0) { $! = 0; my $rc = $code->(); printf("probe %s %d %d\n", $name, $rc, $rc < 0 ? $!+0 : 0); exit 0; }
  waitpid($pid, 0);
}
# A child made by a raw clone or clone3 leaves at once (exit_group); the parent reaps it.
sub child_exit { my $rc = shift; if ($rc == 0) { syscall(231, 0); } waitpid($rc, 0) if $rc > 0; return $rc; }
my $NEWUSER = 0x10000000; my $NEWNS = 0x20000; my $NEWNET = 0x40000000;
probe("unshare_newuser", sub { syscall(272, $NEWUSER) });
probe("clone_newuser", sub { child_exit(syscall(56, $NEWUSER | 17, 0, 0, 0, 0)) });
probe("clone3_newuser", sub { my $args = pack("Q11", $NEWUSER, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0);
                              child_exit(syscall(435, $args, length($args))) });
# setns and fsopen as the root of a new user namespace, where the kernel
# allows them; where that namespace cannot be made, as the agent itself.
probe("setns", sub { syscall(272, $NEWUSER | $NEWNET); open(my $ns, "<", "/proc/self/ns/net") or return -1;
                     syscall(308, fileno($ns), $NEWNET) });
probe("fsopen", sub { syscall(272, $NEWUSER | $NEWNS); my $type = "tmpfs"; syscall(430, $type, 0) });
probe("keyctl", sub { syscall(250, 0, -3, 1) });            # KEYCTL_GET_KEYRING_ID, session keyring
probe("bpf", sub { syscall(321, 0x7fff, 0, 0) });           # an unknown command: EINVAL once reached
probe("io_uring_setup", sub { my $params = "\0" x 120; syscall(425, 1, $params) });
probe("userfaultfd", sub { syscall(323, 1) });              # UFFD_USER_MODE_ONLY
"""
SHELL = ("perl -e '%s'; for args in -Urn -U; do unshare $args true 2>/dev/null; e=$?; "
         "echo \"probe unshare$args $e 0\"; done; grep -E '^Seccomp(_filters)?:' /proc/self/status")


def probes(output):
    """{name: (rc, errno)} from the probe's lines."""
    return dict((m.group(1), (int(m.group(2)), int(m.group(3))))
                for m in re.finditer(r"^probe (\S+) (-?\d+) (\d+)$", output, re.M))


def reached(rc, errno, name):
    """Whether a probe got past any filter: success, or the kernel's own answer."""
    if name.startswith("unshare-"):
        return rc == 0
    return rc >= 0 or errno not in (EPERM, ENOSYS)


@pytest.fixture(scope="module")
def probe_script():
    assert "'" not in PROBE
    return SHELL % PROBE


def test_the_probes_reach_the_kernel_without_a_filter(workstation, probe_script):
    """The control: the same image, the agent's user, no capability, no seccomp filter."""
    assert workstation.run(["uname", "-m"]).stdout.strip() == "x86_64"  # the probe's syscall numbers
    result = workstation.run(["podman", "run", "--rm", "--network=none", "--cap-drop=ALL",
                              "--security-opt=no-new-privileges", "--security-opt=seccomp=unconfined",
                              "--userns=keep-id:uid=1000,gid=1000", "--user=1000:1000", "--entrypoint", "sh",
                              provisioned_sandbox_image(workstation), "-c", probe_script], check=False)
    found = probes(result.stdout)
    print("control:", json.dumps(found, sort_keys=True))
    assert sorted(found) == sorted(REFUSED_WITH), result.stdout + result.stderr
    assert dict((n, v) for n, v in found.items() if not reached(v[0], v[1], n)) == {}
    assert "Seccomp:\t0" in result.stdout


def test_the_agent_cannot_reach_them_in_a_session(workstation, project, probe_script):
    result = run_agent(workstation, command=["sh", "-c", probe_script])
    assert result.returncode == 0, result.stdout[-3000:]
    record = record_of(workstation, result.stdout)
    output = workstation.path(record["transcript"]).read_text()
    found = probes(output)
    print("session:", json.dumps(found, sort_keys=True))
    assert sorted(found) == sorted(REFUSED_WITH), output
    for name, errno in REFUSED_WITH.items():
        rc, got = found[name]
        if name.startswith("unshare-"):
            assert rc != 0, (name, found[name])
        else:
            assert (rc, got) == (-1, errno), (name, found[name])
    # The harness runs under the one filter the sandbox's profile makes.
    assert "Seccomp:\t2" in output and "Seccomp_filters:\t1" in output
    # The record: the profile's file in the session's directory and its digest; the watch
    # read the sandbox's seccomp state with every reading and found it as wanted.
    seccomp = record["seccomp"]
    profile = workstation.path(seccomp["profile"]).read_text()
    assert hashlib.sha256(profile.encode()).hexdigest() == seccomp["sha256"]
    assert seccomp["derived_from"] == "/usr/share/containers/seccomp.json"
    assert f"--security-opt=seccomp={seccomp['profile']}" in next(
        argv for argv in record["commands"] if "aisb-sandbox-" + record["session_id"] in argv)
    watch = record["enforcement_watch"]
    assert watch["seccomp"] == {"Seccomp": "2", "Seccomp_filters": "1"} and watch["lost"] is None, watch


def test_a_sandbox_started_without_its_profile_is_stopped(workstation, project):
    """podman (here a wrapper, as a broken or changed podman would) starts the sandbox
    without the profile: the watch's first reading sees no filter, the session stops it."""
    unfiltered = workstation.install_program("podman-unconfined", (
        "#!/bin/sh\nfor a; do shift; case $a in --security-opt=seccomp=*) a=--security-opt=seccomp=unconfined;; "
        "esac; set -- \"$@\" \"$a\"; done\nexec /usr/bin/podman \"$@\"\n"))
    running = session_containers(workstation)
    result = session_module(workstation, **{**images_and_policy(workstation), "project": PROJECT, "executable": unfiltered,
                                            "command": ["sh", "-c", "echo harness-started; sleep 60; echo harness-finished"]})
    assert result.returncode != 0
    record = record_of(workstation, result.stdout)
    assert record["status"] == "enforcement-lost" and record["exit_code"] == 77, record["reason"]
    lost = record["enforcement_watch"]["lost"]
    assert lost["what"] == "the sandbox is not under its seccomp profile", lost
    assert lost["removed"] == ["Seccomp: 2", "Seccomp_filters: 1"] and lost["added"] == ["Seccomp: 0", "Seccomp_filters: 0"]
    assert "not under its seccomp profile" in record["reason"] and "the sandbox was stopped" in record["reason"]
    assert "harness-finished" not in workstation.path(record["transcript"]).read_text()
    assert left_running(workstation, running) == []


# The spike's seccomp probe without the profile (its leak control), in the workstation.
SECCOMP_LEAK_CONTROL = """
import json, os, sys
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_probes
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute
prober = _host_probes.Prober(Runner(subprocess_execute()), "podman", sys.argv[1], 60)
print(json.dumps(_host_probes.probe_seccomp_profile(prober, enforce=False)))
"""


def test_the_spike_measured_that_the_profile_holds_and_its_probe_sees_a_leak(workstation):
    facts = json.loads(workstation.path(FACTS).read_text())
    probe = facts["probes"]["seccomp_profile"]
    assert probe["ok"] is True, probe
    assert "nft works in the privileged stage and the agent's unshare -Urn is refused" in probe["detail"]
    assert any(arg.startswith("--security-opt=seccomp=") for arg in probe["evidence"]["command"])
    assert facts["verdict"]["model_holds"] is True
    workstation.path("/home/dev/seccomp_leak_control.py").write_text(SECCOMP_LEAK_CONTROL)
    leak = json.loads(workstation.run(["/opt/ansible/bin/python3", "/home/dev/seccomp_leak_control.py",
                                       facts["probe_image"]], timeout=300).stdout)["seccomp_profile"]
    assert leak["ok"] is False and "leak: the agent made a user namespace" in leak["detail"], leak


def test_without_podmans_default_profile_a_session_refuses_unless_allowed_unenforced(workstation, project):
    default = "/usr/share/containers/seccomp.json"
    workstation.run(["mv", default, default + ".moved"], user="root")
    try:
        refused = run_agent(workstation, command=["echo", "harness-ran"])
        allowed = session_module(workstation, **{**images_and_policy(workstation), "project": PROJECT,
                                                 "allow_unenforced": True,
                                                 "command": ["sh", "-c", "grep Seccomp /proc/self/status"]})
    finally:
        workstation.run(["mv", default + ".moved", default], user="root")
    assert refused.returncode != 0 and "harness-ran" not in refused.stdout
    assert f"podman's default seccomp profile {default} cannot be read (No such file or directory)" in refused.stdout
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    record = record_of(workstation, allowed.stdout)
    # Under podman's default profile (a filter, not the sandbox's), and the record says why.
    assert record["seccomp"] is None
    assert any("allow_unenforced: starting anyway although podman's default seccomp profile" in warning
               for warning in record["admission_warnings"]), record["admission_warnings"]
    assert not [argv for argv in record["commands"] if any(a.startswith("--security-opt=seccomp=") for a in argv)]
