# SPDX-License-Identifier: GPL-3.0-or-later
"""The whole benchmark suite in one run (issue 8): every figure beside its floor.

usage: bench/run [--runs N] [--slow-runs N] [--out PREFIX] [--no-fleet] [--update-docs]

Provisions three disposable workstations at once (tests/workstation/fleet.py: Debian 13,
Debian 12, Debian 13 with tun at 0600; not timed), runs on the first: session start
(bench/session.py), review mode (bench/review.py), the project's git
(bench/project_git.py), the spike (bench/spike.py), the gate
(bench/gate.py), the upload budget's quota (bench/upload_budget.py), re-provisioning (bench/reprovision.py), every harness recipe's image
and warm start (bench/recipes.py); then verify.yml over 1 to 3 of
them (bench/verify.py). The credential injector (bench/credential_injector.py) and the
project's Ansible findings (bench/project_ansible.py) and the git broker's 50 MiB push
(bench/git_broker.py) run on the build machine itself.
--no-fleet provisions only the first and leaves verify.yml out. Writes PREFIX.json and
PREFIX.md (default bench/results/latest); --update-docs also puts the table into
docs/dev/performance.md. Medians of N runs (default 5); full spikes,
re-provisioning, the recipes' warm starts and verify.yml, seconds to tens of seconds a
run, take --slow-runs (default 3).
"""

import argparse
import json
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import credential_injector
import gate
import git_broker
import project_ansible
import project_git
import recipes
import reprovision
import review
import session
import spike
import upload_budget
import verify
from measure import REPO, provisioned_workstation

COLUMNS = ("section", "figure", "value", "floor", "ratio", "target", "met")
DOC = REPO / "docs" / "dev" / "performance.md"
# --update-docs replaces what stands between these two lines of DOC with the new table.
DOC_START, DOC_END = "<!-- bench/run --update-docs: start -->\n", "<!-- bench/run --update-docs: end -->\n"


@contextmanager
def workstations(with_fleet):
    """(the workstation the sections run in, (directory, inventory) of the fleet or None)."""
    if not with_fleet:
        with provisioned_workstation() as ws:
            yield ws, None
        return
    with verify.fleet() as (hosts, directory, path, _key, _ports):
        yield hosts["debian13"], (directory, path)


def checkout_state():
    """The commit measured, and whether the working tree (what install_checkout copies)
    differed from it."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return commit + (" with uncommitted changes" if dirty else "")


def load_average():
    """The build machine's 1, 5 and 15 minute load averages: how noisy the run was."""
    return " ".join("%.2f" % load for load in os.getloadavg())


def timed_section(results, name, section):
    """SECTION's rows; its wall seconds go to results["section_s"][NAME]."""
    start = time.monotonic()
    rows = section()
    results.setdefault("section_s", {})[name] = round(time.monotonic() - start, 1)
    print("%s: %.0f s" % (name, results["section_s"][name]), flush=True)
    return rows


def cell(value, unit=""):
    if value is None:
        return ""
    return f"{value} {unit}".strip()


def markdown(results):
    sections = ", ".join("%s %.0f s" % item for item in results["section_s"].items())
    lines = [
        "Benchmark run of %(date)s: %(duration_s).0f s in all (%(setup_s).0f s of it provisioning; "
        "by section: %(sections)s), "
        "medians of %(runs)d runs (%(slow_runs)d for full spikes, re-provisioning and verify.yml)."
        % dict(results, sections=sections),
        "",
        "Host: %s; build machine: %d CPUs, load average %s at the start, %s at the end; checkout %s." % (
            results["host"], results["cpus"], results["load_average"], results["load_average_end"],
            results["checkout"]),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for figure in results["rows"]:
        floor = cell(figure["floor"], figure["unit"])
        if floor:
            floor += f" ({figure['floor_what']})"
        met = {True: "met", False: "**not met**", None: ""}[figure["met"]]
        ratio = cell(figure["ratio"]) + ("x" if figure["ratio"] is not None else "")
        lines.append("| " + " | ".join([figure["section"], figure["what"], cell(figure["value"], figure["unit"]),
                                        floor, ratio, figure["target"] or "", met]) + " |")
    return "\n".join(lines) + "\n"


def update_docs(table):
    """Put TABLE between DOC's markers."""
    text = DOC.read_text()
    head, rest = text.split(DOC_START, 1)
    DOC.write_text(head + DOC_START + table + DOC_END + rest.split(DOC_END, 1)[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--slow-runs", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "latest"))
    parser.add_argument("--no-fleet", action="store_true")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    if args.runs < 1 or args.slow_runs < 1:
        parser.error("--runs and --slow-runs: at least 1")
    start = time.monotonic()
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": args.runs,
               "slow_runs": args.slow_runs, "cpus": os.cpu_count(),
               "load_average": load_average(), "checkout": checkout_state()}
    with workstations(not args.no_fleet) as (ws, fleet):
        results["setup_s"] = round(time.monotonic() - start, 1)
        fingerprint = json.loads(ws.path("/home/dev/.local/state/aisb/host_capabilities.json").read_text())
        results["host"] = "%(distro)s, podman %(podman)s, %(runtime)s, kernel %(kernel)s" % fingerprint["fingerprint"]
        rows = []
        for name, section in (("session", lambda: session.measure(ws, args.runs)),
                              ("review", lambda: review.measure(ws, args.runs)),
                              ("project_git", lambda: project_git.measure(ws, args.runs)),
                              ("spike", lambda: spike.measure(ws, args.runs, args.slow_runs)),
                              ("gate", lambda: gate.measure(ws, args.runs)),
                              ("upload_budget", lambda: upload_budget.measure(ws, args.runs)),
                              ("provision", lambda: reprovision.measure(ws, args.slow_runs)),
                              ("recipes", lambda: recipes.measure(ws, args.slow_runs)),
                              ("credentials", lambda: credential_injector.measure(args.runs)[0]),
                              ("project_ansible", lambda: project_ansible.measure(args.runs)),
                              ("git_broker", lambda: git_broker.rows(args.slow_runs))):
            rows += timed_section(results, name, section)
        if fleet is not None:
            rows += timed_section(results, "verify", lambda: verify.measure(*fleet, args.slow_runs))
    results["duration_s"] = round(time.monotonic() - start, 1)
    results["load_average_end"] = load_average()
    results["rows"] = rows
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results))
    if args.update_docs:
        update_docs(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
