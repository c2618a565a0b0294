# SPDX-License-Identifier: GPL-3.0-or-later
"""Fake model providers on plain HTTP (fake_provider.py) at addresses of their own in a
test internet's namespace, routed there from the workstation: a provider on a public
address, or a self-hosted model server on a private one. Every address is derived from
the internet's own /30, which no other test run on the build machine holds, since the
workstations share its routing table."""

import json
from pathlib import Path

from workstation import TRANSFER_DIR

HERE = Path(__file__).resolve().parent


def addresses(internet):
    """(public, private, other private) addresses for this internet's providers."""
    third, fourth = (int(n) for n in internet.address.split(".")[2:])
    return f"198.19.{third}.{fourth + 1}", f"10.254.{third}.{fourth + 1}", f"10.254.{third}.{fourth + 2}"


class PlainProvider:
    """fake_provider.py on plain HTTP at ADDRESS:PORT inside INTERNET's namespace."""

    def __init__(self, ws, internet, address, port, answer):
        self.ws, self.internet, self.address, self.port = ws, internet, address, port
        self.work = f"{TRANSFER_DIR}/provider-{address}-{port}"
        self.log = f"{self.work}/requests.log"
        ws.path(f"{TRANSFER_DIR}/fake_provider.py").write_text((HERE / "fake_provider.py").read_text())
        ws.sh(f"""
            mkdir -p {self.work} && cd {self.work} && : >{self.log}
            ip -n {internet.netns} addr replace {address}/32 dev eth0
            ip route replace {address}/32 via {internet.address}
            ip netns exec {internet.netns} setsid python3 {TRANSFER_DIR}/fake_provider.py {address} {port} - - \\
              {self.log} {answer} >ready 2>&1 &
            echo $! >pid
            for _ in $(seq 50); do grep -q ready ready && break; sleep 0.1; done
            grep -q ready ready
        """, user="root")

    def requests(self):
        return [json.loads(line) for line in self.ws.path(self.log).read_text().splitlines()]

    def stop(self):
        self.ws.sh(f"""
            kill $(cat {self.work}/pid) || true
            ip route del {self.address}/32 via {self.internet.address} 2>/dev/null || true
        """, user="root", check=False)
