# SPDX-License-Identifier: GPL-3.0-or-later
"""The image and gate roles for real: content-hashed images that are built once, an
entrypoint that refuses to run unenforced, configurations the real parsers accept, and
a gate started from the rendered configuration that relays only what the policy names."""

import json
import re

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman as podman_argv
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _policy as policy_lib
from ansible_collections.aisb.sandbox.plugins.module_utils.policy import _squid as squid_lib
from scenario import closed_port, free_port, provision, task_status
from sessions import built_images, newest, provisioned_sandbox_image
from workstation import BASE_IMAGE, REPO

GATE_ADDR = "100.64.0.1"
WORK = "/home/dev/images-test"
RULESET = "/usr/local/lib/aisb/ruleset.nft"


def provision_with(ws, extra_vars):
    return provision(ws, "-e", json.dumps(extra_vars), timeout=600)


@pytest.fixture(scope="module")
def sandbox_image(workstation):
    return provisioned_sandbox_image(workstation)


@pytest.fixture(scope="module")
def work(workstation):
    workstation.run(["mkdir", "-p", WORK])
    return WORK


def write(ws, path, text):
    ws.path(path).write_text(text)
    return path


def sandbox(ws, image, policy, *args, caps=None, mounts=(), session=None):
    """Run IMAGE like a session would (pasta with the gate address, every flag of the
    sandbox's security set), the policy mounted read-only unless POLICY is None, and
    AISB_SESSION set to SESSION when given."""
    security = list(podman_argv.SANDBOX_SECURITY) + ([f"--env=AISB_SESSION={session}"] if session else [])
    if caps is not None:
        security[1] = "--cap-add=" + caps
    volumes = [] if policy is None else ["--volume", f"{policy}:{podman_argv.SANDBOX_POLICY}:ro"]
    for source, target in mounts:
        volumes += ["--volume", f"{source}:{target}:ro"]
    return ws.run(["podman", "run", "--rm", f"--network=pasta:--map-host-loopback,{GATE_ADDR}", *security,
                   *volumes, image, *args], check=False, timeout=120)


# --- the images and their tags -------------------------------------------------------

def test_images_are_tagged_by_their_content_hash(workstation, sandbox_image):
    gate_image = newest(workstation, "localhost/aisb-gate")
    for tag in (sandbox_image, gate_image):
        labels = json.loads(workstation.run(["podman", "image", "inspect", "--format", "{{json .Labels}}", tag]).stdout)
        assert tag.endswith(":" + labels["io.aisb.content-hash"][:16])
        inputs = json.loads(labels["io.aisb.inputs"])
        assert inputs["base_image_id"].startswith(
            workstation.run(["podman", "image", "inspect", "--format", "{{.Id}}", "localhost/aisb-base:trixie"]).stdout.strip())
        assert "Containerfile" in inputs["files"]
    sandbox_files = json.loads(workstation.run(["podman", "image", "inspect", "--format", "{{json .Labels}}",
                                                sandbox_image]).stdout)["io.aisb.inputs"]
    # The workstation's extra CA anchors are build inputs, and so is the recipe.
    assert "ca/0-" in sandbox_files and "ruleset.nft" in sandbox_files and "pi-coding-agent" in sandbox_files


def test_unchanged_second_provision_builds_nothing(workstation):
    before = built_images(workstation)
    second = provision_with(workstation, {})
    assert second.returncode == 0, second.stdout[-3000:]
    assert task_status(second.stdout, "Build the sandbox image unless one with these inputs exists") == "skipping"
    assert task_status(second.stdout, "Build the gate image unless one with these inputs exists") == "skipping"
    assert built_images(workstation) == before


def test_policy_change_rebuilds_nothing_and_passes_the_real_parsers(workstation):
    before = built_images(workstation)
    policies = workstation.path("/home/dev/.local/state/aisb/policies")
    known = set(policies.iterdir())
    allow = ["allowed.test", ".example.org", "git.example.org:2222", "198.18.0.0/24", "[2001:db8::5]:22"]
    changed = provision_with(workstation, {"aisb_allow": allow, "aisb_connect_ports": [443, 8443]})
    assert changed.returncode == 0, changed.stdout[-3000:]
    # The policy is no input of either image: nothing is built, not even the tool layer.
    assert task_status(changed.stdout, "Build the sandbox image unless one with these inputs exists") == "skipping"
    assert task_status(changed.stdout, "Build the gate image unless one with these inputs exists") == "skipping"
    assert built_images(workstation) == before
    # gate_policy ran squid -k parse and nft -c before the directory got its name.
    assert task_status(changed.stdout, "Validate the policy, render it and check it with squid and nft") == "changed"
    # Other tests share this workstation and render policies of their own: only the one
    # directory this provision added is this policy's.
    added = sorted(set(policies.iterdir()) - known)
    assert len(added) == 1 and "allowed.test" in (added[0] / "squid-policy.conf").read_text()
    record = json.loads((added[0] / "policy.json").read_text())
    assert record["pins"] == [["198.18.0.0/24", 443], ["198.18.0.0/24", 8443], ["2001:db8::5", 22]]


def test_hostile_policy_fails_before_anything_is_written(workstation):
    policies = workstation.path("/home/dev/.local/state/aisb/policies")
    before = sorted(policies.iterdir())
    result = provision_with(workstation, {"aisb_allow": ["example.com\nhttp_access allow all"]})
    assert result.returncode != 0
    assert re.search(r"allow entry 'example\.com\\+nhttp_access allow all'", result.stdout), result.stdout[-2000:]
    assert sorted(policies.iterdir()) == before


# --- the entrypoint ----------------------------------------------------------------------

def test_no_policy_exits_78(workstation, sandbox_image):
    result = sandbox(workstation, sandbox_image, None, "id")
    assert result.returncode == 78, result.stderr


def test_malformed_policy_exits_78(workstation, sandbox_image, work):
    policy = write(workstation, f"{work}/malformed", "gate 100.64.0.1 3128\nallow everything\n")
    result = sandbox(workstation, sandbox_image, policy, "id")
    assert result.returncode == 78, result.stderr
    assert "line 2" in result.stderr


def test_without_net_admin_exits_77(workstation, sandbox_image, work):
    policy = write(workstation, f"{work}/policy", f"gate {GATE_ADDR} 3128\n")
    result = sandbox(workstation, sandbox_image, policy, "id", caps="SETUID,SETGID,SETPCAP")
    assert result.returncode == 77, result.stderr
    assert "refusing to start" in result.stderr


NOT_THE_OUTPUT_CHAIN = "chain inet aisb output is missing, not on the output hook, or its policy is not drop"
OTHER_RULES = "installed rules differ from the policy"


@pytest.mark.parametrize("change, reason", [
    (("policy drop", "policy accept"), NOT_THE_OUTPUT_CHAIN),
    (("hook output", "hook input"), NOT_THE_OUTPUT_CHAIN),
    (("oif \"lo\" accept", "oif \"lo\" accept\n\t\ttcp dport 22 accept"), OTHER_RULES),
    (("oif \"lo\" accept", "oif \"lo\" accept\n\t\tjump more"), OTHER_RULES),
    (("oif \"lo\" accept", "ip daddr 192.0.2.1 tcp dport 443 accept"), OTHER_RULES),
], ids=["no-drop-policy", "input-hook", "extra-accept", "jump", "pin-for-loopback"])
def test_ruleset_that_loads_but_fails_verification_exits_77(workstation, sandbox_image, work, change, reason):
    template = (REPO / "roles/image/files/ruleset.nft").read_text()
    assert change[0] in template
    bad = template.replace(change[0], change[1])
    if "jump more" in bad:
        bad = bad.replace("table inet aisb {", "table inet aisb {\n\tchain more {\n\t\taccept\n\t}")
    ruleset = write(workstation, f"{work}/bad-{abs(hash(change))}.nft", bad)
    # No gate: the harness would wait for one (exit 79) and the table is the point here.
    policy = write(workstation, f"{work}/policy-nogate", "gate none\n")
    # Mounting another template over the baked one is the test's lever: whoever can add
    # mounts to the podman command could run anything anyway.
    result = sandbox(workstation, sandbox_image, policy, "id", mounts=[(ruleset, RULESET)])
    assert result.returncode == 77 and reason in result.stderr, result.stdout + result.stderr
    unenforced = sandbox(workstation, sandbox_image, policy, "--allow-unenforced", "id", "-u",
                         mounts=[(ruleset, RULESET)])
    assert unenforced.returncode == 0, unenforced.stderr
    assert unenforced.stdout.strip() == "1000"
    assert "EGRESS IS NOT ENFORCED" in unenforced.stderr


def test_enforced_harness_runs_without_privileges(workstation, sandbox_image, work):
    # No gate (the harness would wait for it); the sessions' tests install and verify a gate's rule.
    policy = write(workstation, f"{work}/policy-pins", "# test\ngate none\npin 198.18.0.0/24 443\npin 2001:db8::5 22\n")
    script = ("id -u; id -g; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status; "
              "nft flush ruleset 2>/dev/null && echo flushed || echo refused")
    result = sandbox(workstation, sandbox_image, policy, "bash", "-c", script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[:2] == ["1000", "1000"]
    status = dict(line.split(":\t") for line in lines[2:8])
    assert status == {"CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapBnd": "0" * 16,
                      "CapAmb": "0" * 16, "NoNewPrivs": "1"}, result.stdout
    assert lines[8] == "refused"


def test_a_gate_that_never_answers_exits_79_before_the_harness_runs(workstation, sandbox_image, work):
    with closed_port() as port:
        policy = write(workstation, f"{work}/policy-closed", f"gate {GATE_ADDR} {port}\n")
        result = sandbox(workstation, sandbox_image, policy, "echo", "harness-ran", session="s1")
        unnamed = sandbox(workstation, sandbox_image, policy, "echo", "harness-ran")
    assert result.returncode == 79, result.stderr
    assert "did not answer as aisb-gate-s1 within 15 s" in result.stderr
    assert "harness-ran" not in result.stdout
    assert unnamed.returncode == 79 and "AISB_SESSION does not name the session" in unnamed.stderr
    assert "harness-ran" not in unnamed.stdout


def test_another_server_on_the_gate_port_is_not_taken_for_the_gate(workstation, sandbox_image, work):
    # A process that took the gate's port before squid could answers HTTP too; the
    # entrypoint waits for this session's gate by name and never runs the harness.
    port, log = free_port(), f"{work}/foreign-server.log"
    pid = workstation.sh(f"setsid python3 -m http.server --bind 127.0.0.1 {port} >{log} 2>&1 </dev/null & echo $!").stdout
    try:
        wait_for_listener(workstation, port)
        policy = write(workstation, f"{work}/policy-foreign", f"gate {GATE_ADDR} {port}\n")
        result = sandbox(workstation, sandbox_image, policy, "echo", "harness-ran", session="s2")
    finally:
        workstation.run(["kill", pid.strip()], check=False)
    assert result.returncode == 79, result.stderr
    assert "did not answer as aisb-gate-s2" in result.stderr
    assert "harness-ran" not in result.stdout
    assert "aisb-gate-probe" in workstation.path(log).read_text()  # the probe did reach the other server


def test_check_mode_of_the_entrypoint_runs_nft_c(workstation, sandbox_image, work):
    good = write(workstation, f"{work}/check-good", f"gate {GATE_ADDR} 3128\npin 198.18.0.0/24 443\n")
    bad = write(workstation, f"{work}/check-bad", f"gate {GATE_ADDR} 3128\npin 198.18.0.999 443\n")
    assert workstation.run(podman_argv.ruleset_check("podman", sandbox_image, good), check=False).returncode == 0
    assert workstation.run(podman_argv.ruleset_check("podman", sandbox_image, bad), check=False).returncode == 77


def test_pi_runs_in_the_built_image(workstation, sandbox_image, work):
    policy = write(workstation, f"{work}/policy-nogate", "gate none\n")
    result = sandbox(workstation, sandbox_image, policy, "pi", "--version")
    assert result.returncode == 0, result.stderr
    assert re.search(r"\b0\.73\.1\b", result.stdout + result.stderr)


# --- the gate, from the rendered configuration ---------------------------------------------

CLIENT = r"""
import json, socket, ssl, sys
port = int(sys.argv[1])
def ask(request, then=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request.encode())
    head = s.recv(4096).decode(errors="replace")
    status = int(head.split()[1])
    if then and status == 200:
        # Through the tunnel, TLS naming the Host (the gate splices nothing else).
        host = then.split("Host: ", 1)[1].split("\r\n", 1)[0]
        s = ssl._create_unverified_context().wrap_socket(s, server_hostname=host)
        s.sendall(then.encode())
        status = int(s.recv(4096).decode(errors="replace").split()[1])
    s.close()
    return status
out = {}
for name, request, then in json.loads(sys.argv[2]):
    out[name] = ask(request, then)
print(json.dumps(out))
"""


def wait_for_listener(ws, port):
    ws.sh(f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && exit 0; sleep 0.1; done; exit 1")


def test_gate_relays_only_what_the_policy_names(workstation, internet, work, sandbox_image):
    # Allowed names that resolve to the workstation's own loopback, plainly and v4-mapped:
    # if the gate failed to deny them, the traffic would still stay on this workstation.
    workstation.sh("grep -q ' loop.test$' /etc/hosts || printf '127.0.0.1 loop.test\\n::ffff:127.0.0.1 mapped.test\\n'"
                   " >>/etc/hosts", user="root")
    policy = policy_lib.parse_policy(["allowed.test", "loop.test", "mapped.test"], [443])
    policy_dir = f"{work}/gate-policy"
    workstation.run(["mkdir", "-p", policy_dir])
    write(workstation, f"{policy_dir}/squid-policy.conf", squid_lib.render_policy_conf(policy))
    port, session = free_port(), "itest-gate"
    # This test's requests only: the test internet is the whole run's.
    before = len(internet.requests())
    conf = write(workstation, f"{work}/gate-session.conf",
                 squid_lib.render_session_conf(port, session, podman_argv.GATE_POLICY_CONF))
    gate_image = newest(workstation, "localhost/aisb-gate")
    name = f"aisb-gate-{session}"
    workstation.run(podman_argv.gate_run("podman", gate_image, name, policy_dir, conf, extra=["--detach"]))
    try:
        wait_for_listener(workstation, port)
        # The entrypoint knows this gate by its session's name, and only by that.
        gate_policy = write(workstation, f"{work}/policy-gate", f"gate {GATE_ADDR} {port}\n")
        ours = sandbox(workstation, sandbox_image, gate_policy, "echo", "harness-ran", session=session)
        assert ours.returncode == 0 and "harness-ran" in ours.stdout, ours.stderr
        theirs = sandbox(workstation, sandbox_image, gate_policy, "echo", "harness-ran", session="another-session")
        assert theirs.returncode == 79 and "harness-ran" not in theirs.stdout, theirs.stderr
        ip = internet.address

        def get(host):
            return f"GET http://{host}/ HTTP/1.1\r\nHost: {host.split(':')[0]}\r\nConnection: close\r\n\r\n"

        def connect(hostport):
            return f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n\r\n"

        through = "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
        cases = [
            ("allowed", get("allowed.test"), None),
            ("unlisted", get("other.test"), None),
            ("ip literal", get(ip), None),
            ("other http port", get("allowed.test:8443"), None),
            ("resolves to loopback", get("loop.test"), None),
            ("resolves to v4-mapped loopback", get("mapped.test"), None),
            ("connect 443", connect("allowed.test:443"), through),
            ("connect other port", connect("allowed.test:8443"), None),
            ("connect unlisted", connect("other.test:443"), None),
            ("connect ip literal", connect(f"{ip}:443"), None),
        ]
        client = write(workstation, f"{work}/client.py", CLIENT)
        result = json.loads(workstation.run(["python3", client, str(port), json.dumps(cases)]).stdout)
        assert result == {"allowed": 200, "unlisted": 403, "ip literal": 403, "other http port": 403,
                          "resolves to loopback": 403, "resolves to v4-mapped loopback": 403, "connect 443": 200, "connect other port": 403,
                          "connect unlisted": 403, "connect ip literal": 403}
        seen = {(r["host"], r["port"]) for r in internet.requests()[before:]}
        assert ("allowed.test", 80) in seen and ("allowed.test", 443) in seen
        assert not any(host.startswith("other.test") for host, _port in seen)
        log = workstation.run(["podman", "logs", name]).stdout
        # One decision per case: the readiness probe above and the entrypoints' probes
        # (no request, a malformed one) are none, a tunnel counts once.
        decisions = squid_lib.parse_gate_log(log)
        assert (len(decisions["allowed"]), len(decisions["denied"])) == (2, len(cases) - 2), log
    finally:
        workstation.run(["podman", "rm", "--force", "--time", "0", name], check=False)


# A ClientHello check that never says yes or no: squid's BH (broken helper) for every
# line. A shebang and perl both ways: squid runs its helper as `perl SCRIPT TAG`.
BROKEN_HELPER = """#!/usr/bin/perl
$| = 1;
while (<STDIN>) { my ($channel) = split ' '; print "$channel BH\\n"; }
"""
TUNNEL_CLIENT = r"""
import socket, ssl, sys
port, host, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
print("connect", s.recv(4096).decode(errors="replace").split()[1])
try:
    s = ssl._create_unverified_context().wrap_socket(s, server_hostname=host)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    print("tls", s.recv(4096).decode(errors="replace").split()[1])
except (OSError, IndexError) as error:
    print("tls refused", type(error).__name__)
"""


@pytest.mark.parametrize("helper", ["broken", "real"])
def test_a_client_hello_the_check_does_not_answer_opens_no_tunnel(workstation, internet, work, helper):
    """squid splices when its step-2 check ends without an answer (the helper broken,
    timed out, overloaded). The gate fails closed anyway: a tunnel to a CONNECT port needs
    the connection tag only the helper's OK gives (miss_access). With a helper that
    answers BH, a good ClientHello to an allowed name reaches nothing; with the image's
    own helper, the same request is answered (the control)."""
    policy_dir = f"{work}/gate-policy-{helper}"
    workstation.run(["mkdir", "-p", policy_dir])
    write(workstation, f"{policy_dir}/squid-policy.conf",
          squid_lib.render_policy_conf(policy_lib.parse_policy(["allowed.test"], [443])))
    port, session = free_port(), f"itest-helper-{helper}"
    conf = write(workstation, f"{work}/gate-{helper}.conf",
                 squid_lib.render_session_conf(port, session, podman_argv.GATE_POLICY_CONF))
    extra = ["--detach"]
    if helper == "broken":
        broken = write(workstation, f"{work}/broken-helper", BROKEN_HELPER)
        workstation.run(["chmod", "0755", broken], user="root")
        extra += ["--volume", f"{broken}:{squid_lib.SNI_HELPER}:ro"]
    name = f"aisb-gate-{session}"
    workstation.run(podman_argv.gate_run("podman", newest(workstation, "localhost/aisb-gate"), name, policy_dir,
                                         conf, extra=extra))
    try:
        wait_for_listener(workstation, port)
        client = write(workstation, f"{work}/tunnel-client.py", TUNNEL_CLIENT)
        path = f"/c-helper-{helper}-{free_port()}"
        said = workstation.run(["python3", client, str(port), "allowed.test", path]).stdout.splitlines()
        arrived = [r for r in internet.requests() if r["path"] == path]
        log = workstation.run(["podman", "logs", name]).stdout
        if helper == "real":
            assert said == ["connect 200", "tls 200"] and len(arrived) == 1, (said, log)
            return
        assert said[0] == "connect 200" and said[1].startswith("tls refused"), (said, log)
        assert arrived == [], log
        assert squid_lib.parse_gate_log(log)["allowed"] == [], log
    finally:
        workstation.run(["podman", "rm", "--force", "--time", "0", name], check=False)


def test_a_build_keeps_its_log_and_a_failure_names_it_with_its_last_lines(workstation, work):
    """content_image with real podman: the build's output in the state directory's log,
    named by content hash; a failed build's error names that log and shows its end."""
    marker = "log-marker-%d" % free_port()

    def build(name, run_line):
        return {"name": name, "aisb.sandbox.content_image": {
            "name": "localhost/aisb-logtest", "context": f"{work}/logtest-{name}", "base_image": BASE_IMAGE,
            "files": [{"path": "Containerfile", "content": f"FROM {BASE_IMAGE}\nRUN {run_line}\n"}]},
            "register": name, "ignore_errors": True}

    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        build("good", f"echo {marker}-good"), build("bad", f"echo {marker}-bad && false"),
        {"name": "Keep the results", "ansible.builtin.copy": {
            "content": "{{ {'good': good, 'bad': bad} | to_json }}", "dest": f"{work}/logtest.json"}}]}]
    write(workstation, f"{work}/logtest.yml", json.dumps(play))
    ran = workstation.run(["ansible-playbook", f"{work}/logtest.yml"], check=False, timeout=600)
    results = json.loads(workstation.path(f"{work}/logtest.json").read_text())
    good, bad = results["good"], results["bad"]
    logs = "/home/dev/.local/state/aisb/images/logs"
    try:
        assert good["built"] is True and good["log"] == f"{logs}/aisb-logtest-{good['image'].split(':')[1]}.log", \
            ran.stdout[-3000:]
        assert f"{marker}-good" in workstation.path(good["log"]).read_text()
        assert isinstance(good["seconds"], int) and good["msg"] == "built %s from %s in %d s; build log %s" % (
            good["image"], BASE_IMAGE, good["seconds"], good["log"])
        [bad_log] = [str(p).replace(str(workstation.root), "") for p in
                     workstation.path(logs).glob("aisb-logtest-*.log") if f"{marker}-bad" in p.read_text()]
        assert bad["failed"] is True and f"; build log {bad_log}, its last lines:\n" in bad["msg"], bad["msg"]
        assert f"{marker}-bad" in bad["msg"].split("its last lines:")[1], bad["msg"]
    finally:
        workstation.run(["podman", "rmi", "--ignore", good.get("image") or "localhost/aisb-logtest:none"], check=False)
