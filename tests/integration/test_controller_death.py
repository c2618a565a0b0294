# SPDX-License-Identifier: GPL-3.0-or-later
"""The session ends with its controller. kill -9 of ansible-playbook's main process, of its
worker, of both (headless and interactive), of the worker and the session module together,
and a dropped SSH connection to a remote host (the ssh client, the ControlPersist master):
each time no container and no watchdog of the session is left, and its record says
controller-lost. The time each took is printed at the end of the module (the target is 5 s;
the bound here is for correctness on a loaded machine, not a speed assertion)."""

import json
import re
import shutil
import subprocess
import time

import pytest

from fleet import inventory, ssh_key, start_sshd
from sessions import PROJECT, processes, session_containers, start_in_background
from terminal import interactive_bash, open_terminal, screen, wait_for_screen
from workstation import AISB_STATE, TRANSFER_DIR, USER_UID

BOUND = 60  # seconds
ANSIBLE_PLAYBOOK = "^/opt/ansible/bin/python3 /usr/local/bin/ansible-playbook"


@pytest.fixture(scope="module")
def timings(request):
    """Case -> seconds from the kill to nothing left; written out when the module ends."""
    measured = {}
    yield measured
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and measured:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for case, seconds in measured.items():
                reporter.write_line("controller death, %-45s nothing left after %.2f s" % (case, seconds))


def sandboxes(ws):
    return {n for n in session_containers(ws) if n.startswith("aisb-sandbox-")}


def start_headless(ws, marker, *extra):
    """A headless session whose harness touches MARKER in the project, then sleeps;
    returns (ansible-playbook, session id) once the harness runs."""
    before = sandboxes(ws)
    ws.sh(f"rm -f {PROJECT}/{marker}")
    playbook = start_in_background(ws, ["sh", "-c", f"touch /project/{marker}; exec sleep 300"], *extra)
    return playbook, harness_running(ws, before, marker, playbook)


def harness_running(ws, before, marker, playbook=None):
    """The id of the session started after BEFORE, once its harness touched MARKER."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        new = sandboxes(ws) - before
        if new and ws.path(f"{PROJECT}/{marker}").exists():
            return new.pop()[len("aisb-sandbox-"):]
        if playbook is not None and playbook.poll() is not None:
            raise AssertionError("the playbook ended before its harness ran:\n" + playbook.stdout.read()[-3000:])
        time.sleep(0.2)
    raise AssertionError("the harness never ran")


def parent_of(ws, pid):
    return ws.run(["ps", "-o", "ppid=", "-p", pid]).stdout.strip()


def ancestors(ws, pid):
    """PID's parent, its parent, and so on."""
    found = []
    while True:
        pid = parent_of(ws, pid)
        if pid in ("", "0", "1"):
            return found
        found.append(pid)


def playbook_processes(ws):
    """(main, worker): ansible-playbook's main process and the worker running the task
    (its child; a headless session on a local connection is the worker's child in turn,
    forked, so it has the same command line)."""
    pids = processes(ws, ANSIBLE_PLAYBOOK)
    parents = {pid: parent_of(ws, pid) for pid in pids}
    mains = [pid for pid in pids if parents[pid] not in pids]
    workers = [pid for pid in pids if parents[pid] in mains]
    assert len(mains) == 1 and len(workers) == 1, parents
    return mains[0], workers[0]


def session_process(ws, session_id):
    """The process running the session: the parent of its sandbox's podman run."""
    podman_run = processes(ws, f"podman run --rm --name aisb-sandbox-{session_id}")
    assert len(podman_run) == 1, podman_run
    return parent_of(ws, podman_run[0])


def alive(ws, pid):
    state = ws.run(["ps", "-o", "stat=", "-p", pid], check=False).stdout.strip()
    return state != "" and not state.startswith("Z")


def left_behind(ws, session_id):
    """What of the session still exists: its containers and its watchdog."""
    containers = ws.run(["podman", "ps", "-a", "--filter", f"label=aisb.session={session_id}",
                         "--format", "{{.Names}}"]).stdout.split()
    return containers + [f"watchdog {pid}" for pid in processes(ws, f"aisb-watchdog .*{session_id}")]


def kill_and_wait(ws, pids, session_id):
    """kill -9 PIDS at once; the seconds until nothing of the session is left (or the bound)."""
    started = time.monotonic()
    ws.run(["kill", "-KILL", *pids])
    while time.monotonic() - started < BOUND and left_behind(ws, session_id):
        time.sleep(0.1)
    return time.monotonic() - started


def record(ws, session_id):
    """The session's record, once written (whoever cleans up writes it after the removal)."""
    path = ws.path(f"{AISB_STATE}/sessions/{session_id}/record.json")
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline and not path.exists():
        time.sleep(0.2)
    assert path.exists(), f"no record for session {session_id}"
    return json.loads(path.read_text())


def clean_up(ws, session_id, *pids):
    """Whatever a failed case left: this session's processes and containers, not the next case's."""
    ws.run(["kill", "-KILL", *[p for p in pids if p]], check=False)
    for pid in processes(ws, f"aisb-watchdog .*{session_id}"):
        ws.run(["kill", "-KILL", pid], check=False)
    ws.run(["podman", "rm", "--force", "--ignore", "--time", "0",
            f"aisb-sandbox-{session_id}", f"aisb-gate-{session_id}"], check=False)


@pytest.mark.parametrize("killed", ["main", "worker", "main+worker", "worker+module"])
def test_headless_session_ends_when_ansible_playbook_is_killed(workstation, project, timings, killed):
    playbook, session_id = start_headless(workstation, f".ctl-{killed}")
    main, worker = playbook_processes(workstation)
    module = session_process(workstation, session_id)
    assert parent_of(workstation, module) == worker  # headless, local: forked from the worker, no module trip
    chosen = {"main": main, "worker": worker, "module": module}
    try:
        timings["headless, kill -9 " + killed] = elapsed = kill_and_wait(
            workstation, [chosen[name] for name in killed.split("+")], session_id)
        assert left_behind(workstation, session_id) == [], f"still there {elapsed:.1f} s after the kill"
        written = record(workstation, session_id)
        assert written["status"] == "controller-lost", written
        if "module" in killed:
            assert "the watchdog removed" in written["reason"], written  # the module could not write it
        else:
            assert "the sandbox was stopped" in written["reason"], written  # the module wrote it
        # Nothing of the session or of this task stays behind.
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline and any(alive(workstation, p) for p in (module, worker)):
            time.sleep(0.2)
        assert not alive(workstation, module) and not alive(workstation, worker)
        if killed == "worker":
            # ansible-playbook itself notices its worker is gone and fails.
            output = playbook.communicate(timeout=BOUND)[0]
            assert playbook.returncode != 0 and "A worker was found in a dead state" in output, output[-2000:]
    finally:
        clean_up(workstation, session_id, main, worker, module)
        playbook.kill()
        playbook.wait()


@pytest.mark.parametrize("killed", ["main", "worker"])
def test_interactive_session_ends_when_ansible_playbook_is_killed(workstation, project, timings, killed):
    """The session runs in the worker, on ansible-playbook's terminal; the terminal stays
    open after ansible-playbook is gone (the shell in tmux goes on to sleep)."""
    tmux = f"ctl-{killed}"
    before = sandboxes(workstation)
    marker = f".ctl-interactive-{killed}"
    workstation.sh(f"rm -f {PROJECT}/{marker}")
    open_terminal(workstation, tmux, f"{interactive_bash(workstation)}; sleep 600")
    session_id, main, worker = None, None, None
    try:
        wait_for_screen(workstation, tmux, "bash", timeout=300)
        workstation.run(["tmux", "send-keys", "-t", tmux, f"touch /project/{marker}; echo typed-$((6*7))", "Enter"])
        wait_for_screen(workstation, tmux, "typed-42")
        session_id = harness_running(workstation, before, marker)
        main, worker = playbook_processes(workstation)
        assert session_process(workstation, session_id) == worker  # interactive: the worker runs the session
        timings["interactive, kill -9 " + killed] = elapsed = kill_and_wait(
            workstation, [main if killed == "main" else worker], session_id)
        assert left_behind(workstation, session_id) == [], f"still there {elapsed:.1f} s after the kill"
        written = record(workstation, session_id)
        assert written["status"] == "controller-lost", written
        if killed == "main":
            assert written["reason"].startswith(f"ansible-playbook (process {main}) is gone"), written
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline and alive(workstation, worker):
            time.sleep(0.2)
        assert not alive(workstation, worker), screen(workstation, tmux)
    finally:
        if session_id:
            clean_up(workstation, session_id, main, worker)
        workstation.run(["tmux", "kill-session", "-t", tmux], check=False)


@pytest.fixture(scope="module")
def remote(workstation, tmp_path_factory):
    """This workstation as a remote host of itself: sshd on a free port of the loopback, the
    controller (ansible-playbook in the workstation) reaching it over real SSH as the same user.
    Returns the inventory's path."""
    key = ssh_key(tmp_path_factory.mktemp("controller-ssh"))
    port = start_sshd(workstation, f"{key}.pub")
    inside = "/home/dev/.ssh/controller_ed25519"
    shutil.copy(key, workstation.path(inside))
    subprocess.run(["chown", f"{USER_UID}:{USER_UID}", str(workstation.path(inside))], check=True)
    workstation.path(inside).chmod(0o600)
    path = f"{TRANSFER_DIR}/remote-inventory.json"
    inventory(workstation.path(path), inside, {"remote": {"ansible_port": port}})
    yield path
    workstation.run(["sh", "-c", "kill $(cat /run/sshd-fleet.pid)"], user="root", check=False)


SSH_CASES = {
    # Ansible's default: ControlPersist, the worker's ssh is a client of a master that holds
    # the connection.
    "the ControlPersist master": (), "the ssh client (ControlPersist)": (),
    "the ssh client (no ControlPersist)": ("-e", json.dumps({"ansible_ssh_args": "-o ControlMaster=no"})),
    # The connection stays up: only the session's heartbeat tells the ssh client its reader is gone.
    "ansible-playbook's worker": (), "ansible-playbook's main process": (),
}


@pytest.mark.parametrize("killed", list(SSH_CASES))
def test_remote_session_ends_when_its_ssh_connection_drops(workstation, project, remote, timings, killed):
    marker = ".ctl-ssh-" + re.sub(r"\W+", "-", killed)
    playbook, session_id = start_headless(workstation, marker, "-i", remote, "-e", "aisb_hosts=remote",
                                          *SSH_CASES[killed])
    main, worker = playbook_processes(workstation)
    client = workstation.run(["pgrep", "-P", worker, "-x", "ssh"], check=False).stdout.split()
    masters = processes(workstation, r"^ssh: .*\[mux\]")
    module = session_process(workstation, session_id)
    # The session module runs under sshd, not under the worker.
    assert worker not in ancestors(workstation, module)
    assert any("sshd" in workstation.run(["ps", "-o", "args=", "-p", pid]).stdout
               for pid in ancestors(workstation, module))
    assert len(client) == 1, client
    argv = workstation.run(["ps", "-o", "args=", "-p", client[0]]).stdout
    assert ("ControlPersist" in argv) == ("no ControlPersist" not in killed), argv
    chosen = {"the ControlPersist master": masters, "ansible-playbook's worker": [worker],
              "ansible-playbook's main process": [main]}.get(killed, client)
    assert chosen, "no ControlPersist master is running"
    try:
        timings["ssh, kill -9 " + killed] = elapsed = kill_and_wait(workstation, chosen, session_id)
        assert left_behind(workstation, session_id) == [], f"still there {elapsed:.1f} s after the kill"
        written = record(workstation, session_id)
        assert written["status"] == "controller-lost", written
        assert written["reason"].startswith("the session's output has no reader left"), written
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline and alive(workstation, module):
            time.sleep(0.2)
        assert not alive(workstation, module)
    finally:
        clean_up(workstation, session_id, main, worker, module, *client)
        playbook.kill()
        playbook.wait()
