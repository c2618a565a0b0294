# SPDX-License-Identifier: GPL-3.0-or-later
"""Image tags: the hash of every build input; any single change moves it, none keeps it."""

import copy

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._content_hash import (
    build_inputs, content_hash, image_tag)

FILES = {
    "Containerfile": b"FROM localhost/aisb-base:trixie\nRUN true\n",
    "entrypoint": b"#!/bin/bash\nexec \"$@\"\n",
    "ruleset.nft": b"table inet aisb {}\n",
    "ca/0-custom-ca.crt": b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
}
BASE_ID = "sha256:" + "ab" * 32
BUILD_ARGS = {"HTTP_PROXY": ""}
RECIPE = {"recipe": {"packages": ["nodejs"], "install": ["npm i -g x@1"], "command": ["pi"],
                     "allow": ["api.anthropic.com"], "env": ["ANTHROPIC_API_KEY"]}}
# Pinned: a change here means every existing image would be rebuilt. Only change it
# together with SCHEME, on purpose.
GOLDEN = "76135cc27bd6034ca65f3db7939f42ee2c7fee78208a805106d6ae9f410b232e"


def digest(files=None, base=BASE_ID, args=None, extra=None):
    return content_hash(build_inputs(FILES if files is None else files, base,
                                     BUILD_ARGS if args is None else args, RECIPE if extra is None else extra))


def test_golden_hash():
    assert digest() == GOLDEN
    assert image_tag("localhost/aisb-sandbox", GOLDEN) == "localhost/aisb-sandbox:" + GOLDEN[:16]


def test_golden_hash_of_nothing():
    assert content_hash(build_inputs({}, "")) == "8b0eeedf228f85ab437ef878ed90308a8a2ab035ff8ef6339f189eb7505abfe6"


def test_unchanged_inputs_keep_the_hash():
    assert digest(dict(reversed(list(FILES.items()))), extra=copy.deepcopy(RECIPE)) == GOLDEN


def single_changes():
    for path in FILES:
        yield "content of " + path, dict(FILES, **{path: FILES[path] + b" "}), BASE_ID, BUILD_ARGS, RECIPE
        renamed = dict(FILES)
        renamed[path + ".orig"] = renamed.pop(path)
        yield "name of " + path, renamed, BASE_ID, BUILD_ARGS, RECIPE
    yield "added file", dict(FILES, **{"ca/1-more.crt": b"x"}), BASE_ID, BUILD_ARGS, RECIPE
    yield "removed CA", {k: v for k, v in FILES.items() if not k.startswith("ca/")}, BASE_ID, BUILD_ARGS, RECIPE
    yield "base image", FILES, "sha256:" + "cd" * 32, BUILD_ARGS, RECIPE
    yield "build arg value", FILES, BASE_ID, {"HTTP_PROXY": "x"}, RECIPE
    yield "build arg added", FILES, BASE_ID, dict(BUILD_ARGS, NO_PROXY=""), RECIPE
    for key in RECIPE["recipe"]:
        changed = copy.deepcopy(RECIPE)
        changed["recipe"][key] = changed["recipe"][key] + ["x"]
        yield "recipe " + key, FILES, BASE_ID, BUILD_ARGS, changed


@pytest.mark.parametrize("what,files,base,args,extra", list(single_changes()), ids=lambda v: v if isinstance(v, str) else "")
def test_any_single_change_moves_the_hash(what, files, base, args, extra):
    assert digest(files, base, args, extra) != GOLDEN, what


def test_every_single_change_gives_a_distinct_tag():
    tags = {image_tag("r", digest(f, b, a, e)) for _w, f, b, a, e in single_changes()}
    assert len(tags) == len(list(single_changes()))


def test_inputs_record_digests_not_contents():
    inputs = build_inputs(FILES, BASE_ID, BUILD_ARGS, RECIPE)
    assert sorted(inputs["files"]) == sorted(FILES)
    assert all(len(value) == 64 for value in inputs["files"].values())
    assert inputs["base_image_id"] == BASE_ID and inputs["extra"] == RECIPE
