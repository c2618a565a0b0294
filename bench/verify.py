# SPDX-License-Identifier: GPL-3.0-or-later
"""How verify.yml's wall time grows with the fleet.

usage: python3 bench/verify.py [--report-only]   (as root on the build machine, with the
test venv's python: its ansible-playbook is the controller; bench/run runs the fleet
part with the rest)

1. The report step alone, in-process: fleet_report() and both renderers over 1 to 1000
   hosts built from the stored facts of real hosts (docs/facts/*.json).
2. Unless --report-only: a real fleet over SSH (tests/workstation/fleet.py: Debian 13
   provisioned, Debian 12, Debian 13 with tun at 0600), then verify.yml against 1, 2
   and 3 of them, fresh and cached, beside `ansible -m ping` over the same hosts; then,
   by simulation, cached runs over 10 to 100 inventory aliases spread over the same
   three hosts (forks 25).
Prints figures; asserts nothing.
"""

import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

from measure import median, row

REPO = Path(__file__).resolve().parents[1]

_collections = Path(tempfile.mkdtemp(prefix="aisb-bench-"))
(_collections / "ansible_collections" / "aisb").mkdir(parents=True)
(_collections / "ansible_collections" / "aisb" / "sandbox").symlink_to(REPO)
sys.path.insert(0, str(_collections))

from ansible_collections.aisb.sandbox.plugins.module_utils.fleet import (  # noqa: E402  pylint: disable=wrong-import-position
    _fleet_report)
from fleet import controller_env, inventory, prepare, run_verify, ssh_key  # noqa: E402  pylint: disable=wrong-import-position
from workstation import Workstation  # noqa: E402  pylint: disable=wrong-import-position

HOSTS = (("debian13", "trixie", (), None), ("debian12", "bookworm", ("-e", "host_require_pasta=false"), None),
         ("debian13-tun", "trixie", (), "chmod 0600 /dev/net/tun"))


def report_step():
    facts = [json.loads((REPO / "docs" / "facts" / name).read_text()) for name in ("debian13.json", "debian12.json")]
    print("report step (fleet_report + JSON + Markdown, in-process, real facts; median of 5):")
    for count in (1, 10, 100, 1000):
        answers = [("host%04d" % i, {"cached": True, "ansible_facts": {"aisb_host": facts[i % 2]}})
                   for i in range(count)]
        times = []
        for _run in range(5):
            start = time.perf_counter()
            built = _fleet_report.fleet_report(answers, "now")
            size = len(_fleet_report.render_json(built)) + len(_fleet_report.render_markdown(built))
            times.append(time.perf_counter() - start)
        print("  %5d hosts  %8.2f ms  %6.2f ms/host  %8d bytes"
              % (count, 1000 * sorted(times)[2], 1000 * sorted(times)[2] / count, size))


def timed_verify(directory, path, *extra):
    start = time.monotonic()
    done = run_verify(directory, path, "-e", "verify_require_all=false", *extra)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-2000:])
    return elapsed


def timed_ping(directory, path, *extra):
    """Ansible's own floor over SSH: the ping module on the same hosts."""
    ansible = Path(sys.executable).parent / "ansible"
    start = time.monotonic()
    subprocess.run([str(ansible), "-i", str(path), "all", "-m", "ansible.builtin.ping", *extra], cwd=directory,
                   env=controller_env(directory), capture_output=True, check=True, timeout=600)
    return time.monotonic() - start


@contextmanager
def fleet():
    """The three workstations provisioned (harness shell) and reachable over SSH. Yields
    (workstations by name, a directory for Ansible's files, the inventory's path, the
    private key, sshd ports by name). Workstations die with the thread that started
    them: this one."""
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aisb-bench-fleet-")))
        key = ssh_key(directory)
        hosts = dict((name, (stack.enter_context(Workstation(suite)), extra, fault))
                     for name, suite, extra, fault in HOSTS)
        ports = prepare(hosts, f"{key}.pub")
        hostvars = dict((name, {"ansible_port": port}) for name, port in ports.items())
        path = inventory(directory / "fleet.yml", key, hostvars)
        yield dict((name, host[0]) for name, host in hosts.items()), directory, path, key, ports


def measure(directory, path, runs):
    """Figure rows: verify.yml over 1, 2 and 3 hosts of the fleet, fresh and cached."""
    names = [name for name, _suite, _extra, _fault in HOSTS]
    rows = []
    for count in (1, 2, 3):
        limit = ("--limit", ",".join(names[:count]))
        floor_runs = [timed_ping(directory, path, *limit) for _run in range(runs)]
        floor = median(floor_runs)
        for mode, extra in (("fresh", ()), ("cached", ("-e", "verify_cached=true"))):
            runs_seconds = [timed_verify(directory, path, *limit, *extra) for _run in range(runs)]
            seconds = median(runs_seconds)
            rows.append(row("verify", f"verify.yml, {mode}, {count} host(s) ({', '.join(names[:count])})",
                            round(seconds, 1), "s", round(floor, 2), "`ansible -m ping`, same hosts over SSH",
                            None, None, runs, runs_seconds, floor_runs))
    return rows


def aliases(directory, key, ports):
    names = [name for name, _suite, _extra, _fault in HOSTS]
    path = directory / "aliases.yml"
    print("verify.yml, cached, N inventory aliases over the 3 hosts (forks 25):")
    for count in (10, 50, 100):
        inventory(path, key, dict(("alias%03d" % i, {"ansible_port": ports[names[i % 3]]}) for i in range(count)))
        seconds = timed_verify(directory, path, "-e", "verify_cached=true", "--forks", "25")
        print("  %3d hosts  %6.1f s  %5.2f s/host" % (count, seconds, seconds / count))


def main():
    report_step()
    if "--report-only" not in sys.argv[1:]:
        start = time.monotonic()
        with fleet() as (_workstations, directory, path, key, ports):
            print("fleet of 3 provisioned and reachable over SSH in %.0f s" % (time.monotonic() - start))
            print(json.dumps(measure(directory, path, 1), indent=2))
            aliases(directory, key, ports)


if __name__ == "__main__":
    main()
