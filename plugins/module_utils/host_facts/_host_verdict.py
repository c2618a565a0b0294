# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verdict on the host probes: does the sandbox's networking model hold here, and
if not, one sentence per reason with its fix.
"""

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probe_sandbox import GATE_PATH_PROBES, SANDBOX_PROBES
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts._host_probes import ORDER

# What to do when a probe fails, by probe name. Probes missing here are informational.
FIXES = {
    "rootless": "Run the network check (host_capabilities) as the workstation user, not root (rootless podman is the model).",
    "subids": "Give the user a subordinate uid and gid range (the host role does; or usermod "
              "--add-subuids/--add-subgids), then run `podman system migrate`.",
    "tun": "Make /dev/net/tun readable and writable by the user (mode 0666; the host role does).",
    "pasta": "Install a podman with the pasta network mode (podman >= 4.4 with passt; Debian 13, "
             "Ubuntu 24.04, Fedora): the allow mode cannot run without pasta.",
    "host_loopback_reachable": "Install passt >= 2024-08-21 (pasta --map-host-loopback) so the "
                               "sandbox can reach the gate on the host's loopback.",
    "network_host": "The gate needs --network=host for rootless containers; check podman's "
                    "rootless setup.",
    "nft_needs_net_admin": "nft changed the ruleset without CAP_NET_ADMIN: do not use this "
                           "runtime for sandboxes.",
    "seccomp_profile": "The sandbox's seccomp profile did not hold (or nft failed under it): install podman "
                       "and containers-common from the distribution (provision.yml does) and measure again.",
    "nft_default_drop": "The in-container default-drop table did not block a connection: install "
                        "nftables in the image and check the kernel's nf_tables support.",
    "table_allows_gate": "The gate's port was unreachable under the table: check pasta's "
                         "--map-host-loopback.",
    "setpriv_locks_table": "After setpriv the process could still change the table or kept "
                           "capabilities: use a util-linux setpriv with --ambient-caps.",
    "raw_tcp_blocked": "A raw TCP connection passed the table: the sandbox would not hold.",
    "udp_blocked": "A UDP datagram passed the table: the sandbox would not hold.",
    "ipv6_blocked": "An IPv6 connection passed the table: the sandbox would not hold.",
    "bind_mount": "The project mount was not writable even with :z: check the SELinux policy.",
    "keep_id_owner": "Files written under --userns=keep-id:uid=1000,gid=1000 were not owned by "
                     "the caller: keep-id with uid and gid needs podman >= 4.3.",
}
# Where the host's only gate path is tcp-forward, its sandbox probes decide.
TCP_FORWARD_FIX = ("The gate path tcp-forward (pasta -T) did not hold the sandbox's enforcement on this host: "
                   "install passt >= 2024-08-21 (pasta --map-host-loopback) for the mapped gate path.")
# What each reason means, by the probe it starts with (FIXES' and tcp_forward_sandbox):
# docs/reference-refusals.md shows it beside the fix, so the table is all in one place.
MEANS = {
    "rootless": "podman runs as root for this user",
    "subids": "the user has fewer than 65536 subordinate uids or gids",
    "tun": "the user cannot open /dev/net/tun, which pasta needs",
    "pasta": "--network=pasta does not start a container: podman older than 4.4 or no passt "
             "(Debian 12's podman 4.3.1)",
    "host_loopback_reachable": "pasta cannot map the host's loopback into the sandbox (not a reason where "
                               "-T works: the gate path is then tcp-forward)",
    "network_host": "the gate's --network=host does not reach the host's loopback",
    "nft_needs_net_admin": "root in a container changed nftables without CAP_NET_ADMIN",
    "seccomp_profile": "the sandbox's seccomp profile (derived from /usr/share/containers/seccomp.json) could "
                       "not be rendered, let the agent's `unshare -Urn true` through, or broke nft in the "
                       "privileged stage",
    "nft_default_drop": "the default-drop table did not install or did not block",
    "table_allows_gate": "the gate's port was unreachable under the table",
    "setpriv_locks_table": "after setpriv the agent kept capabilities or could flush the table",
    "raw_tcp_blocked": "a raw TCP connection passed the table: a leak",
    "udp_blocked": "a UDP datagram passed the table: a leak",
    "ipv6_blocked": "an IPv6 connection passed the table: a leak",
    "bind_mount": "the project mount is not writable even with :z",
    "keep_id_owner": "files written under keep-id:uid=1000 are not the caller's",
    "tcp_forward_sandbox": "the gate path is tcp-forward (an older passt) and the sandbox probes on its -T "
                           "network failed",
}
# The verdict's reasons that are no single probe's, as it words them.
NO_GATE_PATH = ("gate_path is none: the session reaches its gate through pasta's "
                "--map-host-loopback or -T, which this host lacks.")
NO_GATE_HOLDS = " Network no-gate (addresses pinned, no gate) holds here: verdict.no_gate_holds."
PLAIN_PASTA_ONLY = ("%s: measured on plain pasta only, because the sandbox probe's container with "
                    "--map-host-loopback did not start; measure again.")
NOT_MEASURED = "%s: %s; fix what stops them and measure again."
# Probes measured for the record (and the fleet report) that do not decide the verdict.
INFORMATIONAL = ("selinux", "map_host_loopback", "tcp_forward", "tcp_forward_sandbox", "internal_network_blackout",
                 "container_to_container", "limits")


def verdict(probes):
    """model_holds, no_gate_holds, gate_path, limits_enforceable, bind_mount_label, reasons, notes."""
    def ok(name):
        return probes.get(name, {}).get("ok") is True

    if ok("host_loopback_reachable"):
        gate_path = "map-host-loopback"
    elif ok("tcp_forward"):
        gate_path = "tcp-forward"
    else:
        gate_path = "none"
    failed = [name for name in ORDER if name in probes and not ok(name)]
    # The mapped path's own probe is no reason where the session takes the other path.
    needed = [name for name in failed if name in FIXES and not (gate_path == "tcp-forward" and name in GATE_PATH_PROBES)]
    reasons = sentences(probes, needed, FIXES)
    on_plain_pasta = [name for name in SANDBOX_PROBES if probes.get(name, {}).get("network") == _podman.NO_GATE_NETWORK]
    # Network no-gate needs no gate path, but its enforcement measured on its own network.
    no_gate_holds = (len(on_plain_pasta) == len(SANDBOX_PROBES)
                     and not [name for name in failed if name in FIXES and name not in GATE_PATH_PROBES])
    if gate_path == "map-host-loopback" and on_plain_pasta:
        # The mapped sandbox container failed to start while another mapped one worked:
        # raw TCP, UDP and IPv6 through the mapping went unmeasured.
        reasons.append(PLAIN_PASTA_ONLY % ", ".join(on_plain_pasta))
    if gate_path == "tcp-forward" and not ok("tcp_forward_sandbox"):
        # The table, setpriv and the host's other loopback ports, on the session's -T network.
        reasons.append("tcp_forward_sandbox: %s. %s" % (
            probes.get("tcp_forward_sandbox", {}).get("detail", "not measured"), TCP_FORWARD_FIX))
    if gate_path == "none":
        reasons.append(NO_GATE_PATH + (NO_GATE_HOLDS if no_gate_holds else ""))
    return {
        "model_holds": not reasons,
        "no_gate_holds": no_gate_holds,
        "gate_path": gate_path,
        "limits_enforceable": ok("limits"),
        "bind_mount_label": probes.get("bind_mount", {}).get("label", ""),
        "reasons": reasons,
        "notes": sentences(probes, [name for name in failed if name in INFORMATIONAL], {}),
    }


def sentences(probes, failed, fixes):
    """One sentence per failed probe with its fix; probes that could not run are grouped
    by their cause, so one missing prerequisite reads as one sentence."""
    said = ["%s: %s.%s" % (name, probes[name]["detail"], " " + fixes[name] if name in fixes else "")
            for name in failed if probes[name].get("measured", True)]
    causes = {}
    for name in failed:
        if not probes[name].get("measured", True):
            causes.setdefault(probes[name]["detail"], []).append(name)
    return said + [NOT_MEASURED % (", ".join(names), detail) for detail, names in causes.items()]
