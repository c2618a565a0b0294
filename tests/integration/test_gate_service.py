# SPDX-License-Identifier: GPL-3.0-or-later
"""The long-lived gate (gate.yml) as a systemd user service, for real: a podman quadlet
that comes back when its user manager restarts (a logout, a reboot with linger), keeps
relaying only what its policy allows, stays stopped when stopped, and is gone when
absent. The workstation's user manager: tests/workstation/user_manager.py. The tests
run in a workstation of their own: a user manager makes the workstation look booted with
systemd (/run/systemd/system), and podman's network helpers then start through it."""

import re
import time

import pytest

from scenario import Internet, playbook, provisioned_variant
from sessions import allow
from user_manager import UserManager
from workstation import AISB_STATE

UNITS = "/home/dev/.config/containers/systemd"


def gate_playbook(ws, *extra):
    return playbook(ws, "gate", *allow("allowed.test"), *extra)


def gates(ws):
    """[(name, policy hash, port)] of the running long-lived gates."""
    listed = ws.run(["podman", "ps", "--filter", "label=aisb.policy",
                     "--format", '{{.Names}} {{index .Labels "aisb.policy"}} {{index .Labels "aisb.port"}}'])
    return [tuple(line.split()) for line in listed.stdout.splitlines()]


def relays_only_the_policy(ws, port, timeout=60):
    proxy = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:  # after a manager start the service may still be on its way up
        allowed = ws.run(["curl", "-s", "-x", proxy, "http://allowed.test/"], check=False)
        if "hello from allowed.test" in allowed.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "hello from allowed.test" in allowed.stdout, allowed
    denied = ws.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "http://other.test/"],
                    check=False)
    assert denied.stdout == "403"


def active(ws, name):
    return ws.run(["systemctl", "--user", "is-active", f"{name}.service"], check=False).stdout.strip()


@pytest.fixture(scope="module")
def workstation():
    """A Debian 13 workstation of this module's own, provisioned as the shared one is."""
    with provisioned_variant(lambda ws: None) as ws:
        yield ws


@pytest.fixture(scope="module")
def internet(workstation):
    with Internet(workstation) as running:
        yield running


@pytest.fixture(scope="module")
def user_manager(workstation):
    manager = UserManager(workstation)
    manager.start()
    yield manager
    manager.remove()


def test_without_a_user_manager_gate_up_fails_naming_what_to_do(workstation):
    units = workstation.path(UNITS)
    before = sorted(units.iterdir()) if units.exists() else []
    result = gate_playbook(workstation)
    assert result.returncode != 0
    assert "no systemd user manager answers for dev" in result.stdout, result.stdout[-2000:]
    assert "sudo loginctl enable-linger dev" in result.stdout
    assert (sorted(units.iterdir()) if units.exists() else []) == before
    assert gates(workstation) == []


def test_the_gate_service_survives_its_manager_and_obeys_stopped_and_absent(workstation, internet, user_manager):
    up = gate_playbook(workstation)
    assert up.returncode == 0, up.stdout[-3000:]
    assert "at boot only after: sudo loginctl enable-linger dev" in up.stdout  # nobody lingers here
    [(name, policy_hash, port)] = gates(workstation)
    assert name == f"aisb-gate-policy-{policy_hash}" and active(workstation, name) == "active"
    unit = workstation.path(f"{UNITS}/{name}.container")
    assert "WantedBy=default.target" in unit.read_text()
    relays_only_the_policy(workstation, port)

    again = gate_playbook(workstation)
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0", again.stdout), again.stdout[-2000:]

    # A re-executed manager keeps its services; a restarted one (logout, reboot) starts
    # the gate again, same policy, same port.
    workstation.run(["systemctl", "--user", "daemon-reexec"])
    assert active(workstation, name) == "active"
    relays_only_the_policy(workstation, port)
    user_manager.stop()
    assert gates(workstation) == []
    user_manager.start()
    relays_only_the_policy(workstation, port)
    assert gates(workstation) == [(name, policy_hash, port)] and active(workstation, name) == "active"

    stopped = gate_playbook(workstation, "-e", "state=stopped")
    assert stopped.returncode == 0, stopped.stdout[-2000:]
    # inactive, or failed where squid's exit on the stop counts as one: not running either way
    assert gates(workstation) == [] and active(workstation, name) != "active"
    assert unit.exists() and "WantedBy" not in unit.read_text()
    user_manager.restart()  # stopped stays stopped
    assert gates(workstation) == [] and active(workstation, name) != "active"

    restarted = gate_playbook(workstation, "-e", "state=started")
    assert restarted.returncode == 0, restarted.stdout[-2000:]
    relays_only_the_policy(workstation, port)

    absent = gate_playbook(workstation, "-e", "state=absent")
    assert absent.returncode == 0, absent.stdout[-2000:]
    assert gates(workstation) == [] and not unit.exists()
    assert workstation.run(["systemctl", "--user", "cat", f"{name}.service"], check=False).returncode != 0
    assert not workstation.path(f"{AISB_STATE}/gates/{policy_hash}").exists()
    gone = gate_playbook(workstation, "-e", "state=down")
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0", gone.stdout), gone.stdout[-2000:]
