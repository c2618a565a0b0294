# SPDX-License-Identifier: GPL-3.0-or-later
"""The session's host-side programs come from the system, never from the developer's
PATH: with the project's bin/ first on it (direnv's PATH_add bin, node_modules/.bin),
the agent's bin/podman, bin/pasta, ... never run on the host.

The agent plants, in one session, a wrapper for every program the collection or podman
runs on the host: each leaves a marker under PWNED (outside the sandbox's reach, named
by the program and the uid it ran as) and then runs the real program, so the session
works whether or not the wrapper ran. The developer's next session runs with the
project's bin/ first on PATH: no marker may appear, and the session must still run.
"""

import json
from collections import Counter

from scenario import ANSIBLE_ENV, operator_vars
from sessions import record_of, run_agent
from workstation import BASE_IMAGE, PATH

PROJECT = "/home/dev/src/hosttools-app"
PWNED = "/home/dev/pwned-hosttools"
# What the collection runs on the host, and what podman runs for it (its helpers and
# the network tools it finds on PATH when helper_binaries_dir has none).
PLANTED = ("podman", "pasta", "pasta.avx2", "slirp4netns", "nsenter", "nft", "setpriv", "git", "conmon", "crun",
           "runc", "netavark", "aardvark-dns", "catatonit", "fuse-overlayfs", "newuidmap", "newgidmap", "python3",
           "squid")
# Where the wrappers find the real program (the sandbox does not know the host's).
NAMES = " ".join(PLANTED)
REAL_DIRS = "/usr/sbin /usr/bin /sbin /bin /usr/libexec/podman /usr/lib/podman"
PLANT = f"""
set -e
mkdir -p bin
for name in {NAMES}; do
  cat > "bin/$name" <<'EOF'
#!/bin/sh
name=$(basename "$0")
touch "{PWNED}/$name.uid$(id -u).$$" 2>/dev/null
for dir in {REAL_DIRS}; do
  [ -x "$dir/$name" ] && exec "$dir/$name" "$@"
done
exit 127
EOF
  chmod +x "bin/$name"
done
echo planted
"""


def with_project_path(argv):
    """ARGV run with the project's bin/ first on PATH and as podman's helper directory
    (CONTAINERS_HELPER_BINARY_DIR, searched before helper_binaries_dir), both set once
    the workstation's own setpriv has changed user: the harness's tools are not under test."""
    return ["/usr/bin/env", f"PATH={PROJECT}/bin:{PATH}", f"CONTAINERS_HELPER_BINARY_DIR={PROJECT}/bin"] + argv


def planted_markers(ws):
    return sorted(p.name for p in ws.path(PWNED).iterdir())


def test_a_project_bin_first_on_path_never_runs(workstation):
    ws = workstation
    ws.sh(f"rm -rf {PROJECT} {PWNED} && mkdir -p {PROJECT} {PWNED} && echo 'print(1)' > {PROJECT}/main.py")
    planted = run_agent(ws, command=["bash", "-c", PLANT], project=PROJECT)
    assert record_of(ws, planted.stdout)["status"] == "exited", planted.stdout[-3000:]
    assert ws.path(f"{PROJECT}/bin/pasta").exists()
    # The control: these wrappers do run, and leave their marker, when a program is looked up on this PATH.
    control = ws.run(with_project_path(["sh", "-c", "nsenter --version"]), cwd=PROJECT)
    assert "nsenter" in control.stdout and planted_markers(ws), control.stdout
    ws.sh(f"rm -f {PWNED}/*")
    # The developer's next session, from the project's directory with its bin/ first on PATH.
    command = {"command": ["sh", "-c", "echo agent-ran"]}
    result = ws.run(with_project_path(["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws),
                                       "-e", f"project={PROJECT}", "-e", json.dumps(command)]),
                    check=False, cwd=PROJECT, env=ANSIBLE_ENV, timeout=600)
    record = record_of(ws, result.stdout)
    ran = Counter(name.rsplit(".", 1)[0] for name in planted_markers(ws))
    assert not ran, (sum(ran.values()), dict(ran))
    assert record["status"] == "exited" and record["exit_code"] == 0, result.stdout[-3000:]
    assert "agent-ran" in ws.path(record["transcript"]).read_text().splitlines()
    # Every host tool the session ran is an absolute path in a system directory.
    tools = record["host_tools"]
    assert set(tools) >= {"podman", "nsenter", "setpriv", "nft"}, tools
    assert all(path.startswith(("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")) for path in tools.values()), tools
    assert all(argv[0].startswith("/") for argv in record["commands"]), record["commands"]


def test_a_podman_found_only_outside_the_system_directories_is_refused(workstation):
    ws = workstation
    ws.sh(f"mkdir -p {PROJECT}/bin {PWNED} && rm -f {PWNED}/*")
    ws.sh(f"printf '#!/bin/sh\\ntouch {PWNED}/podman-elsewhere\\nexec /usr/bin/podman.aside \"$@\"\\n' "
          f"> {PROJECT}/bin/podman && chmod +x {PROJECT}/bin/podman")
    ws.run(["mv", "/usr/bin/podman", "/usr/bin/podman.aside"], user="root")
    try:
        result = ws.run(with_project_path(["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws),
                                           "-e", f"project={PROJECT}", "-e", json.dumps({"command": ["true"]})]),
                        check=False, cwd=PROJECT, env=ANSIBLE_ENV, timeout=600)
    finally:
        ws.run(["mv", "/usr/bin/podman.aside", "/usr/bin/podman"], user="root")
    assert result.returncode != 0, result.stdout[-3000:]
    assert "podman is not installed in the system's directories" in result.stdout, result.stdout[-3000:]
    assert planted_markers(ws) == [], planted_markers(ws)


def test_podman_s_configuration_is_never_read_from_the_project(workstation):
    """The agent writes a containers.conf naming its bin/ as podman's helper directory; a
    developer's environment names it (CONTAINERS_CONF=./containers.conf in a .envrc, say):
    podman would run the agent's pasta on the host. The session refuses before any podman
    runs, naming the variable; the control shows podman does take the helper from there."""
    ws = workstation
    ws.sh(f"rm -rf {PROJECT} {PWNED} && mkdir -p {PROJECT} {PWNED}")
    conf = f"[engine]\nhelper_binaries_dir = [\"{PROJECT}/bin\"]\n"
    planted = run_agent(ws, command=["bash", "-c", PLANT + f"printf '%s' '{conf}' > containers.conf"],
                        project=PROJECT)
    assert record_of(ws, planted.stdout)["status"] == "exited", planted.stdout[-3000:]
    environment = ["/usr/bin/env", f"CONTAINERS_CONF={PROJECT}/containers.conf"]
    control = ws.run(environment + ["podman", "run", "--rm", "--network=pasta", BASE_IMAGE, "true"], check=False)
    assert any(name.startswith("pasta") for name in planted_markers(ws)), (control.stderr, planted_markers(ws))
    ws.sh(f"rm -f {PWNED}/*")
    result = ws.run(environment + ["ansible-playbook", "aisb.sandbox.run_agent", "-e", operator_vars(ws),
                                   "-e", f"project={PROJECT}", "-e", json.dumps({"command": ["true"]})],
                    check=False, cwd=PROJECT, env=ANSIBLE_ENV, timeout=600)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "the environment's CONTAINERS_CONF (which podman reads)" in result.stdout, result.stdout[-3000:]
    assert planted_markers(ws) == [], planted_markers(ws)
