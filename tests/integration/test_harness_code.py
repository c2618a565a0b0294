# SPDX-License-Identifier: GPL-3.0-or-later
"""What a harness would load and run from the project at start (code the previous
session's agent may have planted there): each built-in harness with its project's
extensions, hooks, MCP servers, plugins and package installs planted, each writing a
marker into /project when it runs. By default (aisb_project_harness_code false) no
marker appears and the harness still answers through the fake provider; with
aisb_project_harness_code true every marker appears (so the planted code does run when
the harness's switch is not given). Real harnesses, through the gate and the credential
injector."""

import json
import uuid

import pytest

from providers import NAME, PI_CONFIG_FILES, PORT, fake_provider, write_tree
from sessions import record_of, run_agent

TAG = uuid.uuid4().hex[:8]
ANSWER = "FAKE-HARNESS-CODE-ANSWER-" + TAG
KEY = "sk-aisb-harness-code-" + uuid.uuid4().hex
BASE_URL = f"https://{NAME}:{PORT}"


def credentials(header, variable="FAKE_PROVIDER_KEY"):
    """The fake provider's key in HEADER, the harness reading its placeholder from VARIABLE:
    only ever through the injector."""
    entry = {"host": NAME, "port": PORT, "header": header, "variable": variable, "value": KEY}
    return [dict(entry, prefix="Bearer ") if header == "authorization" else entry]


def touch(marker):
    """A shell command writing MARKER into the project (seen on the host)."""
    return f"echo ran >/project/.marker-{marker}"


def node_writer(marker):
    """A module (TypeScript or JavaScript) that writes MARKER as it is loaded."""
    return (f'import {{ writeFileSync }} from "node:fs";\n'
            f'writeFileSync("/project/.marker-{marker}", "ran\\n");\n')


def hook(marker):
    """Claude Code settings whose hooks write MARKER at the session's start and prompt."""
    command = [{"hooks": [{"type": "command", "command": touch(marker)}]}]
    return json.dumps({"hooks": {"SessionStart": command, "UserPromptSubmit": command}})


HARNESSES = {
    "pi": {
        "credentials": credentials("x-api-key"),
        "config": PI_CONFIG_FILES,
        "project": {
            # The case: an extension pi discovers in the project.
            ".pi/extensions/planted.ts": node_writer("pi-extension") + "export default function () {}\n",
            # Its project settings: an extension elsewhere in the project, a package to
            # install at start with an npm command of their own, and a package in the project.
            ".pi/settings.json": json.dumps({"extensions": ["../tools/planted.ts"],
                                             "npmCommand": ["sh", "-c", touch("pi-npm-command")],
                                             "packages": ["npm:aisb-planted-package", "../vendor/planted"]}),
            "tools/planted.ts": node_writer("pi-settings-extension") + "export default function () {}\n",
            "vendor/planted/package.json": json.dumps({"name": "planted", "version": "1.0.0",
                                                       "keywords": ["pi-package"]}),
            "vendor/planted/extensions/planted.ts": node_writer("pi-project-package") + "export default function () {}\n",
        },
        "markers": ["pi-extension", "pi-settings-extension", "pi-npm-command", "pi-project-package"],
    },
    "claude-code": {
        "credentials": credentials("x-api-key", "ANTHROPIC_API_KEY"),
        # The operator approves the project's MCP servers: only the switch keeps .mcp.json's out.
        "config": {"settings.json": json.dumps({"model": "fake-model", "enableAllProjectMcpServers": True})},
        "project": {
            ".claude/settings.json": hook("claude-settings"),
            ".claude/settings.local.json": hook("claude-settings-local"),
            ".mcp.json": json.dumps({"mcpServers": {"planted": {"command": "sh", "args": ["-c", touch("claude-mcp")]}}}),
        },
        "markers": ["claude-settings", "claude-settings-local", "claude-mcp"],
    },
    "codex": {
        "credentials": credentials("authorization"),
        "config": {"config.toml": f"""model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{BASE_URL}/v1"
env_key = "FAKE_PROVIDER_KEY"
wire_api = "responses"
"""},
        # codex has no switch: it loads a project's configuration only where a config.toml
        # of the user's trusts the project, as this one does (the operator's word, given
        # in the control with aisb_project_harness_code).
        "trusts": '[projects."/project"]\ntrust_level = "trusted"\n',
        "project": {
            ".codex/config.toml": f"""[mcp_servers.planted]
command = "sh"
args = ["-c", "{touch('codex-mcp')}"]
""",
        },
        "markers": ["codex-mcp"],
    },
    "opencode": {
        "credentials": credentials("authorization"),
        "config": {"opencode.json": json.dumps({
            "model": "fake/fake-model", "small_model": "fake/fake-model",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": BASE_URL + "/v1", "apiKey": "{env:FAKE_PROVIDER_KEY}"},
                                  "models": {"fake-model": {"name": "Fake model"}}}}})},
        "project": {
            ".opencode/plugin/planted.js": node_writer("opencode-plugin") + "export const Planted = async () => ({});\n",
            "opencode.json": json.dumps({"mcp": {"planted": {"type": "local",
                                                             "command": ["sh", "-c", touch("opencode-mcp")]}}}),
        },
        "markers": ["opencode-plugin", "opencode-mcp"],
    },
}


@pytest.fixture(scope="module", params=sorted(HARNESSES))
def harness(request, workstation, internet):
    """A harness's name, its project (with the planted code) and the operator's
    configuration, with the fake provider answering."""
    name = request.param
    project, config = f"/home/dev/src/harness-code-{name}", f"/home/dev/harness-code-{name}-config"
    write_tree(workstation, config, HARNESSES[name]["config"])
    write_tree(workstation, project, HARNESSES[name]["project"])
    with fake_provider(workstation, internet, ANSWER):
        yield name, project, config


def trusting(ws, harness):
    """HARNESS with an operator's configuration that trusts the project (codex's word), if
    the harness has one; else HARNESS."""
    name, project, config = harness
    if "trusts" not in HARNESSES[name]:
        return harness
    files = dict((path, text + HARNESSES[name]["trusts"]) for path, text in HARNESSES[name]["config"].items())
    write_tree(ws, config + "-trusting", files)
    return name, project, config + "-trusting"


def session(ws, harness, *extra):
    """A headless session of HARNESS asked one question: (result, record, transcript)."""
    name, project, config = harness
    variables = {"aisb_harness": name, "aisb_credentials": HARNESSES[name]["credentials"],
                 "aisb_harness_config": config, "prompt": "Say the answer " + TAG}
    result = run_agent(ws, "-e", json.dumps(variables), *extra, project=project, timeout=1800)
    record = record_of(ws, result.stdout)
    return result, record, ws.path(record["transcript"]).read_text()


def markers(ws, harness):
    """The markers the planted code wrote into the project (on the host), then removed."""
    project = harness[1]
    found = sorted(p.name[len(".marker-"):] for p in ws.path(project).iterdir() if p.name.startswith(".marker-"))
    ws.sh(f"rm -f {project}/.marker-*")
    return found


def test_project_code_runs_only_with_the_operators_word(workstation, harness):
    name = harness[0]
    markers(workstation, harness)
    result, record, transcript = session(workstation, harness)
    assert result.returncode == 0 and record["exit_code"] == 0, result.stdout[-3000:] + transcript[-3000:]
    assert ANSWER in transcript, transcript[-3000:]
    found = markers(workstation, harness)
    print(f"\n{name}: off, markers {found}")
    sandbox_argv = [argv for argv in record["commands"] if "run" in argv and "--init" in argv][0]
    assert found == [], ("the project's code ran without the operator's word: switches %s, sandbox %s, transcript %s"
                         % (record["project_harness_code_switches"], sandbox_argv, transcript[-3000:]))
    assert record["project_harness_code"] is False
    switches = record["project_harness_code_switches"]
    print(f"{name}: off {json.dumps(switches)}; command {record['command'][:6]}")
    # The record says what turned it off: the recipe's switches, or (codex) that it has none.
    if "trusts" in HARNESSES[name]:
        assert switches is None
    else:
        assert switches["args"] or switches["env"], switches

    result, record, transcript = session(workstation, trusting(workstation, harness),
                                         "-e", "aisb_project_harness_code=true")
    found = markers(workstation, harness)
    print(f"{name}: on {json.dumps(record['project_harness_code_switches'])}; markers {found}; exit {record['exit_code']}")
    assert record["project_harness_code"] is True
    assert found == sorted(HARNESSES[name]["markers"]), transcript[-3000:]


def test_a_covered_directory_is_empty_inside(workstation, internet):
    """What the harness would find in the covered .opencode: nothing (podman's tmpfs
    copied the project's plugins into it by default, and opencode then loaded them in
    some runs)."""
    project = "/home/dev/src/harness-code-opencode-covered"
    write_tree(workstation, project, HARNESSES["opencode"]["project"])
    variables = {"aisb_harness": "opencode", "aisb_network": "none",
                 "command": ["sh", "-c", "find /project/.opencode -mindepth 1; echo listed"]}
    result = run_agent(workstation, "-e", json.dumps(variables), project=project, timeout=1800)
    record = record_of(workstation, result.stdout)
    assert record["exit_code"] == 0, result.stdout[-3000:]
    assert workstation.path(record["transcript"]).read_text().split() == ["listed"]


def test_a_link_where_a_covered_directory_was_is_refused(workstation, internet):
    """opencode's .opencode is covered (its plugins load through no switch): the agent
    replaces it by a link to a directory of its plugins elsewhere in the project, which
    opencode would follow. The session refuses before anything starts, naming the path."""
    project = "/home/dev/src/harness-code-opencode-link"
    write_tree(workstation, project, {"plugins/plugin/planted.js": node_writer("opencode-link")})
    workstation.sh(f"ln -sfn plugins {project}/.opencode")
    variables = {"aisb_harness": "opencode", "prompt": "Say the answer " + TAG}
    result = run_agent(workstation, "-e", json.dumps(variables), project=project, timeout=1800)
    assert result.returncode != 0, result.stdout[-3000:]
    assert f"{project}/.opencode is not a directory (a link, say)" in result.stdout, result.stdout[-3000:]
    assert not workstation.path(f"{project}/.marker-opencode-link").exists()
