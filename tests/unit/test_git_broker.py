# SPDX-License-Identifier: GPL-3.0-or-later
"""The git broker between real git and git's own http-backend over HTTPS: fetches pass,
pushes of the session's branches as creates and fast-forwards pass, every other push is
refused with git's own report and never reaches the upstream; the token is the broker's."""

import base64
import itertools
import os
import ssl
import subprocess
import urllib.request

import pytest

import git_server
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_broker import (
    GitBroker, advertisement, client_capabilities, render_advertisement)
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials._git_push import (
    PushError, pkt_line, pkt_lines)

TOKEN = "ghp_unit-broker-token"
SESSION = "20261203T211500-ab12"
ENV = dict((name, value) for name, value in os.environ.items() if "proxy" not in name.lower())
ENV.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@example.org", GIT_COMMITTER_NAME="a",
           GIT_COMMITTER_EMAIL="a@example.org", GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")


def git(cwd, *args, check=True):
    done = subprocess.run(["git"] + list(args), cwd=str(cwd), env=dict(ENV, HOME=str(cwd)), check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if check and done.returncode:
        raise AssertionError(done.stderr)
    return done


@pytest.fixture(name="upstream")
def upstream_fixture(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    git(root, "init", "-q", "--bare", "-b", "main", "repo.git")
    seed = tmp_path / "seed"
    git(tmp_path, "init", "-q", "-b", "main", str(seed))
    (seed / "f").write_text("one\n")
    git(seed, "add", "f")
    git(seed, "commit", "-qm", "one")
    git(seed, "push", "-q", str(root / "repo.git"), "main")
    server, where = git_server.serve(tmp_path, "localhost", root, "x-access-token", TOKEN)
    remote = {"url": "https://localhost:%d/repo.git" % where["port"], "host": "localhost", "port": where["port"],
              "path": "/repo.git", "branches": "aisb/{session}/*", "username": "x-access-token", "token": TOKEN}
    broker = GitBroker([remote], SESSION, context=ssl.create_default_context(cafile=where["ca"]),
                       refused=lambda _address: None).start()
    yield dict(where, broker=broker, bare=root / "repo.git", url="http://127.0.0.1:%d/r0" % broker.port,
               tmp=tmp_path)
    broker.close()
    server.shutdown()


def refs(bare):
    return git(bare, "for-each-ref", "--format=%(refname) %(objectname)").stdout


def clone(upstream):
    work = upstream["tmp"] / "work"
    git(upstream["tmp"], "clone", "-q", upstream["url"], str(work))
    return work


def commit(work, text):
    (work / "f").write_text(text)
    git(work, "commit", "-qam", text)
    return git(work, "rev-parse", "HEAD").stdout.strip()


MINE = "aisb/%s/fix" % SESSION


def test_a_clone_fetch_and_pushes_of_the_sessions_branch_pass(upstream):
    work = clone(upstream)
    assert (work / "f").read_text() == "one\n"
    first = commit(work, "two\n")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/" + MINE)
    assert "refs/heads/%s %s" % (MINE, first) in refs(upstream["bare"])
    second = commit(work, "three\n")
    git(work, "push", "-q", "origin", "HEAD:" + MINE)
    assert "refs/heads/%s %s" % (MINE, second) in refs(upstream["bare"])
    git(work, "fetch", "-q", "origin")
    pushes = upstream["broker"].report()["pushes"]
    assert [(p["relayed"], p["upstream_status"], [r["name"] for r in p["refs"]]) for p in pushes] == [
        (True, 200, ["refs/heads/" + MINE])] * 2
    assert pushes[1]["refs"][0]["old"] == first and pushes[1]["refs"][0]["new"] == second
    # Every request reached the upstream with the broker's token, none without it.
    expected = "Basic " + base64.b64encode(("x-access-token:" + TOKEN).encode()).decode()
    assert set(seen["authorization"] for seen in upstream["seen"]) == {expected}
    assert TOKEN not in (work / ".git" / "config").read_text()
    assert "token" not in upstream["broker"].report()["remotes"][0]


@pytest.mark.parametrize("args, shown", [
    (["HEAD:main"], "HEAD -> main (aisb: only aisb/%s/* may be pushed)" % SESSION),
    (["HEAD:refs/heads/aisb/other/x"], "HEAD -> aisb/other/x (aisb: only aisb/%s/* may be pushed)" % SESSION),
    (["HEAD:refs/tags/v1"], "HEAD -> v1 (aisb: only aisb/%s/* may be pushed)" % SESSION),
    (["--delete", MINE], "%s (aisb: deleting a ref is refused)" % MINE),
    (["--force", "HEAD~1:" + MINE], "HEAD -> %s (aisb: not a fast-forward the pushed pack proves" % MINE),
    (["HEAD:refs/heads/aisb/%s/new" % SESSION, "HEAD:main"], "HEAD -> aisb/%s/new (aisb: another ref" % SESSION),
])
def test_other_pushes_are_refused_with_gits_own_report_and_never_reach_the_upstream(upstream, args, shown):
    work = clone(upstream)
    commit(work, "two\n")
    commit(work, "three\n")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/" + MINE)
    if "--force" in args:
        # A rewind to a new commit the upstream never had: the pack carries it.
        git(work, "reset", "-q", "--hard", "HEAD~1")
        commit(work, "rewritten\n")
        args = ["--force", "HEAD:" + MINE]
    before = refs(upstream["bare"])
    posts = len([seen for seen in upstream["seen"] if seen["path"].endswith("/git-receive-pack")])
    pushed = git(work, "push", "origin", *args, check=False)
    assert pushed.returncode != 0
    assert "! [remote rejected] " + shown in pushed.stderr
    assert refs(upstream["bare"]) == before
    assert len([seen for seen in upstream["seen"] if seen["path"].endswith("/git-receive-pack")]) == posts
    assert upstream["broker"].report()["pushes"][-1]["relayed"] is False


def test_a_large_push_passes_probe_and_chunks(upstream):
    work = clone(upstream)
    (work / "big").write_bytes(os.urandom(3 * 1024 * 1024))
    git(work, "add", "big")
    git(work, "commit", "-qm", "big")
    # Over 1 MiB: git probes with an empty request, then sends the pack chunked.
    git(work, "push", "-q", "origin", "HEAD:" + MINE)
    assert git(upstream["bare"], "rev-parse", MINE).stdout == git(work, "rev-parse", "HEAD").stdout


def test_a_hand_written_push_with_options_is_refused_before_the_upstream(upstream):
    main = git(upstream["bare"], "rev-parse", "main").stdout.strip()

    def body(capabilities):
        return (pkt_line(("%s %s refs/heads/%s\0 %s push-options" % ("0" * 40, main, MINE, capabilities)).encode())
                + b"0000" + pkt_line(b"merge_request.target=main") + b"0000")

    request = urllib.request.Request("http://127.0.0.1:%d/r0/git-receive-pack" % upstream["broker"].port,
                                     data=body("report-status"))
    # Refused as git reports a refusal: the request was read whole, the client asked report-status.
    with urllib.request.urlopen(request, timeout=10) as answer:
        report = answer.read()
    lines = list(itertools.takewhile(lambda payload: payload is not None,
                                     (payload for payload, _offset in pkt_lines(report))))
    assert answer.status == 200 and report.endswith(b"0000") and len(lines) == 2 and lines[0] == b"unpack ok\n"
    assert lines[1].startswith(b"ng refs/heads/%s aisb: capability 'push-options' is not relayed" % MINE.encode())
    assert not [seen for seen in upstream["seen"] if seen["path"].endswith("/git-receive-pack")]
    assert upstream["broker"].report()["pushes"][0]["refused"].startswith("capability 'push-options'")
    # Without report-status the protocol has no report: HTTP's refusal, still before the upstream.
    request = urllib.request.Request(request.full_url, data=body("quiet"))
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 403 and b"push-options" in raised.value.read()
    assert not [seen for seen in upstream["seen"] if seen["path"].endswith("/git-receive-pack")]


def test_a_push_whose_request_is_refused_gets_git_s_own_report(upstream):
    """A ref name with a byte outside ASCII (git allows it) fails the request's reading, not
    a ref's decision: the agent's git still prints the broker's reason per ref."""
    work = clone(upstream)
    commit(work, "two\n")
    before = refs(upstream["bare"])
    pushed = git(work, "push", "origin", "HEAD:refs/heads/aisb/%s/\u00fc" % SESSION, check=False)
    assert pushed.returncode != 0 and "RPC failed" not in pushed.stderr
    assert "! [remote rejected] HEAD -> aisb/%s/\u00fc (aisb: a command line holds a byte that is not ASCII)" \
        % SESSION in pushed.stderr, pushed.stderr
    assert refs(upstream["bare"]) == before
    assert not [seen for seen in upstream["seen"] if seen["path"].endswith("/git-receive-pack")]


def test_push_options_are_refused_before_the_upstream(upstream):
    work = clone(upstream)
    commit(work, "two\n")
    before = refs(upstream["bare"])
    pushed = git(work, "push", "-o", "merge_request.target=main", "origin", "HEAD:" + MINE, check=False)
    # Not advertised, so git itself refuses; sent anyway, the broker refuses them (test_git_push).
    assert pushed.returncode != 0 and "does not support push options" in pushed.stderr
    assert refs(upstream["bare"]) == before


def test_an_unlisted_path_or_another_request_is_refused(upstream):
    base = "http://127.0.0.1:%d" % upstream["broker"].port
    for path, status in (("/r1/info/refs?service=git-upload-pack", 404), ("/r0/HEAD", 403),
                         ("/r0/objects/info/packs", 403), ("/r0/info/refs", 403),
                         ("/r0/info/refs?service=git-upload-pack&x=1", 403)):
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(base + path, timeout=10)
        assert raised.value.code == status, path


def test_an_encoded_push_is_refused(upstream):
    request = urllib.request.Request("http://127.0.0.1:%d/r0/git-receive-pack" % upstream["broker"].port,
                                     data=b"\x1f\x8b junk", headers={"Content-Encoding": "gzip"})
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 415


def test_the_advertisement_is_read_and_passed_on_with_the_brokers_capabilities():
    body = (pkt_line(b"# service=git-receive-pack\n") + b"0000"
            + pkt_line(b"a" * 40 + b" refs/heads/main\0report-status delete-refs push-options push-cert=1 "
                       b"atomic agent=git/2 object-format=sha1\n") + pkt_line(b"b" * 40 + b" refs/heads/x\n")
            + b"0000")
    refs_read, caps, hexsz = advertisement(body, "git-receive-pack")
    assert refs_read == {"refs/heads/main": "a" * 40, "refs/heads/x": "b" * 40} and hexsz == 40
    assert client_capabilities(caps) == ["report-status", "delete-refs", "atomic", "agent=git/2",
                                         "object-format=sha1", "no-thin"]
    assert advertisement(render_advertisement("git-receive-pack", refs_read, caps, 40),
                         "git-receive-pack") == (refs_read, caps, 40)
    empty = render_advertisement("git-receive-pack", {}, ["report-status"], 40)
    assert advertisement(empty, "git-receive-pack") == ({}, ["report-status"], 40)
    for bad in (body.replace(b"receive", b"upload", 1), body + b"x", body[:-4], pkt_line(b"x")):
        with pytest.raises(PushError):
            advertisement(bad, "git-receive-pack")
