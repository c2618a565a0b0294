# SPDX-License-Identifier: GPL-3.0-or-later
"""Measure the two reference hosts and regenerate the table in docs/networking.md.

usage: python3 tests/workstation/measure_hosts.py   (as root on the build machine)

A fresh Debian 13 workstation and a fresh Debian 12 one (host_require_pasta=false: its
podman has no pasta), each provisioned by this checkout's provision.yml, each running a
full spike. Their facts go to docs/facts/debian13.json and docs/facts/debian12.json,
then docs/gen_networking.py rewrites the table from them.
"""

import json
import subprocess
import sys

from spike_host import provisioned, run_spike
from workstation import BASE_IMAGE, REPO

HOSTS = (("debian13", "trixie", ()), ("debian12", "bookworm", ("-e", "host_require_pasta=false")))


def main():
    out = REPO / "docs" / "facts"
    out.mkdir(exist_ok=True)
    for name, suite, extra in HOSTS:
        with provisioned(suite, *extra) as (ws, done):
            print("%s: provision.yml exited %d" % (name, done.returncode), file=sys.stderr)
            facts = run_spike(ws, base_image=BASE_IMAGE)["ansible_facts"]["aisb_host"]
        (out / (name + ".json")).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        print("%s: model_holds=%s" % (name, facts["verdict"]["model_holds"]), file=sys.stderr)
    subprocess.run([sys.executable, str(REPO / "docs" / "gen_networking.py")] +
                   [str(out / (name + ".json")) for name, _suite, _extra in HOSTS], check=True)


if __name__ == "__main__":
    main()
