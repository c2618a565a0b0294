# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):
    """A session's inputs: the options of aisb.sandbox.session that
    aisb.sandbox.session_inputs checks before any image work (_session_spec.INPUT_OPTIONS)."""

    DOCUMENTATION = r"""
options:
  project:
    description: Directory mounted at /project. C(~) is expanded and symlinks resolved.
    type: str
    required: true
  network:
    description:
      - C(allow) runs the gate; C(none) gives the sandbox no network at all.
      - C(no-gate) is the fallback for a host without a gate path, a way for the sandbox to
        reach its gate on the host's loopback (the host facts'
        C(verdict.gate_path) is C(none), or C(tcp-forward) where the model does not hold)
        where C(verdict.no_gate_holds) is true, and is refused elsewhere. No gate and no proxy; the allowed names are
        resolved on the host at session start, handed to the sandbox's C(/etc/hosts), and
        their addresses pinned in the ruleset on port 80, the policy's CONNECT ports and
        the names' own C(host:port) ports. Wildcard entries (C(.example.com)), private
        entries (C(host:port=address)) and names that do not resolve are refused.
        Anything else served on a pinned address is reachable.
    type: str
    choices: [allow, none, no-gate]
    default: allow
  command:
    description:
      - The sandbox's command line, passed as a list and never through a shell. Its first
        word names a program (not empty, no leading C(-), no C(=)).
      - Without it, the O(harness) recipe's command runs, with the prompt when one is given.
    type: list
    elements: str
  harness:
    description:
      - The harness's name (the playbooks' C(aisb_harness)) - a built-in recipe (C(pi),
        C(claude-code), C(codex), C(opencode), C(shell)) or one of O(recipes) - resolved to
        its recipe by the action plugin and again by the module (never taken from a play
        variable - a recipe is policy). Its C(command) is the harness's command line, its
        C(prompt) the arguments put before a prompt (for pi, C([-p])), and its C(env) the
        names passed through from the controller's environment when set there (the
        recipe's API key names, say). Its C(config) says where O(harness_config) goes,
        its C(state) which directories persist per project (O(harness_state)). Its
        C(env_values) are variables the harness always gets (its switches for update
        checks and telemetry) unless O(environment) or O(pass_environment) name them.
        Its C(credential_urls) map a key variable to the variable the harness reads that
        provider's base URL from (Claude Code, C(ANTHROPIC_BASE_URL)). With a
        O(credentials) entry for that key variable, the session points it at the
        entry's injector, keeping the path of an C(https://) value on the entry's host
        given in O(environment), refusing one elsewhere. Its other keys are the image
        build's.
      - A recipe given here as a dict is refused.
    type: raw
  recipes:
    description:
      - The operator's own recipes (the team file's C(recipes) and, where it lets them, the
        developer's C(aisb_recipes)), name to recipe, each with the built-in recipes' keys
        (docs/harnesses.md). A name of a built-in recipe is refused, and so is an address
        or private entry in a recipe's C(allow) (addresses are the operator's, in C(aisb_allow)).
      - With a team file, the module checks them against it again.
    type: dict
    default: {}
  harness_config:
    description:
      - The operator's configuration for the harness (the playbooks' C(aisb_harness_config)),
        a directory on the controller holding only what the O(harness) recipe's C(config)
        names (pi, C(~/.pi/agent)'s C(settings.json), C(models.json), C(keybindings.json),
        C(AGENTS.md), C(SYSTEM.md), C(APPEND_SYSTEM.md), C(prompts/), C(skills/),
        C(themes/)), as UTF-8 text, without links, 4 MiB at most. JSON files must hold an
        object; a C(models.json) C(apiKey) must name a variable, an C(opencode.json)
        C(apiKey) be C({env:NAME}), and a C(config.toml) (codex) hold no
        C(experimental_bearer_token), never a key.
      - The action plugin reads and checks it on the controller and sends its files as
        JSON text; the session writes them into its directory and mounts each read-only
        where the harness reads it. With O(credentials), pi's C(models.json) is the
        operator's with the credentials' providers moved to the injector, and in the
        recipe's C(config.endpoints) files (codex's C(config.toml), opencode's
        C(opencode.json)) every C(https://HOST[:PORT]) URL of a credential's provider
        is moved behind the injector.
      - See docs/harnesses.md.
    type: raw
  harness_state:
    description:
      - The O(harness) recipe's C(state) directories (pi, its sessions) persist per project
        in C($XDG_STATE_HOME/aisb/harness-state/HASH/) (HASH from the project's resolved
        path), mounted read-write into that project's sessions only.
      - C(keep) uses them as they are; C(fresh) removes them first (a new start); C(none)
        mounts none (nothing kept this session).
      - One session of a project writes its kept state at a time; another one started
        meanwhile is refused, naming the first, unless it runs with C(none).
    type: str
    choices: [keep, fresh, none]
    default: keep
  prompt:
    description:
      - A prompt for the O(harness), passed as one argument after the recipe's prompt
        arguments. Runs headless unless O(interactive=true).
    type: str
  prompt_file:
    description:
      - A file on the controller whose whole content is the prompt, read as it is (no
        templating). A relative path is relative to ansible-playbook's working directory.
    type: path
  environment:
    description:
      - Variables and their values for the harness. With O(pass_environment) and the
        O(harness) recipe's C(env) names, the harness's whole environment besides the
        proxy settings.
      - A dict, or its JSON text (what the action plugin sends, so that results hide the
        values as one string and a short value such as C(0) masks nothing else).
      - They reach the harness only after every privilege in the sandbox is dropped,
        through a pipe; no process on the host and no privileged process in the sandbox
        has them in its environment or on its command line.
    type: raw
    default: {}
  pass_environment:
    description:
      - Names of variables whose values are read from the controller's environment.
        A name that is not set there is an error.
      - A built-in provider's key variable (C(ANTHROPIC_API_KEY), C(ANTHROPIC_AUTH_TOKEN),
        C(OPENAI_API_KEY), C(GEMINI_API_KEY)) named here reaches the harness as it is,
        instead of being injected; the record's C(provider_keys_held) and a warning say
        so. A variable an O(credentials) entry reads its key from is refused here.
    type: list
    elements: str
    default: []
  credentials:
    description:
      - Provider keys that never enter the sandbox (the playbooks' C(aisb_credentials)), a
        list of entries, each with C(host) (the provider's DNS name), C(port) (default
        443), C(header) (the request header the key goes in, such as C(x-api-key) or
        C(authorization)), C(prefix) (put before the key, such as C(Bearer ); default
        empty), C(variable) (the harness variable that gets a per-session placeholder)
        and exactly one source of the key, C(from_environment) (a variable of the
        controller's environment), C(from_file) (a file on the controller only its owner
        may read or write) or C(value) (an Ansible Vault variable, say); optionally
        C(paths), the requests the injector relays, a list of C(METHOD /path) rules
        (C(*) matches within one path segment; the word C(defaults) stands for a built-in
        provider's own rules). An entry for C(api.anthropic.com), C(api.openai.com) or
        C(generativelanguage.googleapis.com) on 443 relays only what harnesses need
        (such as C(POST /v1/messages)) unless C(paths) says otherwise; an entry for
        another host relays any request unless C(paths) is given. A path holding C(..),
        C(//), a backslash, NUL or a %-escape of those is refused, never decoded.
      - Without an entry, a key the controller's environment holds in a built-in
        provider's key variable that the O(harness) recipe's C(env) names is injected
        all the same (an entry with that provider's host, header and prefix), unless
        O(pass_environment) or O(environment) names it.
      - The gate refuses every request to an entry's host, CONNECT or plain HTTP,
        whatever the allowlist says (logged as C(provider-direct), listed in the
        record); the provider is reached through its injector only.
      - The action plugin reads each key on the controller and sends the entries with
        their keys as JSON text. The session's own process serves them on the host's
        loopback (the injector); the sandbox reaches a provider at
        C($AISB_CREDENTIAL_PROXY/HOST[:PORT]/PATH), pi through its C(models.json), a
        recipe with C(credential_urls) (Claude Code) through its base-URL variable.
      - An entry whose host and port are a private allow entry's (C(host:port=address))
        sends its key to that address only, never resolving the name; an entry for such
        a name on another port fails before the session starts.
      - Needs O(network=allow). See docs/security.md, provider keys.
    type: raw
    default: []
  git_remotes:
    description:
      - Git remotes the agent fetches from and pushes its own branches to through the
        session's git broker, which holds the token (the playbooks' C(aisb_git_remotes)), a
        list of entries, each with C(url) (C(https://HOST[:PORT]/PATH) of the repository),
        C(branches) (the branches the agent may push, a branch name whose last component
        may be C(*); C({session}) stands for the session's id; default
        C(aisb/{session}/*)), C(username) (the user name the token goes with; default
        C(x-access-token), GitHub's; GitLab takes C(oauth2)) and exactly one source of the
        token, C(from_environment), C(from_file) or C(value), as O(credentials) takes them.
      - The sandbox's git finds the broker through its read-only system configuration
        (C(/etc/gitconfig), C(url.insteadOf) for each C(url)). Fetches pass; a push is
        relayed only when each of its refs is a branch C(branches) allows, created or
        fast-forwarded (proven from the pushed pack's own commits); any other push is
        refused with git's own report (C(! [remote rejected] main) and the broker's
        reason) before anything reaches the upstream. The record's C(git) has each push.
      - The remote's host is reached directly only if the policy allows it for other
        reasons, and then without the token. Needs O(network=allow). See
        docs/sessions.md, git remotes, and docs/security.md.
      - Where a team file governs (docs/teams.md), each remote must be one the team file
        lists, as it lists it (its C(branches) and C(username)), or the team file's
        C(user_may_add) must name C(git_remotes); checked again here, whatever the play passed.
    type: raw
    default: []
  token_budget:
    description:
      - The most input and output tokens, all providers' together, the session may spend
        through the O(credentials)' injector (the playbooks' C(aisb_token_budget)), a whole
        number of tokens, 1 or more. Each answer's usage is counted as it is relayed;
        once the count reaches the budget every further request gets 429 and a body
        naming the budget and what was used. A request already relayed completes.
      - Unset, nothing is refused; the record counts the tokens either way. Without
        O(credentials) it bounds nothing (a warning says so). See docs/sessions.md,
        provider keys.
    type: int
  upload_budget:
    description:
      - The most bytes the sandbox may send to the gate (the playbooks'
        C(aisb_upload_budget)), 1 to 2**50. A named nft quota in the sandbox's own table
        counts every packet to the gate's port that carries payload, headers included
        (pure ACKs and other packets without payload pass uncounted); once it is spent,
        every such packet is rejected with a TCP reset, so a transfer in flight is cut.
        The record's C(upload) has what was sent and when the budget was spent
        (C(upload-budget-exceeded)).
      - It bounds what leaves through every allowed name together, CONNECT tunnels
        included, not per host; unset, nothing is counted. Needs O(network=allow). See
        docs/sessions.md, upload budget, and docs/security.md.
    type: int
  provider_upload_budget:
    description:
      - As O(upload_budget), for what the sandbox sends to the O(credentials)' injector
        (the playbooks' C(aisb_provider_upload_budget)) - a budget of its own, because
        prompts are large. Without O(credentials) it bounds nothing (a warning says so).
    type: int
  interactive:
    description:
      - Give the harness ansible-playbook's own terminal (its TUI). Needs a local
        connection and a terminal; without it the session runs headless and its output
        goes to a transcript.
      - Default true when none of O(command), O(prompt) and O(prompt_file) is given.
    type: bool
  project_mode:
    description:
      - C(direct) mounts the project read-write at /project.
      - C(review) mounts it as an overlay whose upper directory is in the session
        directory, so the host's tree does not change during the session. The project's
        manifest is taken at start; the record's C(review) lists every added, changed and
        deleted path with the flagged ones (the host may run them, or they change how its
        tools behave). Apply or discard them with the C(aisb.sandbox.review) playbook
        (module M(aisb.sandbox.project_review)).
    type: str
    choices: [direct, review]
    default: direct
"""
