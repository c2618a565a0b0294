# SPDX-License-Identifier: GPL-3.0-or-later
"""Fault injection: whatever breaks mid-session (the gate frozen, the sandbox killed,
podman failing, the host changed under the facts, the disk full), nothing stays
running, no egress opens, and the session ends with a status that says what happened.
The gate killed mid-session is test_session.test_gate_killed_mid_session_ends_it_with_a_clear_status.
Each fault that involves the session's network runs over both gate paths (gate_path)."""

import time

import pytest

import tally
from sessions import (PROJECT, allow, images_and_policy, left_running, new_sandbox, record_of, run_agent,
                      session_containers, session_dirs, session_module, start_in_background, through)
from workstation import AISB_STATE


def wait_for_file(ws, path, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ws.path(path).exists():
            return
        time.sleep(0.2)
    raise AssertionError(f"{path} never appeared")


def test_gate_stopped_mid_session_opens_nothing_and_leaves_nothing(workstation, internet, project, gate_path):
    # After the gate is frozen, the sandbox's requests through it time out and no route
    # around it exists; the session still ends and removes the stopped gate.
    script = ("curl -s -o /dev/null http://allowed.test/c-before-stop; touch /project/.fault-ready; "
              "for _ in $(seq 300); do [ -e /project/.fault-go ] && break; sleep 0.2; done; "
              "echo after=$(curl -s -m 5 -o /dev/null -w '%{http_code}' http://allowed.test/c-after-stop); "
              f"curl -s -m 5 --noproxy '*' http://{internet.address}/c-after-stop-direct && echo direct=open "
              "|| echo direct=blocked")
    workstation.sh(f"rm -f {PROJECT}/.fault-*")
    before, running = len(internet.requests()), session_containers(workstation)
    playbook = start_in_background(workstation, ["bash", "-c", script], *allow("allowed.test"), *through(gate_path))
    try:
        sandbox = new_sandbox(workstation, running)
        wait_for_file(workstation, f"{PROJECT}/.fault-ready")
        workstation.run(["podman", "kill", "--signal", "STOP", sandbox.replace("aisb-sandbox-", "aisb-gate-")])
        workstation.path(f"{PROJECT}/.fault-go").touch()
        output = playbook.communicate(timeout=120)[0]
    finally:
        playbook.kill()
    record = record_of(workstation, output)
    transcript = workstation.path(record["transcript"]).read_text()
    paths = [r["path"] for r in internet.requests()[before:]]
    tally.record("gate-stopped", leaked=any("after-stop" in p for p in paths), gate_path=gate_path)
    assert paths == ["/c-before-stop"]
    assert "after=000" in transcript and "direct=blocked" in transcript, transcript
    assert record["status"] == "exited" and record["exit_code"] == 0, record
    assert left_running(workstation, running) == []


def test_sandbox_killed_ends_the_session_and_removes_the_gate(workstation, project, gate_path):
    running = session_containers(workstation)
    playbook = start_in_background(workstation, ["sleep", "300"], *through(gate_path))
    try:
        sandbox = new_sandbox(workstation, running)
        workstation.run(["podman", "kill", sandbox])
        output = playbook.communicate(timeout=120)[0]
    finally:
        playbook.kill()
    record = record_of(workstation, output)
    assert record["exit_code"] == 137, record
    assert record["reason"] == "the sandbox was killed by signal 9", record
    assert left_running(workstation, running) == []


def working_session(ws, **args):
    """The session module itself, as a task would run it, with ARGS over a working default."""
    return session_module(ws, **{**images_and_policy(ws), "project": PROJECT, "command": ["true"], **args})


def wrapper(ws, name, body):
    """A podman wrapper, the system program NAME: BODY (sh) runs first, then the real podman."""
    return ws.install_program(name, f"#!/bin/sh\n{body}\nexec /usr/bin/podman \"$@\"\n")


@pytest.mark.parametrize("which", ["gate", "sandbox"])
def test_podman_failing_to_run_a_container_ends_with_a_clear_status(workstation, project, which, gate_path):
    failing = wrapper(workstation, f"podman-fails-{which}",
                      f'case " $* " in *" --name aisb-{which}-"*) echo "injected: podman cannot run the {which}" >&2;'
                      " exit 125;; esac")
    running = session_containers(workstation)
    result = working_session(workstation, executable=failing, gate_path=gate_path)
    assert result.returncode != 0
    assert left_running(workstation, running) == []
    if which == "gate":
        assert '"status": "failed"' in result.stdout and f"injected: podman cannot run the {which}" in result.stdout
    else:
        record = record_of(workstation, result.stdout)
        assert record["exit_code"] == 125 and record["reason"] == "podman could not run the sandbox", record
        assert f"injected: podman cannot run the {which}" in workstation.path(record["transcript"]).read_text()


SANDBOX_RUN = '" $* " in *" --name aisb-sandbox-"*)'


def test_a_sandbox_slow_to_create_is_waited_for_not_taken_for_lost(workstation, project):
    """podman taking 40 s to create the sandbox (31 to 35 s were measured on a loaded host):
    the wait for the entrypoint's report counts from the container's start, so the session
    runs as usual and is watched (on the code before, the watch started 30 s after podman
    run, found no pid file and stopped the session as enforcement-lost)."""
    slow = wrapper(workstation, "podman-slow-sandbox", f"case {SANDBOX_RUN} sleep 40;; esac")
    result = working_session(workstation, executable=slow, command=["sh", "-c", "echo harness-$((6*7))"])
    record = record_of(workstation, result.stdout)
    assert result.returncode == 0 and record["status"] == "exited", record["reason"]
    assert record["enforcement_watch"]["watched"] is True and record["enforcement_watch"]["lost"] is None
    assert "harness-42" in workstation.path(record["transcript"]).read_text()


@pytest.mark.parametrize("descriptor, status, needle", [
    # No report asked for (podman lost the variable): the harness runs, unwatched, until
    # the session stops it 30 s after the container started.
    ("", "enforcement-unreported", "the entrypoint never reported its table within 30 s of the sandbox's start"),
    # A report asked for on a descriptor it cannot write: the entrypoint refuses to start.
    ("5", "exited", "enforcement could not be installed or verified"),
])
def test_a_sandbox_that_never_reports_its_table_is_stopped(workstation, project, descriptor, status, needle):
    rewrite = wrapper(workstation, f"podman-report-fd-{descriptor or 'none'}",
                      f"case {SANDBOX_RUN} for a; do shift; [ \"$a\" = AISB_REPORT_FD=3 ] && "
                      f"a=AISB_REPORT_FD={descriptor}; set -- \"$@\" \"$a\"; done;; esac")
    running = session_containers(workstation)
    result = working_session(workstation, executable=rewrite,
                             command=["sh", "-c", "echo harness-started; sleep 90; echo harness-finished"])
    assert result.returncode != 0
    record = record_of(workstation, result.stdout)
    assert record["status"] == status and record["exit_code"] == 77 and needle in record["reason"], record["reason"]
    transcript = workstation.path(record["transcript"]).read_text()
    assert "harness-finished" not in transcript
    if descriptor:
        assert "harness-started" not in transcript and "could not be reported to the session" in transcript
    assert left_running(workstation, running) == []


@pytest.mark.parametrize("component,pattern", [
    ("podman", r's/"Version": "[0-9][^"]*"/"Version": "0.0.1-injected"/'),
    ("passt", r's/"package": "passt[^"]*"/"package": "passt_0.0.0-injected"/'),
])
def test_podman_or_passt_changed_after_the_spike_is_refused(workstation, project, component, pattern):
    changed = wrapper(workstation, f"podman-changed-{component}",
                      f'if [ "$1" = info ]; then podman "$@" | sed -e \'{pattern}\'; exit; fi')
    before, running = session_dirs(workstation), session_containers(workstation)
    result = working_session(workstation, executable=changed)
    assert result.returncode != 0
    assert "fingerprint is stale" in result.stdout and component in result.stdout, result.stdout[-2000:]
    assert session_dirs(workstation) == before
    assert left_running(workstation, running) == []


def test_disk_full_while_writing_the_record(workstation, project, gate_path):
    sessions = f"{AISB_STATE}/sessions"
    # Five pages and the sandbox's seccomp profile: the gate's configuration, the policy
    # and a two-page transcript fill four; the record (image labels, commands, the
    # ruleset) needs more than the last.
    profile = int(workstation.run(
        ["/opt/ansible/bin/python3", "-c", "from ansible_collections.aisb.sandbox.plugins.module_utils.common._seccomp "
         "import load_profile; print(len(load_profile()[0].encode()))"],
        env={"PYTHONPATH": "/home/dev/.ansible/collections"}).stdout)
    size = 5 * 4096 + -(-profile // 4096) * 4096
    workstation.run(["mount", "-t", "tmpfs", "-o", f"size={size},uid=1000,gid=1000,mode=0700", "tmpfs", sessions],
                    user="root")
    running = session_containers(workstation)
    try:
        result = run_agent(workstation, *allow("allowed.test"), *through(gate_path),
                           command=["bash", "-c", "head -c 8000 /dev/zero | tr '\\0' x"])
        assert result.returncode != 0
        assert "the record could not be written" in result.stdout, result.stdout[-3000:]
        assert "No space left on device" in result.stdout
        assert left_running(workstation, running) == []
    finally:
        workstation.run(["umount", sessions], user="root")
