# SPDX-License-Identifier: GPL-3.0-or-later
"""aisb.sandbox.session_images over a fake podman: what the image and gate roles gave for
a key is found only while every image and base it names is still so and its policy's
directory exists; remembering keeps the newest; any build forgets it all."""

import json
import os

import pytest

from fake_podman import fake_podman

from ansible_collections.aisb.sandbox.plugins.module_utils.common._runner import Runner
from ansible_collections.aisb.sandbox.plugins.module_utils.images import _session_images
from ansible_collections.aisb.sandbox.plugins.modules import content_image, session_images

pytestmark = pytest.mark.usefixtures("programs_as_named")

SANDBOX, GATE, BASE = "localhost/aisb-sandbox:1", "localhost/aisb-gate:2", "localhost/base:1"
BASE_ID = "sha256:" + BASE.replace("/", "-")


def params(tmp_path, key="k1", remember=None):
    return dict(key=key, remember=remember, images_dir=str(tmp_path / "images"), executable="podman")


def remembered(tmp_path, key="k1", bases=None):
    policy = tmp_path / "policies" / "abc"
    policy.mkdir(parents=True, exist_ok=True)
    entry = dict(image=SANDBOX, gate_image=GATE, policy_dir=str(policy), bases=bases or {BASE: BASE_ID})
    session_images.execute(params(tmp_path, key, entry), False, Runner(fake_podman()), {})
    return policy


def find(tmp_path, images=(SANDBOX, GATE, BASE), key="k1", check_mode=False):
    run = Runner(fake_podman(images))
    return session_images.execute(params(tmp_path, key), check_mode, run, {}), run.commands


def test_a_remembered_entry_is_found_as_the_roles_facts_with_one_podman_call(tmp_path):
    policy = remembered(tmp_path)
    os.utime(policy, (0, 0))
    result, commands = find(tmp_path)
    assert result["found"] is True and result["ansible_facts"] == {
        "aisb_sandbox_image": SANDBOX, "aisb_gate_image": GATE, "aisb_policy_dir": str(policy)}
    assert commands == [["podman", "image", "inspect", "--format", "{{.Id}}", BASE, SANDBOX, GATE]]
    assert os.stat(policy).st_mtime > 0  # marked used, as gate_policy marks it


def test_nothing_is_found_for_another_key_a_missing_image_or_policy_or_a_moved_base(tmp_path):
    policy = remembered(tmp_path)
    assert find(tmp_path, key="k2")[0]["found"] is False
    assert find(tmp_path, images=(SANDBOX, BASE))[0]["found"] is False
    assert find(tmp_path, images=(GATE, BASE))[0]["found"] is False
    assert find(tmp_path, images=(SANDBOX, GATE))[0]["found"] is False
    # The base reference now names another image than the one the images were built from.
    remembered(tmp_path, bases={BASE: "sha256:older"})
    assert find(tmp_path)[0]["found"] is False
    remembered(tmp_path)
    os.rmdir(policy)
    assert find(tmp_path)[0]["found"] is False


def test_an_entry_of_another_shape_is_no_entry(tmp_path):
    path = tmp_path / "images" / _session_images.FILE
    path.parent.mkdir()
    for entry in ({"image": SANDBOX}, {"image": SANDBOX, "gate_image": GATE, "policy_dir": str(tmp_path), "bases": {}},
                  {"image": 1, "gate_image": GATE, "policy_dir": str(tmp_path), "bases": {BASE: BASE_ID}}, "x"):
        path.write_text(json.dumps({"k1": entry}))
        assert find(tmp_path)[0]["found"] is False
    path.write_text("not json")
    assert find(tmp_path)[0]["found"] is False


def test_no_key_a_refresh_finds_and_remembers_nothing(tmp_path):
    result, commands = find(tmp_path, key=None)
    assert result["found"] is False and commands == []
    remembered(tmp_path, key=None)
    assert not (tmp_path / "images" / _session_images.FILE).exists()


def test_check_mode_finds_but_remembers_and_marks_nothing(tmp_path):
    policy = remembered(tmp_path)
    os.utime(policy, (0, 0))
    assert find(tmp_path, check_mode=True)[0]["found"] is True and os.stat(policy).st_mtime == 0
    entry = dict(image=SANDBOX, gate_image=GATE, policy_dir=str(policy), bases={BASE: BASE_ID})
    session_images.execute(params(tmp_path, "k2", entry), True, Runner(fake_podman()), {})
    assert set(json.loads((tmp_path / "images" / _session_images.FILE).read_text())) == {"k1"}


def test_the_newest_entries_are_kept(tmp_path, monkeypatch):
    clock = iter(range(1000, 2000))
    monkeypatch.setattr(_session_images.time, "time", lambda: next(clock))
    for number in range(_session_images.KEEP + 3):
        remembered(tmp_path, key="k%d" % number)
    kept = json.loads((tmp_path / "images" / _session_images.FILE).read_text())
    assert sorted(kept) == sorted("k%d" % n for n in range(3, _session_images.KEEP + 3))


def test_an_image_build_forgets_every_entry_and_a_found_tag_forgets_none(tmp_path):
    remembered(tmp_path)
    context = tmp_path / "context"
    build = dict((name, spec.get("default")) for name, spec in content_image.argspec().items())
    build.update(name="localhost/aisb-sandbox", context=str(context), base_image=BASE, fact_name="aisb_sandbox_image",
                 records_dir=str(tmp_path / "images"), log_dir=str(tmp_path / "logs"),
                 files=[{"path": "Containerfile", "content": "FROM scratch\n", "mode": "0644"}])
    checked = content_image.execute(build, True, Runner(fake_podman({BASE})), {"HOME": str(tmp_path)})
    assert checked["built"] is True and find(tmp_path)[0]["found"] is True  # check mode writes nothing
    built = content_image.execute(build, False, Runner(fake_podman({BASE})), {"HOME": str(tmp_path)})
    assert built["built"] is True and built["ansible_facts"]["aisb_sandbox_image_base_image"] == BASE
    assert not (tmp_path / "images" / _session_images.FILE).exists()
    remembered(tmp_path)
    again = content_image.execute(build, False, Runner(fake_podman({BASE, built["image"]})), {"HOME": str(tmp_path)})
    assert again["built"] is False and find(tmp_path)[0]["found"] is True
