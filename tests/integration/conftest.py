# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures for the integration tests: a provisioned disposable Debian 13 workstation.
Their helpers live in tests/workstation (sessions.py, scenario.py, ...), not here."""

import json
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "workstation"))
sys.path.insert(0, str(TESTS))

import collection_path  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

import tally  # noqa: E402  pylint: disable=wrong-import-position
from scenario import Internet, provision  # noqa: E402  pylint: disable=wrong-import-position
from sessions import PROJECT  # noqa: E402  pylint: disable=wrong-import-position
from workstation import Workstation, install_checkout  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def workstation():
    """A Debian 13 workstation provisioned from bare by this checkout's provision.yml."""
    with Workstation("trixie") as ws:
        install_checkout(ws)
        ws.check_mode_provision = provision(ws, "--check")
        ws.podman_after_check_mode = ws.run(["sh", "-c", "command -v podman"], check=False).returncode == 0
        # Images come from an earlier run's storage when their inputs are unchanged
        # (their tags are content hashes: a stale one is never used, only rebuilt).
        ws.seeded = ws.seed_container_storage()
        first = provision(ws)
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        ws.first_provision = first
        if not ws.seeded:
            ws.save_container_storage()
        yield ws


@pytest.fixture(scope="session")
def internet(workstation):
    with Internet(workstation) as net:
        yield net


@pytest.fixture(scope="module", params=["map-host-loopback", "tcp-forward"])
def gate_path(request):
    """Each gate path in turn (the workstation's facts measure both): the tests that take
    it run their sessions over it (sessions.through), the mapped one first."""
    return request.param


@pytest.fixture(scope="module")
def profile():
    """What the workstation is, when it is not the reference Debian 13: the battery's
    tally names it beside the gate path."""
    return None


@pytest.fixture(scope="module")
def project(workstation):
    """The project directory the sessions run on (PROJECT)."""
    workstation.sh(f"mkdir -p {PROJECT} && echo 'print(1)' > {PROJECT}/main.py")
    return PROJECT


def pytest_sessionfinish(session):
    """On a pytest-xdist worker: hand its battery cases to the controller, which prints
    the summary for the whole run."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tally"] = json.dumps(tally.CASES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # pylint: disable=unused-argument
    """pytest-xdist's: a worker ended; its battery cases join the run's."""
    tally.merge(json.loads(getattr(node, "workeroutput", {}).get("tally", "{}")))


def pytest_terminal_summary(terminalreporter):
    """The bypass battery's count of real-traffic cases and leaks, when it ran."""
    line = tally.summary()
    if line:
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(items):
    """When one pytest runs both (pytest tests/ -n 2), the integration tests before the unit
    tests, each part in its own order: the integration files start first and the quick unit
    tests fill the end. (tests/run runs them apart, the integration tests beside the rest.)"""
    items.sort(key=lambda item: "/tests/integration/" not in str(item.path))
