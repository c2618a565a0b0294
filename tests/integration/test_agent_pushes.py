# SPDX-License-Identifier: GPL-3.0-or-later
"""The agent's pushes through the session's git broker, with real traffic: a git server
in the test internet (git's own http-backend behind HTTPS at git.test, answering 401
without its token), an aisb_git_remotes entry for one of its repositories with the token
in the developer's shell, and a session whose harness is a bash script using the
sandbox's own git.

The agent clones, fetches and pushes its own branch (a create, then a fast-forward)
through the broker; every other push (main, a delete, a tag, a forced rewind, another
repository of the same host) is refused with git's own report or by the gate, and the
upstream's refs are what the accepted pushes made them, compared by object id. The token
is nowhere in the sandbox; the record lists each push. Over each gate path: the broker
is one more pinned port at the gate's address on either.

A team file listing the remote: the agent pushes the team's branch with nothing given by
the developer, and a developer's own remote or a wider pattern for the team's, as a play
variable or as run_agent.yml's settings replaced with -e, is refused before anything
starts."""

import base64
import json
import re
import uuid
from pathlib import Path

import pytest

from providers import BUNDLE, addresses
from scenario import install_team
from sessions import record_of, run_agent, session_dirs, through
from workstation import TRANSFER_DIR

PROJECT = "/home/dev/src/git-broker"
NAME = "git.test"
TOKEN = "ghp_" + uuid.uuid4().hex
WORK = f"{TRANSFER_DIR}/git-server"
ROOT = f"{WORK}/root"
PATTERNS = base64.b64encode(TOKEN.encode()).decode()
SCRIPT = r"""
export GIT_TERMINAL_PROMPT=0
cd /tmp && git clone -q https://git.test/org/repo.git w; echo "RESULT clone $?"
cd w && git config user.email agent@example.org && git config user.name agent
b=aisb/$AISB_SESSION
echo one >f && git add f && git commit -qm one
git push -q origin HEAD:refs/heads/$b/fix; echo "RESULT push-create $?"
echo two >f && git commit -qam two
git push -q origin HEAD:$b/fix; echo "RESULT push-forward $?"
echo "RESULT pushed $(git rev-parse HEAD)"
git fetch -q origin; echo "RESULT fetch $?"
refused() { echo "RESULT $1 $(git push "${@:2}" 2>&1 | grep -o 'remote rejected.*' | head -1)"; }
refused main origin HEAD:main
refused delete origin --delete $b/fix
refused tag origin HEAD:refs/tags/v1
git reset -q --hard HEAD~1 && echo rewritten >f && git commit -qam rewritten
refused rewind origin --force HEAD:$b/fix
refused nonascii origin "HEAD:$b/$(printf '\303\274')"
git push -q https://git.test/org/other.git HEAD:refs/heads/$b/x >/dev/null 2>&1; echo "RESULT unlisted $?"
echo "RESULT direct $(curl -s -m 15 -o /dev/null -w '%{http_code} %{http_connect}' \
  'https://git.test/org/repo.git/info/refs?service=git-upload-pack')"
pattern() { printf %s @PATTERNS@ | base64 -d; }
echo hits-begin
grep -l -s -F -f <(pattern) /proc/[0-9]*/environ /proc/[0-9]*/cmdline
grep -r -l -s -F --exclude-dir=proc --exclude-dir=sys -f <(pattern) / /project
git config -l --show-origin | grep -F -f <(pattern)
echo hits-end
""".replace("@PATTERNS@", PATTERNS)
LAUNCHER = """
import pathlib, sys, time
sys.path.insert(0, "{transfer}")
import git_server
server, where = git_server.serve(pathlib.Path("{work}"), "{name}", pathlib.Path("{root}"), "x-access-token",
                                 "{token}", address="{address}", port=443)
print("ready", flush=True)
while True:
    time.sleep(3600)
"""


def results(text):
    return dict(re.findall(r"^RESULT (\S+) ?(.*)$", text, re.M))


def upstream_refs(ws, repo):
    return ws.sh(f"git -C {ROOT}/org/{repo}.git for-each-ref --format='%(refname) %(objectname)'",
                 user="root").stdout.splitlines()


@pytest.fixture(scope="module")
def git_host(workstation, internet):
    """The git server at a public test address on 443 for git.test, its CA trusted by the
    workstation (the broker), not by the sandbox; two bare repositories with a main."""
    address = addresses(internet)[0]
    for module in ("git_server.py", "certificates.py"):
        workstation.path(f"{TRANSFER_DIR}/{module}").write_text(
            (Path(__file__).resolve().parents[1] / module).read_text())
    bundle = workstation.path(BUNDLE).read_text()
    hosts = workstation.path("/etc/hosts").read_text()
    workstation.path(f"{TRANSFER_DIR}/git_launcher.py").write_text(LAUNCHER.format(
        transfer=TRANSFER_DIR, work=WORK, name=NAME, root=ROOT, token=TOKEN, address=address))
    # git on the workstation: the server's http-backend (the broker runs none).
    workstation.sh("apt-get update -q >/dev/null && "
                   "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git >/dev/null",
                   user="root", timeout=900)
    workstation.sh(f"""
        rm -rf {WORK} && mkdir -p {ROOT}/org && cd {WORK}
        git init -q -b main seed && cd seed && echo zero >f && git add f
        git -c user.email=o@example.org -c user.name=o commit -qm zero
        for repo in repo other; do
          git init -q --bare -b main {ROOT}/org/$repo.git && git push -q {ROOT}/org/$repo.git main
        done
        cd {WORK}
        ip -n {internet.netns} addr replace {address}/32 dev eth0
        ip route replace {address}/32 via {internet.address}
        ip netns exec {internet.netns} setsid python3 {TRANSFER_DIR}/git_launcher.py >ready 2>&1 &
        echo $! >pid
        for _ in $(seq 300); do grep -q ready ready && break; sleep 0.1; done
        grep -q ready ready || {{ cat ready >&2; exit 1; }}
    """, user="root")
    try:
        workstation.path(BUNDLE).write_text(bundle + workstation.path(f"{WORK}/ca.crt").read_text())
        workstation.path("/etc/hosts").write_text(hosts + f"{address} {NAME}\n")
        workstation.sh(f"mkdir -p {PROJECT} && echo 'print(1)' >{PROJECT}/main.py")
        yield address
    finally:
        workstation.sh(f"""
            kill $(cat {WORK}/pid) || true
            ip route del {address}/32 via {internet.address} 2>/dev/null || true
        """, user="root", check=False)
        workstation.path(BUNDLE).write_text(bundle)
        workstation.path("/etc/hosts").write_text(hosts)


def test_the_agent_pushes_its_own_branch_only_and_never_holds_the_token(workstation, git_host, gate_path):
    main = upstream_refs(workstation, "repo")
    other = upstream_refs(workstation, "other")
    remotes = [{"url": f"https://{NAME}/org/repo.git", "from_environment": "GIT_BROKER_TOKEN"}]
    result = run_agent(workstation, "-e", json.dumps({"aisb_git_remotes": remotes}), *through(gate_path),
                       command=["bash", "-c", SCRIPT], env={"GIT_BROKER_TOKEN": TOKEN}, project=PROJECT)
    record = record_of(workstation, result.stdout)
    text = workstation.path(record["transcript"]).read_text()
    got = results(text)
    session = record["session_id"]
    mine = f"refs/heads/aisb/{session}/fix"
    only = f"(aisb: only aisb/{session}/* may be pushed)"
    assert (got["clone"], got["push-create"], got["push-forward"], got["fetch"]) == ("0", "0", "0", "0"), text
    assert got["main"] == f"remote rejected] HEAD -> main {only}"
    assert got["delete"] == f"remote rejected] aisb/{session}/fix (aisb: deleting a ref is refused)"
    assert got["tag"] == f"remote rejected] HEAD -> v1 {only}"
    assert got["rewind"].startswith(f"remote rejected] HEAD -> aisb/{session}/fix (aisb: not a fast-forward")
    # A request the broker's reading refuses (git allows the name) is reported per ref too, not as HTTP 403.
    assert got["nonascii"] == f"remote rejected] HEAD -> aisb/{session}/\u00fc (aisb: a command line holds a byte " \
                              "that is not ASCII)", text
    # Another repository of the same host is no listed remote: the gate refuses its CONNECT.
    assert got["unlisted"] != "0" and got["direct"] == "000 403"
    # The upstream holds main as it was and the agent's branch at its second commit, nothing else.
    assert sorted(upstream_refs(workstation, "repo")) == sorted(main + [f"{mine} {got['pushed']}"])
    assert upstream_refs(workstation, "other") == other
    hits = re.search(r"^hits-begin$(.*?)^hits-end$", text, re.M | re.S).group(1).split()
    assert hits == []
    assert TOKEN not in json.dumps(record)
    pushes = record["git"]["pushes"]
    assert [push["relayed"] for push in pushes] == [True, True, False, False, False, False, False]
    assert [push["refs"][0]["name"] for push in pushes[:6]] == [mine, mine, "refs/heads/main", mine,
                                                                "refs/tags/v1", mine]
    assert pushes[6]["refused"] == "a command line holds a byte that is not ASCII"
    assert pushes[1]["refs"][0]["new"] == got["pushed"] and pushes[1]["upstream_status"] == 200
    assert record["git"]["remotes"] == [{"url": f"https://{NAME}/org/repo.git", "host": NAME, "port": 443,
                                         "path": "/org/repo.git", "branches": "aisb/{session}/*",
                                         "username": "x-access-token"}]


TEAM_FILE = "/etc/aisb/team.json"
TEAM_REMOTE = {"url": f"https://{NAME}/org/repo.git", "branches": "team/{session}/*",
               "from_environment": "GIT_BROKER_TOKEN"}
TEAM_SCRIPT = r"""
export GIT_TERMINAL_PROMPT=0
cd /tmp && git clone -q https://git.test/org/repo.git w; echo "RESULT clone $?"
cd w && git config user.email agent@example.org && git config user.name agent
echo team >f && git commit -qam team
git push -q origin HEAD:refs/heads/team/$AISB_SESSION/x; echo "RESULT push $?"
echo "RESULT pushed $(git rev-parse HEAD)"
echo "RESULT main $(git push origin HEAD:main 2>&1 | grep -o 'remote rejected.*' | head -1)"
"""
# run_agent.yml's own settings, as a developer's -e would replace them.
SETTINGS = {"allow": [], "connect_ports": [443], "pass_environment": [], "environment": {}, "credentials": [],
            "limits": {}, "require_limits": False, "network": "allow", "harness": "pi", "harness_config": None,
            "project_mode": "direct", "allow_unenforced": False}


def test_a_team_s_remote_is_pushed_through_the_broker_and_no_developer_value_widens_it(workstation, git_host):
    """A team file lists the remote, its branch pattern and its token's source; the developer
    gives nothing and the agent pushes the team's branch through the broker. A developer's
    own remote, the team's with a wider pattern, or run_agent.yml's settings replaced with -e
    are each refused before anything starts, where the team lets developers add none."""
    install_team(workstation, {"settings": {"git_remotes": [TEAM_REMOTE]}})
    try:
        result = run_agent(workstation, command=["bash", "-c", TEAM_SCRIPT], env={"GIT_BROKER_TOKEN": TOKEN},
                           project=PROJECT)
        record = record_of(workstation, result.stdout)
        text = workstation.path(record["transcript"]).read_text()
        got = results(text)
        session = record["session_id"]
        assert (got["clone"], got["push"]) == ("0", "0"), text
        assert got["main"] == f"remote rejected] HEAD -> main (aisb: only team/{session}/* may be pushed)"
        refs = upstream_refs(workstation, "repo")
        assert f"refs/heads/team/{session}/x {got['pushed']}" in refs
        assert record["git"]["remotes"][0]["branches"] == "team/{session}/*"
        sessions = session_dirs(workstation)
        wider = dict(TEAM_REMOTE, branches="*")
        added = {"url": f"https://{NAME}/org/other.git", "from_environment": "GIT_BROKER_TOKEN"}
        refused = ("aisb_git_remotes is refused: the team file /etc/aisb/team.json sets git_remotes and lets "
                   "developers add to nothing only (user_may_add)")
        for extra, needle in [
            ({"aisb_git_remotes": [added]}, refused),
            ({"aisb_git_remotes": [wider]}, refused),
            ({"run_agent_settings": dict(SETTINGS, git_remotes=[wider])},
             f"the session's own settings, checked again: aisb_git_remotes changes https://{NAME}/org/repo.git"),
            ({"run_agent_settings": dict(SETTINGS, git_remotes=[added])},
             f"the session's own settings, checked again: aisb_git_remotes is refused: https://{NAME}/org/other.git "
             "is not among the team file"),
        ]:
            refusal = run_agent(workstation, "-e", json.dumps(extra), command=["true"],
                                env={"GIT_BROKER_TOKEN": TOKEN}, project=PROJECT)
            output = refusal.stdout + refusal.stderr
            assert refusal.returncode != 0 and needle in output, output[-3000:]
        assert session_dirs(workstation) == sessions
        assert upstream_refs(workstation, "repo") == refs
    finally:
        workstation.run(["rm", "-f", TEAM_FILE], user="root")
