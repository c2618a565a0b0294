# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Harness recipes: the collection's own (BUILT_IN) and the operator's (the team file's
and, where it lets them, the developer's `recipes`), and the one lookup from a harness
name to its recipe that the image role, the action plugin and the session share.

A recipe is policy (its allow entries join the gate's, its env names what reaches the
harness, its config and state what is mounted), so it is code or a named, checked
input, never a play variable: a session gets a harness NAME and resolves it here.

Each recipe names
  packages: distro packages installed with the sandbox's own tools
  install:  shell steps run as root at build time, one image layer each
  command:  the harness's argv (the image's CMD)
  prompt:   arguments put before a prompt to run it headless (pi -p PROMPT)
  allow:    host names the harness needs, merged into the gate's policy (never an
            address or CIDR: those are the operator's, in aisb_allow); never a provider's
            API (_providers): it is reached through the credential injector, and a
            provider allowed by default would take a key the agent brings itself
  env:      environment variable names the harness reads (a session passes only these)
and optionally
  config:   where the operator's configuration goes (aisb_harness_config): the directory
            the harness reads it from and the names it may hold there (a name ending in /
            is a directory); mounted read-only, never taken from the project.
            endpoints: those of its files in which a session with aisb_credentials moves
            the provider URLs (https://HOST[:PORT]) behind the credential injector
  state:    directories that persist per project (aisb_harness_state), {name: path}
  env_values: fixed variables the harness always gets, {name: value} (its switches for
            update checks and telemetry); aisb_environment and pass-throughs win
  credential_urls: {key variable: base-URL variable}: with a credential for that key
            variable, the harness reads its provider's base URL from the other, which the
            session points at the credential injector
  project_code: the harness's switches for what it loads and runs from the project at
            start, {"off": {"args": [...], "env": {...}, "hide": [...]}, "on": ...}: off unless
            aisb_project_harness_code (_harness_code; docs/harnesses.md)
A recipe is checked once, into a Recipe (parse_recipe): the session, the action plugin,
_harness_code, _harness_config and _harness_state read its fields. Pure.
"""

from __future__ import annotations

import difflib
import re
from typing import Dict, List, NamedTuple, Optional

from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_code import recipe_switches
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_config import HarnessConfig, recipe_config
from ansible_collections.aisb.sandbox.plugins.module_utils.harness._harness_state import recipe_state
from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    NO_COMMAND, InputError, check_command, harness_command, harness_credential_urls, harness_names, harness_values)
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError, parse_policy

KEYS = ("packages", "install", "command", "prompt", "allow", "env")
OPTIONAL_KEYS = ("config", "state", "env_values", "credential_urls", "project_code")
NAME = re.compile(r"\A[a-z0-9][a-z0-9-]{0,63}\Z")
DEFAULT = "pi"

BUILT_IN = {
    "pi": {
        # fd-find and ripgrep: pi downloads fd and rg at start when neither fd nor fdfind,
        # nor rg, is on PATH (its tools-manager), which the gate refuses.
        "packages": ["nodejs", "npm", "git", "ripgrep", "fd-find", "curl"],
        "install": [
            # pi needs Node >= 20.6. Debian 13's nodejs (20.19) is enough; Ubuntu 24.04's
            # (18) is not, and nodejs.org is often unreachable from build networks: then
            # take the official Node binaries as republished on the npm registry
            # (node-linux-<arch>, the packages behind npm's `node` package) into
            # /usr/local, ahead of /usr/bin.
            "node -e 'process.exit(Number(process.versions.node.split(\".\")[0]) >= 20 ? 0 : 1)'"
            " || npm install --global --no-fund --no-audit"
            " \"node-linux-$(dpkg --print-architecture | sed s/amd64/x64/)@22.23.5\"",
            "npm install --global --no-fund --no-audit @mariozechner/pi-coding-agent@0.73.1",
        ],
        "command": ["pi"],
        "prompt": ["-p"],
        "allow": [],
        "env": ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"],
        # pi reads ~/.pi/agent (its getAgentDir); auth.json is not among the names: logins
        # and keys are no configuration (docs/harnesses.md).
        "config": {
            "dir": "/home/agent/.pi/agent",
            "names": ["settings.json", "models.json", "keybindings.json", "AGENTS.md", "SYSTEM.md",
                      "APPEND_SYSTEM.md", "prompts/", "skills/", "themes/"],
        },
        # pi keeps a project's conversations in ~/.pi/agent/sessions/--project--/: pi --continue.
        "state": {"pi-sessions": "/home/agent/.pi/agent/sessions"},
        # Its version check and install telemetry (both to pi.dev) off; PI_OFFLINE would
        # also stop the package updates an operator's settings may ask for.
        "env_values": {"PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"},
        # The project's extensions (.pi/extensions, its settings' extensions and packages'
        # ones) not loaded; --offline: no package its settings name is installed at start
        # (git clone, npm install, or the npmCommand they give).
        "project_code": {"off": {"args": ["--no-extensions", "--offline"]}},
    },
    "claude-code": {
        # The npm package is a wrapper whose postinstall links in the native binary (Bun,
        # rg built in) of its platform package: Node runs only at install. It asks for
        # Node 22, which only its npm's engine warning checks; ripgrep for its Grep tool
        # all the same.
        "packages": ["nodejs", "npm", "git", "ripgrep", "curl"],
        "install": [
            "npm install --global --no-fund --no-audit @anthropic-ai/claude-code@2.1.328",
            # Its first TUI start (onboarding) checks api.anthropic.com and
            # platform.claude.com, whatever the provider, and exits when either fails:
            # marked done in its state file, which stays the harness user's to write.
            "install -d -o 1000 -g 1000 /home/agent"
            " && printf '{\"hasCompletedOnboarding\": true}\\n' >/home/agent/.claude.json"
            " && chown 1000:1000 /home/agent/.claude.json",
        ],
        "command": ["claude"],
        # Headless without a permission prompt it cannot answer: every tool allowed, as the
        # sandbox, not Claude Code's prompts, is the boundary (docs/harnesses.md).
        "prompt": ["--permission-mode", "bypassPermissions", "-p"],
        "allow": [],
        "env": ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"],
        # ~/.claude (CLAUDE_CONFIG_DIR's default); .credentials.json (its login) is not
        # among the names, nor ~/.claude.json (its own state: onboarding, per-project trust).
        "config": {
            "dir": "/home/agent/.claude",
            "names": ["settings.json", "CLAUDE.md", "agents/", "commands/", "skills/", "output-styles/"],
        },
        # A project's conversations in ~/.claude/projects/-project/: claude --continue.
        "state": {"claude-projects": "/home/agent/.claude/projects"},
        # Update checks, telemetry (statsig), error reports (sentry) and its other start-up
        # requests off.
        "env_values": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
        "credential_urls": {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN": "ANTHROPIC_BASE_URL"},
        # Only the user's settings (the operator's): not the project's .claude/settings.json
        # nor .claude/settings.local.json (hooks, plugins, apiKeyHelper, MCP approvals);
        # no MCP server of .mcp.json, even one the operator's settings approve.
        "project_code": {"off": {"args": ["--setting-sources", "user", "--strict-mcp-config"]}},
    },
    "codex": {
        "packages": ["nodejs", "npm", "git", "ripgrep", "curl"],
        "install": [
            # The package's optional dependencies are the native builds, one per platform:
            # npm installs the one for this image's os and cpu (linux x64 or arm64, a
            # static musl binary); `codex --version` fails the build when none fits.
            "npm install --global --no-fund --no-audit @openai/codex@0.169.0 && codex --version",
            # codex's system layer (the operator's config.toml wins over it): off what it
            # fetches at start, each refused by the gate: analytics (ab.chatgpt.com), the
            # curated plugins' sync (github.com, api.github.com, chatgpt.com) and the
            # TUI's update check.
            "mkdir -p /etc/codex && printf '%s\\n' 'check_for_update_on_startup = false' '[analytics]' "
            "'enabled = false' '[features]' 'plugins = false' >/etc/codex/config.toml",
        ],
        "command": ["codex"],
        # Headless: exec answers and exits, never prompting. Its own sandbox (bubblewrap,
        # landlock) and approvals are off: it cannot nest in this container, and this
        # container is the boundary (docs/harnesses.md). Not every project is a git
        # repository.
        "prompt": ["exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"],
        "allow": [],
        # Its built-in openai provider takes no base URL from the environment (0.169.0
        # dialled api.openai.com over CONNECT with OPENAI_BASE_URL set): with
        # OPENAI_API_KEY injected and no operator config.toml, the session writes one
        # naming the injector (_credential_plan.codex_config; docs/harnesses.md).
        "env": ["OPENAI_API_KEY"],
        # codex reads $CODEX_HOME, ~/.codex; auth.json (logins and keys) is not among the names.
        "config": {
            "dir": "/home/agent/.codex",
            "names": ["config.toml", "AGENTS.md", "prompts/", "skills/", "rules/"],
            "endpoints": ["config.toml"],
        },
        # codex keeps each conversation in ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl:
        # codex exec resume --last.
        "state": {"codex-sessions": "/home/agent/.codex/sessions"},
        # No project_code: codex itself loads a project's layers (.codex/config.toml: MCP
        # servers, hooks, exec policies) only when a config.toml of the user's trusts it,
        # which no -c override changes (measured; docs/harnesses.md).
    },
    "opencode": {
        # ripgrep: opencode downloads rg into ~/.local/share/opencode/bin when it is not on PATH.
        "packages": ["nodejs", "npm", "git", "ripgrep", "curl"],
        "install": [
            # Not the optional dependencies (every linux-x64 build, plain and baseline,
            # glibc and musl: 185 MB each): the postinstall fetches the one build this cpu
            # runs (arch, AVX2 or baseline, glibc) at the pinned version and checks it runs.
            "npm install --global --no-fund --no-audit --omit=optional opencode-ai@1.18.33 && opencode --version",
            # The agent's own XDG directories: podman would make the kept state's parent
            # (~/.local) root's, and opencode then cannot create ~/.local/state.
            "mkdir -p /home/agent/.local/share /home/agent/.local/state /home/agent/.cache"
            " && chown -R 1000:1000 /home/agent",
        ],
        "command": ["opencode"],
        # Headless: run answers and exits; --auto approves what the permissions would ask
        # about (nobody is there to answer), denied ones stay denied (docs/harnesses.md).
        "prompt": ["run", "--auto"],
        "allow": [],
        "env": ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        # Its OpenAI provider (the AI SDK's) reads its base URL from OPENAI_BASE_URL.
        "credential_urls": {"OPENAI_API_KEY": "OPENAI_BASE_URL"},
        # Off what opencode fetches at start: the models.dev catalogue (the build's own
        # copy serves), its update check, language servers, sharing. npm offline: at start
        # opencode installs @opencode-ai/plugin (for plugins of its configuration
        # directories, which the recipe does not take) with npm from the registry, which
        # the gate refuses.
        "env_values": {"npm_config_offline": "true", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                       "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                       "OPENCODE_DISABLE_SHARE": "1"},
        # opencode reads ~/.config/opencode; its logins are in its data directory (below).
        "config": {
            "dir": "/home/agent/.config/opencode",
            "names": ["opencode.json", "opencode.jsonc", "AGENTS.md", "agent/", "command/", "mode/", "themes/"],
            "endpoints": ["opencode.json", "opencode.jsonc"],
        },
        # opencode keeps its sessions in ~/.local/share/opencode/opencode.db: run --continue.
        "state": {"opencode-data": "/home/agent/.local/share/opencode"},
        # Neither the project's opencode.json (MCP servers, plugins) nor its .opencode/
        # (plugins, tools, commands, agents); its AGENTS.md with them. The variable stops
        # the configuration, not .opencode/plugin/ (1.18.33 loads it through a second
        # loader that reads no switch): the sandbox covers .opencode, empty and read-only.
        "project_code": {"off": {"env": {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}, "hide": [".opencode"]}},
    },
    "shell": {
        "packages": ["curl", "git"],
        "install": [],
        "command": ["bash"],
        "prompt": ["-c"],
        "allow": [],
        "env": [],
    },
}


class RecipeError(InputError):
    """A harness name or recipe a session must not start with; the message names it."""


class Recipe(NamedTuple):
    """A harness recipe, each field checked once (parse_recipe): the command and its
    prompt arguments, env (names) and env_values, credential_urls, project_code (the
    checked switches, _harness_code.recipe_switches; None when the recipe names none),
    config (_harness_config.HarnessConfig, or None), state ({name: path inside}). GIVEN:
    the recipe as written, what the aisb.sandbox.recipe lookup hands Jinja and the roles."""

    name: Optional[str]
    packages: List[str]
    install: List[str]
    command: List[str]
    prompt: List[str]
    allow: List[str]
    env: List[str]
    env_values: Dict[str, str]
    credential_urls: Dict[str, str]
    project_code: Optional[dict]
    config: Optional[HarnessConfig]
    state: Dict[str, str]
    given: dict


# A session started without a harness (a command of its own): nothing of a recipe's.
NO_RECIPE = Recipe(name=None, packages=[], install=[], command=[], prompt=[], allow=[], env=[], env_values={},
                   credential_urls={}, project_code=None, config=None, state={}, given={})


def parse_recipe(name, recipe, where="recipes"):
    """RECIPE (a dict, named NAME) checked once into a Recipe, or RecipeError naming WHERE and NAME."""
    what = "%s %s" % (where, name)
    if not isinstance(recipe, dict):
        raise RecipeError("%s must be a recipe (a dict), got %r" % (what, recipe))
    missing = [key for key in KEYS if key not in recipe]
    unknown = sorted(set(recipe) - set(KEYS) - set(OPTIONAL_KEYS))
    if missing or unknown:
        raise RecipeError("%s must have the keys %s and may have %s; %s" % (
            what, ", ".join(KEYS), ", ".join(OPTIONAL_KEYS),
            "missing " + ", ".join(missing) if missing else "unknown " + ", ".join(unknown)))
    for key in ("packages", "install", "allow"):
        if not isinstance(recipe[key], list) or not all(isinstance(item, str) for item in recipe[key]):
            raise RecipeError("%s %s must be a list of strings, got %r" % (what, key, recipe[key]))
    try:
        command = harness_command(recipe)
        env = harness_names(recipe)
        env_values = harness_values(recipe)
        credential_urls = harness_credential_urls(recipe)
        switches = recipe_switches(recipe)
        config = recipe_config(recipe)
        state = recipe_state(recipe)
        policy = parse_policy(recipe["allow"], [443])
    except (InputError, PolicyError) as error:
        raise RecipeError("%s: %s" % (what, error))
    if policy.pins or policy.private:
        raise RecipeError("%s allow names an address or a private endpoint: a recipe's allow entries are host "
                          "names; addresses are the operator's, in aisb_allow" % what)
    return Recipe(name=name, packages=list(recipe["packages"]), install=list(recipe["install"]), command=command,
                  prompt=list(recipe.get("prompt") or []), allow=list(recipe["allow"]), env=list(env),
                  env_values=env_values, credential_urls=credential_urls,
                  project_code=switches if "project_code" in recipe else None, config=config, state=state,
                  given=dict(recipe))


def check_recipe(name, recipe, where="recipes"):
    """RECIPE (an operator's, named NAME) checked as a session uses it: a Recipe, or
    RecipeError naming WHERE and NAME."""
    if not isinstance(name, str) or not NAME.match(name):
        raise RecipeError("%s: a recipe's name is lower-case letters, digits and '-', got %r" % (where, name))
    if name in BUILT_IN:
        raise RecipeError("%s: %s is a built-in recipe, which an operator's recipe cannot replace; give yours a "
                          "name of its own" % (where, name))
    return parse_recipe(name, recipe, where)


# The collection's own, checked once, here.
BUILT_IN_RECIPES = dict((name, parse_recipe(name, recipe, "BUILT_IN")) for name, recipe in BUILT_IN.items())


def check_recipes(recipes, where="recipes"):
    """{name: Recipe} checked (check_recipe); {} for None."""
    if recipes is None:
        return {}
    if not isinstance(recipes, dict):
        raise RecipeError("%s must be a dict of recipe names and recipes, got %r" % (where, recipes))
    return dict((name, check_recipe(name, recipe, where)) for name, recipe in recipes.items())


def recipe_for(harness, recipes=None):
    """The Recipe HARNESS names: a built-in one, or one of RECIPES (the operator's, checked
    here); RecipeError for anything else, a recipe given as a dict included."""
    own = check_recipes(recipes)
    if not isinstance(harness, str):
        raise RecipeError("aisb_harness names a recipe (%s), got %r: an operator's own recipe goes in aisb_recipes "
                          "under a name of its own" % (", ".join(names(own)), harness))
    found = BUILT_IN_RECIPES.get(harness) or own.get(harness)
    if found is None:
        raise RecipeError("aisb_harness %r is not a recipe; the recipes are %s%s"
                          % (harness, ", ".join(names(own)), closest(harness, names(own))))
    return found


def closest(harness, known):
    """"; did you mean NAME?" for the name among KNOWN closest to the mistyped HARNESS, or ""."""
    close = difflib.get_close_matches(harness, known, n=1, cutoff=0.5)
    return "; did you mean %s? (aisb_harness=%s)" % (close[0], close[0]) if close else ""


def names(recipes=None):
    """The built-in recipes' names, then RECIPES'."""
    return list(BUILT_IN) + sorted(set(recipes or {}) - set(BUILT_IN))


def session_command(recipe, command=None, prompt=None):
    """The sandbox's argv: COMMAND as given, else RECIPE's command followed, when there is
    a PROMPT (text, passed as one argument, never templated or split), by the recipe's
    prompt arguments and the prompt."""
    if command is not None:
        return check_command(command)
    if not recipe.command:
        raise InputError(NO_COMMAND % (recipe.given,))
    return check_command(recipe.command + recipe.prompt + [prompt] if prompt is not None else recipe.command)
