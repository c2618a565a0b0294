# SPDX-License-Identifier: GPL-3.0-or-later
"""Fake model providers (fake_provider.py) in a workstation's test internet, as the
integration tests run them: over HTTPS at NAME:PORT with a test CA that the workstation
(the session's credential injector) trusts and the sandbox does not; or on plain HTTP at
addresses of their own, a provider on a public address or a self-hosted model server on
a private one, derived from the internet's own /30, which no other test run on the build
machine holds, since the workstations share its routing table. Every request is logged."""

import json
from contextlib import contextmanager
from pathlib import Path

import certificates
from workstation import TRANSFER_DIR

HERE = Path(__file__).resolve().parent
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NAME, PORT = "models.test", 9443
# pi's configuration for the fake provider at NAME:PORT (Anthropic's API), its key read
# from FAKE_PROVIDER_KEY (the credential injector's placeholder).
PI_CONFIG_FILES = {
    "settings.json": json.dumps({"defaultProvider": "fake", "defaultModel": "fake-model",
                                 "enableInstallTelemetry": False}),
    "models.json": json.dumps({"providers": {"fake": {
        "baseUrl": f"https://{NAME}:{PORT}", "api": "anthropic-messages", "apiKey": "FAKE_PROVIDER_KEY",
        "models": [{"id": "fake-model"}]}}}),
}


class Provider:
    """A running fake provider: where it is and what reached it."""

    def __init__(self, ws, log):
        self._ws, self._log = ws, log

    def requests(self):
        """Every request so far: {method, path, headers: [[name, value]], body}."""
        return [json.loads(line) for line in self._ws.path(self._log).read_text().splitlines()]


def write_tree(ws, root, files):
    """FILES ({relative path: text}) under ROOT in the workstation, as the user: an
    operator's harness configuration directory."""
    for path, text in files.items():
        ws.sh(f"mkdir -p $(dirname {root}/{path}) && cat >{root}/{path}", input=text)


@contextmanager
def fake_provider(ws, internet, answer):
    """The fake provider at NAME:PORT in INTERNET's namespace answering ANSWER, its CA
    added to the workstation's bundle (not to /usr/local/share/ca-certificates, from
    which the images take their anchors: an image change would rebuild them)."""
    work = f"{TRANSFER_DIR}/provider"
    bundle = ws.path(BUNDLE).read_text()
    hosts = ws.path("/etc/hosts").read_text()
    log = f"{work}/requests.log"
    setup = f"""
        {certificates.script(NAME)}
        cat ca.crt >>{BUNDLE}
        echo '{internet.address} {NAME}' >>/etc/hosts
    """
    _start(ws, internet, work, setup, internet.address, PORT, "server.crt server.key", log, answer)
    try:
        yield Provider(ws, log)
    finally:
        ws.run(["sh", "-c", f"kill $(cat {work}/pid)"], user="root", check=False)
        ws.path(BUNDLE).write_text(bundle)
        ws.path("/etc/hosts").write_text(hosts)


def _start(ws, internet, work, setup, address, port, credentials, log, answer):
    """fake_provider.py in INTERNET's namespace, run from WORK after the shell SETUP there,
    at ADDRESS:PORT with CREDENTIALS (its certificate and key files, or "- -" for plain
    HTTP), logging to LOG and answering ANSWER; returns once it is ready (up to 20 s on a
    busy machine), or fails with the reason it gave."""
    ws.path(f"{TRANSFER_DIR}/fake_provider.py").write_text((HERE / "fake_provider.py").read_text())
    ws.sh(f"""
        mkdir -p {work} && cd {work} && : >{log}
        {setup}
        ip netns exec {internet.netns} setsid python3 {TRANSFER_DIR}/fake_provider.py {address} {port} {credentials} \\
          {log} {answer} >ready 2>&1 &
        echo $! >pid
        for _ in $(seq 200); do grep -q ready ready && break; sleep 0.1; done
        grep -q ready ready || {{ cat ready >&2; exit 1; }}
    """, user="root")


def addresses(internet):
    """(public, private, other private) addresses for this internet's providers."""
    third, fourth = (int(n) for n in internet.address.split(".")[2:])
    base = fourth & ~3  # the internet's own /30: base + 1 and base + 2 stay below 255
    return f"198.19.{third}.{base + 1}", f"10.254.{third}.{base + 1}", f"10.254.{third}.{base + 2}"


class PlainProvider(Provider):
    """fake_provider.py on plain HTTP at ADDRESS:PORT inside INTERNET's namespace, or on
    HTTPS given CREDENTIALS (its certificate and key files in the workstation)."""

    def __init__(self, ws, internet, address, port, answer, credentials="- -"):
        self.ws, self.internet, self.address, self.port = ws, internet, address, port
        self.work = f"{TRANSFER_DIR}/provider-{address}-{port}"
        self.log = f"{self.work}/requests.log"
        super().__init__(ws, self.log)
        setup = f"""
            ip -n {internet.netns} addr replace {address}/32 dev eth0
            ip route replace {address}/32 via {internet.address}
        """
        _start(ws, internet, self.work, setup, address, port, credentials, self.log, answer)

    def stop(self):
        self.ws.sh(f"""
            kill $(cat {self.work}/pid) || true
            ip route del {self.address}/32 via {self.internet.address} 2>/dev/null || true
        """, user="root", check=False)
