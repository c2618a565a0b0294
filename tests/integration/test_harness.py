# SPDX-License-Identifier: GPL-3.0-or-later
"""The harness as its users run it (pi): the operator's configuration read-only in the
sandbox, its conversations kept per project (pi --continue), nothing the agent can plant
there followed by the host, and nothing downloaded at start. Real pi, through the gate
and the credential injector, against the fake provider."""

import json
import uuid

import pytest

from providers import NAME, PI_CONFIG_FILES, PORT, fake_provider, write_tree
from sessions import record_of, run_agent, session_dirs
from workstation import AISB_STATE

PROJECT = "/home/dev/src/harness"
OTHER = "/home/dev/src/harness-other"
CONFIG = "/home/dev/pi-config"
VICTIM = "/home/dev/victim"
TAG = uuid.uuid4().hex[:8]
ANSWER = "FAKE-HARNESS-ANSWER-" + TAG
KEY = "sk-aisb-harness-" + uuid.uuid4().hex
MARKS = {name: "%s-MARK-%s" % (name.upper(), TAG) for name in ("system", "agents", "template", "skill")}
AGENT_DIR = "/home/agent/.pi/agent"
# A provider of the operator's own in models.json: its key only ever through the injector.
CREDENTIALS = [{"host": NAME, "port": PORT, "header": "x-api-key", "variable": "FAKE_PROVIDER_KEY", "value": KEY}]
CONFIG_FILES = {
    **PI_CONFIG_FILES,
    "SYSTEM.md": f"You are a test harness. {MARKS['system']}\n",
    "AGENTS.md": f"Project rules. {MARKS['agents']}\n",
    "prompts/aisb-check.md": f"---\ndescription: a check\n---\nSay the answer. {MARKS['template']}\n",
    "skills/aisb-skill/SKILL.md": f"---\nname: aisb-skill\ndescription: Use for checks. {MARKS['skill']}\n---\nCheck.\n",
}


@pytest.fixture(scope="module")
def provider(workstation, internet):
    """The fake provider, the two projects and the operator's configuration directory."""
    with fake_provider(workstation, internet, ANSWER) as running:
        workstation.sh(f"mkdir -p {PROJECT} {OTHER} {VICTIM} && echo kept >{VICTIM}/file")
        write_tree(workstation, CONFIG, CONFIG_FILES)
        yield running


def session(ws, *extra, project=PROJECT, config=CONFIG, prompt=None, command=None):
    """run_agent.yml with the credentials and the harness configuration."""
    variables = {"aisb_credentials": CREDENTIALS, "aisb_harness_config": config}
    if prompt is not None:
        variables["prompt"] = prompt
    return run_agent(ws, "-e", json.dumps(variables), *extra, command=command, project=project, timeout=600)


def finished(ws, result):
    """The record of a session that must have exited 0, with its transcript."""
    record = record_of(ws, result.stdout)
    transcript = ws.path(record["transcript"]).read_text()
    assert result.returncode == 0, result.stdout[-3000:] + transcript[-3000:]
    return record, transcript


def last_request(provider, before):
    """The last request the provider got since BEFORE requests, with its key header checked."""
    got = provider.requests()[before:]
    assert got, "no request reached the provider"
    assert all(dict((k.lower(), v) for k, v in r["headers"])["x-api-key"] == KEY for r in got)
    return got[-1]["body"]


def test_pi_reads_the_operators_configuration_and_continues_the_projects_conversation(workstation, provider):
    before = len(provider.requests())
    record, transcript = finished(workstation, session(workstation, prompt="/aisb-check"))
    assert ANSWER in transcript, transcript[-3000:]
    body = last_request(provider, before)
    assert json.loads(body)["model"] == "fake-model"  # settings.json chose models.json's provider
    for name, mark in MARKS.items():
        assert mark in body, f"{name} did not reach pi"
    assert sorted(record["harness_config"]) == [f"{AGENT_DIR}/{name}" for name in (
        "AGENTS.md", "SYSTEM.md", "models.json", "prompts", "settings.json", "skills")]
    kept = record["harness_state"]
    assert kept["dir"].startswith(f"{AISB_STATE}/harness-state/") and kept["mode"] == "keep"
    assert kept["mounts"] == {f"{AGENT_DIR}/sessions": kept["dir"] + "/pi-sessions"}
    conversations = list(workstation.path(kept["dir"] + "/pi-sessions").rglob("*.jsonl"))
    assert len(conversations) == 1 and ANSWER in conversations[0].read_text()
    assert workstation.path(kept["dir"] + "/project").read_text() == PROJECT + "\n"

    before = len(provider.requests())
    record, transcript = finished(workstation, session(workstation, command=["pi", "--continue", "-p", "Again."]))
    body = last_request(provider, before)
    # The second request carries the first exchange: the expanded template and the answer.
    messages = json.dumps(json.loads(body)["messages"])
    assert MARKS["template"] in messages and ANSWER in messages and "Again." in messages, messages[-2000:]
    assert record["harness_state"]["dir"] == kept["dir"]


def test_the_agent_cannot_write_the_configuration_nor_see_another_projects_state(workstation, provider):
    script = f"""
        echo tampered >>{AGENT_DIR}/AGENTS.md; echo agents=$?
        touch {AGENT_DIR}/prompts/planted.md; echo prompts=$?
        mv {AGENT_DIR}/settings.json {AGENT_DIR}/moved.json; echo settings=$?
        echo sessions=$(ls -A {AGENT_DIR}/sessions | wc -l)
        echo state=$(ls -d {AISB_STATE} 2>/dev/null | wc -l)
    """
    record, transcript = finished(workstation, session(workstation, project=OTHER, command=["bash", "-c", script]))
    outcome = dict(line.split("=", 1) for line in transcript.split() if "=" in line)
    assert outcome["agents"] != "0" and outcome["prompts"] != "0" and outcome["settings"] != "0", transcript
    assert outcome["sessions"] == "0", "another project's conversations are visible"
    assert outcome["state"] == "0"
    assert workstation.path(f"{CONFIG}/AGENTS.md").read_text() == CONFIG_FILES["AGENTS.md"]
    session_copy = workstation.path(record["record"]).parent / "harness-config"
    assert (session_copy / "AGENTS.md").read_text() == CONFIG_FILES["AGENTS.md"]
    assert not (session_copy / "prompts" / "planted.md").exists()
    first = record_of(workstation, session(workstation, command=["true"]).stdout)["harness_state"]["dir"]
    assert record["harness_state"]["dir"] != first


def test_fresh_wipes_the_state_without_following_what_the_agent_planted(workstation, provider):
    plant = (f"cd {AGENT_DIR}/sessions && ln -s {VICTIM} evil && ln -s / root && mkdir -p locked/deeper && "
             "touch locked/deeper/f && chmod 000 locked/deeper locked && ls -A")
    record, transcript = finished(workstation, session(workstation, command=["bash", "-c", plant]))
    kept = workstation.path(record["harness_state"]["dir"])
    assert {"evil", "root", "locked"} <= set(p.name for p in (kept / "pi-sessions").iterdir())

    before = len(provider.requests())
    result = session(workstation, "-e", "aisb_harness_state=fresh", command=["pi", "--continue", "-p", "Fresh?"])
    record, transcript = finished(workstation, result)
    assert record["harness_state"]["wiped"] is True and record["harness_state"]["mode"] == "fresh"
    assert ANSWER not in json.dumps(json.loads(last_request(provider, before))["messages"]), "not a new conversation"
    left = set(p.name for p in (kept / "pi-sessions").iterdir())
    assert not left & {"evil", "root", "locked"}, left
    assert workstation.path(f"{VICTIM}/file").read_text() == "kept\n", "the wipe followed a planted link"
    assert [p.name for p in kept.parent.iterdir() if ".wiping-" in p.name] == []


def test_a_configuration_with_a_login_file_is_refused_before_anything_starts(workstation, provider):
    bad = "/home/dev/pi-config-bad"
    workstation.sh(f"mkdir -p {bad} && echo '{{}}' >{bad}/auth.json")
    before = session_dirs(workstation)
    result = session(workstation, config=bad, command=["true"])
    assert result.returncode != 0
    assert "aisb_harness_config auth.json is refused" in result.stdout, result.stdout[-3000:]
    assert session_dirs(workstation) == before


def test_pi_starts_without_downloading_anything(workstation, provider):
    """pi's TUI on a terminal (script's), until its header is up and a little after: it
    looks for fd (or fdfind) and rg before the header, and downloads them when missing.
    The control: the same start with a PATH that holds only node and pi."""
    script = f"""
        tui() {{  # pi's terminal, as its user sees it, between two marks
          TERM=xterm script -qfec "stty cols 100 rows 30; PATH=$1 exec pi" /tmp/$2 >/dev/null &
          for _ in $(seq 240); do grep -q 'startup help' /tmp/$2 2>/dev/null && break; sleep 0.5; done
          sleep 3
          kill -KILL $!
          echo "$2-begin"; cat /tmp/$2; echo; echo "$2-end"
        }}
        mkdir /tmp/only-pi && ln -s "$(command -v node)" "$(command -v pi)" /tmp/only-pi/
        tui /tmp/only-pi control
        rm -rf {AGENT_DIR}/bin
        command -v fdfind rg
        tui "$PATH" image
        ls -A {AGENT_DIR}/bin 2>&1 | sed 's/^/bin: /'
    """
    record, transcript = finished(workstation, session(workstation, command=["bash", "-c", script]))
    control = transcript[transcript.index("control-begin"):transcript.index("control-end")]
    assert "fd not found. Downloading" in control and "Failed to download fd" in control, control[-3000:]
    image = transcript[transcript.index("image-begin"):transcript.index("image-end")]
    assert "startup help" in image, "pi's TUI never came up: " + image[-3000:]
    assert "/usr/bin/fdfind" in transcript and "/usr/bin/rg" in transcript
    assert "Downloading" not in image and "Failed to download" not in image, image[-3000:]
    assert "bin: ls: cannot access" in transcript, "pi installed tools of its own"


def test_pi_asks_the_network_for_nothing_at_start(workstation, provider):
    """pi's TUI in a project it never ran in, without the operator's settings (which turn
    its install telemetry off): the recipe's env_values turn off its version check and
    telemetry, so the gate sees no request. The control: the same start without them."""
    def start(prefix):
        script = f"""
            TERM=xterm script -qfec "stty cols 100 rows 30; exec {prefix}pi" /tmp/tui >/dev/null &
            for _ in $(seq 240); do grep -q 'startup help' /tmp/tui 2>/dev/null && break; sleep 0.5; done
            sleep 8
            kill -KILL $!
            grep -c 'startup help' /tmp/tui
        """
        project = f"/home/dev/src/harness-start-{uuid.uuid4().hex[:8]}"
        workstation.sh(f"mkdir -p {project}")
        record, transcript = finished(workstation, session(workstation, project=project, config=None,
                                                           command=["bash", "-c", script]))
        assert transcript.split()[-1] != "0", "pi's TUI never came up: " + transcript[-3000:]
        return record["gate"]

    gate = start("")
    assert gate["allowed"] == [] and gate["denied"] == [], gate
    control = start("env -u PI_SKIP_VERSION_CHECK -u PI_TELEMETRY ")
    assert {"pi.dev:443"} <= {e["url"] for e in control["denied"]}, control
