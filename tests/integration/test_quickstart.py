# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/quickstart.md as written: its command block, taken from the page, run line by line
in one shell as the workstation's user on a bare Debian 13 workstation whose Ansible is
removed (the page installs Debian's own), with the release tarball (tools/build_release.py:
README.galaxy.md as its README.md) in the home directory and a fake provider behind api.anthropic.com. The test adds only what this machine lacks
and a real workstation has: apt's package lists, and the operator variables that give a
base image from Debian's archive (no container registry here) and the build machine's CA
anchors, passed by a shell function around ansible-playbook and aisb. The page's key
placeholder is replaced by the test's key."""

import json
import re
import shutil
import sys
import uuid

import pytest

import certificates
from providers import BUNDLE, PlainProvider, addresses
from scenario import Internet, operator_vars
from sessions import session_dirs
from workstation import AISB_STATE, REPO, TRANSFER_DIR, USER_HOME, USER_UID, Workstation

sys.path.insert(0, str(REPO / "tools"))
import build_release  # noqa: E402  pylint: disable=wrong-import-position

PAGE = REPO / "docs" / "quickstart.md"
KEY = "sk-ant-quickstart-" + uuid.uuid4().hex
ANSWER = "QUICKSTART-ANSWER-" + uuid.uuid4().hex[:8]
HOST = "api.anthropic.com"
CERTIFICATES = f"{TRANSFER_DIR}/quickstart-tls"
# What the test puts around the page's lines: the operator variables on every playbook run.
PRELUDE = """set -euo pipefail
ansible-playbook() { command ansible-playbook "$@" -e '@VARS'; }
aisb() { local subcommand=$1; shift; command aisb "$subcommand" -e '@VARS' "$@"; }
set -x
"""


def page_commands():
    """The quickstart's first sh block, its lines in order."""
    block = re.search(r"^```sh\n(.*?)^```$", PAGE.read_text(), re.M | re.S)
    assert block, f"{PAGE} has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def tarball_name():
    version = re.search(r"^version: (\S+)$", (REPO / "galaxy.yml").read_text(), re.M).group(1)
    return f"aisb-sandbox-{version}.tar.gz"


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A bare Debian 13 workstation with the release tarball in the home directory and no
    Ansible, a fake Anthropic provider in its test internet, and a project at ~/src/app."""
    with Workstation("trixie") as ws:
        tarball = build_release.build(tmp_path_factory.mktemp("release"))
        assert tarball.name == tarball_name()
        shutil.copy2(tarball, ws.path(f"{USER_HOME}/{tarball.name}"))
        shutil.chown(ws.path(f"{USER_HOME}/{tarball.name}"), USER_UID, USER_UID)
        # The tree's own Ansible (what the other tests run) goes: the page installs Debian's.
        ws.sh("rm -rf /opt/ansible /usr/local/bin/ansible* && apt-get update -qq", user="root", timeout=900)
        ws.sh("mkdir -p ~/src/app && echo 'print(1)' >~/src/app/main.py")
        ws.seed_container_storage()
        with Internet(ws) as internet:
            address = addresses(internet)[0]
            ws.sh(f"mkdir -p {CERTIFICATES} && cd {CERTIFICATES}\n{certificates.script(HOST)}", user="root")
            server = PlainProvider(ws, internet, address, 443, ANSWER,
                                   f"{CERTIFICATES}/server.crt {CERTIFICATES}/server.key")
            try:
                ws.path(BUNDLE).write_text(ws.path(BUNDLE).read_text()
                                           + ws.path(f"{CERTIFICATES}/ca.crt").read_text())
                ws.path("/etc/hosts").write_text(ws.path("/etc/hosts").read_text() + f"{address} {HOST}\n")
                yield ws, server
            finally:
                server.stop()


@pytest.fixture(scope="module")
def quickstart(bare):
    """The page's block, run: (result, provider requests, record)."""
    ws, server = bare
    lines = page_commands()
    script = PRELUDE.replace("@VARS", operator_vars(ws)) + "\n".join(
        line.replace("sk-ant-...", KEY) for line in lines)
    # -K reads the sudo password: the workstation's sudo needs none.
    result = ws.run(["bash", "-c", script], check=False, input="\n", timeout=3600)
    sessions = session_dirs(ws)
    record = json.loads(ws.path(f"{AISB_STATE}/sessions/{sessions[-1]}/record.json").read_text()) if sessions else None
    return result, server.requests(), record


def test_the_page_names_the_release_tarball_and_fewer_than_ten_commands():
    lines = page_commands()
    assert len(lines) < 10, lines
    assert any(tarball_name() in line for line in lines), (tarball_name(), lines)
    assert any("sk-ant-..." in line for line in lines), "the test replaces the page's key placeholder"


def test_the_quickstart_ends_with_the_answer_on_screen(quickstart):
    result, _requests, _record = quickstart
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert ANSWER in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_page_runs_on_debians_own_ansible(bare, quickstart):
    ws, _server = bare
    result, _requests, _record = quickstart
    assert result.returncode == 0, result.stderr[-3000:]
    # The aisb command runs the ansible-playbook beside the interpreter that installed it.
    assert "#!/usr/bin/python3" in ws.path("/usr/local/bin/aisb").read_text().splitlines()[0]
    assert not ws.path("/opt/ansible").exists()


def test_the_key_reaches_the_provider_and_nothing_else(quickstart):
    result, requests, record = quickstart
    assert record is not None and record["exit_code"] == 0, result.stderr[-3000:]
    asked = [r for r in requests if r["method"] == "POST"]
    assert asked and [r["path"] for r in asked] == ["/v1/messages"] * len(asked), requests
    assert all(dict((k.lower(), v) for k, v in r["headers"])["x-api-key"] == KEY for r in asked)
    assert [entry["variable"] for entry in record["credentials"]["entries"]] == ["ANTHROPIC_API_KEY"]
    assert record["provider_keys_held"] == [] and KEY not in json.dumps(record)
    transcript = record["transcript"]
    assert transcript and KEY not in result.stdout
