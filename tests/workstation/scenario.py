# SPDX-License-Identifier: GPL-3.0-or-later
"""What the tests, the benchmarks and ./demo do with a workstation: install this
collection, provision it as an operator would, and give it a test "internet".

Every workstation shares the build machine's network namespace with whatever else runs
there (another test run, a benchmark): nothing here takes a fixed port or address."""

import json
import random
import re
import socket
import uuid
from contextlib import contextmanager
from pathlib import Path

from workstation import BASE_IMAGE, BASE_IMAGE_TAR, TRANSFER_DIR, Workstation, install_checkout

HERE = Path(__file__).resolve().parent
TRIPWIRE = f"{TRANSFER_DIR}/tripwire.py"
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


def provision(ws, *extra, timeout=3600):
    """Run the collection's own provision.yml inside the workstation."""
    return playbook(ws, "provision", *extra, timeout=timeout)


def install_team(ws, team):
    """TEAM as the team file, written by the team_file module as root (provision.yml's task)."""
    result = ws.run(["ansible", "localhost", "-b", "-m", "aisb.sandbox.team_file", "-a", json.dumps({"team": team})],
                    check=False, env=ANSIBLE_ENV)
    assert result.returncode == 0, result.stdout[-3000:]


def provision_checkout(ws, prepare, *extra, timeout=3600):
    """This checkout installed in WS, PREPARE(ws) run when given (what the host is: its
    pasta, say), then provision.yml with EXTRA, asserted to succeed; its result. The
    container storage starts from the saved one when there is one (the images an earlier
    provision built from the same inputs: their tags are content hashes, so a stale one
    is never used, only rebuilt), and is never saved from here: the reference
    workstation's images are the ones kept."""
    install_checkout(ws)
    if prepare:
        prepare(ws)
    ws.seed_container_storage()
    done = provision(ws, *extra, timeout=timeout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done


@contextmanager
def provisioned_variant(prepare, *extra):
    """A Debian 13 workstation that PREPARE(ws) changed before this checkout's
    provision.yml ran with EXTRA (provision_checkout)."""
    with Workstation("trixie") as ws:
        provision_checkout(ws, prepare, *extra)
        yield ws


def task_status(output, task):
    """'ok' or 'changed' (or whatever ansible said) for the task named TASK in a playbook's OUTPUT."""
    match = re.search(r"TASK \[[^\]]*" + re.escape(task) + r"[^\]]*\][^\n]*\n(\w+):", output)
    assert match, f"task {task!r} not in the output"
    return match.group(1)


def free_port():
    """A loopback port nothing listens on right now."""
    with closed_port() as port:
        return port


@contextmanager
def closed_port():
    """A loopback port held closed for the block: bound and not listening, so a connection
    to it is refused and nothing else can take it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def marking_callback(marker):
    """The text of a callback plugin an agent would plant: importing it creates MARKER (a
    path the sandbox cannot reach), so the marker says Ansible loaded it on the host."""
    return f"""
open("{marker}", "w").close()
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "agent"
    CALLBACK_NEEDS_ENABLED = True
"""


def install_tripwire(ws):
    """tripwire.py (the battery's listeners) inside the workstation; its path there."""
    ws.path(TRIPWIRE).write_text((HERE / "tripwire.py").read_text())
    return TRIPWIRE


class Internet:
    """A test "internet" for one workstation: a network namespace joined by a veth pair,
    with an address from 198.18.0.0/15 and a listener that logs every request. Names in
    NAMES resolve to it through the workstation's /etc/hosts, which the gate reads."""

    NAMES = ["allowed.test", "other.test"] + [f"site{i}.test" for i in range(5)]
    PORTS = [80, 443, 8443]

    def __init__(self, ws):
        self.ws = ws
        suffix = uuid.uuid4().hex[:6]
        self.netns = f"inet{suffix}"  # in the workstation's own /run/netns
        self.log = f"{TRANSFER_DIR}/internet-{suffix}.log"
        self.host_side = self.address = self.veth = None

    def claim_addresses(self):
        """A /30 of 198.18.0.0/16 that no other internet on the build machine has: the veth
        is named after it, and `ip link add` refuses a name that exists."""
        for _attempt in range(50):
            third, fourth = random.randrange(256), random.randrange(0, 256, 4)
            veth = f"aisb{third:02x}{fourth:02x}"
            added = self.ws.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                                 "netns", self.netns], user="root", check=False)
            if added.returncode == 0:
                self.veth = veth
                self.host_side, self.address = f"198.18.{third}.{fourth + 1}", f"198.18.{third}.{fourth + 2}"
                return
        raise AssertionError(f"no free /30 for a test internet: {added.stderr}")

    def start(self):
        listener = f"{TRANSFER_DIR}/listener.py"
        ready = f"{TRANSFER_DIR}/listener-{self.netns}.out"
        # A self-signed certificate for HTTPS: nobody checks it (curl -k), the gate least.
        cert, key = f"{self.log}.crt", f"{self.log}.key"
        self.ws.path(listener).write_text((HERE / "listener.py").read_text())
        self.ws.path(self.log).write_text("")
        self.ws.run(["ip", "netns", "add", self.netns], user="root")
        self.claim_addresses()
        self.ws.sh(f"""
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \\
              -subj /CN=allowed.test -keyout {key} -out {cert} 2>/dev/null
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *_exc):
        self.stop()

    def stop(self):
        # The veth's peer lives in the namespace: deleting one end deletes both.
        self.ws.run(["ip", "link", "del", self.veth], user="root", check=False)
        self.ws.run(["ip", "netns", "del", self.netns], user="root", check=False)

    def requests(self):
        """Every request the listener saw, oldest first."""
        return [json.loads(line) for line in self.ws.path(self.log).read_text().splitlines()]
