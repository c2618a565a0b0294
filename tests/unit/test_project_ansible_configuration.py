# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible's configuration in the project: what is read-only, what is reported at any depth,
what review flags, and what a session says about its own ansible-playbook."""

import os

from ansible_collections.aisb.sandbox.plugins.module_utils.project import _project_ansible, _project_layout
from ansible_collections.aisb.sandbox.plugins.module_utils.review import _review_flags


def test_an_existing_configuration_file_and_directory_are_read_only_a_link_is_not(tmp_path):
    assert _project_ansible.read_only(str(tmp_path)) == []
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / ".ansible").symlink_to("elsewhere")
    assert _project_ansible.read_only(str(tmp_path)) == ["ansible.cfg"]
    (tmp_path / ".ansible").unlink()
    (tmp_path / ".ansible").mkdir()
    assert _project_ansible.read_only(str(tmp_path)) == [".ansible", "ansible.cfg"]


def test_new_and_changed_names_are_found_untouched_ones_are_not(tmp_path):
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "ok.py").write_text("print(0)\n")
    (tmp_path / "roles").mkdir()
    before = _project_ansible.snapshot(str(tmp_path))
    assert _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path))) == []
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncallback_plugins = ./callback_plugins\n")
    (tmp_path / "callback_plugins").mkdir()
    size = os.stat(tmp_path / "library" / "ok.py")
    (tmp_path / "library" / "ok.py").write_text("print(1)\n")
    # The agent sets the time back: the change is still seen (ctime).
    os.utime(tmp_path / "library" / "ok.py", ns=(size.st_atime_ns, size.st_mtime_ns))
    found = _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path)))
    assert [(f["path"], f["what"].split(":")[0]) for f in found] == [
        ("ansible.cfg", "new"), ("callback_plugins", "new"), ("library", "changed")]
    assert "imports the plugins it names" in found[0]["what"]
    sentence = _project_ansible.warning("/p", found)
    assert "/p/ansible.cfg" in sentence and "/p/library" in sentence and "before any task" in sentence


def test_a_linked_configuration_is_compared_through_its_link(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "ansible.cfg").symlink_to("conf/ansible.cfg")
    (tmp_path / "conf" / "plugins").mkdir()
    (tmp_path / "callback_plugins").symlink_to("conf/plugins")
    before = _project_ansible.snapshot(str(tmp_path))
    (tmp_path / "conf" / "ansible.cfg").write_text("[defaults]\ncallback_plugins = ./cb\n")
    (tmp_path / "conf" / "plugins" / "agent.py").write_text("")
    found = _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path)))
    assert [f["path"] for f in found] == ["ansible.cfg", "callback_plugins", "conf/ansible.cfg"]


def test_a_directory_past_the_bound_is_reported_not_walked(tmp_path, monkeypatch):
    monkeypatch.setattr(_project_ansible, "MAX_ENTRIES", 3)
    before = _project_ansible.snapshot(str(tmp_path))
    (tmp_path / "roles").mkdir()
    for name in "abcd":
        (tmp_path / "roles" / name).write_text("")
    [found] = _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path)))
    assert found["path"] == "roles" and found["what"].startswith("more than 3 entries, not compared")


def test_review_flags_ansible_names_at_any_depth():
    def flagged(path):
        item = {"path": path, "change": "added", "type": "file", "mode": "644"}
        return [why for why in _review_flags.flags(item, "/nonexistent", "/nonexistent", set()) if why.startswith("Ansible")]
    for path in ("ansible.cfg", "deploy/ansible.cfg", "callback_plugins/x.py", "playbooks/library/m.py",
                 ".ansible/collections/x", "group_vars/all.yml", "roles/web/tasks/main.yml", "collections"):
        assert flagged(path), path
    assert flagged("src/main.py") == [] and flagged("lib/libraryish.py") == []


def test_the_origin_names_what_lies_in_the_project_once():
    found = _project_ansible.origin("/home/dev/app", "/home/dev/app/ansible.cfg", [
        ("callback path", "/home/dev/app/callback_plugins"), ("module path", "/home/dev/app/callback_plugins"),
        ("callback path", "/home/dev/app-other/cb"), ("python", "/usr/bin/python3"),
        ("callback path", "/home/dev/app/callback_plugins")])
    assert found == {"config_file": "/home/dev/app/ansible.cfg", "from_project": [
        "configuration file /home/dev/app/ansible.cfg", "callback path /home/dev/app/callback_plugins",
        "module path /home/dev/app/callback_plugins"]}
    sentence = _project_ansible.origin_warning(found)
    assert "read its configuration from the project" in sentence and "ansible-config dump --only-changed" in sentence
    assert _project_ansible.origin_warning(_project_ansible.origin("/home/dev/app", "/etc/ansible/ansible.cfg", [])) \
        is None and _project_ansible.origin_warning(None) is None


def test_names_at_any_depth_are_found_outside_git_directories(tmp_path):
    (tmp_path / "sub" / "dir").mkdir(parents=True)
    (tmp_path / ".git" / "library").mkdir(parents=True)
    before = _project_ansible.snapshot(str(tmp_path))
    (tmp_path / "sub" / "dir" / "callback_plugins").mkdir()
    (tmp_path / "sub" / "dir" / "callback_plugins" / "x.py").write_text("")
    (tmp_path / "sub" / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / ".git" / "library" / "m.py").write_text("")
    found = _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path)))
    assert [(f["path"], f["what"].split(":")[0]) for f in found] == [
        ("sub/ansible.cfg", "new"), ("sub/dir/callback_plugins", "new")]


def test_the_walk_stops_past_its_bound_and_says_where(tmp_path, monkeypatch):
    deep = tmp_path.joinpath(*"abcdef")
    deep.mkdir(parents=True)
    before = _project_ansible.snapshot(str(tmp_path))
    (deep / "roles").mkdir()
    monkeypatch.setattr(_project_layout, "MAX_DEPTH", 3)
    found = _project_ansible.findings(before, _project_ansible.snapshot(str(tmp_path)))
    assert found == [{"path": "a/b/c/d", "what": "the walk stopped here (more than %d entries or 3 levels): Ansible's "
                      "files beyond it were not looked for" % _project_layout.MAX_ENTRIES}]
