# SPDX-License-Identifier: GPL-3.0-or-later
"""Claude Code (the claude-code recipe) as its users run it: headless through the gate
and the credential injector against the fake provider (Anthropic Messages, streamed),
its exit code in the record, the operator's configuration read-only, its conversations
kept per project (claude --continue), the key never in the sandbox, and nothing asked of
the network at start but the provider."""

import base64
import json
import re
import uuid

import pytest

from fake_provider import FAIL_MARK
from providers import NAME, PORT, fake_provider, write_tree
from sessions import record_of, run_agent
from workstation import AISB_STATE

PROJECT = "/home/dev/src/claude"
CONFIG = "/home/dev/claude-config"
TAG = uuid.uuid4().hex[:8]
ANSWER = "FAKE-CLAUDE-ANSWER-" + TAG
KEY = "sk-aisb-claude-" + uuid.uuid4().hex
MARKS = {name: "%s-MARK-%s" % (name.upper(), TAG) for name in ("memory", "command")}
CLAUDE_DIR = "/home/agent/.claude"
HARNESS = ["-e", "aisb_harness=claude-code"]
CREDENTIALS = [{"host": NAME, "port": PORT, "header": "x-api-key", "variable": "ANTHROPIC_API_KEY", "value": KEY}]
CONFIG_FILES = {
    "settings.json": json.dumps({"model": "fake-model"}),
    "CLAUDE.md": f"Operator rules. {MARKS['memory']}\n",
    "commands/aisb-check.md": f"---\ndescription: a check\n---\nSay the answer. {MARKS['command']}\n",
}
# Searched for inside the sandbox without the key on any command line or in any file
# there: the pattern comes through a pipe, decoded there (as test_credentials.py does).
PATTERN = f'<(printf %s {base64.b64encode(KEY.encode()).decode()} | base64 -d)'
SEARCH = (f"echo environ-hits-begin; grep -l -s -F -f {PATTERN} /proc/[0-9]*/environ; echo environ-hits-end; "
          f"echo fs-hits-begin; grep -r -l -s -F --exclude-dir=proc --exclude-dir=sys -f {PATTERN} / /project; "
          "echo fs-hits-end")


@pytest.fixture(scope="module")
def provider(workstation, internet):
    """The fake provider, the project and the operator's configuration directory."""
    with fake_provider(workstation, internet, ANSWER) as running:
        workstation.sh(f"mkdir -p {PROJECT}")
        write_tree(workstation, CONFIG, CONFIG_FILES)
        yield running


def session(ws, *extra, prompt=None, command=None, config=CONFIG):
    """run_agent.yml with the claude-code recipe, the credentials and the configuration."""
    variables = {"aisb_credentials": CREDENTIALS, "aisb_harness_config": config}
    if prompt is not None:
        variables["prompt"] = prompt
    return run_agent(ws, *HARNESS, "-e", json.dumps(variables), *extra, command=command, project=PROJECT,
                     timeout=1800)


def outcome(ws, result):
    """The record and transcript of the session whose playbook printed RESULT."""
    record = record_of(ws, result.stdout)
    return record, ws.path(record["transcript"]).read_text()


def requests_since(provider, before):
    """The requests the provider got since BEFORE, each carrying the real key."""
    got = provider.requests()[before:]
    assert got, "no request reached the provider"
    for request in got:
        headers = dict((k.lower(), v) for k, v in request["headers"])
        assert headers["x-api-key"] == KEY, headers
    return got


def gate_requests(record):
    """Every request the session's gate saw, allowed or refused: (verdict, method, url)."""
    gate = record["gate"]
    return ([("allowed", e["method"], e["url"]) for e in gate["allowed"]]
            + [("denied", e["method"], e["url"]) for e in gate["denied"]])


def between(text, name):
    return re.search(f"^{name}-begin$(.*?)^{name}-end$", text, re.M | re.S).group(1).split()


def test_claude_answers_headless_reads_the_configuration_and_continues_the_conversation(workstation, provider):
    before = len(provider.requests())
    result = session(workstation, prompt="/aisb-check")
    record, transcript = outcome(workstation, result)
    assert result.returncode == 0 and record["exit_code"] == 0, result.stdout[-3000:] + transcript[-3000:]
    assert ANSWER in transcript, transcript[-3000:]
    got = requests_since(provider, before)
    assert all(r["path"].startswith("/v1/messages") for r in got), [r["path"] for r in got]
    body = got[-1]["body"]
    assert json.loads(body)["model"] == "fake-model"  # the operator's settings.json
    for name, mark in MARKS.items():
        assert mark in body, f"the operator's {name} did not reach Claude Code"
    # Nothing but the provider, and that through the injector: the gate saw no request.
    assert gate_requests(record) == [], record["gate"]
    assert sorted(record["harness_config"]) == [f"{CLAUDE_DIR}/{name}" for name in
                                                ("CLAUDE.md", "commands", "settings.json")]
    kept = record["harness_state"]
    assert kept["dir"].startswith(f"{AISB_STATE}/harness-state/") and kept["mode"] == "keep"
    assert kept["mounts"] == {f"{CLAUDE_DIR}/projects": kept["dir"] + "/claude-projects"}
    conversations = list(workstation.path(kept["dir"] + "/claude-projects").rglob("*.jsonl"))
    assert len(conversations) == 1 and ANSWER in conversations[0].read_text(), conversations

    before = len(provider.requests())
    command = ["claude", "--permission-mode", "bypassPermissions", "--continue", "-p", "Again."]
    result = session(workstation, command=command)
    record, transcript = outcome(workstation, result)
    assert result.returncode == 0, result.stdout[-3000:] + transcript[-3000:]
    messages = json.dumps(json.loads(requests_since(provider, before)[-1]["body"])["messages"])
    # The second request carries the first exchange: the expanded command and the answer.
    assert MARKS["command"] in messages and ANSWER in messages and "Again." in messages, messages[-2000:]
    assert record["harness_state"]["dir"] == kept["dir"]


def test_a_provider_error_is_a_non_zero_exit_code_in_the_record(workstation, provider):
    before = len(provider.requests())
    result = session(workstation, prompt=f"Fail now: {FAIL_MARK}")
    record, transcript = outcome(workstation, result)
    assert requests_since(provider, before), "the failing request never reached the provider"
    assert result.returncode != 0, result.stdout[-3000:]
    assert record["status"] == "exited" and record["exit_code"] == 1, record
    assert "API Error: 400" in transcript and FAIL_MARK in transcript, transcript[-3000:]


def test_the_key_reaches_the_provider_and_the_sandbox_holds_only_a_placeholder(workstation, provider):
    before = len(provider.requests())
    script = ("claude --permission-mode bypassPermissions -p 'Say the answer.'; echo claude-rc=$?; "
              "echo placeholder=$ANTHROPIC_API_KEY; echo base=$ANTHROPIC_BASE_URL; " + SEARCH)
    result = session(workstation, command=["bash", "-c", script], config=None)
    record, transcript = outcome(workstation, result)
    assert result.returncode == 0, result.stdout[-3000:] + transcript[-3000:]
    assert ANSWER in transcript and "claude-rc=0" in transcript, transcript[-3000:]
    requests_since(provider, before)  # each with the real key
    placeholder = re.search(r"^placeholder=(\S+)$", transcript, re.M).group(1)
    assert placeholder.startswith("aisb-placeholder-")
    base = re.search(r"^base=(\S+)$", transcript, re.M).group(1)
    # The injector, where the sandbox reaches the gate's address, on this entry's route.
    assert re.fullmatch(r"http://[0-9.]+:[0-9]+/%s:%d" % (re.escape(NAME), PORT), base), base
    assert between(transcript, "environ-hits") == [], "the key is in a sandbox process's environment"
    assert between(transcript, "fs-hits") == [], "the key is in a file the sandbox can read"
    assert KEY not in transcript and KEY not in result.stdout


def test_nothing_is_fetched_at_start_and_without_the_recipes_switch_something_is(workstation, provider):
    """Claude Code's TUI on a terminal (script's) until its first screen is up (the trust
    of /project: its onboarding, whose connectivity check to api.anthropic.com and
    platform.claude.com fails and exits, is marked done in the image) and a little after,
    then headless: the gate sees no request at all. The control: the same headless run
    without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC asks the gate for more."""
    tui = """
        TERM=xterm script -qfec "stty cols 100 rows 30; exec claude" /tmp/tui >/dev/null &
        for _ in $(seq 240); do grep -qiE 'trust.*folder|Unable to connect' /tmp/tui 2>/dev/null && break; sleep 0.5; done
        sleep 8
        kill -KILL $!
        echo tui-begin; cat /tmp/tui; echo; echo tui-end
        claude --permission-mode bypassPermissions -p 'Say the answer.'; echo claude-rc=$?
        sleep 5
    """
    result = session(workstation, command=["bash", "-c", tui], config=None)
    record, transcript = outcome(workstation, result)
    assert result.returncode == 0, result.stdout[-3000:] + transcript[-3000:]
    screen = transcript[transcript.index("tui-begin"):transcript.index("tui-end")]
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", " ", screen)  # its cursor moves stand between words
    assert "Unable to connect" not in screen, screen[-3000:]
    assert re.search(r"trust\s*this\s*folder", screen), "Claude Code's TUI never came up: " + screen[-3000:]
    assert "claude-rc=0" in transcript and ANSWER in transcript, transcript[-3000:]
    assert gate_requests(record) == [], record["gate"]

    control = ("env -u CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC claude --permission-mode bypassPermissions "
               "-p 'Say the answer.'; echo claude-rc=$?; sleep 5")
    result = session(workstation, command=["bash", "-c", control], config=None)
    record, transcript = outcome(workstation, result)
    assert "claude-rc=0" in transcript, transcript[-3000:]
    assert gate_requests(record), "without the switch, Claude Code asked the gate for nothing: the test proves nothing"
