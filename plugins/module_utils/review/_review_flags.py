# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Why a review session's change needs the user's explicit word before it reaches the
project: the host may run it, or it changes how the host's tools behave (flags); and
why every change to the project's kept harness state does (state_flags)."""

from __future__ import annotations

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.project import (
    _project_ansible, _project_guard, _project_layout)

EXECUTE = 0o111
SET_ID = 0o7000
# fuse-overlayfs marks a deletion of NAME with a file .wh.NAME (kernel overlay does not).
WHITEOUT_PREFIX = ".wh."

# Why a path is flagged, by the name of any directory on its way (at any depth: a nested
# repository's .git runs hooks as well).
FLAGGED_DIRECTORIES = {
    ".git": "git runs hooks and commands named in its configuration",
    ".husky": "git hooks (husky)",
    ".vscode": "VS Code runs tasks and reads settings from it when the folder opens",
    ".idea": "JetBrains IDEs run configurations and tools named in it",
    ".devcontainer": "dev container definitions run on the host's container engine",
    ".cargo": "cargo's configuration names runners and compiler wrappers",
    ".mvn": "Maven's wrapper and JVM options",
    # The harnesses' project configuration: what the next session's harness loads and runs
    # (extensions, hooks, MCP servers, plugins) before the operator's word applies.
    ".pi": "pi loads extensions, packages and settings from it at start",
    ".claude": "Claude Code runs hooks and reads settings and MCP servers from it",
    ".codex": "codex reads the project's configuration (MCP servers, commands) from it",
    ".opencode": "opencode loads plugins, agents and commands from it",
}
# ... by a directory pair on its way.
FLAGGED_SUBDIRECTORIES = {
    (".github", "workflows"): "CI workflows run with the repository's secrets when pushed",
    (".github", "actions"): "CI actions run with the repository's secrets when pushed",
}
# ... by its own name, in any directory.
FLAGGED_NAMES = {
    ".envrc": "direnv runs it on cd",
    ".env": "direnv, docker compose and others load it into the environment",
    "Makefile": "make runs it", "makefile": "make runs it", "GNUmakefile": "make runs it",
    "justfile": "just runs it", "Justfile": "just runs it", "Rakefile": "rake runs it",
    ".gitattributes": "selects git's filter and diff drivers",
    ".gitmodules": "submodule URLs and update commands",
    ".lfsconfig": "git-lfs configuration",
    ".pre-commit-config.yaml": "pre-commit runs its hooks on git commit",
    "pyproject.toml": "Python build backends and tool configuration run on install and test",
    "setup.py": "runs on install", "setup.cfg": "Python build configuration",
    "conftest.py": "pytest imports it", "tox.ini": "tox runs its commands",
    "noxfile.py": "nox runs it",
    ".npmrc": "npm configuration (script-shell, node-options)",
    ".yarnrc": "yarn configuration", ".yarnrc.yml": "yarnPath runs a file on every yarn command",
    ".pnpmfile.cjs": "pnpm runs it on install",
    ".tool-versions": "version managers pick the tools run here",
    ".mise.toml": "mise runs its hooks and sets the environment on cd",
    "mise.toml": "mise runs its hooks and sets the environment on cd",
    ".nvmrc": "picks the node run here", ".python-version": "picks the python run here",
    "build.rs": "cargo runs it on build", "gradlew": "the Gradle wrapper runs it",
    "mvnw": "the Maven wrapper runs it", "build.gradle": "Gradle runs it",
    "build.gradle.kts": "Gradle runs it", "settings.gradle": "Gradle runs it",
    "settings.gradle.kts": "Gradle runs it", "gradle-wrapper.properties": "names the Gradle the wrapper downloads",
    ".gitlab-ci.yml": "CI jobs run with the repository's secrets when pushed",
    ".mcp.json": "Claude Code and others start the MCP servers it names",
    "opencode.json": "opencode's project configuration (MCP servers, plugins, commands)",
    "opencode.jsonc": "opencode's project configuration (MCP servers, plugins, commands)",
}
# Every change to a kept state: the harness's next session reads it as its own history.
KEPT_STATE = "the harness's kept state (%s): its next session in this project reads it"
FLAGGED_SUFFIXES = {
    ".desktop": "a desktop entry runs its command when opened",
    ".mk": "make includes it",
}


def _scripts(path):
    """package.json's scripts, or None when it is not a JSON object."""
    try:
        with open(path, "rb") as handle:
            document = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return document.get("scripts") if isinstance(document, dict) else None


def _link_escapes(path, target):
    """True when a link at PATH to TARGET may lead out of its tree (the project, a kept
    state): TARGET is absolute, climbs above it, or goes down and back up ("x/.."), where
    it lands depends on whether x is a link itself. Climbing first ("../lib") passes only
    through the link's own parent directories, which are real directories of the tree."""
    if target.startswith("/"):
        return True
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        return True
    parts = [part for part in target.split("/") if part not in ("", ".")]
    return any(part == ".." and any(before != ".." for before in parts[:index]) for index, part in enumerate(parts))


def git_reads(upper, project, environ):
    """Every path of PROJECT that the host's git reads as configuration or runs
    (_project_guard.git_reads, the rule direct mode protects by), with the project as
    it is and as it would be with UPPER applied: the union, so a change is flagged
    whether it names the path or the project already did."""
    home = environ.get("HOME") or os.path.expanduser("~")
    layout = _project_layout.read(project, home, environ)
    paths, _refusals = _project_guard.git_reads(layout, _project_layout.kind)
    merged, merged_kind = _project_layout.overlaid(layout, upper)
    return paths | _project_guard.git_reads(merged, merged_kind)[0]


def flags(item, upper, project, read_by_git):
    """Why ITEM needs the user's explicit word before it reaches the project (a list of
    reasons; empty when it does not). READ_BY_GIT: git_reads()."""
    path = item["path"]
    parts = path.split("/")
    reasons = [FLAGGED_DIRECTORIES[part] + " (%s)" % part for part in parts if part in FLAGGED_DIRECTORIES]
    reasons += ["the host's git reads or runs it: the configuration names %s" % named for named in sorted(read_by_git)
                if path == named or path.startswith(named + "/")]
    reasons += [why for pair, why in FLAGGED_SUBDIRECTORIES.items()
                if any(tuple(parts[i:i + 2]) == pair for i in range(len(parts) - 1))]
    if parts[-1] in FLAGGED_NAMES:
        reasons.append(FLAGGED_NAMES[parts[-1]])
    reasons += [why for suffix, why in FLAGGED_SUFFIXES.items() if parts[-1].endswith(suffix)]
    reasons += _project_ansible.review_flags(parts)
    reasons += entry_flags(item, "project")
    if parts[-1] == "package.json" and item["type"] == "file" and item["change"] != "deleted":
        old = _scripts(os.path.join(project, path)) if (item.get("was") or {}).get("type") == "file" else None
        if _scripts(os.path.join(upper, path)) != old:
            reasons.append("package.json scripts changed (npm runs them on install)")
    return reasons


def state_flags(name):
    """The flags of a change to the kept state NAME (a function of the change, for
    _project_review.changes): every one, and what the change itself is."""
    return lambda item: [KEPT_STATE % name] + entry_flags(item, "kept state")


def entry_flags(item, tree):
    """Why ITEM needs the user's word whatever its path: what it is (a new executable, a
    device, a set-id bit, a link out of its TREE, a name like a whiteout)."""
    if item["change"] == "deleted":
        return []
    parts = item["path"].split("/")
    reasons = []
    if parts[-1].startswith(WHITEOUT_PREFIX):
        reasons.append("named like an overlay whiteout (.wh.NAME): fuse-overlayfs marks a deletion of NAME so")
    mode = int(item["mode"], 8)
    was = item.get("was") or {}
    if item["type"] == "special":
        reasons.append("a device, fifo or socket: never applied")
    if item["type"] == "file":
        if was.get("type") != "file" and mode & EXECUTE:
            reasons.append("a new executable file")
        elif was.get("type") == "file" and (int(was["mode"], 8) ^ mode) & EXECUTE:
            reasons.append("its exec bit changed")
    if mode & SET_ID and item["type"] != "symlink":
        reasons.append("setuid, setgid or sticky bit (applied without it)")
    if item["type"] == "symlink" and _link_escapes(item["path"], item["target"]):
        reasons.append("a symbolic link pointing out of the %s (%s)" % (tree, item["target"]))
    return reasons
