#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs as PID 1 of fresh mount and PID namespaces (started by workstation.py through
# unshare) and turns ROOT into a workstation: its own /proc, /sys bound, private /run
# and /tmp, its own /dev with /dev/net/tun at TUN_MODE, then pivot_root into it.
# A chroot would not do: the kernel refuses new user namespaces inside one.
#
# usage: enter.sh ROOT TUN_MODE USER_UID HOSTNAME
set -eu
root=$1 tun_mode=$2 user_uid=$3 name=$4

echo "$name" >/proc/sys/kernel/hostname

mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"

cd "$root/dev"
mknod -m 0666 null c 1 3
mknod -m 0666 zero c 1 5
mknod -m 0666 full c 1 7
mknod -m 0666 random c 1 8
mknod -m 0666 urandom c 1 9
mknod -m 0666 tty c 5 0
mkdir pts shm net
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts pts
ln -s pts/ptmx ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs shm
mknod -m "$tun_mode" net/tun c 10 200
ln -s /proc/self/fd fd
ln -s /proc/self/fd/0 stdin
ln -s /proc/self/fd/1 stdout
ln -s /proc/self/fd/2 stderr

# crun refuses hybrid cgroups while a controller is still attached to the v2
# hierarchy (hugetlb, on a fresh build machine). Mounting it as a v1 hierarchy moves
# it there; the mount lives in this namespace and goes away with it.
unified=/sys/fs/cgroup/unified/cgroup.controllers
if [ -r "$unified" ]; then
  # The file is one line of space-separated names.
  read -r controllers <"$unified" || true
  # While another workstation holds such a controller as v1, it is missing from that
  # list, and it returns to cgroup2 when that workstation ends: a v1 controller (its
  # hierarchy is not 0) mounted nowhere in this namespace is taken too, so this
  # workstation holds it for its own lifetime.
  while read -r controller hierarchy _rest; do
    case $controller in '#'*) continue ;; esac
    [ "$hierarchy" != 0 ] || continue
    grep -Eq " - cgroup cgroup ([^ ]*,)?$controller(,| |\$)" /proc/self/mountinfo ||
      controllers="$controllers $controller"
  done </proc/cgroups
  for controller in $controllers; do
    mkdir -p "$root/run/aisb-cgroup-v1/$controller"
    mount -t cgroup -o "$controller" cgroup "$root/run/aisb-cgroup-v1/$controller"
  done
fi

# What pam_systemd would do at login on a real workstation: the user's runtime dir.
mkdir -p "$root/run/user/$user_uid"
chown "$user_uid:$user_uid" "$root/run/user/$user_uid"
chmod 0700 "$root/run/user/$user_uid"

cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot
# podman warns when / is not shared; the namespace is private to this workstation.
mount --make-rshared /

echo READY
# PID 1: ignoring SIGCHLD makes the kernel reap orphans; SIGTERM ends the workstation,
# and with it every process in this PID namespace.
exec /usr/bin/python3 -c '
import signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
'
