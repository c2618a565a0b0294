# SPDX-License-Identifier: GPL-3.0-or-later
"""verify.yml over real SSH against a fleet of disposable workstations: one where the
model holds, one where it holds on the tcp-forward gate path (Debian 13 with Debian 12's
passt, old_passt.py), a Debian 12 one (no pasta), a Debian 13 one whose /dev/net/tun the
user cannot open; plus inventory entries nothing answers on: a closed port, a port that
accepts and stays silent, and a host whose module hangs. The first two ran a real session
each; the first one's record was then edited by one byte, as whoever lacks the
workstation's key would, and the second keeps a record from before records were sealed."""

import json
import re
import socket
import subprocess
from contextlib import ExitStack

import pytest

from concurrent.futures import ThreadPoolExecutor

from fleet import HANGING_PYTHON, inventory, prepare, run_verify, ssh_key
from old_passt import FINGERPRINT as OLD_PASST, install_old_passt
from scenario import closed_port
from sessions import PROJECT, record_path, run_agent
from workstation import AISB_STATE, USER_UID, Workstation

TIMEOUT = 20
# A record as the collection wrote it before records were sealed (no schema_version: 1).
UNSEALED = {"session_id": "20261101T090000-0000000a", "status": "exited", "exit_code": 0, "gate": None}


def real_session(ws):
    """One session through run_agent.yml on WS (the harness provision built): its record's path."""
    ws.run(["mkdir", "-p", PROJECT])
    done = run_agent(ws, "-e", "aisb_harness=shell", command=["true"])
    assert done.returncode == 0, done.stdout[-3000:]
    return record_path(done.stdout)


def edit_one_byte(ws, path):
    """The record at PATH with its exit code's one digit changed, as its user could."""
    data = ws.path(path).read_bytes()
    assert data.count(b'"exit_code": 0,') == 1, data
    ws.path(path).write_bytes(data.replace(b'"exit_code": 0,', b'"exit_code": 1,'))


def leave_an_unsealed_record(ws, record):
    """A session directory holding RECORD, as an older collection left it."""
    directory = ws.path(f"{AISB_STATE}/sessions/{record['session_id']}")
    directory.mkdir(mode=0o700)
    (directory / "record.json").write_text(json.dumps(record, indent=2))
    subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(directory)], check=True)


def markdown_rows(text):
    """host -> {column: cell} from the report's table."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    columns = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
    rows = [dict(zip(columns, (cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]))) for line in lines[1:]]
    return dict((row["host"], row) for row in rows)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The four workstations provisioned and reachable over SSH, and an inventory."""
    directory = tmp_path_factory.mktemp("fleet")
    key = ssh_key(directory)
    with ExitStack() as stack, socket.socket() as silent:
        # Started here, in the test's own thread: each workstation dies with its starter.
        hosts = {
            "debian13": (stack.enter_context(Workstation("trixie")), (), None),
            "debian13-old-passt": (stack.enter_context(Workstation("trixie")), (), None, install_old_passt),
            "debian12": (stack.enter_context(Workstation("bookworm")), ("-e", "host_require_pasta=false"), None),
            "debian13-tun": (stack.enter_context(Workstation("trixie")), (), "chmod 0600 /dev/net/tun"),
        }
        ports = prepare(hosts, f"{key}.pub")
        with ThreadPoolExecutor(max_workers=2) as pool:
            edited, intact = pool.map(real_session, [hosts["debian13"][0], hosts["debian13-old-passt"][0]])
        edit_one_byte(hosts["debian13"][0], edited)
        leave_an_unsealed_record(hosts["debian13-old-passt"][0], UNSEALED)
        # Accepts TCP and never speaks SSH: a host that hangs before it can be asked anything.
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        path = inventory(directory / "fleet.yml", key, {
            "debian13": {"ansible_port": ports["debian13"]},
            "debian13-old-passt": {"ansible_port": ports["debian13-old-passt"]},
            "debian12": {"ansible_port": ports["debian12"]},
            "debian13-tun": {"ansible_port": ports["debian13-tun"]},
            "debian12-hung": {"ansible_port": ports["debian12"], "ansible_python_interpreter": HANGING_PYTHON,
                              "verify_timeout": TIMEOUT},
            "closed": {"ansible_port": stack.enter_context(closed_port())},
            "silent": {"ansible_port": silent.getsockname()[1]},
        })
        fresh = run_verify(directory, path)
        yield directory, path, fresh, {"edited": edited, "intact": intact}


@pytest.fixture(scope="module")
def report(fleet):
    directory, _path, fresh, _records = fleet
    assert (directory / "aisb-fleet-report" / "fleet-report.json").exists(), fresh.stdout[-4000:] + fresh.stderr
    return json.loads((directory / "aisb-fleet-report" / "fleet-report.json").read_text())


@pytest.fixture(scope="module")
def rows(fleet, report):
    return markdown_rows((fleet[0] / "aisb-fleet-report" / "fleet-report.md").read_text())


def entry(report, host):
    return next(item for item in report["hosts"] if item["host"] == host)


def test_every_inventory_host_is_a_row_in_inventory_order(report, rows):
    names = ["debian13", "debian13-old-passt", "debian12", "debian13-tun", "debian12-hung", "closed", "silent"]
    assert [item["host"] for item in report["hosts"]] == names
    assert list(rows) == names


def test_summary_counts_every_outcome(fleet, report):
    assert report["summary"] == {"hosts": 7, "hold": 2, "do_not_hold": 2, "unreachable": 2, "probe_failed": 1,
                                 "records_failed": 2}
    markdown = (fleet[0] / "aisb-fleet-report" / "fleet-report.md").read_text()
    assert "7 hosts, 2 hold, 2 do not, 2 unreachable, 1 probe failed, 2 with records failing their check" in markdown


def test_a_host_that_does_not_hold_fails_the_run(fleet):
    fresh = fleet[2]
    assert fresh.returncode == 2, fresh.stdout[-3000:]
    assert "the networking model does not hold on every host" in fresh.stdout


def test_a_record_edited_by_one_byte_fails_its_host_naming_it(fleet, report, rows):
    """The attacker's edit: one digit of a real session's record. That host fails, naming
    the record; its own task says so too; the play fails."""
    edited = fleet[3]["edited"]
    records = entry(report, "debian13")["records"]
    assert records["counts"] == {"checked": 1, "signed": 0, "unsigned": 0, "failed": 1}, records
    assert [failed["record"] for failed in records["failed_records"]] == [edited]
    assert "its MAC does not match its content" in " ".join(records["failed_records"][0]["problems"])
    assert rows["debian13"]["session records"] == "0 signed, 0 unsigned, **1 failed**"
    assert f"record {edited}: " in rows["debian13"]["reasons"]
    fresh = fleet[2]
    assert fresh.returncode == 2
    assert "session records fail their check on debian13, debian12-hung" in fresh.stdout, fresh.stdout[-3000:]
    task = fresh.stdout.split("TASK [Check the session records kept on the host]")[1].split("TASK [")[0]
    failed = task.split("fatal: [debian13]: FAILED!")[1].split("fatal: [")[0]
    assert edited in failed and "fatal: [debian13-old-passt]" not in task, task[:3000]


def test_the_other_hosts_records_pass_an_unsealed_one_reported_as_such(fleet, report, rows):
    records = entry(report, "debian13-old-passt")["records"]
    assert records["counts"] == {"checked": 2, "signed": 1, "unsigned": 1, "failed": 0}, records
    assert records["unsigned_records"] == [
        f"{AISB_STATE}/sessions/{UNSEALED['session_id']}/record.json"]
    assert rows["debian13-old-passt"]["session records"] == "1 signed, 1 unsigned"
    for host in ("debian12", "debian13-tun"):
        assert entry(report, host)["records"]["counts"]["failed"] == 0
        assert rows[host]["session records"] == "0 signed, 0 unsigned"
    assert rows["closed"]["session records"] == ""


def test_debian13_holds(report, rows):
    item = entry(report, "debian13")
    assert item["status"] == "holds" and item["cached"] is False and item["reasons"] == []
    assert item["fingerprint"]["distro"] == "debian 13" and item["fingerprint"]["podman"] == "5.4.2"
    assert item["verdict"]["gate_path"] == "map-host-loopback"
    row = rows["debian13"]
    assert (row["distro"], row["podman"], row["gate path"], row["model holds"]) == \
        ("debian 13", "5.4.2", "map-host-loopback", "yes")
    assert row["passt"] == item["fingerprint"]["passt"] and "passt" in row["passt"]


def test_debian13_with_the_old_passt_holds_on_tcp_forward(report, rows):
    item = entry(report, "debian13-old-passt")
    assert item["status"] == "holds" and item["reasons"] == [], item
    assert item["fingerprint"]["passt"] == OLD_PASST
    assert item["verdict"]["gate_path"] == "tcp-forward" and item["verdict"]["no_gate_holds"] is False
    assert item["probes"]["tcp_forward_sandbox"]["ok"] is True
    row = rows["debian13-old-passt"]
    assert (row["distro"], row["passt"], row["gate path"], row["model holds"]) == \
        ("debian 13", OLD_PASST, "tcp-forward", "yes")


def test_every_probe_comes_with_its_evidence(report):
    probes = entry(report, "debian13")["probes"]
    assert len(probes) >= 20
    for name, probe in probes.items():
        if name != "selinux":
            assert probe["evidence"]["command"] and "rc" in probe["evidence"], name


def test_debian12_does_not_hold_because_of_pasta(report, rows):
    item = entry(report, "debian12")
    assert item["status"] == "does not hold" and item["fingerprint"]["podman"] == "4.3.1"
    assert item["reasons"][0].startswith("pasta: the container did not start"), item["reasons"]
    row = rows["debian12"]
    assert (row["distro"], row["gate path"], row["model holds"]) == ("debian 12", "none", "**no**")
    assert row["reasons"].startswith("pasta: ") and "pasta network mode" in row["reasons"]


def test_tun_fault_is_named(report, rows):
    item = entry(report, "debian13-tun")
    assert item["status"] == "does not hold"
    assert item["reasons"][0].startswith("tun: /dev/net/tun cannot be opened by this user"), item["reasons"]
    assert rows["debian13-tun"]["model holds"] == "**no**"
    assert rows["debian13-tun"]["reasons"].startswith("tun: ")


def test_unreachable_hosts_are_reported_not_dropped(report, rows):
    closed, silent = entry(report, "closed"), entry(report, "silent")
    assert closed["status"] == silent["status"] == "unreachable"
    assert "Connection refused" in closed["error"]
    # ssh's own bound (Ansible's connection timeout) ended the wait for a banner.
    assert "timed out" in silent["error"].lower(), silent["error"]
    assert rows["closed"]["model holds"] == rows["silent"]["model holds"] == "**unreachable**"


def test_a_hung_module_is_bounded_by_verify_timeout(report, rows):
    item = entry(report, "debian12-hung")
    assert item["status"] == "probe failed"
    # 2.17/2.18 say "expected time frame (N)", 2.19 and later "Timed out after N second(s)".
    assert "time" in item["error"].lower() and str(TIMEOUT) in item["error"], item["error"]
    assert rows["debian12-hung"]["model holds"] == "**probe failed**"


def test_cached_run_can_be_told_not_to_fail(fleet):
    directory, path, _fresh, _records = fleet
    again = run_verify(directory, path, "--limit", "debian13-old-passt,debian12,debian13-tun,closed",
                       "-e", "verify_cached=true", "-e", "verify_require_all=false",
                       "-e", "verify_report_dir=cached")
    assert again.returncode == 0, again.stdout[-3000:]
    cached = json.loads((directory / "cached" / "fleet-report.json").read_text())
    assert [item["host"] for item in cached["hosts"]] == ["debian13-old-passt", "debian12", "debian13-tun", "closed"]
    assert all(item["cached"] for item in cached["hosts"][:3])
    assert [item["status"] for item in cached["hosts"]] == ["holds", "does not hold", "does not hold", "unreachable"]
