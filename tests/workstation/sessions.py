# SPDX-License-Identifier: GPL-3.0-or-later
"""Sessions in a provisioned workstation, as the integration tests start them (through
run_agent.yml, or the session module itself) and what they read afterwards: the
record, the session directories, the containers and processes left, the built images."""

import json
import re
import subprocess
import time


from scenario import ANSIBLE_ENV, operator_vars
from spike_host import FACTS
from workstation import AISB_STATE

PROJECT = "/home/dev/src/app"


def run_agent(ws, *extra, command=None, env=None, project=PROJECT, timeout=300):
    """run_agent.yml on PROJECT, with COMMAND as the harness when given."""
    argv = ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws), "-e", f"project={project}"]
    if command is not None:
        argv += ["-e", json.dumps({"command": command})]
    return ws.run(argv + list(extra), check=False, env=dict(ANSIBLE_ENV, **(env or {})), timeout=timeout)


def start_in_background(ws, command, *extra, project=PROJECT):
    """run_agent.yml on PROJECT with COMMAND as the harness, not waited for: its Popen
    (stdout and stderr in one pipe)."""
    argv = ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws), "-e", f"project={project}",
            "-e", json.dumps({"command": command}), *extra]
    return subprocess.Popen(ws.command(argv, env=ANSIBLE_ENV), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def allow(*entries):
    """Extra arguments of run_agent.yml that allow ENTRIES."""
    return ["-e", json.dumps({"aisb_allow": list(entries)})]


def through(gate_path):
    """Extra arguments of run_agent.yml for a session over GATE_PATH (aisb_gate_path)."""
    return ["-e", json.dumps({"aisb_gate_path": gate_path})]


def sandbox_network(record):
    """The sandbox's --network value in a session's RECORD (the gate's is host)."""
    return next(arg.split("=", 1)[1] for argv in record["commands"] for arg in argv
                if arg.startswith("--network=pasta"))


def session_module(ws, timeout=300, **args):
    """The session module itself, as a task would run it, with exactly ARGS."""
    return ws.run(["ansible", "localhost", "-m", "aisb.sandbox.session", "-a", json.dumps(args)],
                  check=False, env=ANSIBLE_ENV, timeout=timeout)


def built_images(ws):
    """{name:tag: (id, created)} of the collection's images."""
    found = {}
    for image in json.loads(ws.run(["podman", "images", "--format", "json"]).stdout):
        for name in image.get("Names") or []:
            if name.startswith(("localhost/aisb-sandbox:", "localhost/aisb-gate:")):
                found[name] = (image["Id"], image["Created"])
    return found


def newest(ws, repository, command=None):
    """The tag of REPOSITORY's most recently built image; with COMMAND, of the sandbox
    images built for the recipe whose command that is (the workstation holds one image
    per recipe a test built)."""
    candidates = [(created, name) for name, (_id, created) in built_images(ws).items()
                  if name.startswith(repository + ":") and (command is None or recipe_command(ws, name) == command)]
    assert candidates, f"no {repository} image" + (f" for the command {command}" if command else "")
    return max(candidates)[1]


def recipe_command(ws, image):
    """The command of the harness recipe IMAGE was built for (its hashed inputs' label)."""
    labels = json.loads(ws.run(["podman", "image", "inspect", "--format", "{{json .Labels}}", image]).stdout)
    return json.loads(labels["io.aisb.inputs"])["extra"]["recipe"]["command"]


def image_recipes():
    """The collection's built-in harness recipes, by name."""
    from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import BUILT_IN  # pylint: disable=import-outside-toplevel
    return BUILT_IN


def provisioned_sandbox_image(ws):
    """The newest sandbox image of the recipe provisioning builds (pi, the default)."""
    return newest(ws, "localhost/aisb-sandbox", command=["pi"])


def images_and_policy(ws):
    """Arguments the session module needs beside the inputs under test: the built images,
    the facts and the smallest policy rendered so far (provisioning's: the harness
    recipe's own)."""
    facts = json.loads(ws.path(FACTS).read_text())
    policies = sorted((len(json.loads((p / "policy.json").read_text())["allow"]), p.name)
                      for p in ws.path(f"{AISB_STATE}/policies").iterdir())
    assert policies, "provisioning rendered no policy"
    policy_dir = f"{AISB_STATE}/policies/{policies[0][1]}"
    return {"image": provisioned_sandbox_image(ws), "gate_image": newest(ws, "localhost/aisb-gate"),
            "policy_dir": policy_dir, "host_facts": facts}


def record_path(output):
    """The record's path (inside the workstation) of the session whose playbook or module
    printed OUTPUT."""
    path = re.search(r"record (\S+/record\.json)", output) or re.search(r'"record": "([^"]+)"', output)
    assert path, output[-3000:]
    return path.group(1)


def record_of(ws, output):
    """The record of the session whose playbook or module printed OUTPUT."""
    return json.loads(ws.path(record_path(output)).read_text())


def session_dirs(ws):
    """The session directories (one per session that started), by name."""
    sessions = ws.path(f"{AISB_STATE}/sessions")
    return sorted(p.name for p in sessions.iterdir()) if sessions.exists() else []


def listed_session_containers(ws, shape):
    """podman's listing of every session's container (gates and sandboxes), running or
    not, a line each in SHAPE (a Go template)."""
    return ws.run(["podman", "ps", "-a", "--filter", "label=aisb.session", "--format", shape]).stdout


def session_containers(ws):
    """Names of every session's containers (gates and sandboxes), running or not."""
    return listed_session_containers(ws, "{{.Names}}").split()


def containers_left(ws, within=60):
    """Session containers still there after up to WITHIN seconds (a sandbox's end can take
    seconds on a busy disk: unmounting its overlays syncs the filesystem), with what the
    workstation runs when any are: "" when none are left."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and session_containers(ws):
        time.sleep(0.2)
    left = listed_session_containers(ws, "{{.Names}} {{.Status}} pid={{.Pid}}").strip()
    if not left:
        return ""
    return left + "\n" + ws.run(["ps", "-eo", "pid,ppid,pgid,stat,etimes,wchan:24,args"]).stdout


def left_running(ws, before):
    """Session containers that exist now and did not before: another test's leftovers
    must not make this one pass or fail."""
    return sorted(set(session_containers(ws)) - set(before))


def new_sandbox(ws, before, timeout=120):
    """The name of a sandbox container that was not among BEFORE, once one exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [n for n in left_running(ws, before) if n.startswith("aisb-sandbox-")]
        if names:
            return names[0]
        time.sleep(0.2)
    raise AssertionError("no sandbox started")


def processes(ws, pattern):
    """PIDs of the workstation's processes whose command line matches PATTERN."""
    return ws.run(["pgrep", "-f", pattern], check=False).stdout.split()


def clock(ws):
    """The workstation's time now, as podman events --since takes it: to the nanosecond,
    so a container created earlier in the same second is not taken for a later one."""
    return ws.run(["date", "-u", "+%Y-%m-%dT%H:%M:%S.%NZ"]).stdout.strip()


def containers_created(ws, since):
    """Names of the containers podman created since SINCE (its own event log)."""
    done = ws.run(["podman", "events", "--stream=false", "--since", since, "--filter", "type=container",
                   "--filter", "event=create", "--format", "{{.Name}}"])
    return done.stdout.split()
