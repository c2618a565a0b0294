# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake podman for the unit tests: a Runner's EXECUTE that answers like podman on a
host where everything holds, starting nothing."""

import json

INFO = {"version": {"Version": "5.4.2"},
        "host": {"security": {"rootless": True}, "kernel": "6.18.44",
                 "distribution": {"distribution": "debian", "version": "13"},
                 "ociRuntime": {"name": "crun", "version": "crun version 1.21"}, "pasta": {"package": "passt"}}}
# What a probe container prints on a host where everything holds (the listeners decide the rest).
SCRIPT_OUTPUT = ("started\npeer=10.0.0.1\ntarget=169.254.1.2\ntable=installed\nflush=1\nuid=1000\n"
                 "CapEff=0000000000000000\nCapBnd=0000000000000000\nCapAmb=0000000000000000\nNoNewPrivs=1\n"
                 "write=ok\npids.max=64\nmemory.max=268435456\ncpu.max=50000 100000\nnft=1\n")


def fake_podman(images=("localhost/base:1",)):
    """execute(argv, timeout) answering like podman; images: what it has."""
    images = set(images)

    def execute(argv, timeout=None):
        if argv[1:3] == ["info", "--format"]:
            return 0, json.dumps(INFO), ""
        if argv[1] == "unshare":
            return 0, "0 1000 1\n1 100000 65536\n0 1000 1\n1 100000 65536\n", ""
        if argv[1:3] == ["image", "exists"]:
            return (0 if argv[3] in images else 1), "", ""
        if argv[1:3] == ["image", "inspect"]:
            references = argv[5:]
            return ((0, "".join("sha256:%s\n" % ref.replace("/", "-") for ref in references), "")
                    if set(references) <= images else (125, "", ""))
        if argv[1] == "build":
            images.add(argv[argv.index("--tag") + 1])
            return 0, "", ""
        if argv[1] == "tag":
            images.add(argv[3])
            return 0, "", ""
        if argv[1] in ("network", "rm"):
            return 0, "", ""
        if argv[1] == "inspect":
            return 0, "10.89.0.2\n", ""
        if argv[1] == "run":
            return 0, SCRIPT_OUTPUT, ""
        if argv[0] == "pasta":
            return 0, "", ""
        raise AssertionError(argv)

    return execute
