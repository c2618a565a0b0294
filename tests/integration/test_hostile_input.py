# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile input: policy entries, project paths, environment names and values and
harness arguments that must be refused before anything starts, each refusal naming the
input; and prompt text and harness arguments full of shell and template syntax that
must arrive in the sandbox verbatim. (test_session covers thirteen project paths and
four environment names through run_agent.yml; test_images a squid directive through
provision.yml.)"""

import json

import pytest

from scenario import ANSIBLE_ENV, TRANSFER_DIR
from sessions import PROJECT, images_and_policy, left_running, record_of, run_agent, session_containers, session_dirs

from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import MAX_ENTRY_LENGTH

# Past the policy's bound, refused before any pattern reads it.
LONG = "x" * (MAX_ENTRY_LENGTH + 25)
# (name, module arguments over a working default, text the refusal must contain).
# allow and connect_ports go to the gate_policy module (the gate role's), the session's
# one policy source; everything else to the session module.
REFUSED = [(f"allow {entry!r}"[:60], {"allow": [entry]}, repr(entry)) for entry in [
    "example.com\nhttp_access allow all", "example.com http_access allow all", "*.example.com",
    "example.com;id", "example.com\r", "example.com\x00", "..example.com", "example..com", "com",
    "-bad.example.com", "a" * 64 + ".example.com", "example.com:0", "example.com:65536", "example.com:080",
    "0.0.0.0/0", "10.0.0.0/4", "127.0.0.1", "::1", "169.254.169.254", "[::ffff:198.18.0.1]:443",
    "198.18.0.999", "2130706433", "0x7f000001", "example.com/24", "[example.com]:443", "ex\tample.com",
    "\u00e9xample.com", "example.com#x", 'example.com"', "example.com\\", "example.com%0a",
]] + [
    ("allow too long", {"allow": [LONG]}, repr(LONG[:40] + "...")),
    ("connect port 0", {"connect_ports": [0]}, "connect_ports entry 0"),
    ("connect port 65536", {"connect_ports": [65536]}, "connect_ports entry 65536"),
    ("connect port twice", {"connect_ports": [443, 443]}, "connect_ports entry 443"),
    ("connect ports empty", {"connect_ports": []}, "connect_ports []"),
] + [(f"project {path!r}", {"project": path}, needle) for path, needle in [
    (PROJECT + "\nx", repr(PROJECT + "\nx")),
    (PROJECT + "\x1b[2J", repr(PROJECT + "\x1b[2J")),
    ("/home/dev/src/../.ssh", "'/home/dev/.ssh'"),
    ("~/.ssh", "'/home/dev/.ssh'"),
    ("/home/dev/src/link-to-etc", "'/etc'"),
    ("/home/dev/src/link-to-home", "'/home/dev'"),
    ("/home/dev/.local/share/containers", "'/home/dev/.local/share/containers'"),
    ("/tmp", "'/tmp'"),
    ("/var/tmp", "'/var/tmp'"),
]] + [(f"environment name {name!r}", {"environment": {name: "x"}}, repr(name)) for name in [
    "A=B", "", "PATH\nX", "http_proxy", "NO_PROXY", "npm_config_proxy", "NODE_USE_ENV_PROXY", "$(id)", "A;B",
]] + [
    ("environment value NUL", {"environment": {"GIVEN": "a\x00b"}}, "environment GIVEN contains a NUL byte"),
    ("environment value dict", {"environment": {"GIVEN": {"nested": 1}}}, "environment GIVEN must be a string"),
    ("environment value list", {"environment": {"GIVEN": ["x"]}}, "environment GIVEN must be a string"),
    ("pass_environment unset", {"pass_environment": ["UNSET_BATTERY_VAR"]}, "'UNSET_BATTERY_VAR'"),
    ("pass_environment proxy", {"pass_environment": ["HTTPS_PROXY"]}, "'HTTPS_PROXY'"),
    ("pass_environment bad name", {"pass_environment": ["1BAD"]}, "'1BAD'"),
    ("pass_environment and value", {"pass_environment": ["HOME"], "environment": {"HOME": "/x"}}, "'HOME'"),
    ("harness argument NUL", {"command": ["bash", "-c", "a\x00b"]}, repr("a\x00b")),
]

POLICY_OPTIONS = {"allow", "connect_ports"}
PLAYBOOK = """
- name: Hostile inputs, each given to the module that takes it
  hosts: localhost
  gather_facts: false
  tasks:
    - name: One policy per policy case
      aisb.sandbox.gate_policy:
        allow: "{{ item.args.allow | default([]) }}"
        connect_ports: "{{ item.args.connect_ports | default([443]) }}"
        state_dir: "{{ scratch }}"
      loop: "{{ cases | selectattr('via', 'equalto', 'policy') }}"
      loop_control:
        label: "{{ item.name }}"
      register: policy_outcome
      ignore_errors: true
    - name: One session per session case
      aisb.sandbox.session:
        project: "{{ item.args.project | default(base.project) }}"
        image: "{{ base.image }}"
        gate_image: "{{ base.gate_image }}"
        policy_dir: "{{ base.policy_dir }}"
        host_facts: "{{ base.host_facts }}"
        environment: "{{ item.args.environment | default({}) }}"
        pass_environment: "{{ item.args.pass_environment | default([]) }}"
        command: "{{ item.args.command | default(['true']) }}"
      loop: "{{ cases | selectattr('via', 'equalto', 'session') }}"
      loop_control:
        label: "{{ item.name }}"
      register: session_outcome
      ignore_errors: true
    - name: Save the outcomes
      ansible.builtin.copy:
        content: "{{ (policy_outcome.results + session_outcome.results) | to_json }}"
        dest: "{{ out }}"
        mode: "0600"
"""


@pytest.fixture(scope="module")
def outcomes(workstation):
    workstation.sh(f"mkdir -p {PROJECT} /home/dev/.ssh && ln -sfn /etc /home/dev/src/link-to-etc"
                   " && ln -sfn /home/dev /home/dev/src/link-to-home")
    base = dict(images_and_policy(workstation), project=PROJECT)
    cases = [{"name": name, "args": args, "via": "policy" if set(args) <= POLICY_OPTIONS else "session"}
             for name, args, _needle in REFUSED]
    variables, playbook, out = (f"{TRANSFER_DIR}/hostile-{n}" for n in ("vars.json", "play.yml", "out.json"))
    scratch = f"{TRANSFER_DIR}/hostile-policies"
    workstation.path(variables).write_text(json.dumps({"base": base, "cases": cases, "out": out,
                                                       "scratch": scratch}))
    workstation.path(playbook).write_text(PLAYBOOK)
    before, running = session_dirs(workstation), session_containers(workstation)
    result = workstation.run(["ansible-playbook", playbook, "-e", "@" + variables], check=False,
                             env=ANSIBLE_ENV, timeout=900)
    assert workstation.path(out).exists(), result.stdout[-3000:]
    results = json.loads(workstation.path(out).read_text())
    return {"results": dict((r["item"]["name"], r) for r in results), "dirs_before": before,
            "policies_written": sorted(p.name for p in workstation.path(scratch).glob("policies/*")),
            "dirs_after": session_dirs(workstation), "left_running": left_running(workstation, running)}


def test_there_are_at_least_forty_cases():
    assert len(REFUSED) >= 40


@pytest.mark.parametrize("name,needle", [(name, needle) for name, _args, needle in REFUSED],
                         ids=[f"{i:02d}" for i in range(len(REFUSED))])
def test_refused_before_anything_starts_naming_the_input(outcomes, name, needle):
    result = outcomes["results"][name]
    assert result.get("failed") is True, result
    assert result["item"]["via"] == "policy" or result.get("status") == "refused", result
    assert needle in result["msg"], result["msg"]
    assert "session_id" not in result and "policy_dir" not in result


def test_no_refused_case_left_a_session_a_policy_or_a_container(outcomes):
    assert len(outcomes["results"]) == len(REFUSED)
    assert outcomes["dirs_after"] == outcomes["dirs_before"]
    assert outcomes["policies_written"] == []
    assert outcomes["left_running"] == []


# Shell and terminal syntax that must reach the harness as it was written. (Template
# syntax is Ansible's to evaluate in any extra var; prompt_file carries it verbatim.)
VERBATIM = ["$(touch /project/pwned)", "`touch /project/pwned`", "; touch /project/pwned", "a && b || c | d",
            "'single' \"double\"", "line1\nline2", "tab\there", "back\\slash\\", "*", "~", "$HOME", "%s%n%x",
            "-rf", "--privileged", "\u00fcn\u00efc\u00f6d\u00e9 \u2713", "\x1b]0;title\x07", " leading and trailing ",
            "", "-e", "--", "> /project/pwned"]
TEMPLATES = ["{{ 7 * 7 }}", "{% raw %}x{% endraw %}",
             "{{ lookup('ansible.builtin.pipe', 'touch /home/dev/pwned-hostile') }}", "{# comment #}"]


def test_harness_arguments_arrive_verbatim(workstation):
    workstation.sh(f"mkdir -p {PROJECT} && rm -f {PROJECT}/args.bin {PROJECT}/pwned")
    result = run_agent(workstation, command=["bash", "-c", 'printf "%s\\0" "$@" >/project/args.bin', "bash",
                                             *VERBATIM])
    assert result.returncode == 0, result.stdout[-3000:]
    arrived = workstation.path(f"{PROJECT}/args.bin").read_bytes().decode().split("\0")[:-1]
    assert arrived == VERBATIM
    assert not workstation.path(f"{PROJECT}/pwned").exists()


def test_prompt_file_arrives_verbatim(workstation):
    # The prompt goes to the recipe's harness (pi -p PROMPT, after the switches that keep
    # the project's extensions off) as one argument, never through a shell or a
    # template; no network, so the harness cannot send it anywhere.
    prompt = "\n".join(VERBATIM + TEMPLATES) + "\n"
    workstation.path(f"{TRANSFER_DIR}/prompt.md").write_text(prompt)
    workstation.sh(f"mkdir -p {PROJECT} && rm -f /home/dev/pwned-hostile {PROJECT}/pwned")
    result = run_agent(workstation, "-e", json.dumps({"prompt_file": f"{TRANSFER_DIR}/prompt.md",
                                                      "aisb_network": "none"}))
    record = record_of(workstation, result.stdout)
    command = ["pi", "--no-extensions", "--offline", "-p", prompt]
    assert record["command"] == command
    sandbox_argv = [argv for argv in record["commands"] if "run" in argv and "--init" in argv][0]
    assert sandbox_argv[-len(command):] == command
    assert not workstation.path("/home/dev/pwned-hostile").exists()
    assert not workstation.path(f"{PROJECT}/pwned").exists()
