# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline stand-in for get-pip.py.

ansible-test bootstraps pip into its sanity virtualenvs with a get-pip.py it downloads
from a host outside PyPI, which this machine cannot reach. tests/run puts this file in
ansible-test's cache under the name it looks for: pip comes from the interpreter's own
bundled wheel, then pip installs the pinned packages ansible-test asked for from PyPI.
"""
import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")

# ansible-test clears the environment, PIP_CERT included: trust the system's anchors,
# which hold any TLS-intercepting proxy's CA, rather than pip's bundled ones.
SYSTEM_ANCHORS = "/etc/ssl/certs/ca-certificates.crt"

ensurepip.bootstrap()
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
if os.path.exists(SYSTEM_ANCHORS):
    args = ["--cert", SYSTEM_ANCHORS] + args
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))
