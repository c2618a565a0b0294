# SPDX-License-Identifier: GPL-3.0-or-later
"""The fake model provider (fake_provider.py) in a workstation's test internet, as the
integration tests run it: HTTPS with a test CA that the workstation (the session's
credential injector) trusts and the sandbox does not, every request logged."""

import json
from contextlib import contextmanager
from pathlib import Path

import certificates
from workstation import TRANSFER_DIR

HERE = Path(__file__).resolve().parent
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NAME, PORT = "models.test", 9443


class Provider:
    """A running fake provider: where it is and what reached it."""

    def __init__(self, ws, log):
        self._ws, self._log = ws, log

    def requests(self):
        """Every request so far: {method, path, headers: [[name, value]], body}."""
        return [json.loads(line) for line in self._ws.path(self._log).read_text().splitlines()]


@contextmanager
def fake_provider(ws, internet, answer):
    """The fake provider at NAME:PORT in INTERNET's namespace answering ANSWER, its CA
    added to the workstation's bundle (not to /usr/local/share/ca-certificates, from
    which the images take their anchors: an image change would rebuild them)."""
    work = f"{TRANSFER_DIR}/provider"
    ws.path(f"{TRANSFER_DIR}/fake_provider.py").write_text((HERE / "fake_provider.py").read_text())
    bundle = ws.path(BUNDLE).read_text()
    hosts = ws.path("/etc/hosts").read_text()
    log = f"{work}/requests.log"
    ws.sh(f"""
        mkdir -p {work} && cd {work}
        {certificates.script(NAME)}
        cat ca.crt >>{BUNDLE}
        echo '{internet.address} {NAME}' >>/etc/hosts
        : >{log}
        ip netns exec {internet.netns} setsid python3 {TRANSFER_DIR}/fake_provider.py {internet.address} \\
          {PORT} server.crt server.key {log} {answer} >ready 2>&1 &
        echo $! >pid
        for _ in $(seq 50); do grep -q ready ready && break; sleep 0.1; done
        grep -q ready ready
    """, user="root")
    try:
        yield Provider(ws, log)
    finally:
        ws.run(["sh", "-c", f"kill $(cat {work}/pid)"], user="root", check=False)
        ws.path(BUNDLE).write_text(bundle)
        ws.path("/etc/hosts").write_text(hosts)
