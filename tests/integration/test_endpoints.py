# SPDX-License-Identifier: GPL-3.0-or-later
"""A model provider on plain http://, reached by pi (a Node harness) through the gate,
with real traffic: a fake provider on port 80 of an allowed name in the test internet.

Node's proxy agent (undici's EnvHttpProxyAgent, which pi installs for every request)
sends even an http:// URL as CONNECT host:80, which the gate refuses: CONNECT goes to
the CONNECT ports only, and a CONNECT to 80 would be a tunnel the gate cannot read
(docs/security.md, "Plain-HTTP endpoints"). So the refusal names its fix in the record
and in the play's output, and with that fix (the operator's 'host:80' entry) pi answers.
"""

import json
import re
import uuid

import pytest

from providers import PlainProvider, addresses
from sessions import record_of, run_agent

NAME = "plain-models.test"
ANSWER = "PLAIN-HTTP-ANSWER-" + uuid.uuid4().hex[:8]
MODELS = json.dumps({"providers": {"anthropic": {"baseUrl": f"http://{NAME}"}}})
# pi against the provider; beside it the same request as pi's own proxy agent makes it
# (undici's EnvHttpProxyAgent from pi's installation), and curl's plain HTTP through the
# gate (an absolute URL, no CONNECT).
SCRIPT = f"""
mkdir -p ~/.pi/agent && printf '%s' '{MODELS}' >~/.pi/agent/models.json
PI=$(npm root -g)/@mariozechner/pi-coding-agent node -e '
  const undici = require(require.resolve("undici", {{paths: [process.env.PI]}}));
  undici.fetch("http://{NAME}/node-fetch", {{dispatcher: new undici.EnvHttpProxyAgent()}}).then(
    (r) => console.log("RESULT node=" + r.status),
    (e) => console.log("RESULT node=error " + ((e.cause && e.cause.message) || e.message)));'
curl -s -o /dev/null -w 'RESULT curl=%{{http_code}}\\n' http://{NAME}/curl-plain
ANTHROPIC_API_KEY=sk-fake-key timeout 120 pi -p 'Say the answer.'
code=$?
echo "RESULT pi=$code"
exit $code
"""


@pytest.fixture(scope="module")
def provider(workstation, internet):
    public, _private, _other = addresses(internet)
    hosts = workstation.path("/etc/hosts")
    before = hosts.read_text()
    hosts.write_text(before + f"{public} {NAME}\n")
    started = PlainProvider(workstation, internet, public, 80, ANSWER)
    workstation.sh("mkdir -p /home/dev/src/endpoints")
    yield started
    started.stop()
    hosts.write_text(before)


def session(workstation, *entries):
    result = run_agent(workstation, "-e", json.dumps({"aisb_allow": list(entries)}), command=["bash", "-c", SCRIPT],
                       project="/home/dev/src/endpoints", timeout=600)
    record = record_of(workstation, result.stdout)
    transcript = workstation.path(record["transcript"]).read_text()
    return result, record, transcript, dict(re.findall(r"^RESULT (\w+)=(.*)$", transcript, re.M))


def test_plain_http_through_a_node_agent_is_refused_and_the_refusal_names_the_fix(workstation, provider):
    before = len(provider.requests())
    result, record, transcript, results = session(workstation, NAME)
    assert results.get("curl") == "200", transcript[-3000:]  # the gate reads plain HTTP and relays it
    assert results.get("node", "").startswith("error"), transcript[-3000:]
    assert results.get("pi") not in (None, "0") and ANSWER not in transcript, transcript[-3000:]
    assert "Connection error" in transcript, transcript[-3000:]
    assert [r["path"] for r in provider.requests()[before:]] == ["/curl-plain"]
    refused = [e for e in record["gate"]["denied"] if e["method"] == "CONNECT"]
    assert refused and {e["url"] for e in refused} == {f"{NAME}:80"}, record["gate"]
    hint = (f"the gate refused CONNECT {NAME}:80: CONNECT goes to ports 443 only, and Node harnesses (pi) "
            f"tunnel http:// URLs with CONNECT; use https://, or add '{NAME}:80' to aisb_allow")
    assert len(record["gate"]["hints"]) == 1 and record["gate"]["hints"][0].startswith(hint), record["gate"]
    # In the play's output: the failed task's message and its warning.
    output = re.sub(r"\s+", " ", result.stdout)
    assert result.returncode != 0 and output.count(f"add '{NAME}:80' to aisb_allow") >= 2, result.stdout[-3000:]


def test_the_operators_host_80_entry_lets_pi_answer_over_plain_http(workstation, provider):
    before = len(provider.requests())
    result, record, transcript, results = session(workstation, f"{NAME}:80")
    assert result.returncode == 0, result.stdout[-3000:] + transcript[-3000:]
    assert results.get("node") == "200" and results.get("curl") == "200" and results.get("pi") == "0", transcript
    assert ANSWER in transcript, transcript[-3000:]
    got = [r["path"] for r in provider.requests()[before:]]
    assert "/node-fetch" in got and "/curl-plain" in got and any(p.startswith("/v1/messages") for p in got), got
    assert record["gate"]["hints"] == []
    assert f"{NAME}:80" in {e["url"] for e in record["gate"]["allowed"] if e["method"] == "CONNECT"}, record["gate"]
