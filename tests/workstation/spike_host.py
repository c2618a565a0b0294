# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the network spike (aisb.sandbox.host_capabilities) in a disposable workstation.

Shared by the integration tests, tests/workstation/measure_hosts.py (the measured table
in docs/networking.md) and bench/spike.py.
"""

import json
from contextlib import contextmanager
from pathlib import Path

from workstation import BASE_IMAGE, BASE_IMAGE_TAR, TRANSFER_DIR, Workstation, copy_checkout

REPO = Path(__file__).resolve().parents[2]
ENV = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
FACTS = "/home/dev/.local/state/aisb/host_capabilities.json"


def run_spike(ws, check=False, **args):
    """Run the module ad hoc as the workstation user; its result as a dict."""
    argv = ["ansible", "localhost", "-m", "aisb.sandbox.host_capabilities", "-a", json.dumps(args)]
    if check:
        argv.append("--check")
    done = ws.run(argv, check=False, env=ENV, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(done.stdout[done.stdout.index("{"):])


@contextmanager
def provisioned(suite, *extra):
    """A workstation of SUITE provisioned by this checkout's provision.yml, with the base
    image present. Yields (workstation, provision result): provisioning may fail after the
    spike ran (a Debian 12 host cannot build every image), and callers decide."""
    with Workstation(suite) as ws:
        src = copy_checkout(ws, REPO)
        ws.sh(f"cd {src} && ansible-galaxy collection build --force --output-path {TRANSFER_DIR} . >/dev/null"
              f" && ansible-galaxy collection install --force {TRANSFER_DIR}/aisb-sandbox-*.tar.gz >/dev/null")
        variables = {"aisb_base_image": BASE_IMAGE, "aisb_base_image_archive": BASE_IMAGE_TAR, "aisb_harness": "shell"}
        done = ws.run(["ansible-playbook", "aisb.sandbox.provision", "-e", json.dumps(variables), *extra],
                      check=False, env=ENV, timeout=1800)
        if ws.run(["podman", "image", "exists", BASE_IMAGE], check=False).returncode != 0:
            ws.load_base_image()
        yield ws, done
