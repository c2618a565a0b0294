# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures for the integration tests: a provisioned disposable Debian 13 workstation."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "workstation"))

from workstation import TRANSFER_DIR, Workstation  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory):
    """The collection as `ansible-galaxy collection build` makes it from this checkout."""
    out = tmp_path_factory.mktemp("collection")
    subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", str(out), str(REPO)],
                   check=True, capture_output=True)
    return next(out.glob("aisb-sandbox-*.tar.gz"))


def install_collection(ws, tarball):
    """Install the built tarball for the workstation user, as a user would."""
    inside = f"{TRANSFER_DIR}/{tarball.name}"
    ws.path(inside).write_bytes(tarball.read_bytes())
    ws.run(["ansible-galaxy", "collection", "install", "--force", inside])


def provision(ws, *extra):
    """Run the collection's own provision.yml inside the workstation."""
    return ws.run(["ansible-playbook", "aisb.sandbox.provision", *extra], check=False,
                  env={"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0",
                       "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"})


@pytest.fixture(scope="session")
def workstation(collection_tarball):
    """A Debian 13 workstation provisioned from bare by provision.yml, base image loaded."""
    with Workstation("trixie") as ws:
        install_collection(ws, collection_tarball)
        ws.check_mode_provision = provision(ws, "--check")
        ws.podman_after_check_mode = ws.run(["sh", "-c", "command -v podman"], check=False).returncode == 0
        first = provision(ws)
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        ws.first_provision = first
        ws.load_base_image()
        yield ws
