# SPDX-License-Identifier: GPL-3.0-or-later
"""What the tests, the benchmarks and ./demo do with a workstation: install this
collection, provision it as an operator would, and give it a test "internet"."""

import json
import uuid
from pathlib import Path

from workstation import BASE_IMAGE, BASE_IMAGE_TAR, TRANSFER_DIR

HERE = Path(__file__).resolve().parent
ANSIBLE_ENV = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
# No registry is reachable: the base image comes from Debian's archive (the harness's
# minbase tarball); images trust the same extra CA anchors as the workstation.
PROVISION_VARS = {"aisb_base_image": BASE_IMAGE, "aisb_base_image_archive": BASE_IMAGE_TAR}


def operator_vars(ws):
    """The workstation's operator variables as a file for -e @FILE (what group_vars
    would hold on a real workstation)."""
    anchors = sorted("/" + str(p.relative_to(ws.root))
                     for p in ws.path("/usr/local/share/ca-certificates").glob("*.crt"))
    path = f"{TRANSFER_DIR}/operator-vars.json"
    ws.path(path).write_text(json.dumps(dict(PROVISION_VARS, aisb_extra_ca_certificates=anchors)))
    return "@" + path


def playbook(ws, name, *extra, **kwargs):
    """Run one of the collection's playbooks inside the workstation as its user."""
    return ws.run(["ansible-playbook", f"aisb.sandbox.{name}", "-e", operator_vars(ws), *extra],
                  check=False, env=dict(ANSIBLE_ENV, **kwargs.pop("env", {})), **kwargs)


class Internet:
    """A test "internet" for one workstation: a network namespace joined by a veth pair,
    with an address from 198.18.0.0/15 and a listener that logs every request. Names in
    NAMES resolve to it through the workstation's /etc/hosts, which the gate reads."""

    NAMES = ["allowed.test", "other.test"] + [f"site{i}.test" for i in range(5)]
    PORTS = [80, 443, 8443]

    def __init__(self, ws):
        self.ws = ws
        suffix = uuid.uuid4().hex[:6]
        # A /30 of 198.18.0.0/16 of its own: concurrent workstations share the build
        # machine's network namespace.
        third, fourth = int(suffix[:2], 16), int(suffix[2:4], 16) & 0xFC
        self.host_side, self.address = f"198.18.{third}.{fourth + 1}", f"198.18.{third}.{fourth + 2}"
        self.veth, self.netns = f"aisb{suffix}", f"inet{suffix}"
        self.log = f"{TRANSFER_DIR}/internet-{suffix}.log"

    def start(self):
        listener = f"{TRANSFER_DIR}/listener.py"
        ready = f"{TRANSFER_DIR}/listener-{self.netns}.out"
        # A self-signed certificate for HTTPS: nobody checks it (curl -k), the gate least.
        cert, key = f"{self.log}.crt", f"{self.log}.key"
        self.ws.path(listener).write_text((HERE / "listener.py").read_text())
        self.ws.path(self.log).write_text("")
        self.ws.sh(f"""
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \\
              -subj /CN=allowed.test -keyout {key} -out {cert} 2>/dev/null
            ip netns add {self.netns}
            ip link add {self.veth} type veth peer name eth0 netns {self.netns}
            ip addr add {self.host_side}/30 dev {self.veth}
            ip link set {self.veth} up
            ip -n {self.netns} addr add {self.address}/30 dev eth0
            ip -n {self.netns} link set eth0 up
            ip -n {self.netns} link set lo up
            echo "{self.address} {' '.join(self.NAMES)}" >>/etc/hosts
            ip netns exec {self.netns} setsid python3 {listener} {self.address} {self.log} {cert} {key} \\
              {' '.join(map(str, self.PORTS))} >{ready} 2>&1 &
            for _ in $(seq 50); do grep -q ready {ready} && break; sleep 0.1; done
            grep -q ready {ready}
        """, user="root")
        return self

    def stop(self):
        # The veth's peer lives in the namespace: deleting one end deletes both.
        self.ws.run(["ip", "link", "del", self.veth], user="root", check=False)
        self.ws.run(["ip", "netns", "del", self.netns], user="root", check=False)

    def requests(self):
        """Every request the listener saw, oldest first."""
        return [json.loads(line) for line in self.ws.path(self.log).read_text().splitlines()]
