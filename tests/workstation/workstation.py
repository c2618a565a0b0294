# SPDX-License-Identifier: GPL-3.0-or-later
"""A disposable Debian workstation for the integration tests.

The build machine's own podman is too old for pasta, so the tests build a Debian tree
with debootstrap (cached, keyed by a hash of its recipe), copy it fresh for every run,
and enter the copy through new mount and PID namespaces with pivot_root. Every process
started inside dies with the workstation: its PID 1 is killed when the Python process
that started it goes away, however that happens (parent-death signal).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from cache import cache_root, delete_in_background, delete_tree, empty_trash, hold, locked, new_entry, remove_abandoned, remove_unused

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECIPE = HERE / "recipe.sh"
ENTER = HERE / "enter.sh"
MIRROR = os.environ.get("AISB_TEST_MIRROR", "http://deb.debian.org/debian")
CA_DIR = Path("/usr/local/share/ca-certificates")
USER = "dev"
USER_UID = 1000
USER_HOME = f"/home/{USER}"
AISB_STATE = f"{USER_HOME}/.local/state/aisb"  # the collection's state: facts, policies, sessions
TRANSFER_DIR = "/opt/aisb-test"
BASE_IMAGE_TAR = f"{TRANSFER_DIR}/base-image.tar"
BASE_IMAGE = "localhost/aisb-base:trixie"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CONTAINER_STORAGE = f"{USER_HOME}/.local/share/containers"
# What the collection builds its images from. A seeded storage whose images miss one of
# these only costs a build: images are tagged by content hash, never reused stale.
IMAGE_INPUTS = ["roles/image", "roles/gate", "plugins/modules/content_image.py",
                "plugins/module_utils/common/_content_hash.py", "plugins/module_utils/harness/_recipes.py"]
# Saved container storages kept per suite (2.6 GB each): runs of checkouts whose image
# inputs differ (two branches side by side) each keep theirs.
STORAGES_KEPT = 3


def tree_key(suite: str) -> str:
    """Content hash of everything a bare tree is made from."""
    digest = hashlib.sha256()
    digest.update(RECIPE.read_bytes())
    digest.update(f"\0{suite}\0{MIRROR}\0".encode())
    for cert in sorted(CA_DIR.glob("*.crt")):
        digest.update(cert.name.encode() + b"\0" + cert.read_bytes())
    return digest.hexdigest()[:16]


def ensure_tree(suite: str) -> Path:
    """Return the cached bare tree for SUITE, building it once if needed."""
    trees = cache_root() / "trees"
    final = trees / f"{suite}-{tree_key(suite)}"
    # Held for the whole build: a second run waits for the tree instead of building it too.
    with locked(trees):
        if final.is_dir():
            return final
        remove_abandoned(trees)
        building, owned = new_entry(trees)
        try:
            subprocess.run(
                ["bash", str(RECIPE), str(building / "root"), suite, MIRROR,
                 str(building / "base-image.tar"), str(CA_DIR)],
                check=True,
            )
            building.rename(final)
        except BaseException:
            delete_tree(building)
            raise
        finally:
            os.close(owned)
    empty_trash(trees)
    return final


def storage_key(suite: str) -> str:
    """Content hash of the tree and of every image input: which saved container storage
    (the provisioned images) a workstation of SUITE may start from."""
    digest = hashlib.sha256(tree_key(suite).encode())
    for top in IMAGE_INPUTS:
        paths = [REPO / top] if (REPO / top).is_file() else sorted((REPO / top).rglob("*"))
        for path in filter(Path.is_file, paths):
            digest.update(b"\0" + str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def base_image_tar(suite: str = "trixie") -> Path:
    """The minbase tree of SUITE as a tarball, for `podman import`."""
    return ensure_tree(suite) / "base-image.tar"


def owner_alive(run_dir: Path) -> bool:
    """Whether the run that RUN_DIR names in owner.pid lives: runs started by checkouts
    older than the run locks say who owns them that way instead."""
    try:
        return Path(f"/proc/{int((run_dir / 'owner.pid').read_text())}").exists()
    except (OSError, ValueError):
        return False


def prune_orphaned_runs(runs: Path):
    """Delete the copies of workstations whose owners died without cleaning up (SIGKILL,
    say): nobody holds their lock any more."""
    with locked(runs):
        for run_dir in runs.iterdir():
            if run_dir.is_dir() and not run_dir.name.startswith(".") and not owner_alive(run_dir):
                remove_unused(run_dir)
    empty_trash(runs)


class Workstation:
    """One running workstation: a fresh copy of a cached tree in its own namespaces."""

    def __init__(self, suite: str = "trixie", tun_mode: str = "0666"):
        self.suite = suite
        self.tun_mode = tun_mode
        self.run_dir = None
        self.root = None
        self.hostname = None
        self._init = None
        self._owned = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *_exc):
        self.stop()

    def start(self):
        cached = ensure_tree(self.suite)
        runs = cache_root() / "runs"
        prune_orphaned_runs(runs)
        with locked(runs):
            self.run_dir = runs / f"{self.suite}-{uuid.uuid4().hex[:8]}"
            self.run_dir.mkdir()
            # Held until stop(), or until this process dies: then the copy is an orphan.
            self._owned = hold(self.run_dir)
        self.root = self.run_dir / "root"
        subprocess.run(["cp", "-a", "--reflink=auto", str(cached / "root"), str(self.root)], check=True)
        self.path(TRANSFER_DIR).mkdir(parents=True)
        os.chown(self.path(TRANSFER_DIR), USER_UID, USER_UID)
        shutil.copy(cached / "base-image.tar", self.path(BASE_IMAGE_TAR))
        self.hostname = f"ws-{self.run_dir.name}"
        self.path("/etc/hostname").write_text(self.hostname + "\n")
        self.path("/etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {self.hostname}\n::1 localhost\n")
        self.path("/etc/resolv.conf").write_text(Path("/etc/resolv.conf").read_text())
        # setpriv's parent-death signal ends unshare if this process dies; unshare's
        # --kill-child then ends the namespace's PID 1, and the kernel the rest.
        self._init = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", "--",
             "unshare", "--mount", "--pid", "--uts", "--fork", "--kill-child", "--propagation", "private",
             "--", "sh", str(ENTER), str(self.root), self.tun_mode, str(USER_UID),
             self.hostname],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        line = self._init.stdout.readline().strip()
        if line != "READY":
            self.stop()
            raise RuntimeError(f"workstation did not start (got {line!r})")

    @property
    def init_pid(self) -> int:
        """PID (in the build machine's namespace) of the workstation's PID 1: unshare's child."""
        return int(Path(f"/proc/{self._init.pid}/task/{self._init.pid}/children").read_text().split()[0])

    def command(self, argv, user: str = USER, cwd: str = None, env: dict = None) -> list:
        """argv that runs ARGV inside the workstation as USER with a clean environment."""
        home = USER_HOME if user == USER else "/root"
        base_env = {"PATH": PATH, "HOME": home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
                    "TERM": os.environ.get("TERM", "xterm")}
        if user == USER:
            base_env["XDG_RUNTIME_DIR"] = f"/run/user/{USER_UID}"
            # This build machine has hybrid cgroups; the warning is known and noisy.
            base_env["PODMAN_IGNORE_CGROUPSV1_WARNING"] = "1"
        base_env.update(env or {})
        # nsenter would resolve --wd in the build machine's tree: env changes directory inside.
        prefix = ["nsenter", "-t", str(self.init_pid), "-m", "-p", "-u", "-r", "-w",
                  "--", "/usr/bin/env", "-i", f"--chdir={cwd or home}"] + [f"{k}={v}" for k, v in base_env.items()]
        if user != "root":
            prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        return prefix + [str(a) for a in argv]

    def run(self, argv, user: str = USER, check: bool = True, timeout: float = 600,
            cwd: str = None, env: dict = None, input: str = None) -> subprocess.CompletedProcess:
        """Run ARGV inside the workstation and capture its output."""
        result = subprocess.run(self.command(argv, user=user, cwd=cwd, env=env), input=input, check=False,
                                capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv!r} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
                f"\n--- stderr\n{result.stderr[-4000:]}")
        return result

    def sh(self, script: str, **kwargs) -> subprocess.CompletedProcess:
        """Run a shell script inside the workstation."""
        return self.run(["bash", "-euo", "pipefail", "-c", script], **kwargs)

    def install_program(self, name: str, text: str) -> str:
        """TEXT as the program /usr/bin/NAME, root's and 0755: the sessions run only programs
        in the system's directories that nobody but root can change (a test's podman
        wrapper included). Returns its path."""
        path = f"/usr/bin/{name}"
        self.run(["sh", "-c", f"cat >{path} && chmod 0755 {path}"], user="root", input=text)
        return path

    def load_base_image(self):
        """Import the cached minbase tree as the user's base image (no registry here)."""
        self.run(["podman", "import", BASE_IMAGE_TAR, BASE_IMAGE])

    def cached_image(self, name: str, containerfile: str) -> str:
        """Tag of an image built FROM the base image, saved to the cache by content hash."""
        digest = hashlib.sha256(f"{tree_key(self.suite)}\0{containerfile}".encode()).hexdigest()[:16]
        tag = f"localhost/aisb-test-{name}:{digest}"
        images = cache_root() / "images"
        archive = images / f"{name}-{digest}.tar"
        inside = f"{TRANSFER_DIR}/{archive.name}"
        if archive.exists():
            shutil.copy(archive, self.path(inside))
            self.run(["podman", "load", "-q", "-i", inside])
        else:
            context = f"{TRANSFER_DIR}/{name}-context"
            self.path(context).mkdir()
            self.path(f"{context}/Containerfile").write_text(containerfile)
            self.run(["podman", "build", "-q", "--pull=never", "-t", tag, context])
            self.run(["podman", "save", "-q", "-o", inside, tag])
            with locked(images):
                remove_abandoned(images)
                building, owned = new_entry(images)
            try:
                shutil.copy(self.path(inside), building / archive.name)
                # Atomic: a run beside this one copies a whole archive, this one or its own.
                os.replace(building / archive.name, archive)
            finally:
                delete_tree(building)
                os.close(owned)
            empty_trash(images)
        self.path(inside).unlink()
        return tag

    def seed_container_storage(self) -> bool:
        """Start the user's container storage from the one saved for these image inputs,
        if any (the base, probe, sandbox and gate images of an earlier provision)."""
        stored = cache_root() / "storage"
        saved = stored / f"{self.suite}-{storage_key(self.suite)}"
        with locked(stored):
            if not saved.is_dir():
                return False
            # Shared: no other run removes it while this one copies it.
            reading = hold(saved, shared=True)
            os.utime(saved)  # recently used: the last to be evicted
        try:
            target = self.path(CONTAINER_STORAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", "--reflink=auto", str(saved), str(target)], check=True)
        finally:
            os.close(reading)
        subprocess.run(["chown", f"{USER_UID}:{USER_UID}", str(target.parent), str(target.parent.parent)],
                       check=True)
        return True

    def save_container_storage(self) -> None:
        """Keep this workstation's container storage for the next runs with the same image
        inputs, evicting the least recently used beyond STORAGES_KEPT that nobody is
        copying. No container may be running."""
        stored = cache_root() / "storage"
        final = stored / f"{self.suite}-{storage_key(self.suite)}"
        with locked(stored):
            remove_abandoned(stored)
            building, owned = new_entry(stored)
        try:
            subprocess.run(["cp", "-a", "--reflink=auto", str(self.path(CONTAINER_STORAGE)), str(building / "s")],
                           check=True)
            with locked(stored):
                if not final.exists():
                    (building / "s").rename(final)
                os.utime(final)
                saved = sorted(stored.glob(f"{self.suite}-*"), key=lambda entry: entry.stat().st_mtime, reverse=True)
                for old in saved[STORAGES_KEPT:]:
                    remove_unused(old)
        finally:
            delete_tree(building)
            os.close(owned)
        empty_trash(stored)

    def path(self, inside: str) -> Path:
        """The build machine's path of a file inside the workstation."""
        return self.root / inside.lstrip("/")

    def stop(self):
        if self._init is not None:
            self._init.kill()
            self._init.wait()
            self._init = None
        if self.run_dir is not None:
            # Still held (_owned): no other run's prune takes it meanwhile.
            delete_in_background(self.run_dir)
            self.run_dir = None
        if self._owned is not None:
            os.close(self._owned)
            self._owned = None


def copy_checkout(ws, repo: Path) -> str:
    """Copy the repository's tracked and new files into the workstation; return the path."""
    inside = f"{TRANSFER_DIR}/src"
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, files):
        source = repo / name.decode()
        if source.is_file():
            target = ws.path(f"{inside}/{name.decode()}")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(ws.path(inside))], check=True)
    return inside


def install_checkout(ws) -> None:
    """Build this checkout into a collection inside the workstation and install it for
    the workstation user, as `ansible-galaxy` would from a release tarball."""
    src = copy_checkout(ws, REPO)
    ws.sh(f"cd {src} && ansible-galaxy collection build --force --output-path {TRANSFER_DIR} . >/dev/null"
          f" && ansible-galaxy collection install --force {TRANSFER_DIR}/aisb-sandbox-*.tar.gz >/dev/null")


def demo(suite: str) -> int:
    """Provision a fresh workstation from bare Debian with this checkout, then run one
    sandboxed session on examples/hello: one allowed request, two refused."""
    from scenario import Internet, playbook  # pylint: disable=import-outside-toplevel

    with Workstation(suite) as ws:
        install_checkout(ws)
        print("provisioning a bare Debian workstation (podman, the spike, the images)...", flush=True)
        provisioned = playbook(ws, "provision", timeout=3600)
        if provisioned.returncode != 0:
            print(provisioned.stdout[-4000:])
            return provisioned.returncode
        internet = Internet(ws).start()
        project = "/home/dev/hello"
        shutil.copytree(REPO / "examples" / "hello", ws.path(project))
        subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(ws.path(project))], check=True)
        print("running a sandboxed session on examples/hello...", flush=True)
        session = playbook(ws, "run_agent", "-e", f"project={project}", "-e", json.dumps({
            "command": ["sh", "/project/check-egress.sh"], "aisb_allow": ["allowed.test"],
            "aisb_environment": {"DEMO_SERVER": internet.address}}))
        print("\n".join(line for line in session.stdout.splitlines() if "session " in line or "ok=" in line))
        record = re.search(r"record (\S+record\.json)", session.stdout)
        if record:
            details = json.loads(ws.path(record.group(1)).read_text())
            print(ws.path(details["transcript"]).read_text())
            print(json.dumps({k: details[k] for k in ("session_id", "exit_code", "status", "gate")}, indent=2))
        return session.returncode


def main(argv) -> int:
    """`workstation.py shell [SUITE]`: a shell in a fresh workstation.
    `workstation.py demo [SUITE]`: provision a fresh workstation with this checkout."""
    command = argv[0] if argv else "shell"
    suite = argv[1] if len(argv) > 1 else "trixie"
    if command == "demo":
        return demo(suite)
    with Workstation(suite) as ws:
        return subprocess.run(ws.command(["bash", "-l"]), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
