# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""aisb, the developer's command: each subcommand is one run of a playbook of the
collection (run_agent.yml, review.yml, verify.yml) or a read of the state directory.

aisb starts in the project's directory, which the agent writes, so nothing there shapes
the host's side: ansible-playbook gets a configuration aisb chose (the user's own file,
never ./ansible.cfg: Ansible imports the plugins it names before any task), the
system's PATH, no inventory or plugin path of the directory, and starts in /; the
project and the prompt travel in an extra-vars file of its own, never templated
(!unsafe). The launcher the host role installs (roles/host/templates/aisb.j2) finds the
collection and calls main().

Pure: the parser, each playbook run's argv and variables, its environment, the list of
sessions and a record's readable form. Side effects in main() and the run_* functions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record, _state_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.common._host_tools import SYSTEM_PATH, resolve
from ansible_collections.aisb.sandbox.plugins.module_utils.host_facts import _host_facts
from ansible_collections.aisb.sandbox.plugins.plugin_utils._terminal_text import TerminalText

# The collection's quiet stdout callback (plugins/callback/quiet.py), and the file it
# writes the session task's result to (rc, status, session_id), named in this variable.
CALLBACK = "aisb.sandbox.quiet"
RESULT_VARIABLE = "AISB_RESULT_FILE"
# Names the empty configuration file aisb made for a run (the user has none): the session
# records no configuration file then, not a temporary path (config_in_use).
EMPTY_CONFIG_VARIABLE = "AISB_EMPTY_CONFIG"
NO_CONFIG_NOTE = "aisb: no configuration file (ansible-playbook read an empty one aisb made for the run)"
# The user's own Ansible configuration, in Ansible's order less the current directory's.
USER_CONFIGS = ("~/.ansible.cfg", "/etc/ansible/ansible.cfg")
# ansible-playbook's exit when a task failed: a refusal, or a harness that exited non-zero
# without the callback having seen the session's result.
PLAYBOOK_FAILED = 2


def build_parser():
    parser = argparse.ArgumentParser(
        prog="aisb", description="Sandboxed agent sessions on this workstation (the aisb.sandbox collection's "
                                 "playbooks, run so that nothing of the current directory shapes them).")
    commands = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="run a session on a project (run_agent.yml)",
                              description="Run a sandboxed agent session on DIR (default: the current directory). "
                                          "The exit code is the harness's: 77 enforcement failed or was lost, "
                                          "78 the policy was missing, 79 the gate never answered; 2 a refusal.")
    run.add_argument("dir", nargs="?", metavar="DIR", help="the project directory (default: the current one)")
    run.add_argument("-H", "--harness", help="the harness recipe (aisb_harness): pi, claude-code, codex, ...")
    prompt = run.add_mutually_exclusive_group()
    prompt.add_argument("-p", "--prompt", help="run the harness headless on PROMPT and print its answer")
    prompt.add_argument("-f", "--prompt-file", metavar="PROMPT_FILE", help="the same with the prompt read from a file")
    run.add_argument("--review", action="store_true", help="the agent works on an overlay (aisb_project_mode=review)")
    run.add_argument("--fresh", action="store_true", help="wipe the project's kept harness state first "
                                                          "(aisb_harness_state=fresh)")
    run.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                     help="more variables, as ansible-playbook -e takes them (@FILE, JSON or key=value)")
    run.add_argument("command", nargs="*", metavar="-- COMMAND",
                     help="run COMMAND in the sandbox instead of the harness")

    review = commands.add_parser("review", help="show, apply or discard a review-mode session's changes (review.yml)")
    review.add_argument("session", nargs="?", default="last", metavar="ID|last")
    review.add_argument("action", nargs="?", default="show", choices=["show", "apply", "discard"])
    review.add_argument("--include", nargs="+", default=[], metavar="PATH",
                        help="flagged paths to apply as well (apply_flagged)")

    commands.add_parser("ls", help="recent sessions", description="Recent sessions, newest last.")
    for name, what in (("show", "a session's record, readable"), ("logs", "a session's transcript and gate log")):
        shown = commands.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        shown.add_argument("session", nargs="?", default="last", metavar="ID|last")

    verify = commands.add_parser("verify", help="measure hosts and write a fleet report (verify.yml)")
    verify.add_argument("-i", "--inventory", help="the hosts to verify (default: this workstation)")
    verify.add_argument("--last", type=int, default=0, metavar="N",
                        help="check each host's newest N session records (default: every one kept)")
    commands.add_parser("doctor", help="what this workstation's facts say, in plain words, and what to fix")
    return parser


def parse(argv):
    """The parsed ARGV; a COMMAND after `--` is kept whole (its own options included)."""
    argv = list(argv)
    command = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    args = build_parser().parse_args(argv)
    if args.subcommand == "run":
        if args.command:
            build_parser().error("a command to run goes after --: aisb run [DIR] -- %s" % " ".join(args.command))
        args.command = command
        if command and (args.prompt is not None or args.prompt_file is not None):
            build_parser().error("-p/-f and -- COMMAND exclude each other: a prompt runs the harness headless, "
                                 "a command runs instead of it")
    elif command:
        build_parser().error("only aisb run takes -- COMMAND")
    if args.subcommand == "verify" and args.last < 0:
        build_parser().error("--last is %d: how many of each host's newest records are checked, 0 or more "
                             "(0: every one)" % args.last)
    return args


def absolute(path, cwd):
    """PATH (~ expanded) as an absolute path, relative to CWD, where aisb was started."""
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def run_variables(args, cwd, terminal):
    """run_agent.yml's variables for `aisb run` ARGS started in CWD; TERMINAL: whether
    stdin and stdout are a terminal (a command then runs interactively, as a shell would)."""
    variables = {"project": absolute(args.dir or ".", cwd)}
    if args.harness is not None:
        variables["aisb_harness"] = args.harness
    if args.prompt is not None:
        variables["prompt"] = args.prompt
    if args.prompt_file is not None:
        variables["prompt_file"] = absolute(args.prompt_file, cwd)
    if args.review:
        variables["aisb_project_mode"] = "review"
    if args.fresh:
        variables["aisb_harness_state"] = "fresh"
    if args.command:
        variables["command"] = list(args.command)
        variables["interactive"] = terminal
    # aisb prints a headless session's output itself, as it comes (TranscriptFollower).
    variables["run_agent_show_answer"] = False
    return variables


def verify_inventory(inventory, cwd, python, last=0):
    """(inventory, variables) of verify.yml for `aisb verify [-i INVENTORY] [--last LAST]` started in CWD:
    the report beside the user, as the playbook form writes it; without an inventory, this
    workstation, on a local connection with PYTHON (verify.yml refuses an implicit localhost:
    it is in no inventory)."""
    variables = {"verify_report_dir": absolute("aisb-fleet-report", cwd), "verify_records_last": last}
    if inventory:
        return absolute(inventory, cwd), variables
    variables.update(aisb_hosts="localhost", ansible_connection="local", ansible_python_interpreter=python)
    return "localhost,", variables


def review_variables(args, session_id):
    return {"session": session_id, "action": args.action, "apply_flagged": list(args.include)}


def yaml_string(text):
    """TEXT as a YAML double-quoted scalar of printable ASCII: every other character as
    an escape (\\uXXXX, or \\UXXXXXXXX past the BMP, which JSON would split into surrogates
    YAML refuses), so no character of a prompt is folded, dropped or refused."""
    def escaped(char):
        if char in '"\\':
            return "\\" + char
        if " " <= char <= "~":
            return char
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise ValueError("%r holds bytes that are not UTF-8 text: pass text" % text)
        return ("\\u%04x" if ord(char) <= 0xFFFF else "\\U%08x") % ord(char)
    return '"' + "".join(escaped(char) for char in text) + '"'


def unsafe_yaml(variables):
    """VARIABLES as an extra-vars file in which every string that holds a template's mark
    ('{{', '{%', '{#') is !unsafe: Ansible passes it on as text ('{{ ... }}' in a prompt or
    a path stays text). Only those: ansible-core 2.19 resolves an !unsafe scalar's type
    despite its quotes (!unsafe "true" loads as a boolean), which no string with a '{'
    can take."""
    def value(item, indent):
        if isinstance(item, str):
            return (" !unsafe " if "{" in item else " ") + yaml_string(item)
        if isinstance(item, bool) or item is None:
            return " " + json.dumps(item)
        if isinstance(item, list):
            return "".join("\n%s-%s" % (indent, value(element, indent + "  ")) for element in item) if item else " []"
        raise TypeError("no extra variable is a %s" % type(item).__name__)
    return "".join("%s:%s\n" % (name, value(item, "  ")) for name, item in variables.items())


def extra_vars_argument(value, cwd):
    """An -e VALUE as ansible-playbook, started in /, reads what the user meant in CWD."""
    return "@" + absolute(value[1:], cwd) if value.startswith("@") else value


def playbook_argv(ansible_playbook, playbook, vars_file, extra=(), inventory=None):
    """ansible-playbook's argv: PLAYBOOK (a name in the collection) with the variables
    in VARS_FILE, then EXTRA (the user's own -e), and INVENTORY when given."""
    argv = [ansible_playbook, playbook, "-e", "@" + vars_file]
    for value in extra:
        argv += ["-e", value]
    return argv + (["-i", inventory] if inventory else [])


def user_config(home, exists=os.path.isfile):
    """The user's own Ansible configuration file (USER_CONFIGS, ~ as HOME), or None."""
    for candidate in USER_CONFIGS:
        path = os.path.join(home, candidate[2:]) if candidate.startswith("~/") else candidate
        if exists(path):
            return path
    return None


def playbook_environment(environ, config, result_file, empty_config=False):
    """ansible-playbook's environment: the user's, with the configuration CONFIG (a file
    aisb chose; EMPTY_CONFIG: the empty one it made, named in EMPTY_CONFIG_VARIABLE), the
    system's PATH, the quiet callback writing RESULT_FILE, and no implicit-localhost
    warnings (aisb runs on this workstation, without an inventory)."""
    environment = dict(environ, ANSIBLE_CONFIG=config, PATH=SYSTEM_PATH, ANSIBLE_STDOUT_CALLBACK=CALLBACK,
                       ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
                       **{RESULT_VARIABLE: result_file})
    environment.pop(EMPTY_CONFIG_VARIABLE, None)
    if empty_config:
        environment[EMPTY_CONFIG_VARIABLE] = config
    return environment


def config_in_use(config_file, environ, size=os.path.getsize):
    """(the configuration file a session records, a note or None) for Ansible's CONFIG_FILE:
    None and NO_CONFIG_NOTE when it is the empty file aisb made for the run (named in
    ENVIRON's EMPTY_CONFIG_VARIABLE, and still empty: a name alone hides no configuration)."""
    if config_file and config_file == environ.get(EMPTY_CONFIG_VARIABLE):
        try:
            if size(config_file) == 0:
                return None, NO_CONFIG_NOTE
        except OSError:
            pass
    return config_file, None


def ansible_playbook(python, exists=os.access):
    """ansible-playbook beside PYTHON (the interpreter running aisb: the one Ansible is
    installed for), else the system's (_host_tools): never one found through PATH."""
    beside = os.path.join(os.path.dirname(python), "ansible-playbook")
    if exists(beside, os.X_OK):
        return beside, None
    return resolve("ansible-playbook")


def exit_code(playbook_rc, result):
    """aisb run's exit: the harness's, when the session ran (RESULT, the callback's), else
    ansible-playbook's (a refusal: 2)."""
    if result and result.get("rc") is not None:
        return result["rc"]
    return playbook_rc


def pick_session(wanted, ids):
    """(session id, None) for WANTED (an id, or last) among IDS, else (None, sentence)."""
    if wanted == "last":
        return (ids[-1], None) if ids else (None, "no session has run on this workstation yet")
    if wanted in ids:
        return wanted, None
    return None, "no session %r: aisb ls lists them (ids like 20261130T230455-1a2b3c4d), or say last" % wanted


def duration(record):
    try:
        seconds = _host_facts.parse_time(record["ended_at"]) - _host_facts.parse_time(record["started_at"])
    except (KeyError, TypeError, ValueError):
        return "-"
    return "%dm%02ds" % divmod(seconds, 60) if seconds >= 60 else "%ds" % seconds


def review_pending(record):
    """Whether a review-mode session's changes wait for the user's apply or discard."""
    if record.get("project_mode") != "review" or not record.get("review"):
        return False
    return not any(entry.get("action") in ("apply", "discard") for entry in record["review"].get("history", []))


def listing_row(session_id, record):
    """One line of aisb ls for SESSION_ID's RECORD (None: it has none yet, or an unreadable one)."""
    if record is None:
        return "%s  (no record: running, or ended without one)" % session_id
    gate = record.get("gate") or {}
    status = record.get("status", "?")
    if status == "exited":
        status = "exit %s" % record.get("exit_code")
    return "  ".join([
        session_id, record.get("project", "?"), str(record.get("harness") or "-"), record.get("project_mode", "?"),
        status, record.get("started_at", "?"), duration(record),
        "allowed %d denied %d" % (len(gate.get("allowed", [])), len(gate.get("denied", [])))
        + (" answered %d" % len(gate["answered"]) if gate.get("answered") else ""),
    ] + (["review pending"] if review_pending(record) else []))


def readable_record(record):
    """SHOW's lines: a record's essentials, the gate's refusals and their hints."""
    gate = record.get("gate") or {}
    lines = ["session  %s" % record.get("session_id"),
             "project  %s (%s)" % (record.get("project"), record.get("project_mode")),
             "harness  %s, command %s" % (record.get("harness") or "-", json.dumps(record.get("command"))),
             "network  %s" % record.get("network"),
             "time     %s, %s" % (record.get("started_at"), duration(record)),
             "status   %s, exit %s%s" % (
                 record.get("status"), record.get("exit_code"), (": " + record["reason"]) if record.get("reason") else ""),
             "gate     allowed %d, denied %d, answered by the gate %d" % (
                 len(gate.get("allowed", [])), len(gate.get("denied", [])), len(gate.get("answered", [])))]
    lines += ["  denied %s %s" % (entry.get("method", ""), entry.get("url", "")) for entry in gate.get("denied", [])]
    lines += ["  answered %s %s %s: %s" % (entry.get("method", ""), entry.get("url", ""), entry.get("status", ""),
                                           entry.get("reason", "")) for entry in gate.get("answered", [])]
    lines += ["  hint: %s" % hint for hint in gate.get("hints", [])]
    if review_pending(record):
        lines.append("review   pending: aisb review %s [show|apply|discard]" % record.get("session_id"))
    if record.get("transcript"):
        lines.append("transcript %s" % record["transcript"])
    lines.append("record   %s" % record.get("record"))
    return lines


def seal_line(state, session_id):
    """SHOW's last line: whether the record passes its check (_session_record.check)."""
    try:
        key = _record_seal.read_key(_state_layout.record_key_path(state))
    except _record_seal.KeyFileError as error:
        return "sealed   not checked: %s" % error
    checked = _session_record.check(_state_layout.session_directory(state, session_id), key)
    if checked.state == "failed":
        return "sealed   FAILS its check: %s" % "; ".join(checked.problems)
    return "sealed   %s" % ("yes, intact" if checked.state == "signed" else "no: " + checked.note)


def gate_lines(record):
    """LOGS' gate part: each of the gate's decisions, in order."""
    gate = record.get("gate") or {}
    return (["allowed %s %s" % (entry.get("method", ""), entry.get("url", "")) for entry in gate.get("allowed", [])]
            + ["denied  %s %s" % (entry.get("method", ""), entry.get("url", "")) for entry in gate.get("denied", [])]
            + ["answered %s %s %s: %s" % (entry.get("method", ""), entry.get("url", ""), entry.get("status", ""),
                                          entry.get("reason", "")) for entry in gate.get("answered", [])])


def doctor_lines(facts):
    """DOCTOR's lines for the host's FACTS (None: never measured)."""
    if facts is None:
        return False, ["this workstation has not been measured: run ansible-playbook aisb.sandbox.provision -K"]
    verdict = facts.get("verdict") or {}
    if verdict.get("model_holds"):
        lines = ["sessions can run here: the networking model holds (measured %s)" % facts.get("measured_at", "?")]
    elif verdict.get("no_gate_holds"):
        lines = ["sessions can run here only with aisb_network=no-gate: the gate path does not hold"]
    else:
        lines = ["no session can start here:"]
    lines += ["  fix: %s" % reason for reason in verdict.get("reasons", [])]
    lines += ["  note: %s" % note for note in verdict.get("notes", [])]
    return bool(verdict.get("model_holds") or verdict.get("no_gate_holds")), lines


# The side effects.

class Verbatim(object):
    """An output stream's bytes as they are (an answer written to a file)."""

    @staticmethod
    def feed(data, final=False):  # pylint: disable=unused-argument
        return data


def answer_text(terminal):
    """How the harness's output reaches stdout: on a TERMINAL made safe for it (an
    agent's output never drives the developer's terminal), else verbatim."""
    return TerminalText() if terminal else Verbatim()


class TranscriptFollower(threading.Thread):
    """Copies to OUT, as it is written, the transcript of the one session that starts
    under STATE after the ids BEFORE; when two start (another session beside this one),
    it follows neither, and finish() prints the run's own transcript whole. TEXT:
    answer_text's, what the bytes go through."""

    def __init__(self, state, before, out, interval=0.05, text=None):
        super().__init__(daemon=True)
        self.state, self.before, self.out, self.interval = state, set(before), out, interval
        self.text = text or Verbatim()
        self.path, self.handle = None, None
        self.stopped = threading.Event()

    def _find(self):
        new = [session_id for session_id in _state_layout.session_ids(self.state) if session_id not in self.before]
        if len(new) > 1:
            self.stopped.set()
        elif new:
            path = os.path.join(_state_layout.session_directory(self.state, new[0]), _state_layout.TRANSCRIPT)
            try:
                self.handle = open(path, "rb")
                self.path = path
            except OSError:
                pass

    def _write(self, data, final=False):
        data = self.text.feed(data, final)
        if data:
            self.out.write(data)
            self.out.flush()

    def _copy(self, final=False):
        self._write(self.handle.read(), final)

    def run(self):
        while not self.stopped.is_set():
            if self.handle is None:
                self._find()
            else:
                self._copy()
            self.stopped.wait(self.interval)

    def finish(self, transcript):
        """Stop, then print what is left of TRANSCRIPT (the run's own, from the callback's
        result; None: no headless session ran)."""
        self.stopped.set()
        self.join()
        try:
            if transcript and self.path == transcript:
                self._copy(final=True)
            elif transcript:
                with open(transcript, "rb") as whole:
                    self._write(whole.read(), final=True)
        finally:
            if self.handle is not None:
                self.handle.close()


def read_record(state, session_id):
    try:
        return _session_record.read(_state_layout.session_directory(state, session_id))
    except (OSError, _session_record.RecordError):
        return None


def playbook_run(python, environ, playbook, variables, extra=(), inventory=None):
    """Run PLAYBOOK with VARIABLES from /; (ansible-playbook's rc, the callback's result)."""
    program, problem = ansible_playbook(python)
    try:
        text = unsafe_yaml(variables)
    except ValueError as error:
        problem = problem or str(error)
    if problem:
        sys.stderr.write("aisb: %s\n" % problem)
        return PLAYBOOK_FAILED, None
    private = tempfile.mkdtemp(prefix="aisb-")
    try:
        vars_file, result_file = os.path.join(private, "vars.yml"), os.path.join(private, "result.json")
        config = user_config(environ.get("HOME", os.path.expanduser("~")))
        empty_config = config is None
        if empty_config:
            config = os.path.join(private, "ansible.cfg")
            open(config, "w").close()
        with open(vars_file, "w") as handle:
            handle.write(text)
        playbook_process = subprocess.Popen(playbook_argv(program, playbook, vars_file, extra, inventory), cwd="/",
                                            env=playbook_environment(environ, config, result_file, empty_config))
        # Ctrl-C reaches ansible-playbook from the terminal, and the session ends it cleanly:
        # aisb waits for that instead of ending (or killing) its child first.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            rc = playbook_process.wait()
        finally:
            signal.signal(signal.SIGINT, interrupt)
        try:
            with open(result_file) as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            result = None
        return rc, result
    finally:
        shutil.rmtree(private, ignore_errors=True)


def main(argv, cwd, python=sys.executable, environ=None):
    """aisb ARGV started in CWD; its exit code."""
    environ = dict(os.environ if environ is None else environ)
    args = parse(argv)
    state = _state_layout.state_dir(environ)
    if args.subcommand == "run":
        terminal = sys.stdin.isatty() and sys.stdout.isatty()
        follower = TranscriptFollower(state, _state_layout.session_ids(state), sys.stdout.buffer,
                                      text=answer_text(sys.stdout.isatty()))
        follower.start()
        result = None
        try:
            rc, result = playbook_run(python, environ, "aisb.sandbox.run_agent", run_variables(args, cwd, terminal),
                                      [extra_vars_argument(value, cwd) for value in args.extra_vars])
        finally:
            follower.finish((result or {}).get("transcript"))
        return exit_code(rc, result)
    if args.subcommand == "verify":
        inventory, variables = verify_inventory(args.inventory, cwd, python, args.last)
        return playbook_run(python, environ, "aisb.sandbox.verify", variables, inventory=inventory)[0]
    if args.subcommand == "doctor":
        healthy, lines = doctor_lines(_host_facts.load(_state_layout.facts_path(environ)))
        print("\n".join(lines))
        return 0 if healthy else 1
    ids = _state_layout.session_ids(state)
    if args.subcommand == "ls":
        print("\n".join(listing_row(session_id, read_record(state, session_id)) for session_id in ids[-20:])
              or "no session has run on this workstation yet")
        return 0
    session_id, problem = pick_session(args.session, ids)
    if problem:
        sys.stderr.write("aisb: %s\n" % problem)
        return 1
    if args.subcommand == "review":
        return playbook_run(python, environ, "aisb.sandbox.review", review_variables(args, session_id))[0]
    record = read_record(state, session_id)
    if record is None:
        sys.stderr.write("aisb: session %s has no readable record yet (running, or ended without one)\n" % session_id)
        return 1
    if args.subcommand == "show":
        print("\n".join(readable_record(record) + [seal_line(state, session_id)]))
        return 0
    if record.get("transcript"):
        with open(record["transcript"], "rb") as handle:
            sys.stdout.flush()
            sys.stdout.buffer.write(answer_text(sys.stdout.isatty()).feed(handle.read(), final=True))
            sys.stdout.buffer.flush()
    else:
        print("(an interactive session: its output went to the terminal, no transcript)")
    print("--- gate")
    print("\n".join(gate_lines(record)) or "(no request reached the gate)")
    return 0
