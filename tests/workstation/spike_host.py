# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the network spike (aisb.sandbox.host_capabilities) in a disposable workstation.

Shared by the integration tests, tests/workstation/measure_hosts.py (the measured table
in docs/dev/networking-measured.md) and bench/spike.py.
"""

import json
from contextlib import contextmanager

from scenario import ANSIBLE_ENV, provision
from workstation import AISB_STATE, BASE_IMAGE, Workstation, install_checkout

FACTS = f"{AISB_STATE}/host_capabilities.json"
# Runs the negative probes with the protection left out (the leak control), inside the
# workstation, from the installed collection.
LEAK_CONTROL = """
import json, os, sys
sys.path.insert(0, os.path.expanduser("~/.ansible/collections"))
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_probes
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import probe_sandbox
from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner, subprocess_execute
prober = _host_probes.Prober(Runner(subprocess_execute()), "podman", sys.argv[1], 60)
found = {}
for probe in (_host_probes.probe_internal_network, _host_probes.probe_nft_needs_net_admin, probe_sandbox):
    found.update(probe(prober, enforce=False))
print(json.dumps(found))
"""


def run_spike(ws, check=False, **args):
    """Run the module ad hoc as the workstation user; its result as a dict."""
    argv = ["ansible", "localhost", "-m", "aisb.sandbox.host_capabilities", "-a", json.dumps(args)]
    if check:
        argv.append("--check")
    done = ws.run(argv, check=False, env=ANSIBLE_ENV, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(done.stdout[done.stdout.index("{"):])


def run_leak_control(ws, probe_image):
    """The negative probes against a sandbox of PROBE_IMAGE without its protection:
    {probe name: entry}."""
    script = "/home/dev/leak_control.py"
    ws.path(script).write_text(LEAK_CONTROL)
    return json.loads(ws.run(["/opt/ansible/bin/python3", script, probe_image], timeout=300).stdout)


@contextmanager
def provisioned(suite, *extra, prepare=None):
    """A workstation of SUITE provisioned by this checkout's provision.yml (harness
    `shell`), with the base image present; PREPARE(ws), when given, runs before. Yields
    (workstation, provision result): provisioning may fail after the spike ran (a
    Debian 12 host cannot build every image), and callers decide."""
    with Workstation(suite) as ws:
        install_checkout(ws)
        if prepare:
            prepare(ws)
        done = provision(ws, "-e", "aisb_harness=shell", *extra, timeout=1800)
        if ws.run(["podman", "image", "exists", BASE_IMAGE], check=False).returncode != 0:
            ws.load_base_image()
        yield ws, done
