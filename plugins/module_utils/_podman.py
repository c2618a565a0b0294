# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one place that builds podman command lines for images, the gate and checks,
and the one command that reads a sandbox's namespaces as podman made them.

Pure functions returning argv lists; callers run them and report them.
"""

# Inside the sandbox: the policy file the entrypoint reads (read-only mount).
SANDBOX_POLICY = "/etc/aisb/policy"
# Inside the gate: the rendered policy directory and the per-session configuration.
GATE_POLICY_DIR = "/etc/aisb/gate-policy"
GATE_POLICY_CONF = GATE_POLICY_DIR + "/squid-policy.conf"
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
# The gate is squid as the image's unprivileged proxy user: binding a high loopback
# port needs no capability, and squid never has to drop privileges itself.
GATE_SECURITY = [
    "--network=host", "--user=proxy", "--cap-drop=ALL", "--security-opt=no-new-privileges",
    "--read-only",
]


def is_local(reference):
    """True for an image that only exists locally (never pulled from a registry)."""
    return reference.startswith("localhost/")


def image_id(podman, reference):
    return [podman, "image", "inspect", "--format", "{{.Id}}", reference]


def pull(podman, reference):
    return [podman, "pull", "--quiet", reference]


def image_exists(podman, reference):
    return [podman, "image", "exists", reference]


def build(podman, tag, context, base_image_id, labels, build_args=None):
    """Build CONTEXT as TAG from exactly the base image that was hashed (--from its ID)."""
    argv = [podman, "build", "--pull=never", "--from", base_image_id, "--tag", tag]
    for name, value in sorted((build_args or {}).items()):
        argv += ["--build-arg", "%s=%s" % (name, value)]
    for name, value in sorted(labels.items()):
        argv += ["--label", "%s=%s" % (name, value)]
    return argv + [context]


def gate_run(podman, image, name, policy_dir, session_conf, extra=()):
    """Start a gate: policy directory and session configuration mounted read-only.

    EXTRA goes before the image (e.g. ["--detach", "--rm"]).
    """
    return ([podman, "run", "--name", name] + GATE_SECURITY + list(extra) +
            ["--volume", "%s:%s:ro" % (policy_dir, GATE_POLICY_DIR),
             "--volume", "%s:%s:ro" % (session_conf, GATE_SESSION_CONF),
             image, "squid", "-N", "-f", GATE_SESSION_CONF])


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


def sandbox_run(podman, name, image, project, project_label, policy_file, network, env_names,
                labels, limits, interactive, report_fd, command, hosts=(), pidfile=None):
    """The sandbox: only the project at /project, the policy read-only, the named
    environment (values come from podman's own environment, never the command line).

    REPORT_FD: the entrypoint writes the installed ruleset to descriptor 3 (handed in
    with --preserve-fds) and closes it before the harness runs.
    HOSTS: (name, address) pairs for the sandbox's /etc/hosts (network no-gate: the
    names resolved on the host, since no resolver is reachable inside).
    PIDFILE: where podman writes the host PID of the sandbox's first process (the
    enforcement watch enters its namespaces); a host path the sandbox cannot reach.
    """
    mount = "%s:/project" % project + (":%s" % project_label if project_label else "")
    argv = [podman, "run", "--rm", "--name", name, "--init", "--network=%s" % network]
    argv += SANDBOX_SECURITY
    argv += ["--volume", mount, "--workdir", "/project",
             "--volume", "%s:%s:ro" % (policy_file, SANDBOX_POLICY)]
    argv += ["--preserve-fds", str(report_fd - 2)] if report_fd else []
    argv += ["--pidfile", pidfile] if pidfile else []
    argv += ["--interactive", "--tty"] if interactive else []
    for key, value in sorted(labels.items()):
        argv += ["--label", "%s=%s" % (key, value)]
    for env_name in env_names:
        argv += ["--env", env_name]
    for host, address in hosts:
        argv += ["--add-host", "%s:%s" % (host, address)]
    return argv + list(limits) + [image] + list(command)


def logs(podman, name):
    return [podman, "logs", name]


def wait(podman, name):
    return [podman, "wait", name]


def stop(podman, names, timeout=2):
    """SIGTERM, then SIGKILL after TIMEOUT seconds (0: at once)."""
    return [podman, "stop", "--ignore", "--time", str(timeout)] + list(names)


def remove(podman, names):
    return [podman, "rm", "--force", "--ignore", "--time", "0"] + list(names)


# What the enforcement watch writes to its helper for one reading: nft's interactive
# mode runs it and prints the ruleset as one line of JSON.
NETNS_READING_REQUEST = "list ruleset\n"


def netns_reader(nsenter, pid, setpriv, nft):
    """The enforcement watch's helper: the host's NFT in interactive mode (one command a
    line on its standard input, so no process starts per reading; it exits at end of
    file), in the user and network namespaces of the sandbox's first process PID
    (podman's pid file).

    The sandbox's user namespace owns its network namespace; the session's user owns its
    parent (podman's rootless namespace), so nsenter needs no privilege and the helper
    holds power over this sandbox's namespaces only. nsenter changes the credentials,
    which clears a parent-death signal: setpriv sets it after, so the helper dies with
    the session's thread that started it.
    """
    return [nsenter, "--target", str(int(pid)), "--user", "--net", "--",
            setpriv, "--pdeathsig", "KILL", "--", nft, "--json", "--interactive"]
