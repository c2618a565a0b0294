# SPDX-License-Identifier: GPL-3.0-or-later
"""A pasta without --map-host-loopback, as a passt older than 2024-08-21 (Ubuntu 24.04's)
is, in front of the workstation's own: podman finds it first through its
helper_binaries_dir. Everything but that option is the real (2025) pasta."""

WRAPPER_DIR = "/home/dev/.local/libexec/old-pasta"
# What pasta before --map-host-loopback says of it (getopt_long's message).
OLD_PASTA = """#!/bin/sh
for arg in "$@"; do
  case $arg in --map-host-loopback*) echo "pasta: unrecognized option '--map-host-loopback'" >&2; exit 1 ;; esac
done
exec /usr/bin/pasta "$@"
"""
CONTAINERS_CONF = "/home/dev/.config/containers/containers.conf"
HELPERS = f'[engine]\nhelper_binaries_dir = ["{WRAPPER_DIR}", "/usr/libexec/podman", "/usr/lib/podman", "/usr/bin"]\n'


def install_old_pasta(ws):
    """Put the old pasta in front of WS's own, for its user's podman."""
    ws.sh(f"mkdir -p {WRAPPER_DIR} && cat >{WRAPPER_DIR}/pasta && chmod 0755 {WRAPPER_DIR}/pasta", input=OLD_PASTA)
    ws.sh(f"mkdir -p $(dirname {CONTAINERS_CONF}) && cat >{CONTAINERS_CONF}", input=HELPERS)
