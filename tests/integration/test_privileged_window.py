# SPDX-License-Identifier: GPL-3.0-or-later
"""Nothing from the operator or the project runs while a capability is held.

The agent controls every file in the project; an operator may plausibly point an
environment variable into it (a project's own tools on PATH, say). Each case plants
files in the project and sets one such variable through aisb_environment, then runs a
session whose harness tries to reach the test internet directly. Each planted file,
whoever runs it, appends where it ran, its uid and its effective capabilities to the
project's .markers and tries to delete the sandbox's table. A case passes when no
marker comes from the host or from a process holding a capability, the harness's
direct request never arrives (real traffic), and the variable did reach the harness
(after the drop it is the harness's business).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import tally
from sessions import session_dirs, start_in_background
from workstation import AISB_STATE, TRANSFER_DIR

HOSTILE = Path(__file__).resolve().parent / "hostile"
PROJECTS = "/home/dev/src/hostile"
# Every command the entrypoint and harness-exec run, the interpreter included (the old
# entrypoint found bash through PATH); and what the session runs on the host.
ENTRYPOINT_COMMANDS = ["bash", "cat", "nft", "jq", "sort", "diff", "sed", "timeout", "grep", "sleep", "setpriv",
                       "env"]
HOST_COMMANDS = ["bash", "sh", "setpriv", "podman", "conmon", "pasta", "crun"]
# (case, planted command names in a PATH directory of the project (None: none),
# the operator's environment: {name: value})
CASES = [(f"path-{name}", [name], {"PATH": "/project/bin-{case}:/usr/local/bin:/usr/bin:/bin"})
         for name in ENTRYPOINT_COMMANDS] + [
    ("path-cwd", ENTRYPOINT_COMMANDS, {"PATH": ":/usr/bin:/bin"}),
    ("path-host", HOST_COMMANDS, {"PATH": PROJECTS + "/{case}/bin-{case}:/usr/bin:/bin"}),
    ("ifs", ["usr", "local", "lib", "aisb", "sbin", "bin", "etc"], {"IFS": "/", "PATH": "/project/bin-{case}:/usr/bin:/bin"}),
    ("bash-env", None, {"BASH_ENV": "/project/rc.sh"}),
    ("env", None, {"ENV": "/project/rc.sh"}),
    ("shellopts-ps4", None, {"SHELLOPTS": "xtrace", "BASHOPTS": "extdebug", "PS4": "$(/project/bin/so)"}),
    ("ld-preload", None, {"LD_PRELOAD": "/project/lib/evil.so"}),
    ("ld-preload-host", None, {"LD_PRELOAD": PROJECTS + "/{case}/lib/evil.so"}),
    ("ld-library-path", None, {"LD_LIBRARY_PATH": "/project/lib"}),
    ("ld-audit", None, {"LD_AUDIT": "/project/lib/evil.so"}),
    ("gconv-path", None, {"GCONV_PATH": "/project/gconv"}),
    ("node-options", None, {"NODE_OPTIONS": "--require=/project/evil.js"}),
    ("python", None, {"PYTHONPATH": "/project/py", "PYTHONSTARTUP": "/project/py/startup.py"}),
    ("home", None, {"HOME": "/project"}),
    ("tmpdir", None, {"TMPDIR": "/project/tmp"}),
]


# Sessions run this many at a time, each case in a project of its own.
BATCH = 4


def project_of(case):
    return f"{PROJECTS}/{case}"


def plant(ws, case, names):
    """The project an attacker prepared for CASE: marker scripts (NAMES of commands in
    bin-CASE, or in the project's root for the working-directory case), rc files,
    libraries, node and python start-up files."""
    project = project_of(case)
    ws.run(["mkdir", "-p", project])  # as the workstation user: its parents stay its own
    root = ws.path(project)
    (root / "bin").mkdir()
    mark = (HOSTILE / "mark.sh").read_text().replace("@PROJECT@", project)
    (root / "bin" / "so").write_text(mark)
    for name in names or []:
        directory = root if case == "path-cwd" else root / f"bin-{case}"
        directory.mkdir(exist_ok=True)
        (directory / name).write_text(mark)
    for rc in ("rc.sh", ".bashrc", ".profile", ".bash_profile"):
        (root / rc).write_text("/project/bin/so\n")
    for directory in ("lib", "gconv", "py", "tmp"):
        (root / directory).mkdir()
    (root / "gconv" / "gconv-modules").write_text("alias\tANSI_X3.4-1968//\tEVIL//\n"
                                                  "module\tEVIL//\tINTERNAL\tevil\t1\n"
                                                  "module\tINTERNAL\tEVIL//\tevil\t1\n")
    build = ws.path(f"{TRANSFER_DIR}/hostile-build")
    shutil.copy(build / "evil.so", root / "lib" / "evil.so")
    shutil.copy(build / "evil.so", root / "gconv" / "evil.so")
    shutil.copy(build / "libjq.so.1", root / "lib" / "libjq.so.1")
    (root / "evil.js").write_text("require('child_process').execFileSync('/project/bin/so');\n")
    for name in ("sitecustomize.py", "startup.py"):
        (root / "py" / name).write_text("import os\nos.system('/project/bin/so')\n")
    (root / ".markers").write_text("")
    ws.run(["chown", "-R", "dev:dev", project], user="root")
    ws.run(["chmod", "-R", "a+rX", project], user="root")
    # Root in the sandbox's user namespace has no DAC_OVERRIDE: it can append only to
    # a file anyone may write.
    ws.run(["chmod", "0666", f"{project}/.markers"], user="root")
    ws.run(["sh", "-c", f"chmod +x {project}/bin*/* {project}/*"], user="root", check=False)


def build_libraries(ws):
    """The planted library, and a shim for libjq that loads the real one by its full
    path (jq still works; whoever loads the shim through LD_LIBRARY_PATH runs it)."""
    build = ws.path(f"{TRANSFER_DIR}/hostile-build")
    build.mkdir(parents=True, exist_ok=True)
    evil = HOSTILE / "evil.c"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(build / "evil.so"), str(evil)], check=True)
    stub = build / "libjq-stub.so"
    subprocess.run(["gcc", "-shared", "-o", str(stub), "-x", "c", "/dev/null",
                    "-Wl,-soname,/usr/lib/x86_64-linux-gnu/libjq.so.1"], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(build / "libjq.so.1"), str(evil),
                    "-Wl,-soname,libjq.so.1", "-Wl,--no-as-needed", str(stub)], check=True)


def harness_script(case, address):
    """What the harness does: keep the environment it was started with (its shell may
    drop some names, IFS say), then send a request around the gate."""
    return ("tr '\\0' '\\n' </proc/$$/environ | sort >/project/.seen; "
            f"/usr/bin/curl -s -m 3 --noproxy '*' -o /dev/null -w 'direct=%{{http_code}}\\n' "
            f"http://{address}/privileged-window-{case}; exit 0")


def records_by_project(ws, before):
    """The records of the sessions started since BEFORE (session directory names), by
    project. Found on disk: output can be masked, and the sessions ran side by side."""
    found = {}
    for name in sorted(set(session_dirs(ws)) - set(before)):
        path = ws.path(f"{AISB_STATE}/sessions/{name}/record.json")
        if path.exists():
            record = json.loads(path.read_text())
            found[record["project"]] = record
    return found


@pytest.fixture(scope="module")
def outcomes(workstation, internet):
    workstation.run(["rm", "-rf", PROJECTS], user="root")
    build_libraries(workstation)
    results = {}
    for first in range(0, len(CASES), BATCH):
        batch = CASES[first:first + BATCH]
        before_dirs, before = session_dirs(workstation), len(internet.requests())
        runs = {}
        for case, names, env in batch:
            plant(workstation, case, names)
            environment = {name: value.replace("{case}", case) for name, value in env.items()}
            runs[case] = (environment, start_session(workstation, project_of(case), environment,
                                                     harness_script(case, internet.address)))
        outputs = {case: process.communicate(timeout=600)[0] for case, (_env, process) in runs.items()}
        records = records_by_project(workstation, before_dirs)
        requests = internet.requests()[before:]
        for case, (environment, _process) in runs.items():
            project = workstation.path(project_of(case))
            record = records.get(project_of(case))
            transcript = workstation.path(record["transcript"]).read_text() if record else ""
            arrived = [r for r in requests if r["path"] == f"/privileged-window-{case}"]
            tally.record(f"privileged-window {case}", leaked=bool(arrived))
            results[case] = {"record": record, "output": outputs[case][-3000:], "arrived": arrived,
                             "markers": (project / ".markers").read_text().splitlines(),
                             "seen": (project / ".seen").read_text() if (project / ".seen").exists() else "",
                             "transcript": transcript, "environment": environment}
    return results


def start_session(ws, project, environment, script):
    return start_in_background(ws, ["/bin/sh", "-c", script], "-e", json.dumps({"aisb_environment": environment}),
                               project=project)


def privileged(marker):
    """A marker from the host, or from a process with uid 0 or any effective capability."""
    fields = dict(part.split("=", 1) for part in marker.split()[1:])
    return fields["where"] == "host" or fields["uid"] == "0" or int(fields["caps"], 16) != 0


@pytest.mark.parametrize("case", [case for case, _names, _env in CASES])
def test_nothing_planted_runs_privileged_and_egress_stays_closed(outcomes, case):
    outcome = outcomes[case]
    record = outcome["record"]
    assert record is not None, outcome["output"]
    assert record["status"] == "exited", (record["status"], record["reason"], outcome["transcript"][-2000:])
    assert [m for m in outcome["markers"] if privileged(m)] == [], outcome["markers"]
    assert outcome["arrived"] == [], "the harness reached the test internet around the gate"
    assert "direct=000" in outcome["transcript"], outcome["transcript"][-2000:]
    # After the drop the variable is the harness's, with the operator's value.
    seen = outcome["seen"].splitlines()
    for name, value in outcome["environment"].items():
        assert f"{name}={value}" in seen, (name, outcome["seen"][-2000:])


def test_planted_files_do_run_once_unprivileged(outcomes):
    """The markers can be written: a control that the cases above could fail. With a
    planted sh first on PATH, the harness's own shell is the agent's, as uid 1000."""
    harness_runs = [m for case in ("path-cwd", "ld-preload") for m in outcomes[case]["markers"]]
    assert harness_runs, "no planted file ran at all: the markers prove nothing"
    assert all("where=sandbox uid=1000 caps=0000000000000000" in m for m in harness_runs), harness_runs
