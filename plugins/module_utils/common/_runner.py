# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one way the host-side modules run a command: a Runner that records what it ran.

A Runner is the RUN callable every helper here takes, RUN(argv, timeout=None) -> (rc,
stdout, stderr), with rc None when the command outlived TIMEOUT seconds and was killed.
It keeps every argv in COMMANDS, in the order they started, for the module's result.
How a command executes is the Runner's EXECUTE: module_execute(module) inside a module
(AnsibleModule.run_command), or subprocess_execute(env) where there is no module or
the environment must be exactly ENV (the controller, scripts, and the commands around
a session, which run with _host_env.host_environment). A session's long-lived
processes (the sandbox on a terminal, the watchdog) stay outside the Runner.
"""

import os
import signal
import subprocess
import threading

from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_tools import HELPER_DIR_VARIABLE, SYSTEM_PATH


class Runner(object):
    """RUN(argv, timeout=None) -> (rc, stdout, stderr), recording each argv in COMMANDS.

    FAIL(msg, **details), when given, is what checked() calls on a failure (a module's
    fail_json); it gets the commands so far as details too.
    """

    def __init__(self, execute, fail=None):
        self.execute, self.fail = execute, fail
        self.commands = []
        self._lock = threading.Lock()

    def __call__(self, argv, timeout=None):
        argv = list(argv)
        with self._lock:  # the probes run from several threads
            self.commands.append(argv)
        return self.execute(argv, timeout)

    def checked(self, argv, timeout=None):
        """stdout of ARGV, stripped; any rc but 0 goes to FAIL with podman's own words."""
        rc, out, err = self(argv, timeout)
        if rc != 0:
            self.fail(msg="%s failed (rc=%s): %s" % (" ".join(argv[:3]), rc, err.strip()),
                      rc=rc, stdout=out, stderr=err, commands=self.commands)
        return out.strip()


def module_execute(module):
    """EXECUTE over MODULE.run_command: arguments exactly as given (no ~ or $VAR
    expansion), a missing program as rc 127, and a command that outlives its timeout
    killed (SIGKILL, as a hung podman client needs) and reported with rc None. Every
    command gets the system's PATH and no HELPER_DIR_VARIABLE, as podman's own lookups
    of its helpers (pasta, conmon, ...) must (_host_tools)."""
    module.run_command_environ_update = dict(module.run_command_environ_update, PATH=SYSTEM_PATH)
    os.environ.pop(HELPER_DIR_VARIABLE, None)  # this module's own environment: run_command passes it on

    def execute(argv, timeout=None):
        killed = threading.Event()
        timers = []

        def arm(process):
            def kill():
                if process.poll() is None:
                    killed.set()
                    process.kill()
            if timeout:
                timers.append(threading.Timer(timeout, kill))
                timers[0].daemon = True
                timers[0].start()

        try:
            rc, out, err = module.run_command(argv, expand_user_and_vars=False, handle_exceptions=False,
                                              before_communicate_callback=arm)
        except OSError as exc:
            return 127, "", str(exc)
        finally:
            for timer in timers:
                timer.cancel()
        return (None if killed.is_set() else rc), out, err

    return execute


def module_runner(module):
    """A Runner for MODULE: run_command executes, fail_json reports a checked failure."""
    return Runner(module_execute(module), module.fail_json)


def subprocess_execute(env=None):
    """EXECUTE over subprocess, with the environment ENV (None: this process's): stdin
    closed, rc None when the command outlived its timeout (then killed), 127 when the
    program cannot be started."""
    def execute(argv, timeout=None):
        try:
            # run_command adds its own process's environment to any it is given: these
            # commands must get exactly ENV (_host_env), and on the controller there is no module.
            done = subprocess.run(  # pylint: disable=ansible-bad-function
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                timeout=timeout, check=False, universal_newlines=True, env=env)
        except subprocess.TimeoutExpired as exc:
            # What a killed command printed arrives as bytes whatever the text mode.
            return None, (exc.stdout or b"").decode("utf-8", "replace"), (exc.stderr or b"").decode("utf-8", "replace")
        except OSError as exc:
            return 127, "", str(exc)
        return done.returncode, done.stdout, done.stderr

    return execute


def exit_module(module, result):
    """End MODULE (an AnsibleModule) with RESULT, its execute()'s: fail_json when RESULT
    says failed, else exit_json."""
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


def kill_unreaped(process):
    """SIGKILL to PROCESS (a subprocess.Popen) unless it was reaped: Popen.kill would reap
    one that has exited, and its CPU time (wait4's rusage) with it."""
    if process.returncode is None:
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
