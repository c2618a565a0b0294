# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's upload budget, with real traffic (issue 35): a named nft quota in the
sandbox's own table counts what the sandbox sends to the gate's port (and, apart, to the
injector's); once spent, every packet with payload is reset.

An upload server in the test internet (allowed.test:8080, plain HTTP through the gate)
counts every byte it receives, on every connection, cut ones included, and serves a
large download. The agent controls every byte it sends: it uploads past the budget,
tries to remove the quota, and sends UDP to the gate's port; the provider route (the
injector) keeps working once the gate's budget is spent.
"""

import json
import re
import uuid

import pytest

from providers import NAME as PROVIDER, PORT as PROVIDER_PORT, fake_provider
from scenario import ANSIBLE_ENV, operator_vars
from sessions import record_of, through
from workstation import TRANSFER_DIR

PROJECT = "/home/dev/src/upload"
MIB = 1024 * 1024
BUDGET = 8 * MIB
PROVIDER_BUDGET = 1 * MIB
DOWNLOAD = 200 * MIB
PORT = 8080
ANSWER = "UPLOAD-PROVIDER-ANSWER-" + uuid.uuid4().hex[:8]
# The most a TCP connection has in flight past the quota's last counted packet: none
# passes the quota once it is spent, so the slack is for squid's own request headers.
SLACK = 64 * 1024
# Counts every byte received per connection (a JSON line when it ends, cut or not), and
# answers GET /big with DOWNLOAD bytes.
SERVER = r'''
import json, socket, sys, threading
address, port, log, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
lock = threading.Lock()
def one(conn):
    got, head = 0, b""
    try:
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += len(chunk); head += chunk
        method = head.split(b" ", 1)[0].decode("ascii", "replace")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = len(head.split(b"\r\n\r\n", 1)[1]) if b"\r\n\r\n" in head else 0
        while body < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += len(chunk); body += len(chunk)
        if method == "GET":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
            block = b"\0" * 65536
            for _ in range(size // 65536):
                conn.sendall(block)
        elif body >= length:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        complete = body >= length
    except OSError:
        complete = False
    finally:
        conn.close()
    with lock, open(log, "a") as out:
        out.write(json.dumps({"method": method if head else "", "received": got, "complete": complete}) + "\n")
server = socket.create_server((address, port))
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=one, args=(conn,), daemon=True).start()
'''
# The agent: a file to send, three PUTs of 3 MiB through the gate (curl's proxy settings
# from the session), each one's exit and HTTP code; then the provider route.
UPLOADS = f"""
head -c {3 * MIB} /dev/urandom >/tmp/upload
for i in 1 2 3; do
  code=$(curl -sS -o /dev/null -w '%{{http_code}}' -H 'Expect:' -T /tmp/upload http://allowed.test:{PORT}/put$i)
  echo "RESULT put$i=$? $code"
done
code=$(curl -s -o /dev/null -w '%{{http_code}}' http://allowed.test:{PORT}/after)
echo "RESULT after=$? $code"
curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" "$AISB_CREDENTIAL_PROXY/{PROVIDER}:{PROVIDER_PORT}/v1/echo" \\
  | grep -q 'fake provider saw /v1/echo'
echo "RESULT provider=$?"
# Past three canary rounds: the canaries' CONNECT is reset now too, which is no loss.
sleep 20
"""
# The agent has no capabilities: the quota and its table stay. UDP to the gate's port
# is dropped on the mapped path (the table lets TCP through only); on tcp-forward the
# gate is at 127.0.0.1, where UDP stays inside the sandbox (pasta forwards TCP only).
ATTACKS = """
gate=${HTTP_PROXY#http://}; gate=${gate%/}
/usr/sbin/nft delete quota inet aisb upload_${gate##*:} 2>&1; echo "RESULT delete-quota=$?"
/usr/sbin/nft flush table inet aisb 2>&1; echo "RESULT flush=$?"
(echo exfil >"/dev/udp/${gate%:*}/${gate##*:}") 2>&1; echo "RESULT udp=$?"
"""
DOWNLOAD_SCRIPT = f"""
curl -sS -o /dev/null -w 'RESULT download=%{{http_code}} %{{size_download}}\\n' http://allowed.test:{PORT}/big
sleep 5
"""


@pytest.fixture(scope="module")
def server(workstation, internet):
    """The upload server at allowed.test:PORT, and the project; its log's entries."""
    work = f"{TRANSFER_DIR}/upload-server"
    log = f"{work}/received.log"
    workstation.sh(f"mkdir -p {work} {PROJECT} && echo 'print(1)' >{PROJECT}/main.py")
    workstation.path(f"{work}/server.py").write_text(SERVER)
    workstation.sh(f"""
        : >{log}
        ip netns exec {internet.netns} setsid python3 {work}/server.py {internet.address} {PORT} {log} {DOWNLOAD} \\
          >{work}/out 2>&1 & echo $! >{work}/pid
        for _ in $(seq 50); do grep -q ready {work}/out && break; sleep 0.1; done
        grep -q ready {work}/out
    """, user="root")
    yield lambda: [json.loads(line) for line in workstation.path(log).read_text().splitlines()]
    workstation.run(["sh", "-c", f"kill $(cat {work}/pid)"], user="root", check=False)


@pytest.fixture(scope="module")
def provider(workstation, internet):
    with fake_provider(workstation, internet, ANSWER) as running:
        yield running


def session(ws, script, gate_path, budgets, credentials=None):
    argv = ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws), "-e", f"project={PROJECT}",
            "-e", json.dumps(dict({"aisb_allow": [f"allowed.test:{PORT}"]}, **budgets)), *through(gate_path),
            "-e", json.dumps({"command": ["bash", "-c", script]})]
    if credentials:
        argv += ["-e", json.dumps({"aisb_credentials": credentials})]
    result = ws.run(argv, check=False, env=ANSIBLE_ENV, timeout=900)
    record = record_of(ws, result.stdout)
    transcript = ws.path(record["transcript"]).read_text()
    return result, record, transcript, dict(re.findall(r"^RESULT ([\w-]+)=(.*)$", transcript, re.M))


def test_uploads_past_the_budget_are_cut_and_the_record_says_so(workstation, server, provider, gate_path):
    before = len(server())
    credentials = [{"host": PROVIDER, "port": PROVIDER_PORT, "header": "x-api-key", "variable": "ANTHROPIC_API_KEY",
                    "value": "sk-upload-test-" + uuid.uuid4().hex}]
    result, record, transcript, results = session(
        workstation, ATTACKS + UPLOADS, gate_path,
        {"aisb_upload_budget": BUDGET, "aisb_provider_upload_budget": PROVIDER_BUDGET}, credentials)
    assert record["status"] == "exited" and record["exit_code"] == 0, (record["reason"], transcript[-3000:])
    # Two fit in the budget; the third is reset part way, and so is every later request.
    assert results["put1"] == "0 200" and results["put2"] == "0 200", transcript[-3000:]
    assert not results["put3"].endswith(" 200") and not results["after"].endswith(" 200"), transcript[-3000:]
    received = server()[before:]
    total = sum(entry["received"] for entry in received)
    print("upload budget %d (%s): the server received %d bytes over %d connections: %s"
          % (BUDGET, gate_path, total, len(received), received))
    assert 6 * MIB < total <= BUDGET + SLACK, received
    assert [entry["complete"] for entry in received if entry["method"] == "PUT"].count(True) == 2, received
    # The gate's log says where the bytes went: what squid read from the sandbox, by host.
    by_host = record["gate"]["sent_by_host"]
    print("the gate read %s from the sandbox" % by_host)
    assert 6 * MIB < by_host.get("allowed.test", 0) <= BUDGET, by_host
    upload = record["upload"]
    assert upload["status"] == "upload-budget-exceeded" and upload["gate"]["spent_at"], upload
    assert upload["gate"]["budget"] == BUDGET and upload["gate"]["sent"] == BUDGET, upload
    # The provider route has its own budget: it still answers, and it was counted.
    assert results["provider"] == "0", transcript[-3000:]
    assert upload["injector"]["budget"] == PROVIDER_BUDGET and 0 < upload["injector"]["sent"] < PROVIDER_BUDGET
    assert upload["injector"]["spent_at"] is None, upload
    # The watch saw the quota spent, never a change of the table; the canaries' CONNECT,
    # reset like every packet with payload to the gate, is no loss either.
    assert record["enforcement_watch"]["lost"] is None, record["enforcement_watch"]
    assert record["enforcement_watch"]["canaries"]["rounds"] >= 4, record["enforcement_watch"]["canaries"]
    assert list(record["enforcement_watch"]["quota_spent"]) == ["upload_%d" % upload_port(record)]
    # The agent cannot remove the quota or the table, nor send UDP to the gate's port.
    assert results["delete-quota"] not in ("0", "127") and results["flush"] not in ("0", "127"), transcript[-3000:]
    assert "Operation not permitted" in transcript, transcript[-3000:]
    if gate_path == "map-host-loopback":
        assert results["udp"] != "0", transcript[-3000:]
    assert "upload-budget-exceeded" in result.stdout, result.stdout[-3000:]


def upload_port(record):
    return int(re.search(r"^gate \S+ (\d+)$", record["policy"], re.M).group(1))


def test_a_large_download_spends_almost_nothing_of_the_budget(workstation, server):
    result, record, transcript, results = session(workstation, DOWNLOAD_SCRIPT, "map-host-loopback",
                                                  {"aisb_upload_budget": BUDGET})
    assert results.get("download") == "200 %d" % DOWNLOAD, transcript[-3000:]
    upload = record["upload"]
    print("a %d-byte download sent %s bytes to the gate (budget %d)" % (DOWNLOAD, upload["gate"]["sent"], BUDGET))
    # Pure ACKs pass uncounted: what counts is the request itself.
    assert upload["status"] == "within-budget" and upload["gate"]["sent"] < BUDGET // 100, upload
    assert record["enforcement_watch"]["lost"] is None and result.returncode == 0


# The most one round of the session's canaries may send to the gate: two CONNECTs and a
# ClientHello of one key share (the host's OpenSSL 3.5 offers a post-quantum one of its
# own, 1561 bytes in all, and spent 1.3 MB of a budget an hour).
CANARY_ROUND_BYTES = 1024


def test_the_canaries_spend_little_of_the_budget(workstation, server):
    """An idle session's bytes to the gate are its canaries' (and the entrypoint's checks,
    once): what each round costs a budget, from the record (bytes the kernel counted)."""
    rounds = {}
    for seconds in (3, 33):
        _result, record, transcript, _results = session(workstation, f"sleep {seconds}", "map-host-loopback",
                                                        {"aisb_upload_budget": BUDGET})
        canaries = record["enforcement_watch"]["canaries"]
        assert canaries["failed"] is None and record["upload"]["status"] == "within-budget", transcript[-2000:]
        rounds[seconds] = (canaries["rounds"], record["upload"]["gate"]["sent"])
    (short_rounds, short_sent), (long_rounds, long_sent) = rounds[3], rounds[33]
    assert long_rounds > short_rounds, rounds
    per_round = (long_sent - short_sent) / (long_rounds - short_rounds)
    print("the canaries sent %.0f bytes a round to the gate (%s)" % (per_round, rounds))
    # A round sends before its answer is counted: one may be in flight at the end.
    assert 0 < long_sent - short_sent <= (long_rounds - short_rounds + 1) * CANARY_ROUND_BYTES, rounds


def test_without_a_budget_the_table_has_no_quota(workstation, server):
    _result, record, transcript, results = session(
        workstation, f"curl -s -o /dev/null -w 'RESULT put=%{{http_code}}\\n' -T /etc/os-release "
                     f"http://allowed.test:{PORT}/plain", "map-host-loopback", {})
    assert results.get("put") == "200", transcript[-3000:]
    assert record["upload"] is None and "budget" not in record["policy"]
    assert not any("quota" in line or "upload_" in line for line in record["enforcement_watch"]["table"])


# A methods entry narrows the name's plain HTTP: a GET passes, a POST (or a method the
# list does not name, in any case) gets the gate's 403; a CONNECT tunnel to the same
# name cannot be narrowed without interception, so a POST inside TLS reaches the server.
METHODS_SCRIPT = """
for method in GET POST post PUT; do
  echo "RESULT $method=$(curl -s -o /dev/null -w '%{http_code}' -X $method http://allowed.test/methods-$method)"
done
echo "RESULT tls-POST=$(curl -sk -o /dev/null -w '%{http_code}' -X POST https://allowed.test/in-tls)"
"""


def test_a_methods_entry_lets_its_methods_through_and_refuses_the_rest(workstation, internet):
    argv = ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(workstation), "-e", f"project={PROJECT}",
            "-e", json.dumps({"aisb_allow": ["allowed.test methods=GET,HEAD"]}),
            "-e", json.dumps({"command": ["bash", "-c", METHODS_SCRIPT]})]
    workstation.sh(f"mkdir -p {PROJECT}")
    before = len(internet.requests())
    result = workstation.run(argv, check=False, env=ANSIBLE_ENV, timeout=900)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    results = dict(re.findall(r"^RESULT ([\w-]+)=(.*)$", transcript, re.M))
    assert results["GET"] == "200", transcript[-3000:]
    assert results["POST"] == results["post"] == results["PUT"] == "403", transcript[-3000:]
    # squid reads a known method in any case as that method (its log says POST for post).
    denied = sorted(entry["method"].upper() for entry in record["gate"]["denied"])
    assert denied == ["POST", "POST", "PUT"], record["gate"]
    assert [r["path"] for r in internet.requests()[before:] if r["port"] == 80] == ["/methods-GET"]
    # The tunnel carried the POST unread (the listener answers a POST 501: it got there).
    assert results["tls-POST"] == "501", transcript[-3000:]


def test_a_pi_session_s_bytes_up_are_in_its_record(workstation, provider):
    """A typical session's figure for docs/sessions.md: pi answers one prompt through the
    fake provider (the injector) with both budgets set, far above what it sends."""
    workstation.sh(f"mkdir -p {PROJECT}")
    argv = ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(workstation), "-e", f"project={PROJECT}",
            "-e", json.dumps({"aisb_upload_budget": BUDGET, "aisb_provider_upload_budget": 64 * MIB,
                              "aisb_credentials": [{"host": PROVIDER, "port": PROVIDER_PORT, "header": "x-api-key",
                                                    "variable": "ANTHROPIC_API_KEY",
                                                    "value": "sk-upload-test-" + uuid.uuid4().hex}]}),
            # pi as the recipe runs it, then a reading of the table after its last request.
            "-e", json.dumps({"command": ["bash", "-c", "pi -p 'Say the answer.'; code=$?; sleep 3; exit $code"]})]
    result = workstation.run(argv, check=False, env=ANSIBLE_ENV, timeout=900)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    assert result.returncode == 0 and ANSWER in transcript, result.stdout[-3000:] + transcript[-3000:]
    upload = record["upload"]
    print("one pi prompt and answer sent %s bytes to the gate and %s to the injector; the gate read %s"
          % (upload["gate"]["sent"], upload["injector"]["sent"], record["gate"]["sent_by_host"]))
    assert upload["status"] == "within-budget" and 0 < upload["injector"]["sent"] < 64 * MIB, upload
