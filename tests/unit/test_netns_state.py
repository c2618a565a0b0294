# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox's routes, addresses and pasta as the host reads them (_netns_state), from
a /proc tree the test writes (the kernel's formats) and from this machine's own /proc."""

import os
import subprocess

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.session import _netns_state

FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     |-- 10.0.2.0
        /24 link UNICAST
Local:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.0.2.15
        /32 host LOCAL
"""
IPV6_ROUTE = (
    "20010db8000000000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "fe800000000000000000000000000001 00000400 00000002 00000007 00450003     eth0\n")
# The route the kernel adds for a link-local address once its duplicate detection ends
# (measured: 1 to 2 s after the sandbox started), and an anycast one.
LOCAL = ("fe800000000000008426a3fffe62b3fc 80 00000000000000000000000000000000 00 "
         "00000000000000000000000000000000 00000000 00000002 00000000 80200001     eth0\n"
         "fe800000000000000000000000000000 80 00000000000000000000000000000000 00 "
         "00000000000000000000000000000000 00000000 00000002 00000000 00300001     eth0\n")
CACHED = ("20010db8000000000000000000000099 80 00000000000000000000000000000000 00 "
          "fe800000000000000000000000000001 00000000 00000001 00000003 01000003     eth0\n")
IF_INET6 = "20010db8000000000000000000000005 02 40 00 80     eth0\n"


def proc_tree(tmp_path, pid=4242, fib_trie=FIB_TRIE, ipv6_route=IPV6_ROUTE, if_inet6=IF_INET6):
    net = tmp_path / str(pid) / "net"
    net.mkdir(parents=True, exist_ok=True)
    (net / "fib_trie").write_text(fib_trie)
    (net / "ipv6_route").write_text(ipv6_route)
    (net / "if_inet6").write_text(if_inet6)
    ns = tmp_path / str(pid) / "ns"
    ns.mkdir(exist_ok=True)
    (ns / "net").write_text("")
    return str(tmp_path)


def lines(tmp_path, **texts):
    found, error = _netns_state.network_lines(4242, proc_tree(tmp_path, **texts))
    assert error is None
    return found


def test_routes_and_addresses_are_kept_and_what_changes_by_itself_is_not(tmp_path):
    first = lines(tmp_path)
    assert "ipv6_route 20010db8000000000000000000000000 40 00000000000000000000000000000000 00 " \
           "00000000000000000000000000000000 00000100 00000001 eth0" in first
    assert "if_inet6 20010db8000000000000000000000005 02 40 00 eth0" in first
    assert any(line.endswith("/32 host LOCAL") for line in first)
    # Traffic's cached clones, use and reference counts, duplicate detection's flags and
    # the local routes it adds at its end: no difference.
    counted = IPV6_ROUTE.replace("00000002 00000007", "00000005 00000099")
    assert lines(tmp_path, ipv6_route=counted + CACHED + LOCAL, if_inet6=IF_INET6.replace(" 80 ", " 40 ")) == first


@pytest.mark.parametrize("texts", [
    {"fib_trie": FIB_TRIE.replace("/0 universe UNICAST", "/1 universe UNICAST")},
    {"fib_trie": FIB_TRIE + "Id 100:\n  |-- 0.0.0.0\n     /0 universe UNICAST\n"},
    {"ipv6_route": IPV6_ROUTE + IPV6_ROUTE.splitlines(True)[1].replace("fe80", "fe90")},
    {"ipv6_route": IPV6_ROUTE.splitlines(True)[0]},
    {"if_inet6": IF_INET6 + IF_INET6.replace("05 02", "06 02")},
    {"if_inet6": IF_INET6 + "garbage\n"},
], ids=["v4-route-changed", "v4-table-added", "v6-route-added", "v6-route-removed", "address-added", "unknown-line"])
def test_a_route_or_an_address_added_removed_or_changed_is_a_difference(tmp_path, texts):
    first = lines(tmp_path)
    assert lines(tmp_path, **texts) != first


def test_a_network_that_cannot_be_read_says_which_file(tmp_path):
    os.unlink(os.path.join(proc_tree(tmp_path), "4242", "net", "if_inet6"))
    found, error = _netns_state.network_lines(4242, str(tmp_path))
    assert found is None and "if_inet6" in error and "No such file" in error


def test_this_machines_own_network_reads(tmp_path):
    found, error = _netns_state.network_lines(os.getpid())
    assert error is None and any(line.startswith("netns ") for line in found)
    assert any(line.startswith("fib_trie") for line in found)


def test_pasta_is_found_by_the_namespace_it_holds_open_and_its_identity_read(tmp_path):
    pasta = tmp_path / "pasta"
    # As pasta does: the namespace open on a descriptor (here, this process's own).
    pasta.write_text("#!/bin/sh\nfor a; do last=$a; done\nexec 7<\"$last\"\nsleep 600\n")
    pasta.chmod(0o755)
    other = subprocess.Popen([str(pasta), "--netns", "/dev/null"], start_new_session=True)
    mine = subprocess.Popen([str(pasta), "--config-net", "--netns", "/proc/%d/ns/net" % os.getpid()],
                            start_new_session=True)
    try:
        found = None
        for _attempt in range(200):  # until the shell has started (its name is the script's)
            found = _netns_state.find_pasta(os.getpid())
            if found:
                break
            subprocess.run(["sleep", "0.01"], check=True)
        assert found is not None and found["pid"] == mine.pid
        assert found["argv"][-3:] == ["--config-net", "--netns", "/proc/%d/ns/net" % os.getpid()]
        assert _netns_state.process_identity(mine.pid) == found
    finally:
        for process in (other, mine):
            os.killpg(process.pid, 9)
            process.wait()
    assert _netns_state.process_identity(mine.pid) is None
