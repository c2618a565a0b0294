#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Builds one bare workstation tree: Debian minbase, python3 with a venv holding
# ansible-core, the build machine's extra CA anchors, and a sudo-capable user.
# Nothing of the container stack: the collection's provision.yml installs that.
#
# usage: recipe.sh TREE_DIR SUITE MIRROR BASE_IMAGE_TAR CA_DIR
# The tree's cache key is a hash of this file and its arguments (see workstation.py).
set -euo pipefail

tree=$1 suite=$2 mirror=$3 base_tar=$4 ca_dir=$5
ansible_core_spec='ansible-core>=2.17,<2.22'
user=dev
uid=1000

debootstrap --variant=minbase "$suite" "$tree" "$mirror" >/dev/null

# The sandbox's base image is this same minbase tree, before anything else goes in.
rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
tar -C "$tree" --numeric-owner -cf "$base_tar" .

cp /etc/resolv.conf "$tree/etc/resolv.conf"
mount -t proc proc "$tree/proc"
trap 'umount "$tree/proc"' EXIT

in_tree() { chroot "$tree" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

in_tree apt-get update -q >/dev/null
in_tree apt-get install -y -q --no-install-recommends \
  ca-certificates python3 python3-venv sudo iproute2 curl procps tmux >/dev/null

# Trust anchors of an intercepting TLS proxy, if the build machine has any.
if compgen -G "$ca_dir/*.crt" >/dev/null; then
  cp "$ca_dir"/*.crt "$tree/usr/local/share/ca-certificates/"
  in_tree update-ca-certificates >/dev/null
fi

in_tree python3 -m venv /opt/ansible
in_tree /opt/ansible/bin/pip install -q --disable-pip-version-check "$ansible_core_spec"
for tool in ansible ansible-playbook ansible-galaxy ansible-inventory; do
  ln -sf /opt/ansible/bin/$tool "$tree/usr/local/bin/$tool"
done

in_tree useradd --create-home --uid $uid --shell /bin/bash $user
printf '%s ALL=(ALL) NOPASSWD: ALL\n' $user >"$tree/etc/sudoers.d/$user"
chmod 0440 "$tree/etc/sudoers.d/$user"

in_tree apt-get clean
rm -rf "$tree"/var/lib/apt/lists/*
