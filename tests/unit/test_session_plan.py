# SPDX-License-Identifier: GPL-3.0-or-later
"""The session plan: what will run, built from validated inputs and the host facts."""

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _policy
from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_git
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _review_session
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session, _session_plan

from builders import FACTS, SECCOMP_PROFILE, TOOLS, inputs


def sandbox_argv(plan):
    return _podman.sandbox_run("podman", plan.sandbox_options)


def test_allow_mode_reaches_the_gate_through_the_mapped_loopback_address():
    plan = _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40001)
    argv = sandbox_argv(plan)
    assert "--network=pasta:--map-host-loopback,100.64.0.1,--no-map-gw" in argv
    assert plan.policy_text.splitlines()[1:] == ["gate 100.64.0.1 40001", "pin 198.18.0.7 443"]
    assert plan.environment["HTTPS_PROXY"] == "http://100.64.0.1:40001"
    assert "http_port 127.0.0.1:40001" in plan.gate.conf_text


def test_the_sandbox_runs_under_its_seccomp_profile_written_in_the_sessions_directory():
    plan = _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40001)
    assert plan.seccomp_profile == SECCOMP_PROFILE
    assert plan.sandbox_options.seccomp_profile == "/s/seccomp.json"
    argv = sandbox_argv(plan)
    assert "--security-opt=seccomp=/s/seccomp.json" in argv
    assert argv.index("--security-opt=seccomp=/s/seccomp.json") < argv.index(plan.sandbox_options.image)
    # Without one (allow_unenforced on a host without podman's default): podman's default.
    plan = _session_plan.plan_session("sid", "/s", inputs(seccomp_profile=None, allow_unenforced=True), FACTS, 40001)
    assert not [arg for arg in sandbox_argv(plan) if "seccomp" in arg]
    assert plan.seccomp_profile is None


def test_tcp_forward_gate_path_uses_the_sandbox_loopback():
    facts = {"verdict": dict(FACTS["verdict"], gate_path="tcp-forward")}
    plan = _session_plan.plan_session("sid", "/s", inputs(), facts, 40002)
    assert "--network=pasta:-4,-T,40002,--no-map-gw" in sandbox_argv(plan)
    assert "gate 127.0.0.1 40002" in plan.policy_text


def test_no_gate_path_refuses():
    with pytest.raises(_session_plan.SessionError, match="gate path 'none'"):
        _session_plan.plan_session("sid", "/s", inputs(), {"verdict": {"gate_path": "none"}}, 40003)


def test_network_none_has_no_gate_and_no_proxy():
    plan = _session_plan.plan_session("sid", "/s", inputs(network="none"), FACTS, None)
    assert plan.gate is None
    assert "--network=none" in sandbox_argv(plan)
    assert "gate none" in plan.policy_text
    assert "HTTPS_PROXY" not in plan.environment


def test_podman_gets_only_the_sessions_own_variables_and_no_operator_value():
    plan = _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40004)
    argv = sandbox_argv(plan)
    given = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert given == ["AISB_ENV_FD=4", "AISB_REPORT_FD=3", "AISB_SESSION=sid"]
    assert not any("secret" in a or "TOKEN" in a for a in argv)
    assert argv[argv.index("--preserve-fds") + 1] == "2"  # descriptors 3 (report) and 4 (environment)


def test_the_harness_environment_goes_through_the_pipe_as_nul_ended_pairs():
    plan = _session_plan.plan_session(
        "sid", "/s", inputs(environment={"TOKEN": "a=b\nc", "PATH": "/project/bin:/usr/bin"}), FACTS, 40004)
    assert plan.environment["TOKEN"] == "a=b\nc"
    assert plan.environment["HTTPS_PROXY"] == "http://100.64.0.1:40004"
    pairs = _session_plan.environment_bytes(plan.environment).split(b"\0")
    assert pairs[-1] == b"" and b"TOKEN=a=b\nc" in pairs and b"PATH=/project/bin:/usr/bin" in pairs
    assert b"AISB_SESSION=sid" in pairs


def test_sandbox_mounts_only_the_project_and_the_policy():
    argv = sandbox_argv(_session_plan.plan_session("sid", "/s", inputs(), FACTS, 40005))
    volumes = [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]
    assert volumes == ["/home/dev/src/app:/project", "/s/policy:/etc/aisb/policy:ro"]


def test_selinux_label_is_applied_when_the_facts_say_so():
    argv = sandbox_argv(_session_plan.plan_session("sid", "/s", inputs(project_label="z"), FACTS, 40006))
    assert "/home/dev/src/app:/project:z" in argv


def test_security_options_and_the_command_come_last():
    argv = sandbox_argv(_session_plan.plan_session("sid", "/s", inputs(allow_unenforced=True), FACTS, 40007))
    for option in _podman.SANDBOX_SECURITY:
        assert option in argv
    assert argv[-4:] == ["localhost/aisb-sandbox:abc", "--allow-unenforced", "pi", "--version"]


def test_the_table_is_watched_unless_the_operator_asked_to_run_unenforced():
    assert _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40011).enforcement_watch == TOOLS
    assert _session_plan.plan_session("sid", "/s", inputs(allow_unenforced=True), FACTS, 40012).enforcement_watch is None
    # Without the tools a plan is not made: no session runs unwatched by omission.
    with pytest.raises(_session_plan.SessionError, match="no tools to watch"):
        _session_plan.plan_session("sid", "/s", inputs(watch_tools={}), FACTS, 40013)


def test_podman_writes_the_sandboxs_pid_where_the_watch_reads_it():
    plan = _session_plan.plan_session("sid", "/state/sessions/sid", inputs(), FACTS, 40014)
    argv = sandbox_argv(plan)
    assert argv[argv.index("--pidfile") + 1] == "/state/sessions/sid/sandbox.pid" == plan.sandbox_options.pidfile
    assert argv.index("--pidfile") < argv.index("localhost/aisb-sandbox:abc")
    assert argv[argv.index("--volume", argv.index("--workdir")) + 1] == "/state/sessions/sid/policy:/etc/aisb/policy:ro"


def test_limits_are_refused_when_required_but_not_enforceable():
    with pytest.raises(_session_plan.SessionError, match="limits_enforceable is false"):
        _session_plan.plan_session("sid", "/s", inputs(limits={"memory": "1g"}, require_limits=True), FACTS, 40008)


def test_limits_are_dropped_when_not_enforceable_and_not_required():
    assert _session_plan.plan_session("sid", "/s", inputs(limits={"memory": "1g"}), FACTS, 40009).limits == []


def test_limits_are_applied_when_enforceable():
    facts = {"verdict": dict(FACTS["verdict"], limits_enforceable=True)}
    plan = _session_plan.plan_session("sid", "/s", inputs(limits={"memory": "1g", "pids": 64, "cpus": "0.5"}), facts,
                                      40010)
    assert plan.limits == ["--memory=1g", "--pids-limit=64", "--cpus=0.5"]


# A review-mode session and a direct-mode one with everything the sandbox mounts: the kept
# harness state, a covered directory, credentials (pi's models.json) and, in direct mode,
# the git directories' overlays. The command line is podman's whole contract with the sandbox.
ENTRY = {"host": "api.anthropic.com", "port": 443, "header": "x-api-key", "prefix": "", "variable": "ANTHROPIC_API_KEY",
         "key": "sk-never-in-argv"}
KEPT = {"mounts": [("/state/aisb/harness-state/abc/pi-sessions", "/home/agent/.pi/agent/sessions")]}
REVIEW_ARGV = [
    "podman", "run", "--rm", "--name", "aisb-sandbox-sid", "--init",
    "--network=pasta:--map-host-loopback,100.64.0.1,--no-map-gw", "--cap-drop=ALL",
    "--cap-add=NET_ADMIN,SETUID,SETGID,SETPCAP", "--security-opt=no-new-privileges",
    "--userns=keep-id:uid=1000,gid=1000", "--user=0:0", "--security-opt=seccomp=/s/seccomp.json", "--volume",
    "/home/dev/src/app:/project:O,upperdir=/s/review/upper,workdir=/s/review/work", "--workdir", "/project",
    "--volume", "/s/policy:/etc/aisb/policy:ro", "--tmpfs", "/home/agent/.pi/agent:rw,nosuid,nodev,mode=1777",
    "--volume", "/s/harness-config/AGENTS.md:/home/agent/.pi/agent/AGENTS.md:ro", "--volume",
    "/s/pi-models.json:/home/agent/.pi/agent/models.json:ro", "--volume",
    "/state/aisb/harness-state/abc/pi-sessions:/home/agent/.pi/agent/sessions:O,"
    "upperdir=/s/review/state/pi-sessions/upper,workdir=/s/review/state/pi-sessions/work",
    "--tmpfs", "/project/.opencode:ro,nosuid,nodev,noexec,mode=0555,notmpcopyup", "--preserve-fds", "2", "--pidfile",
    "/s/sandbox.pid", "--label", "aisb.session=sid", "--env", "AISB_ENV_FD=4", "--env", "AISB_REPORT_FD=3", "--env",
    "AISB_SESSION=sid", "localhost/aisb-sandbox:abc", "pi", "--version"]
DIRECT_ARGV = [
    "podman", "run", "--rm", "--name", "aisb-sandbox-sid", "--init",
    "--network=pasta:--map-host-loopback,100.64.0.1,--no-map-gw", "--cap-drop=ALL",
    "--cap-add=NET_ADMIN,SETUID,SETGID,SETPCAP", "--security-opt=no-new-privileges",
    "--userns=keep-id:uid=1000,gid=1000", "--user=0:0", "--security-opt=seccomp=/s/seccomp.json", "--volume",
    "/home/dev/src/app:/project:z", "--volume",
    "/home/dev/src/app/.aisb-ro:/project/.aisb-ro:ro,z", "--volume",
    "/home/dev/src/app/.git:/project/.git:O,upperdir=/s/git/0/upper,workdir=/s/git/0/work", "--volume",
    "/home/dev/src/app/sub:/project/sub:rw,z", "--volume",
    "/home/dev/src/app/sub/.git:/project/sub/.git:O,upperdir=/s/git/1/upper,workdir=/s/git/1/work", "--workdir",
    "/project", "--volume", "/s/policy:/etc/aisb/policy:ro", "--tmpfs",
    "/home/agent/.pi/agent:rw,nosuid,nodev,mode=1777", "--volume",
    "/s/pi-models.json:/home/agent/.pi/agent/models.json:ro", "--volume",
    "/state/aisb/harness-state/abc/pi-sessions:/home/agent/.pi/agent/sessions:rw,z", "--tmpfs",
    "/project/.opencode:ro,nosuid,nodev,noexec,mode=0555,notmpcopyup", "--preserve-fds", "2", "--pidfile",
    "/s/sandbox.pid", "--label", "aisb.session=sid", "--env", "AISB_ENV_FD=4", "--env", "AISB_REPORT_FD=3", "--env",
    "AISB_SESSION=sid", "localhost/aisb-sandbox:abc", "pi", "--version"]


def test_a_review_session_mounts_the_project_and_its_kept_state_as_overlays_in_its_directory():
    session = inputs(project_mode="review", project_label="z", harness_state=KEPT, hidden_dirs=[".opencode"],
                     credentials=[ENTRY], harness_files=[{"path": "AGENTS.md", "text": "rules"}],
                     harness_mounts=[("harness-config/AGENTS.md", "/home/agent/.pi/agent/AGENTS.md")])
    plan = _session_plan.plan_session("sid", "/s", session, FACTS, 40001, ({"ANTHROPIC_API_KEY": "ph"}, 40002),
                                      review=_review_session.overlays("/s", _session_plan.kept_state_mounts(session)))
    assert sandbox_argv(plan) == REVIEW_ARGV


def test_a_direct_session_mounts_the_git_directories_overlays_and_the_kept_state_read_write():
    git = {"project": "/home/dev/src/app", "gitdirs": [".git", "sub/.git"], "read_only": [".aisb-ro"], "pinned": ["sub"]}
    session = inputs(project_label="z", harness_state=KEPT, hidden_dirs=[".opencode"], credentials=[ENTRY],
                     project_git=git)
    plan = _session_plan.plan_session("sid", "/s", session, FACTS, 40001, ({"ANTHROPIC_API_KEY": "ph"}, 40002),
                                      project_mounts=_project_git.mounts(git, "/s", "z"))
    assert sandbox_argv(plan) == DIRECT_ARGV


def test_a_refused_plan_comes_before_the_session_makes_anything(tmp_path):
    # Review mode with kept state: the overlays' paths are planned, their directories not made.
    session = inputs(project_mode="review", harness_state=KEPT, limits={"memory": "1g"}, require_limits=True)
    with pytest.raises(_session_plan.SessionError, match="limits_enforceable is false"):
        _session.start(session, FACTS, {"XDG_STATE_HOME": str(tmp_path)}, None)
    assert list(tmp_path.iterdir()) == []


def test_the_sni_canary_goes_to_the_first_allowed_name_on_the_first_connect_port():
    parse = _policy.parse_policy
    assert _session_plan.sni_canary_target(parse(["www.example.org", "api.example.com"], [8443, 443])) == (
        "api.example.com", 443)
    # A wildcard entry's own name is among the names it covers.
    assert _session_plan.sni_canary_target(parse([".example.org"], [443])) == ("example.org", 443)
    # No name allowed: the gate relays no CONNECT, and no such canary runs.
    assert _session_plan.sni_canary_target(parse([], [443])) is None


def test_upload_budgets_meter_the_gate_s_port_and_the_injector_s():
    plan = _session_plan.plan_session("sid", "/s", inputs(upload_budget=8 * 2 ** 20, provider_upload_budget=2 ** 20),
                                      FACTS, 40001, injector=({}, 40005))
    lines = plan.policy_text.splitlines()
    assert lines[-2:] == ["budget 100.64.0.1 40001 8388608", "budget 100.64.0.1 40005 1048576"]
    # Without credentials there is no injector to meter; without a budget, no line.
    alone = _session_plan.plan_session("sid", "/s", inputs(provider_upload_budget=2 ** 20), FACTS, 40001)
    assert "budget" not in alone.policy_text
    assert "budget" not in _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40001).policy_text
