# SPDX-License-Identifier: GPL-3.0-or-later
"""codex and opencode as their users run them, headless: each built from its pinned npm
package, its operator configuration read-only in the sandbox, its provider's key held by
the credential injector (the sandbox only ever sees a placeholder), its conversation kept
per project and resumed, its exit code in the record (a provider's error fails the
run), and nothing refused by the gate as it starts. Real harnesses, through the gate,
against the fake provider (OpenAI Responses for codex, chat completions for opencode)."""

import json
import re
import uuid

import pytest

from fake_provider import FAIL_MARK
from providers import NAME, PORT, fake_provider, write_tree
from sessions import record_of, run_agent

TAG = uuid.uuid4().hex[:8]
ANSWER = "FAKE-OPENAI-ANSWER-" + TAG
KEY = "sk-aisb-openai-" + uuid.uuid4().hex
AGENTS_MARK = "AGENTS-MARK-" + TAG
FIRST = "First question " + TAG
BASE_URL = f"https://{NAME}:{PORT}/v1"
# The operator's provider of their own, its key only ever through the injector: the
# recipe's endpoint files name the provider's real URL, the session moves it.
CREDENTIALS = [{"host": NAME, "port": PORT, "header": "authorization", "prefix": "Bearer ",
                "variable": "FAKE_PROVIDER_KEY", "value": KEY}]
HARNESSES = {
    "codex": {
        "files": {
            "config.toml": f"""model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{BASE_URL}"
env_key = "FAKE_PROVIDER_KEY"
wire_api = "responses"
""",
            "AGENTS.md": f"Operator rules. {AGENTS_MARK}\n",
        },
        "path": "/v1/responses",
        "resume": ["codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
                   "resume", "--last"],
        "state": {"/home/agent/.codex/sessions": "codex-sessions"},
    },
    "opencode": {
        "files": {
            "opencode.json": json.dumps({
                "model": "fake/fake-model", "small_model": "fake/fake-model",
                "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                      "options": {"baseURL": BASE_URL, "apiKey": "{env:FAKE_PROVIDER_KEY}"},
                                      "models": {"fake-model": {"name": "Fake model"}}}}}),
            "AGENTS.md": f"Operator rules. {AGENTS_MARK}\n",
        },
        "path": "/v1/chat/completions",
        "resume": ["opencode", "run", "--auto", "--continue"],
        "state": {"/home/agent/.local/share/opencode": "opencode-data"},
    },
}


@pytest.fixture(scope="module")
def provider(workstation, internet):
    with fake_provider(workstation, internet, ANSWER) as running:
        yield running


@pytest.fixture(scope="module", params=sorted(HARNESSES))
def harness(request, workstation, provider):
    """A harness's name, with its project and the operator's configuration in place."""
    name = request.param
    project, config = f"/home/dev/src/openai-{name}", f"/home/dev/{name}-config"
    workstation.sh(f"mkdir -p {project} && echo 'print(1)' >{project}/main.py")
    write_tree(workstation, config, HARNESSES[name]["files"])
    return name, project, config


def session(ws, harness, prompt=None, command=None, timeout=1800):
    """run_agent.yml with HARNESS (its first session builds its image: minutes)."""
    name, project, config = harness
    variables = {"aisb_harness": name, "aisb_credentials": CREDENTIALS, "aisb_harness_config": config}
    if prompt is not None:
        variables["prompt"] = prompt
    result = run_agent(ws, "-e", json.dumps(variables), command=command, project=project, timeout=timeout)
    record = record_of(ws, result.stdout)
    return result, record, ws.path(record["transcript"]).read_text()


def requests_since(provider, before):
    """The requests that reached the provider since BEFORE, each with the real key."""
    got = provider.requests()[before:]
    assert got, "no request reached the provider"
    for request in got:
        headers = dict((k.lower(), v) for k, v in request["headers"])
        assert headers.get("authorization") == "Bearer " + KEY, (request["path"], headers)
    return got


def test_answers_through_the_injector_and_resumes_the_projects_conversation(workstation, provider, harness):
    name = harness[0]
    recipe = HARNESSES[name]
    before = len(provider.requests())
    result, record, transcript = session(workstation, harness, prompt=FIRST)
    assert result.returncode == 0 and record["exit_code"] == 0, result.stdout[-3000:] + transcript[-3000:]
    assert ANSWER in transcript, transcript[-3000:]
    got = requests_since(provider, before)
    asked = [r for r in got if r["method"] == "POST" and r["path"] == recipe["path"] and FIRST in r["body"]]
    assert asked, [(r["method"], r["path"]) for r in got]
    assert AGENTS_MARK in asked[-1]["body"], "the operator's AGENTS.md did not reach the model"
    # Nothing refused as it started: whatever it fetches is in the image or turned off.
    assert record["gate"]["denied"] == [], record["gate"]["denied"]
    assert [(e["host"], e["status"]) for e in record["credentials"]["injected"]][:1] == [(f"{NAME}:{PORT}", 200)]
    assert sorted(record["harness_config"]) == sorted(
        "%s/%s" % ({"codex": "/home/agent/.codex", "opencode": "/home/agent/.config/opencode"}[name], f)
        for f in recipe["files"])
    kept = record["harness_state"]
    assert kept["mounts"] == dict((inside, kept["dir"] + "/" + sub) for inside, sub in recipe["state"].items())
    for where, text in (("transcript", transcript), ("record", json.dumps(record)), ("output", result.stdout)):
        assert KEY not in text, "the key is in the " + where
    # The figures docs/harnesses.md gives: the build's time (when this session built it) and the size.
    built = re.search(r"built \S+ from \S+ in (\d+) s", result.stdout)
    size = workstation.run(["podman", "image", "inspect", "--format", "{{.Size}}", record["image"]["tag"]]).stdout
    print(f"\n{name}: image {record['image']['tag']} size {int(size) / 1e6:.0f} MB, "
          f"build {built.group(1) + ' s' if built else 'not built by this session'}")

    before = len(provider.requests())
    result, record, transcript = session(workstation, harness, command=recipe["resume"] + ["Again " + TAG])
    assert result.returncode == 0 and record["exit_code"] == 0, result.stdout[-3000:] + transcript[-3000:]
    again = [r for r in requests_since(provider, before) if "Again " + TAG in r["body"]]
    assert again, "the resumed run asked nothing"
    # The second request carries the first exchange: the first question and its answer.
    assert FIRST in again[-1]["body"] and ANSWER in again[-1]["body"], again[-1]["body"][-2000:]
    assert record["harness_state"]["dir"] == kept["dir"]
    assert record["gate"]["denied"] == [], record["gate"]["denied"]


def test_a_provider_error_fails_the_run_and_the_play(workstation, provider, harness):
    before = len(provider.requests())
    result, record, transcript = session(workstation, harness, prompt="Fail now " + FAIL_MARK, timeout=900)
    assert any(FAIL_MARK in r["body"] for r in requests_since(provider, before)), "the provider was never asked"
    assert record["status"] == "exited" and record["exit_code"] not in (0, None), (record["status"], transcript[-3000:])
    assert result.returncode != 0, result.stdout[-3000:]
    assert "fake provider refused" in transcript, transcript[-3000:]
