# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one place that builds podman command lines for images, the gate and checks,
and the one command that reads a sandbox's namespaces as podman made them.

Pure functions returning argv lists; callers run them and report them.
"""

from typing import Dict, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SQUID_POLICY_CONF

# Inside the sandbox: the policy file the entrypoint reads (read-only mount).
SANDBOX_POLICY = "/etc/aisb/policy"
# Inside the gate: the rendered policy directory and the per-session configuration.
GATE_POLICY_DIR = "/etc/aisb/gate-policy"
GATE_POLICY_CONF = GATE_POLICY_DIR + "/" + SQUID_POLICY_CONF
GATE_SESSION_CONF = "/etc/aisb/gate-session.conf"
# The entrypoint installs the ruleset as root in the container's user namespace (NET_ADMIN),
# then setpriv changes ids (SETUID, SETGID) and empties the bounding set (SETPCAP); it
# drops all four before the harness runs.
SANDBOX_SECURITY = [
    "--cap-drop=ALL", "--cap-add=NET_ADMIN,SETUID,SETGID,SETPCAP",
    "--security-opt=no-new-privileges",
    "--userns=keep-id:uid=1000,gid=1000", "--user=0:0",
]
# Network no-gate: plain pasta, only the pinned addresses pass the sandbox's table.
# --no-map-gw: the gateway address would lead to the host's loopback, and a pinned
# CIDR may cover it.
NO_GATE_NETWORK = "pasta:--no-map-gw"
# pasta's own default, which podman 5 turns off unless asked (--map-gw): the gateway
# address leads to the host's loopback. On a passt older than --map-host-loopback
# (2024-08-21) and --map-guest-addr (2024-10) it is the only address that leads to the
# host's listeners: the network check's sandbox probes run there, never a session.
GATEWAY_NETWORK = "pasta:--map-gw"
# The gate is squid as the image's unprivileged proxy user: binding a high loopback
# port needs no capability, and squid never has to drop privileges itself.
GATE_SECURITY = [
    "--network=host", "--user=proxy", "--cap-drop=ALL", "--security-opt=no-new-privileges",
    "--read-only",
]


def is_local(reference):
    """True for an image that only exists locally (never pulled from a registry)."""
    return reference.startswith("localhost/")


def image_id(podman, reference, *more):
    """The ID of REFERENCE (and of each of MORE, a line each, in order; any missing one
    fails the whole command)."""
    return [podman, "image", "inspect", "--format", "{{.Id}}", reference] + list(more)


def image_labels(podman, reference):
    return [podman, "image", "inspect", "--format", "{{json .Labels}}", reference]


def pull(podman, reference):
    return [podman, "pull", "--quiet", reference]


def version(podman):
    return [podman, "--version"]


def image_exists(podman, reference):
    return [podman, "image", "exists", reference]


def import_archive(podman, archive, reference):
    """REFERENCE made from ARCHIVE, a root filesystem tarball."""
    return [podman, "import", archive, reference]


def build(podman, tag, context, base_image_id, labels, build_args=None, logfile=None, no_cache=False):
    """Build CONTEXT as TAG from exactly the base image that was hashed (--from its ID);
    the build's output goes to LOGFILE as it runs, when given (podman's final error
    still goes to stderr). NO_CACHE: every step runs again (a refresh: a cached apt
    layer would keep yesterday's packages)."""
    argv = [podman, "build", "--pull=never", "--from", base_image_id, "--tag", tag]
    if no_cache:
        argv.append("--no-cache")
    if logfile:
        argv += ["--logfile", logfile]
    for name, value in sorted((build_args or {}).items()):
        argv += ["--build-arg", "%s=%s" % (name, value)]
    for name, value in sorted(labels.items()):
        argv += ["--label", "%s=%s" % (name, value)]
    return argv + [context]


# What the gate runs: squid in the foreground on the mounted session configuration.
GATE_COMMAND = ["squid", "-N", "-f", GATE_SESSION_CONF]


def gate_options(policy_dir, session_conf, extra=()):
    """A gate's podman run options: GATE_SECURITY, EXTRA, then the policy directory and
    session configuration mounted read-only (a session's gate and the gate service's unit)."""
    return (GATE_SECURITY + list(extra) +
            ["--volume", "%s:%s:ro" % (policy_dir, GATE_POLICY_DIR),
             "--volume", "%s:%s:ro" % (session_conf, GATE_SESSION_CONF)])


def gate_run(podman, image, name, policy_dir, session_conf, extra=()):
    """Start a gate: policy directory and session configuration mounted read-only.

    EXTRA goes before the image (e.g. ["--detach", "--rm"]).
    """
    return [podman, "run", "--name", name] + gate_options(policy_dir, session_conf, extra) + [image] + GATE_COMMAND


def squid_parse(podman, image, policy_dir, session_conf):
    """squid -k parse over a session configuration and the policy part it includes."""
    return ([podman, "run", "--rm", "--network=none", "--user=proxy", "--cap-drop=ALL",
             "--volume", "%s:%s:ro" % (policy_dir, GATE_POLICY_DIR),
             "--volume", "%s:%s:ro" % (session_conf, GATE_SESSION_CONF),
             image, "squid", "-k", "parse", "-f", GATE_SESSION_CONF])


def ruleset_check(podman, image, policy_file):
    """The sandbox entrypoint's --check: nft -c over the ruleset this policy makes."""
    return ([podman, "run", "--rm", "--network=none"] + SANDBOX_SECURITY +
            ["--volume", "%s:%s:ro" % (policy_file, SANDBOX_POLICY), image, "--check"])


class SandboxOptions(NamedTuple):
    """A sandbox's podman run options (sandbox_run): only the project at /project, the
    policy read-only (POLICY_FILE; and the harness's configuration and kept state, below),
    and ENV: the session's own variables for the entrypoint ({name: value}, never an
    operator's: those reach the harness after the privilege drop, through a preserved
    descriptor).

    PRESERVE_FDS: how many descriptors from 3 on podman hands to the entrypoint.
    HOSTS: (name, address) pairs for the sandbox's /etc/hosts (network no-gate: the
    names resolved on the host, since no resolver is reachable inside).
    PIDFILE: where podman writes the host PID of the sandbox's first process (the
    enforcement watch enters its namespaces); a host path the sandbox cannot reach.
    PROJECT_OVERLAY: (upper, work) for review mode: the project is the overlay's lower
    layer and every write goes to UPPER (podman's O option takes no other option, so no
    label: podman labels an overlay's content itself).
    PROJECT_MOUNTS: options for mounts inside /project (project_mounts()), direct mode only.
    WRITABLE_DIRS: paths inside that get an empty tmpfs anyone may write to (sticky),
    made before READ_ONLY_FILES, (host path, path inside) pairs mounted read-only in them
    (a file or a whole directory): a tmpfs is root's, and the harness writes beside such a
    file (pi's ~/.pi/agent).
    STATE_MOUNTS: (host directory, path inside) pairs mounted read-write, labelled like
    the project: the harness's state kept for this project.
    STATE_OVERLAYS: (host directory, path inside, upper, work) for review mode: the kept
    state as an overlay's lower layer, every write going to UPPER, as the project's.
    HIDDEN_DIRS: paths inside the project covered by an empty read-only tmpfs (podman
    mounts the project before what lies below it), nothing copied up into it.
    SECCOMP_PROFILE: the host path of the sandbox's seccomp profile (_seccomp), or None
    for podman's default (a session that runs unenforced on the operator's word).
    """
    name: str
    image: str
    project: str
    project_label: str
    policy_file: str
    network: str
    env: Dict[str, str]
    labels: Dict[str, str]
    limits: Sequence[str]
    interactive: bool
    preserve_fds: int
    command: Sequence[str]
    hosts: Sequence[Tuple[str, str]] = ()
    pidfile: Optional[str] = None
    project_overlay: Optional[Tuple[str, str]] = None
    project_mounts: Sequence[str] = ()
    writable_dirs: Sequence[str] = ()
    read_only_files: Sequence[Tuple[str, str]] = ()
    state_mounts: Sequence[Tuple[str, str]] = ()
    state_overlays: Sequence[Tuple[str, str, str, str]] = ()
    hidden_dirs: Sequence[str] = ()
    seccomp_profile: Optional[str] = None


def seccomp_option(profile):
    """podman's option that puts a container under the seccomp profile at PROFILE."""
    return "--security-opt=seccomp=%s" % profile


def sandbox_run(podman, options):
    """The sandbox's podman run command line for OPTIONS (SandboxOptions)."""
    label = options.project_label
    mount = "%s:/project" % options.project + (":%s" % label if label else "")
    if options.project_overlay:
        mount = "%s:/project:O,upperdir=%s,workdir=%s" % ((options.project,) + tuple(options.project_overlay))
    argv = [podman, "run", "--rm", "--name", options.name, "--init", "--network=%s" % options.network]
    argv += SANDBOX_SECURITY
    argv += [seccomp_option(options.seccomp_profile)] if options.seccomp_profile else []
    argv += ["--volume", mount] + list(options.project_mounts) + [
        "--workdir", "/project", "--volume", "%s:%s:ro" % (options.policy_file, SANDBOX_POLICY)]
    for inside in options.writable_dirs:
        argv += ["--tmpfs", "%s:rw,nosuid,nodev,mode=1777" % inside]
    for outside, inside in options.read_only_files:
        argv += ["--volume", "%s:%s:ro" % (outside, inside)]
    for outside, inside in options.state_mounts:
        argv += ["--volume", "%s:%s:rw" % (outside, inside) + ("," + label if label else "")]
    for outside, inside, upper, work in options.state_overlays:
        argv += ["--volume", "%s:%s:O,upperdir=%s,workdir=%s" % (outside, inside, upper, work)]
    for inside in options.hidden_dirs:
        # notmpcopyup: podman's tmpfs copies up what lies below it by default, which here
        # is the project's directory the tmpfs is there to hide.
        argv += ["--tmpfs", "%s:ro,nosuid,nodev,noexec,mode=0555,notmpcopyup" % inside]
    argv += ["--preserve-fds", str(options.preserve_fds)] if options.preserve_fds else []
    argv += ["--pidfile", options.pidfile] if options.pidfile else []
    argv += ["--interactive", "--tty"] if options.interactive else []
    for key, value in sorted(options.labels.items()):
        argv += ["--label", "%s=%s" % (key, value)]
    for env_name, value in sorted(options.env.items()):
        argv += ["--env", "%s=%s" % (env_name, value)]
    for host, address in options.hosts:
        argv += ["--add-host", "%s:%s" % (host, address)]
    return argv + list(options.limits) + [options.image] + list(options.command)


def project_mounts(project, read_only, pinned, overlays=(), label=""):
    """--volume options for paths inside the project (_project_guard.plan): each PINNED
    directory bound over itself, writable, so that it cannot be renamed away from the
    mounts below it; each of READ_ONLY bound over itself read-only; each of OVERLAYS,
    (path, upper, work), an overlay over itself whose lower layer is the host's
    directory (never written) and whose upper and work directories are the session's
    (podman's O option takes no label: podman labels an overlay itself). Paths are
    relative to PROJECT; podman mounts a parent before what lies below it."""
    suffix = "," + label if label else ""
    options = [("%s/%s:/project/%s:%s" % (project, path, path, mode + suffix), path)
               for path, mode in [(p, "rw") for p in pinned] + [(p, "ro") for p in read_only]]
    options += [("%s/%s:/project/%s:O,upperdir=%s,workdir=%s" % (project, path, path, upper, work), path)
                for path, upper, work in overlays]
    return [word for option, _path in sorted(options, key=lambda item: item[1]) for word in ("--volume", option)]


# Inside the bundle container: where each repository's git directory on the host is
# seen read-only (what the host has, so that only new commits go into a bundle), and
# where the bundles are written.
BUNDLE_HOST = "/aisb/host"
BUNDLE_OUT = "/aisb/out"
# For each repository (arguments: its git directory relative to /project, numbered
# from 0): <n>.refs, "object name" of each branch, tag, refs/stash and HEAD (its
# commit) of the agent's that the host's same-named ref does not hold already; a
# bundle of those refs less every commit a ref on the host holds (git leaves out of a
# bundle a ref whose commit it leaves out, and refuses a bundle with nothing in it:
# <n>.refs still names them); the exit status and the messages. pipefail: a host list
# that cannot be read fails the bundle (never a bundle of everything). --work-tree: a
# submodule's git directory names its worktree relative to where it is on the host,
# which is not here.
BUNDLE_SCRIPT = r"""
set -o pipefail
refs() {
  git --git-dir="$1" --work-tree=/tmp for-each-ref --format='%%(objectname) %%(refname)' refs/heads refs/tags refs/stash &&
    { head=$(git --git-dir="$1" --work-tree=/tmp rev-parse -q --verify 'HEAD^{commit}') && echo "$head HEAD" || true; }
}
number=0
for repository; do
  host="%(host)s/$number" out="%(out)s/$number"
  { refs "$host" >"$out.host" &&
    refs "/project/$repository" | awk 'NR == FNR { known[$0]; next } !($0 in known)' "$out.host" - >"$out.refs" &&
    { git --git-dir="$host" --work-tree=/tmp for-each-ref \
        --format='%%(objecttype) %%(objectname) %%(*objecttype) %%(*objectname)' |
        awk '$1 == "commit" { print "^" $2 } $3 == "commit" { print "^" $4 }' && awk '{ print $2 }' "$out.refs"; } |
    git --git-dir="/project/$repository" bundle create -q "$out.bundle" --stdin; } 2>"$out.err"
  echo $? >"$out.rc"
  number=$((number + 1))
done
""" % {"host": BUNDLE_HOST, "out": BUNDLE_OUT}


def commits_bundle(podman, image, project, mounts, overlay, out, hosts, repositories, label=""):
    """The container that writes the agent's commits as bundles into OUT: the sandbox's
    IMAGE without its entrypoint, no network, no capability, the session's user; the
    project as the agent left it (direct mode: MOUNTS, the sandbox's project_mounts;
    review mode: OVERLAY, its (upper, work)); HOSTS, (host git directory, path inside)
    pairs, read-only. Whatever the agent's configuration makes git do runs in here, and
    the worktree is read-only to it."""
    mount = "%s:/project:ro" % project + ("," + label if label else "")
    if overlay:
        mount = "%s:/project:O,upperdir=%s,workdir=%s" % ((project,) + tuple(overlay))
    argv = [podman, "run", "--rm", "--network=none", "--cap-drop=ALL", "--security-opt=no-new-privileges",
            "--userns=keep-id:uid=1000,gid=1000", "--user=1000:1000", "--entrypoint", "bash",
            "--volume", mount] + list(mounts)
    for outside, inside in hosts:
        argv += ["--volume", "%s:%s:ro" % (outside, inside) + ("," + label if label else "")]
    argv += ["--volume", "%s:%s:rw" % (out, BUNDLE_OUT) + ("," + label if label else ""), "--workdir", "/project"]
    return argv + [image, "-c", BUNDLE_SCRIPT, "aisb-bundle"] + list(repositories)


def logs(podman, name):
    return [podman, "logs", name]


def wait(podman, name):
    return [podman, "wait", name]


def stop(podman, names, grace=2):
    """Stop NAMES: SIGTERM, then SIGKILL after GRACE seconds."""
    return [podman, "stop", "--ignore", "--time", str(grace)] + list(names)


def remove(podman, names):
    return [podman, "rm", "--force", "--ignore", "--time", "0"] + list(names)


def pasta_network(map_host_loopback=(), forward_tcp=(), no_map_gw=False, ipv4_only=False):
    """podman's --network value for pasta: MAP_HOST_LOOPBACK, the addresses at which the
    container reaches the host's loopback; FORWARD_TCP, ports of the container's own
    loopback forwarded to the host's (-T); NO_MAP_GW, no way to the host through the
    gateway address; IPV4_ONLY, no IPv6 at all (-4). "pasta" alone without options."""
    options = ["-4"] if ipv4_only else []
    for address in map_host_loopback:
        options += ["--map-host-loopback", address]
    for port in forward_tcp:
        options += ["-T", str(port)]
    if no_map_gw:
        options.append("--no-map-gw")
    return "pasta:" + ",".join(options) if options else "pasta"


def tcp_forward_network(ports):
    """The sandbox's network on the tcp-forward gate path: PORTS (the gate's, the
    injector's) forwarded from its own loopback to the host's, and nothing else. -4:
    pasta's -T listens on ::1 too and forwards it to the host's ::1:PORT, which is not
    the gate's socket (squid listens on 127.0.0.1) and may be any other host service's."""
    return pasta_network(forward_tcp=ports, no_map_gw=True, ipv4_only=True)


# The host measurement's probes (host_capabilities).

def info(podman):
    return [podman, "info", "--format", "json"]


def run_script(podman, name, options, image, script, args=()):
    """A probe container: podman run --rm --name NAME OPTIONS IMAGE bash -c SCRIPT _ ARGS."""
    return ([podman, "run", "--rm", "--name", name] + list(options) +
            [image, "bash", "-c", script, "_"] + [str(a) for a in args])


def unshare(podman, argv):
    """ARGV in the user namespace rootless podman sets up for this user."""
    return [podman, "unshare"] + list(argv)


def remove_tree(podman, path):
    """PATH and everything in it removed in podman's user namespace, where what its root
    owns (an overlay's work directory, what the agent made unreadable) is removable; rm
    follows no link and stays on PATH's file system."""
    return unshare(podman, ["rm", "-rf", "--one-file-system", "--", path])


def network(podman, action, name, internal=False):
    return [podman, "network", action] + (["--internal"] if internal else []) + [name]


def container_address(podman, name, network_name):
    """NAME's address on the user-defined network NETWORK_NAME."""
    return [podman, "inspect", "--format",
            '{{(index .NetworkSettings.Networks "%s").IPAddress}}' % network_name, name]


def tag(podman, image, new_tag):
    return [podman, "tag", image, new_tag]


def error_line(stderr):
    """podman's own message (its "Error: ..." line) out of STDERR; the rest is context."""
    lines = (stderr or "").strip().splitlines() or [""]
    return next((line for line in lines if line.startswith("Error")), lines[-1])[:300]


# What the enforcement watch writes to its helper for one reading: nft's interactive
# mode runs it and prints the ruleset as one line of JSON.
NETNS_READING_REQUEST = "list ruleset\n"


def netns_helper(nsenter, pid, setpriv, argv):
    """ARGV (a host tool's absolute path and its arguments) as one of the enforcement
    watch's helpers: in the user and network namespaces of the sandbox's first process
    PID (podman's pid file).

    The sandbox's user namespace owns its network namespace; the session's user owns its
    parent (podman's rootless namespace), so nsenter needs no privilege and the helper
    holds power over this sandbox's namespaces only. nsenter changes the credentials,
    which clears a parent-death signal: setpriv sets it after, so the helper dies with
    the session's thread that started it.
    """
    return [nsenter, "--target", str(int(pid)), "--user", "--net", "--",
            setpriv, "--pdeathsig", "KILL", "--"] + list(argv)


def netns_reader(nsenter, pid, setpriv, nft):
    """The watch's reader: the host's NFT in interactive mode (one command a line on its
    standard input, so no process starts per reading; it exits at end of file)."""
    return netns_helper(nsenter, pid, setpriv, [nft, "--json", "--interactive"])


def netns_monitor(nsenter, pid, setpriv, nft):
    """The watch's listener: the host's NFT printing one line for each change the
    kernel makes to the namespace's ruleset (and each new generation), as it happens."""
    return netns_helper(nsenter, pid, setpriv, [nft, "monitor"])


def images_json(podman):
    """Every image with its tags, ID and creation time, as podman's JSON."""
    return [podman, "images", "--format", "json"]


def containers_json(podman):
    """Every container, running or not, with its name and image ID, as podman's JSON."""
    return [podman, "ps", "--all", "--format", "json"]


def remove_image(podman, reference):
    """Remove REFERENCE's tag (and the image with its last tag). Never forced: podman
    refuses an image a container uses."""
    return [podman, "rmi", reference]
