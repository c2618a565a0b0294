# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A Runner's EXECUTE where there is no AnsibleModule: the controller and scripts.

Modules execute through module_utils/_runner.module_execute (run_command); this is the
same contract with subprocess, for code that runs the host-side helpers outside a
module (the integration tests' leak control, the benchmark's in-process timing).
"""

import subprocess


def execute(argv, timeout=None):
    """(rc, stdout, stderr) of ARGV, stdin closed; rc None when it outlived TIMEOUT
    seconds (then killed), 127 when the program cannot be started."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, check=False, universal_newlines=True)
    except subprocess.TimeoutExpired as exc:
        # What a killed command printed arrives as bytes whatever the text mode.
        return None, (exc.stdout or b"").decode("utf-8", "replace"), (exc.stderr or b"").decode("utf-8", "replace")
    except OSError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr
