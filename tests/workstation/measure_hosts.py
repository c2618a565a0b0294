# SPDX-License-Identifier: GPL-3.0-or-later
"""Measure the reference hosts and regenerate the table in docs/dev/networking-measured.md.

usage: python3 tests/workstation/measure_hosts.py [NAME...]   (as root on the build machine)

A fresh Debian 13 workstation, the same with Debian 12's passt (old_passt.py: no
--map-host-loopback, as on Ubuntu 24.04) and a fresh Debian 12 one
(host_require_pasta=false: its podman has no pasta), each provisioned by this
checkout's provision.yml, each running a full spike. Their facts go to
docs/facts/NAME.json (only the NAMEs given, when any; the others' files stay), then
docs/gen_networking.py rewrites the table from all of them.
"""

import json
import subprocess
import sys

from old_passt import install_old_passt
from spike_host import provisioned, run_spike
from workstation import BASE_IMAGE, REPO

HOSTS = (("debian13", "trixie", (), None), ("debian13-old-passt", "trixie", (), install_old_passt),
         ("debian12", "bookworm", ("-e", "host_require_pasta=false"), None))


def main(names):
    out = REPO / "docs" / "facts"
    out.mkdir(exist_ok=True)
    for name, suite, extra, prepare in HOSTS:
        if names and name not in names:
            continue
        with provisioned(suite, *extra, prepare=prepare) as (ws, done):
            print("%s: provision.yml exited %d" % (name, done.returncode), file=sys.stderr)
            facts = run_spike(ws, base_image=BASE_IMAGE)["ansible_facts"]["aisb_host"]
        (out / (name + ".json")).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        print("%s: model_holds=%s" % (name, facts["verdict"]["model_holds"]), file=sys.stderr)
    subprocess.run([sys.executable, str(REPO / "docs" / "gen_networking.py")] +
                   [str(out / (host[0] + ".json")) for host in HOSTS], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
