# SPDX-License-Identifier: GPL-3.0-or-later
"""The aisb command's pure parts: what each subcommand hands ansible-playbook, and what it
reads back from the state directory."""

import io
import json
import os
import time

import pytest
from ansible.parsing.yaml.loader import AnsibleLoader

from ansible_collections.aisb.sandbox.plugins.plugin_utils import _aisb_command as cli
from ansible_collections.aisb.sandbox.plugins.module_utils.common import _record_seal, _session_record, _state_layout

CWD = "/home/dev/src/my app"


def variables(*argv, terminal=False):
    found = cli.run_variables(cli.parse(["run"] + list(argv)), CWD, terminal)
    # aisb prints the headless answer itself, as it comes: never the play's copy too.
    assert found.pop("run_agent_show_answer") is False
    return found


def test_run_takes_the_current_directory_and_the_options_as_run_agent_variables():
    assert variables() == {"project": CWD}
    assert variables("../other", "-H", "claude-code", "-p", "fix {{ it }}", "--review", "--fresh") == {
        "project": "/home/dev/src/other", "aisb_harness": "claude-code", "prompt": "fix {{ it }}",
        "aisb_project_mode": "review", "aisb_harness_state": "fresh"}
    assert variables("-f", "task.md") == {"project": CWD, "prompt_file": CWD + "/task.md"}
    assert variables("-f", "~/task.md")["prompt_file"] == os.path.expanduser("~/task.md")


def test_a_project_named_with_a_leading_dash_or_spaces_is_a_path_never_an_option():
    assert variables("./-rf") == {"project": CWD + "/-rf"}
    assert variables("my app/ -x ") == {"project": CWD + "/my app/ -x "}
    assert cli.unsafe_yaml(variables("./--network=host")) == 'project: "%s/--network=host"\n' % CWD


def test_a_command_after_the_double_dash_is_kept_whole_and_interactive_only_on_a_terminal():
    assert variables("--", "ls", "-la", "--", "x") == {
        "project": CWD, "command": ["ls", "-la", "--", "x"], "interactive": False}
    assert variables("/p", "--", "bash", terminal=True) == {"project": "/p", "command": ["bash"], "interactive": True}


@pytest.mark.parametrize("argv, needle", [
    (["run", "-p", "x", "-f", "y"], "not allowed with"),
    (["run", "-p", "x", "--", "true"], "exclude each other"),
    (["run", "dir", "extra"], "goes after --"),
    (["ls", "--", "x"], "only aisb run"),
    # A directory named like an option is one only as ./-rf.
    (["run", "-rf"], "unrecognized arguments: -rf"),
    (["review", "last", "merge"], "invalid choice"),
    ([], "required"),
])
def test_a_wrong_command_line_is_refused_naming_it(argv, needle, capsys):
    with pytest.raises(SystemExit) as ended:
        cli.parse(argv)
    assert ended.value.code == 2
    assert needle in capsys.readouterr().err


def test_every_subcommand_has_help(capsys):
    for name in ("run", "review", "ls", "show", "logs", "verify", "doctor"):
        with pytest.raises(SystemExit):
            cli.parse([name, "--help"])
        assert capsys.readouterr().out.startswith("usage: aisb " + name)


def test_the_variables_file_is_never_a_template():
    given = {"project": "/a b/{{ lookup('pipe', 'id') }}", "prompt": "line\n\"quoted\" {% raw %} é",
             "command": ["sh", "-c", "{{ x }}", "true", "1", "yes", "~", "", "2026-12-03", "{#"],
             "interactive": True, "apply_flagged": []}
    text = cli.unsafe_yaml(given)
    loaded = AnsibleLoader(text).get_single_data()
    # A string stays a string ("true" is no boolean), with its type.
    assert loaded == given and all(isinstance(item, str) for item in loaded["command"])
    # Every string with a template's mark is marked: Ansible passes it on as text, never templated.
    assert text.count("!unsafe") == 4, text
    with pytest.raises(TypeError, match="no extra variable is a dict"):
        cli.unsafe_yaml({"x": {}})


def test_every_character_of_a_prompt_arrives_as_given():
    # An emoji is past the BMP (JSON writes it as two surrogates, which YAML refuses); a line
    # or paragraph separator and a byte-order mark would be folded or refused unescaped.
    prompt = "fix the \U0001f41b bug\u2028next\u2029\ufeff\x85\t\x7f \"q\" \\ {{ x }} \u00e9"
    text = cli.unsafe_yaml({"prompt": prompt, "plain": "\U0001f600"})
    assert text.isascii()
    loaded = AnsibleLoader(text).get_single_data()
    assert loaded == {"prompt": prompt, "plain": "\U0001f600"}


def test_a_prompt_of_bytes_that_are_not_text_is_refused_naming_it():
    with pytest.raises(ValueError, match="not UTF-8 text"):
        cli.unsafe_yaml({"prompt": b"caf\xe9".decode("utf-8", "surrogateescape")})


def test_ansible_playbook_gets_a_chosen_configuration_the_system_path_and_the_quiet_callback():
    env = cli.playbook_environment({"HOME": "/home/dev", "PATH": "./node_modules/.bin:/usr/bin",
                                    "ANSIBLE_CONFIG": "./ansible.cfg"}, "/tmp/aisb-x/ansible.cfg", "/tmp/r.json")
    assert env["ANSIBLE_CONFIG"] == "/tmp/aisb-x/ansible.cfg"
    assert env["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin"
    assert env["ANSIBLE_STDOUT_CALLBACK"] == "aisb.sandbox.quiet"
    assert env[cli.RESULT_VARIABLE] == "/tmp/r.json" and env["HOME"] == "/home/dev"


def test_the_empty_configuration_aisb_made_is_recorded_as_none(tmp_path):
    empty, own = tmp_path / "ansible.cfg", tmp_path / "own.cfg"
    empty.write_text("")
    own.write_text("[defaults]\n")
    env = cli.playbook_environment({"AISB_EMPTY_CONFIG": str(own)}, str(empty), "/tmp/r.json", empty_config=True)
    assert env[cli.EMPTY_CONFIG_VARIABLE] == str(empty)
    assert cli.config_in_use(str(empty), env) == (None, cli.NO_CONFIG_NOTE)
    # The user's own file is recorded as it is; a name inherited from the shell is dropped.
    users = cli.playbook_environment({"AISB_EMPTY_CONFIG": str(own)}, str(own), "/tmp/r.json")
    assert cli.EMPTY_CONFIG_VARIABLE not in users
    assert cli.config_in_use(str(own), users) == (str(own), None)
    # A name alone hides no configuration: a file that is not empty is recorded.
    assert cli.config_in_use(str(own), {cli.EMPTY_CONFIG_VARIABLE: str(own)}) == (str(own), None)
    assert cli.config_in_use(None, env) == (None, None)


def test_the_configuration_is_the_users_own_never_the_current_directorys():
    assert cli.user_config("/home/dev", exists=lambda path: True) == "/home/dev/.ansible.cfg"
    assert cli.user_config("/home/dev", exists=lambda path: path.startswith("/etc")) == "/etc/ansible/ansible.cfg"
    assert cli.user_config("/home/dev", exists=lambda path: False) is None


def test_ansible_playbook_is_the_one_beside_the_interpreter_or_the_systems():
    assert cli.ansible_playbook("/opt/ansible/bin/python3", exists=lambda path, mode: True) == (
        "/opt/ansible/bin/ansible-playbook", None)
    path, problem = cli.ansible_playbook("/nowhere/python3", exists=lambda path, mode: False)
    assert path is None or path.startswith(("/usr/bin/", "/bin/")), path
    assert path or "never one found through PATH" in problem


def test_the_argv_and_extra_vars_read_from_where_aisb_started():
    assert cli.playbook_argv("/opt/a/ansible-playbook", "aisb.sandbox.run_agent", "/tmp/v.yml",
                             [cli.extra_vars_argument("@mine.yml", CWD), "x=1"]) == [
        "/opt/a/ansible-playbook", "aisb.sandbox.run_agent", "-e", "@/tmp/v.yml", "-e", "@" + CWD + "/mine.yml",
        "-e", "x=1"]
    assert cli.playbook_argv("p", "aisb.sandbox.verify", "/v", inventory="/i")[-2:] == ["-i", "/i"]


def test_the_exit_code_is_the_harnesses_or_the_playbooks():
    assert cli.exit_code(2, {"rc": 77, "status": "enforcement-lost"}) == 77
    assert cli.exit_code(0, {"rc": 0}) == 0
    assert cli.exit_code(2, {"rc": None, "status": "refused"}) == 2
    assert cli.exit_code(2, None) == 2


def record(session_id, **fields):
    return dict({"schema_version": 1, "session_id": session_id, "project": "/p", "harness": "pi",
                 "project_mode": "direct", "status": "exited", "exit_code": 0, "command": ["pi"],
                 "started_at": "2026-12-03T10:00:00Z", "ended_at": "2026-12-03T10:01:05Z",
                 "gate": {"allowed": [{"method": "CONNECT", "url": "a.test:443"}],
                          "denied": [{"method": "CONNECT", "url": "b.test:22"}], "hints": ["allow b.test:22"]},
                 "record": "/s/%s/record.json" % session_id, "transcript": None}, **fields)


def test_sessions_are_listed_and_picked_from_the_state_directory(tmp_path):
    state = str(tmp_path)
    ids = ["20261203T100000-0000000a", "20261203T110000-0000000b"]
    for session_id in ids + ["not-a-session"]:
        os.makedirs(_state_layout.session_directory(state, session_id))
    _session_record.write(_state_layout.session_directory(state, ids[0]), record(ids[0]), b"k" * 32)
    assert _state_layout.session_ids(state) == ids
    assert _state_layout.session_ids(str(tmp_path / "none")) == []
    assert cli.pick_session("last", ids) == (ids[1], None)
    assert cli.pick_session(ids[0], ids) == (ids[0], None)
    assert "aisb ls lists them" in cli.pick_session("nope", ids)[1]
    assert cli.pick_session("last", [])[1] == "no session has run on this workstation yet"
    assert cli.read_record(state, ids[0])["session_id"] == ids[0]
    assert cli.read_record(state, ids[1]) is None


def test_a_listing_row_says_the_session_at_a_glance():
    assert cli.listing_row("ID", record("ID")) == (
        "ID  /p  pi  direct  exit 0  2026-12-03T10:00:00Z  1m05s  allowed 1 denied 1")
    review = record("ID", project_mode="review", status="enforcement-lost", exit_code=77, review={"history": []})
    assert cli.listing_row("ID", review).endswith("enforcement-lost  2026-12-03T10:00:00Z  1m05s  allowed 1 denied 1"
                                                  "  review pending")
    applied = dict(review, review={"history": [{"action": "apply"}]})
    assert not cli.listing_row("ID", applied).endswith("review pending")
    assert "no record" in cli.listing_row("ID", None)


def test_show_names_the_refusals_and_their_hints():
    lines = cli.readable_record(record("ID", reason="", project_mode="review", review={"history": []}))
    assert "  denied CONNECT b.test:22" in lines and "  hint: allow b.test:22" in lines
    assert "review   pending: aisb review ID [show|apply|discard]" in lines
    assert cli.gate_lines(record("ID")) == ["allowed CONNECT a.test:443", "denied  CONNECT b.test:22"]


def test_show_says_whether_the_record_passes_its_check(tmp_path):
    state = str(tmp_path)
    key = _record_seal.workstation_key(_state_layout.record_key_path(state))
    session_dir = _state_layout.session_directory(state, "20261203T100000-0000000a")
    os.makedirs(session_dir)
    _session_record.write(session_dir, record("20261203T100000-0000000a", schema_version=2), key)
    assert cli.seal_line(state, "20261203T100000-0000000a") == "sealed   yes, intact"
    path = _session_record.path(session_dir)
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(text.replace('"exit_code": 0', '"exit_code": 1'))
    assert cli.seal_line(state, "20261203T100000-0000000a").startswith(
        "sealed   FAILS its check: event 4 (end) does not match its chain")
    _session_record.write(session_dir, record("20261203T100000-0000000a"), key)
    assert cli.seal_line(state, "20261203T100000-0000000a").startswith("sealed   no: written before records were sealed")


def test_the_gates_own_answers_are_shown_apart_with_their_reason():
    gate = {"allowed": [], "denied": [], "hints": [],
            "answered": [{"method": "GET", "url": "/path", "status": "NONE_NONE/400", "reason": "not relayed"}]}
    assert cli.listing_row("ID", record("ID", gate=gate)).endswith("allowed 0 denied 0 answered 1")
    assert "  answered GET /path NONE_NONE/400: not relayed" in cli.readable_record(record("ID", gate=gate))
    assert cli.gate_lines(record("ID", gate=gate)) == ["answered GET /path NONE_NONE/400: not relayed"]


def test_doctor_says_the_verdict_and_what_to_fix():
    assert cli.doctor_lines(None) == (False, [
        "this workstation has not been measured: run ansible-playbook aisb.sandbox.provision -K"])
    healthy, lines = cli.doctor_lines({"measured_at": "T", "verdict": {"model_holds": True, "reasons": []}})
    assert healthy and lines == ["sessions can run here: the networking model holds (measured T)"]
    healthy, lines = cli.doctor_lines({"verdict": {"model_holds": False, "no_gate_holds": False,
                                                   "reasons": ["pasta: too old"], "notes": ["limits: no"]}})
    assert not healthy and lines == ["no session can start here:", "  fix: pasta: too old", "  note: limits: no"]


def test_review_variables():
    args = cli.parse(["review", "last", "apply", "--include", ".envrc", "bin"])
    assert cli.review_variables(args, "ID") == {"session": "ID", "action": "apply", "apply_flagged": [".envrc", "bin"]}
    assert cli.parse(["review"]).session == "last" and cli.parse(["review"]).action == "show"
    assert json.loads(json.dumps(cli.review_variables(cli.parse(["review"]), "ID")))["action"] == "show"


class Out(io.BytesIO):
    def when(self, text, timeout=5):
        deadline = time.monotonic() + timeout
        while text not in self.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.getvalue()


def new_transcript(state, session_id):
    directory = _state_layout.session_directory(state, session_id)
    os.makedirs(directory)
    return open(os.path.join(directory, _state_layout.TRANSCRIPT), "wb", buffering=0)


def test_the_new_sessions_transcript_is_followed_as_it_is_written(tmp_path):
    state, out = str(tmp_path), Out()
    os.makedirs(_state_layout.session_directory(state, "20261203T100000-0000000a"))
    follower = cli.TranscriptFollower(state, _state_layout.session_ids(state), out, interval=0.01)
    follower.start()
    with new_transcript(state, "20261203T110000-0000000b") as transcript:
        transcript.write(b"first line\n")
        assert out.when(b"first line\n") == b"first line\n"
        transcript.write(b"second\n")
        assert out.when(b"second\n") == b"first line\nsecond\n"
        transcript.write(b"last")
    follower.finish(transcript.name)
    assert out.getvalue() == b"first line\nsecond\nlast"


def test_with_two_new_sessions_none_is_followed_and_the_runs_own_is_printed_at_its_end(tmp_path):
    state, out = str(tmp_path), Out()
    follower = cli.TranscriptFollower(state, [], out, interval=0.01)
    with new_transcript(state, "20261203T110000-0000000b") as other, \
            new_transcript(state, "20261203T110000-0000000c") as own:
        other.write(b"not mine\n")
        own.write(b"mine\n")
        follower.start()
        follower.join(5)
        assert not follower.is_alive() and out.getvalue() == b""
    follower.finish(own.name)
    assert out.getvalue() == b"mine\n"
    quiet = cli.TranscriptFollower(state, _state_layout.session_ids(state), Out(), interval=0.01)
    quiet.start()
    quiet.finish(None)
    assert quiet.out.getvalue() == b""


def test_verify_takes_the_users_inventory_or_this_workstation():
    assert cli.verify_inventory("fleet.ini", CWD, "/opt/a/python3") == (
        CWD + "/fleet.ini", {"verify_report_dir": CWD + "/aisb-fleet-report", "verify_records_last": 0})
    assert cli.verify_inventory(None, CWD, "/opt/a/python3", 5) == ("localhost,", {
        "verify_report_dir": CWD + "/aisb-fleet-report", "verify_records_last": 5, "aisb_hosts": "localhost",
        "ansible_connection": "local", "ansible_python_interpreter": "/opt/a/python3"})
    assert cli.parse(["verify", "--last", "5"]).last == 5


def test_verify_refuses_a_negative_last(capsys):
    with pytest.raises(SystemExit):
        cli.parse(["verify", "--last", "-1"])
    assert "--last is -1: how many of each host's newest records are checked, 0 or more" in capsys.readouterr().err


def test_on_a_terminal_the_answer_never_drives_it_and_to_a_file_it_is_verbatim(tmp_path):
    assert isinstance(cli.answer_text(False), cli.Verbatim) and isinstance(cli.answer_text(True), cli.TerminalText)
    for terminal, expected in ((True, b"title ?]0;owned? done\n"), (False, b"title \x1b]0;owned\x07 done\n")):
        state, out = str(tmp_path / str(terminal)), Out()
        follower = cli.TranscriptFollower(state, [], out, interval=0.01, text=cli.answer_text(terminal))
        follower.start()
        with new_transcript(state, "20261203T110000-0000000b") as transcript:
            transcript.write(b"title \x1b]0;")
            out.when(b"title ")
            transcript.write(b"owned\x07 done\n")
        follower.finish(transcript.name)
        assert out.getvalue() == expected, terminal
