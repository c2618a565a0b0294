# SPDX-License-Identifier: GPL-3.0-or-later
"""A fleet of disposable workstations reached over real SSH, for verify.yml.

Each workstation runs its own sshd on the build machine's loopback (they share its
network namespace), on a port of its own, accepting one key the caller generated.
The controller is the build machine itself, with this checkout as the collection: it
stands outside the fleet as a real controller does, its test venv's ansible-core (2.19)
is older than the workstations' (2.21) so the controller/target split runs across
versions, the reports land where the test reads them, and no extra workstation is built.
Shared by tests/integration/test_fleet.py and bench/verify.py.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scenario import ANSIBLE_ENV, free_port, provision_checkout
from workstation import BASE_IMAGE, REPO, TRANSFER_DIR, USER, USER_UID

# sshd as a workstation's login would set the session up: pam_systemd would give the
# user its runtime directory, where rootless podman keeps its state.
SSHD_CONFIG = """Port {port}
ListenAddress 127.0.0.1
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd-fleet.pid
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers {user}
SetEnv XDG_RUNTIME_DIR=/run/user/{uid} PODMAN_IGNORE_CGROUPSV1_WARNING=1
Subsystem sftp /usr/lib/openssh/sftp-server
"""
# A python that never answers: the module "hangs" on that host.
HANGING_PYTHON = f"{TRANSFER_DIR}/hanging-python"


def ssh_key(directory):
    """A fresh ed25519 key pair in DIRECTORY; returns the private key's path."""
    key = Path(directory) / "fleet_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "aisb-fleet-test", "-f", str(key)],
                   check=True)
    return key


def install_and_provision(ws, *extra, before=None):
    """This checkout installed and provision.yml run inside WS, as its operator would
    (harness `shell`: the fleet needs the spike, not pi); BEFORE(ws), when given, runs
    first (what the host is: bookworm's passt, say). scenario.provision_checkout."""
    return provision_checkout(ws, before, "-e", "aisb_harness=shell", *extra, timeout=1800)


def start_sshd(ws, public_key):
    """sshd inside WS on a free port of 127.0.0.1, letting in `dev` with PUBLIC_KEY; the port."""
    port = free_port()
    # The package's maintainer scripts must not start a daemon on port 22 of the build
    # machine's network namespace: policy-rc.d refuses every service start.
    ws.sh("""
        printf '#!/bin/sh\\nexit 101\\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d
        [ -n "$(ls /var/lib/apt/lists/ | grep -v -e lock -e partial)" ] || apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openssh-server >/dev/null
        mkdir -p /run/sshd
        # useradd leaves the password field "!": sshd without PAM counts that as locked.
        usermod -p '*' {user}
    """.format(user=USER), user="root", timeout=600)
    ws.path("/etc/ssh/sshd_fleet_config").write_text(SSHD_CONFIG.format(port=port, user=USER, uid=USER_UID))
    ssh_dir = ws.path(f"/home/{USER}/.ssh")
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(public_key).read_text())
    subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(ssh_dir)], check=True)
    (ssh_dir / "authorized_keys").chmod(0o600)
    ws.run(["/usr/sbin/sshd", "-f", "/etc/ssh/sshd_fleet_config"], user="root")
    ws.path(HANGING_PYTHON).write_text("#!/bin/sh\nexec sleep 3600\n")
    ws.path(HANGING_PYTHON).chmod(0o755)
    return port


def prepare(hosts, public_key):
    """Provision and open every host concurrently. HOSTS: name -> (workstation,
    provision extra args, fault script run as root afterwards or None[, a callable run
    on the workstation before provisioning]). The workstations must have been started
    by the caller's own thread: each dies with the thread that started it. Returns
    name -> sshd port."""
    def one(item):
        ws, extra, fault, *before = item
        install_and_provision(ws, *extra, before=before[0] if before else None)
        port = start_sshd(ws, public_key)
        if fault:
            ws.sh(fault, user="root")
        return port

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return dict(zip(hosts, pool.map(one, hosts.values())))


def inventory(path, key, hosts):
    """An inventory file at PATH: HOSTS is name -> host vars (at least ansible_port)."""
    document = {"all": {
        "vars": {
            "ansible_host": "127.0.0.1", "ansible_user": USER, "ansible_ssh_private_key_file": str(key),
            # Every workstation makes its own host keys: nothing to pin them against.
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
            "ansible_python_interpreter": "/usr/bin/python3",
            # The probe image's base, as provision.yml built it (no registry here).
            "aisb_base_image": BASE_IMAGE,
        },
        "hosts": hosts,
    }}
    Path(path).write_text(json.dumps(document, indent=2))
    return path


def controller_env(directory):
    """The build machine as controller: this checkout as the collection aisb.sandbox,
    and Ansible's state in DIRECTORY instead of root's home."""
    collections = Path(directory) / "collections" / "ansible_collections" / "aisb"
    collections.mkdir(parents=True, exist_ok=True)
    if not (collections / "sandbox").exists():
        (collections / "sandbox").symlink_to(REPO)
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(Path(directory) / "collections"),
                ANSIBLE_HOME=str(Path(directory) / "ansible-home"), ANSIBLE_FORKS="10", **ANSIBLE_ENV)


def run_verify(directory, inventory_path, *extra, timeout=1800):
    """ansible-playbook aisb.sandbox.verify from the build machine, in DIRECTORY."""
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(ansible_playbook), "-i", str(inventory_path), "aisb.sandbox.verify", *extra],
                          cwd=directory, env=controller_env(directory), capture_output=True, text=True,
                          timeout=timeout, check=False)
