#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs what the build machine needs to build and enter a workstation, if missing.
set -euo pipefail
missing=()
for tool in debootstrap:debootstrap unshare:util-linux nsenter:util-linux setpriv:util-linux git:git shellcheck:shellcheck; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
