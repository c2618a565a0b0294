# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What each top-level field of a session record (sessions/<id>/record.json) holds: the
source of docs/reference-record.md (docs/docsite/gen_reference.py). Pure data.
tests/unit/test_record_fields.py holds it to the code that writes records (_session,
_watchdog, _record_seal), field by field.
"""

# When a field is written. START: before the sandbox starts (the watchdog's copy has it
# too); END: when the session ends; START_END: at start, and again at the end with what
# the session learnt; IF: only when the case it names arises; SEAL: by every write.
START = "start"
END = "end"
START_END = "start, again at the end"
SEAL = "every write"

# (name, when, what it holds, the guide that says more or ""), in the record's reading order.
FIELDS = (
    ("schema_version", START, "The record's layout: 2. Raised when a field changes meaning or goes away; a reader "
     "refuses a version it does not know, naming the file.", "sessions.md#what-a-session-does-in-order"),
    ("session_id", START, "The session's id, also its directory's name and the suffix of its containers' names.", ""),
    ("started_at", START, "When the session started (UTC).", ""),
    ("ended_at", END, "When the session ended (UTC).", ""),
    ("status", END, "How it ended: `exited` (the harness ended), `failed` (it could not start or end cleanly), "
     "`enforcement-lost`, `enforcement-unreported`, `gate-died`, `interrupted` (ansible-playbook got a signal) "
     "or `controller-lost`.", "sessions.md#the-enforcement-watch-status-enforcement-lost"),
    ("exit_code", END, "The sandbox's exit code (the harness's, or one of those below); null when it returned "
     "none.", ""),
    ("reason", END, "Why the session ended as it did, one sentence; empty when the harness exited with its own "
     "code.", ""),
    ("project", START, "The project's directory on the host (mounted at /project).", ""),
    ("project_mode", START, "`direct` (the agent writes to the project) or `review` (to an overlay).",
     "sessions.md#review-mode-review-then-apply"),
    ("command", START, "What ran in the sandbox: the harness's command line.", ""),
    ("harness", START, "The harness recipe's name (`pi`, `claude-code`, `codex`, `opencode`, `shell`, or the "
     "operator's).", "harnesses.md"),
    ("network", START, "`allow` (through the gate), `none` or `no-gate`.", "sessions.md#variables-operator-side"),
    ("pinned_names", START, "Network no-gate: each allowed name and the addresses pinned for it; else empty.",
     "sessions.md#network-no-gate-a-host-without-a-gate-path"),
    ("allow", START, "The policy's allow entries, each with its origin: `team`, `user`, `harness` or the "
     "settings file.", "teams.md#the-record"),
    ("policy", START, "The policy's text as the gate and the table used it.", ""),
    ("policy_dir", START, "The policy's directory on the host, mounted read-only at /etc/aisb/policy.", ""),
    ("ruleset", END, "The sandbox's nftables table as its entrypoint installed and read it back (nft JSON).", ""),
    ("image", START_END, "The sandbox image: `tag` at start; `labels` (its content hash and the hash's inputs) at "
     "the end.", ""),
    ("gate_image", START, "The gate's image tag; null without a gate.", ""),
    ("facts_fingerprint", START, "The hash of the host fingerprint the network check's facts were measured under.",
     "networking.md"),
    ("limits", START, "The podman options that limit memory, processes and CPU (empty without limits).", ""),
    ("seccomp", START, "The sandbox's seccomp profile: its file, its sha256 and the host's default it was made "
     "from; null where podman's default ran (`aisb_allow_unenforced`).",
     "security.md#the-kernel-surface-the-sandboxs-seccomp-profile"),
    ("admission_warnings", START, "What the admission warned of: with `aisb_allow_unenforced`, each control "
     "that did not hold.", ""),
    ("environment_names", START, "The names of the variables the harness got (never their values).", ""),
    ("provider_keys_held", START, "The provider keys the agent was handed as they are (named in "
     "`aisb_pass_environment`).", "sessions.md#provider-keys-aisb_credentials"),
    ("harness_config", START, "Where the operator's harness configuration was mounted, read-only, inside the "
     "sandbox.", "harnesses.md#the-operators-configuration-aisb_harness_config"),
    ("harness_state", START, "The project's kept harness state the session used (its directory, made or wiped); "
     "null when none was kept (`aisb_harness_state=none`, or a recipe that keeps nothing).", "harnesses.md#what-persists-aisb_harness_state"),
    ("project_harness_code", START, "Whether the harness could load and run the project's own code (extensions, "
     "hooks, MCP servers, plugins).", "harnesses.md#project-code-aisb_project_harness_code"),
    ("project_harness_code_switches", START, "The recipe's switches that kept the project's code off, or turned "
     "it on (`args`, `env`); null for a recipe with none.", "harnesses.md#project-code-aisb_project_harness_code"),
    ("credentials", START_END, "Provider credentials, without their keys: the entries, then each request the "
     "injector relayed (`injected`) or refused, and each the gate refused (`elsewhere`, `provider_direct`); "
     "null without `aisb_credentials`.", "sessions.md#provider-keys-aisb_credentials"),
    ("tokens", START_END, "Each provider's input and output tokens and requests, the token budget and whether it "
     "was spent; null without provider credentials.", "sessions.md#a-token-budget-aisb_token_budget"),
    ("upload", END, "Each upload budget (the gate's, the injector's): its bytes, what the sandbox sent, when it "
     "was spent, and `status` (`within-budget` or `upload-budget-exceeded`); null without a budget.", "sessions.md#an-upload-budget-aisb_upload_budget"),
    ("gate", END, "The gate's decisions: `allowed` (relayed), `denied` (refused by the policy), `answered` (by "
     "the gate itself), each with its time, method, URL, status and address; `hints`, `sent_by_host`, "
     "`canary_connects`. Null when nobody read the gate's log (`controller-lost`).",
     "sessions.md#what-a-session-does-in-order"),
    ("enforcement_watch", END, "The enforcement watch: `watched`, its readings, the table, seccomp, network and "
     "pasta it saw first, and `lost` (why enforcement was lost, or null).",
     "sessions.md#the-enforcement-watch-status-enforcement-lost"),
    ("git", END, "The git remotes the broker served (no token) and each push: its refs, old and new ids, relayed "
     "or refused and why; null without `aisb_git_remotes`.", "sessions.md#git-remotes-aisb_git_remotes"),
    ("review", START_END, "Review mode: where the agent's writes went and the project's manifest; at the end "
     "every change with its flags; `history`, each apply and discard. Null in direct mode.",
     "sessions.md#review-mode-review-then-apply"),
    ("project_git", END, "Direct mode: the git directories overlaid, the paths mounted read-only and pinned, and "
     "the findings (repositories and Ansible configuration the agent made). Absent in review mode.",
     "sessions.md#ansibles-configuration-is-never-the-projects"),
    ("commits", END, "The agent's refs brought back, per repository, under `refs/aisb/<session id>/`.", ""),
    ("ansible_origin", START, "Where the session's ansible-playbook read its configuration and plugins from.",
     "sessions.md#ansibles-configuration-is-never-the-projects"),
    ("host_tools", START, "The absolute path of each program the session ran on the host.", ""),
    ("commands", END, "Every podman command the session ran on the host.", ""),
    ("transcript", START, "The headless session's transcript (`transcript.log`); null for an interactive one.", ""),
    ("record", START, "This record's path; null when it could not be written.", ""),
    ("record_error", "if the record could not be written", "Why it could not be written; only in the task's "
     "result, as the record is not on disk.", ""),
    ("seal_error", "if the watchdog could not read the key", "Why the watchdog's record is not sealed (the "
     "record's check then fails it).", ""),
    ("chain", SEAL, "The seal's hash chain over the record's events (start, each gate decision, each finding, "
     "the end, each review step).", "security.md#tamper-evident-records"),
    ("mac", SEAL, "The seal's HMAC-SHA256 over the whole record with the workstation's key, and that key's id.",
     "security.md#tamper-evident-records"),
)
