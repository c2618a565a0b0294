# SPDX-License-Identifier: GPL-3.0-or-later
"""The ansible-core the collection claims is the ansible-core it is tested on."""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def series(text):
    """(major, minor) of "2.19" or "2.19.0"."""
    return tuple(int(part) for part in text.split(".")[:2])


def matrix():
    rows = [line.split() for line in (REPO / "tests" / "ansible-core-matrix").read_text().splitlines()
            if line and not line.startswith("#")]
    return [(series(core), python) for core, python in rows]


def test_the_matrix_starts_at_the_claimed_floor_and_skips_no_series():
    claim = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert claim.startswith(">=") and "," not in claim  # a floor and no ceiling
    cores = [core for core, _python in matrix()]
    assert cores[0] == series(claim[2:])
    assert cores == [(2, minor) for minor in range(cores[0][1], cores[0][1] + len(cores))]


def test_the_main_toolchain_is_the_first_row():
    pins = [line for line in (REPO / "tests" / "requirements.txt").read_text().splitlines()
            if line.startswith("ansible-core")]
    (floor, _python), = matrix()[:1]
    assert pins == ["ansible-core>=%d.%d,<%d.%d" % (floor + (floor[0], floor[1] + 1))]


def test_roles_claim_the_same_floor():
    (floor, _python), = matrix()[:1]
    for meta in sorted(REPO.glob("roles/*/meta/main.yml")):
        claimed = yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"]
        assert series(claimed) == floor, meta
