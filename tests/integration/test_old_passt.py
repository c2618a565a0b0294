# SPDX-License-Identifier: GPL-3.0-or-later
"""A Debian 13 workstation whose pasta lacks --map-host-loopback, as a passt older than
2024-08-21 (Ubuntu 24.04's) does, while -T works: the spike's verdict holds on the
tcp-forward gate path, and a session's real traffic goes through its gate on the
sandbox's own loopback. The old pasta is a wrapper (old_pasta.py) in front of Debian
13's: its options beside --map-host-loopback are 2025's, not 2024-02's
(docs/networking.md says what else differs from a real Ubuntu 24.04)."""

import json

import pytest

from old_pasta import install_old_pasta
from scenario import Internet, provision
from sessions import PROJECT, allow, clock, containers_created, record_of, run_agent, through
from spike_host import FACTS
from workstation import Workstation, install_checkout

OPERATOR = ["-e", "aisb_harness=shell"]
SCRIPT = ("echo proxy=$HTTP_PROXY; curl -s -o /dev/null -w 'allowed=%{http_code}\\n' http://allowed.test/c-old-allowed; "
          "curl -s -o /dev/null -w 'other=%{http_code}\\n' http://other.test/c-old-other; "
          "curl -s -m 5 -o /dev/null --noproxy '*' http://allowed.test/c-old-direct && echo direct=open "
          "|| echo direct=blocked")


@pytest.fixture(scope="module")
def host():
    """A Debian 13 workstation provisioned with the old pasta in place."""
    with Workstation("trixie") as ws:
        install_checkout(ws)
        install_old_pasta(ws)
        done = provision(ws, *OPERATOR)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        ws.sh(f"mkdir -p {PROJECT}")
        yield ws


@pytest.fixture(scope="module")
def internet(host):
    net = Internet(host).start()
    yield net
    net.stop()


def test_the_verdict_holds_on_tcp_forward(host):
    facts = json.loads(host.path(FACTS).read_text())
    verdict, probes = facts["verdict"], facts["probes"]
    assert "unrecognized option '--map-host-loopback'" in probes["map_host_loopback"]["evidence"]["stderr"]
    assert verdict["gate_path"] == "tcp-forward" and verdict["model_holds"] is True, verdict["reasons"]
    sandbox = probes["tcp_forward_sandbox"]
    assert sandbox["ok"] is True and sandbox["network"].startswith("pasta:-4,-T,") and \
        sandbox["network"].endswith(",--no-map-gw"), sandbox
    assert all(entry["ok"] for entry in sandbox["probes"].values()), sandbox["probes"]


def test_a_session_reaches_its_gate_over_tcp_forward(host, internet):
    before = len(internet.requests())
    result = run_agent(host, *OPERATOR, *allow("allowed.test"), command=["sh", "-c", SCRIPT])
    assert result.returncode == 0, result.stdout[-4000:]
    record = record_of(host, result.stdout)
    # The sandbox's (the gate's is --network=host).
    network = next(arg for argv in record["commands"] for arg in argv if arg.startswith("--network=pasta"))
    transcript = host.path(record["transcript"]).read_text()
    values = dict(line.split("=", 1) for line in transcript.split() if "=" in line)
    port = values["proxy"].rsplit(":", 1)[1]
    # The gate on the sandbox's own loopback, its port forwarded; IPv4 only.
    assert values["proxy"] == f"http://127.0.0.1:{port}", values
    assert network == f"--network=pasta:-4,-T,{port},--no-map-gw", network
    assert (values["allowed"], values["other"], values["direct"]) == ("200", "403", "blocked"), transcript
    assert [r["path"] for r in internet.requests()[before:]] == ["/c-old-allowed"]


def test_the_mapped_gate_path_and_no_gate_are_refused_there(host):
    since = clock(host)
    mapped = run_agent(host, *OPERATOR, *through("map-host-loopback"), command=["true"])
    assert mapped.returncode != 0
    assert "gate_path map-host-loopback is refused" in mapped.stdout, mapped.stdout[-3000:]
    assert "aisb_host.probes.host_loopback_reachable failed" in mapped.stdout
    no_gate = run_agent(host, *OPERATOR, "-e", "aisb_network=no-gate", *allow("allowed.test"), command=["true"])
    assert no_gate.returncode != 0
    assert "network no-gate is refused: aisb_host.verdict.gate_path is tcp-forward" in no_gate.stdout
    assert [n for n in containers_created(host, since) if n.startswith(("aisb-sandbox-", "aisb-gate-"))] == []
