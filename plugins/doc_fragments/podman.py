# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):
    """Options shared by every module that runs podman."""

    DOCUMENTATION = r"""
options:
  executable:
    description:
      - The podman binary - a name looked up in the system's directories (C(/usr/sbin),
        C(/usr/bin), C(/sbin), C(/bin)), never on PATH, or an absolute path in one of them;
        root's alone. Anything else is refused with a sentence naming it.
    type: str
    default: podman
"""
