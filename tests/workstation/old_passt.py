# SPDX-License-Identifier: GPL-3.0-or-later
"""Debian 12's passt (2023-03-09, from Debian's archive) in a Debian 13 workstation: a
real passt older than --map-host-loopback (2024-08-21) and --map-guest-addr (2024-10),
as Ubuntu 24.04's (2024-02-20) is. Debian's archive has nothing between the two
(bookworm's 2023-03-09, then trixie's 2025-05-03), so this is the closest old passt it
offers. Installed before provisioning and held: provision.yml finds passt installed and
leaves it, as it would an operator's."""

# bookworm's passt as its Packages index names it: the download is checked against it.
PACKAGE = "passt_0.0~git20230309.7c7625d-1_amd64.deb"
URL = "http://deb.debian.org/debian/pool/main/p/passt/" + PACKAGE
SHA256 = "86cbbf887b293caa4602babeae6b2a903b3303ff61ca9b8c383f684d2d8b5e6c"
# What the spike's fingerprint records for it (dpkg's name of the package file).
FINGERPRINT = PACKAGE[:-len(".deb")]


def install_old_passt(ws):
    """Install bookworm's passt in WS (a Debian 13 tree) in place of trixie's and hold it."""
    ws.sh(f"""
        cd /tmp
        curl -sSf -o '{PACKAGE}' '{URL}'
        echo '{SHA256}  {PACKAGE}' | sha256sum -c --quiet
        DEBIAN_FRONTEND=noninteractive dpkg -i '{PACKAGE}' >/dev/null
        apt-mark hold passt >/dev/null
        rm -f '{PACKAGE}'
    """, user="root", timeout=600)
