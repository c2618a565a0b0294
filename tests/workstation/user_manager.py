# SPDX-License-Identifier: GPL-3.0-or-later
"""A systemd user manager for the workstation's user, run the way user@UID.service runs
it on a real workstation, for the gate service's tests.

The workstation has no systemd as PID 1 and no logind. Measured on the build machine
(Debian 13's systemd 257, hybrid cgroups): `systemd --user` exits at once unless
/run/systemd/system exists ("the system has not been booted with systemd"), then exits
1 when it cannot make init.scope in its own cgroup (mkdir: EACCES): it needs a cgroup
delegated to the user, which user@.service's Delegate=yes gives it. So root makes one
per workstation (named after it) in each hierarchy systemd tracks processes in, moves
itself there and starts the manager as the user. `systemctl --user exit` stops the
manager the way stopping user@UID.service (a logout, a reboot) does: every service
stops. A new manager then starts what its default.target wants, as at boot with
linger. systemctl reaches it on $XDG_RUNTIME_DIR/systemd/private, without a bus.
The workstation's tree is Debian's minbase, without systemd (every real Debian 13
workstation has it): start() installs it first, from Debian's archive.
"""

import time

from workstation import USER, USER_UID

CGROUP_ROOT = "/sys/fs/cgroup"


class UserManager:
    """The user's systemd manager in the workstation WS: start(), restart(), remove()."""

    def __init__(self, ws):
        self.ws = ws
        self.name = f"aisb-{ws.hostname}"

    def cgroups(self):
        """The delegated cgroup in each hierarchy systemd uses: the unified one and the
        named systemd one on a hybrid host, the root on a cgroup v2 one."""
        # Read inside: the workstation's /sys is the build machine's, mounted in its namespace.
        found = self.ws.sh(f"ls -d {CGROUP_ROOT}/cgroup.controllers {CGROUP_ROOT}/unified {CGROUP_ROOT}/systemd "
                           "2>/dev/null || true").stdout.split()
        roots = [CGROUP_ROOT] if f"{CGROUP_ROOT}/cgroup.controllers" in found else found
        return [f"{root}/{self.name}/user@{USER_UID}.service" for root in roots]

    def start(self, timeout=60):
        self.ws.sh("test -x /usr/lib/systemd/systemd || { apt-get update -q && DEBIAN_FRONTEND=noninteractive "
                   "apt-get install -y -q --no-install-recommends systemd; } >/dev/null", user="root", timeout=900)
        cgroups = self.cgroups()
        join = "; ".join(f"echo $$ > {cgroup}/cgroup.procs" for cgroup in cgroups)
        self.ws.sh(f"mkdir -p /run/systemd/system {' '.join(cgroups)}; chown -R {USER_UID}:{USER_UID} {' '.join(cgroups)}; "
                   f"{join}; setsid setpriv --reuid={USER} --regid={USER} --init-groups env -i HOME=/home/{USER} "
                   f"USER={USER} LOGNAME={USER} XDG_RUNTIME_DIR=/run/user/{USER_UID} PATH=/usr/bin:/bin "
                   f"/usr/lib/systemd/systemd --user </dev/null >/tmp/{self.name}-manager.log 2>&1 &", user="root")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.ws.run(["systemctl", "--user", "is-system-running"], check=False).stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.5)
        log = self.ws.run(["cat", f"/tmp/{self.name}-manager.log"], check=False).stdout
        raise AssertionError(f"the user manager did not start: {log}")

    def processes(self):
        return [pid for cgroup in self.cgroups() for pid in
                self.ws.sh(f"find {cgroup} -name cgroup.procs -exec cat {{}} + 2>/dev/null || true", user="root").stdout.split()]

    def stop(self, timeout=90):
        """Stop it as stopping user@UID.service would: its services stop first."""
        self.ws.run(["systemctl", "--user", "exit"], check=False)
        deadline = time.monotonic() + timeout
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = self.processes()
        assert not left, f"the user manager's processes outlived it: {left}"

    def restart(self):
        self.stop()
        self.start()

    def remove(self):
        """Stop it (killing what is left) and remove its cgroups from the build machine."""
        try:
            self.stop()
        except AssertionError:
            self.ws.run(["kill", "-9", *self.processes()], user="root", check=False)
        for cgroup in self.cgroups():
            self.ws.sh(f"find {cgroup.rsplit('/', 1)[0]} -depth -type d -exec rmdir {{}} + 2>/dev/null || true",
                       user="root")
        # Without a manager the workstation is no longer one booted with systemd.
        self.ws.run(["rm", "-rf", "/run/systemd/system"], user="root")
