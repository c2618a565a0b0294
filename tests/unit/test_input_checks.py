# SPDX-License-Identifier: GPL-3.0-or-later
"""The input checks: refused before anything starts, with the input named."""

import os

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common._input_checks import (
    InputError, build_environment, check_command, check_project, check_token_budget, resolve_project)

HOME = "/home/dev"
PROTECTED = ["/home/dev/.local/state/aisb", "/run/user/1000"]

BAD_PROJECTS = [
    ("/", "system directory"),
    ("/etc", "system directory"),
    ("/usr", "system directory"),
    ("/home", "system directory"),
    ("/tmp", "system directory"),
    ("/var/lib", "system directory"),
    ("/etc/ssh", "system tree /etc"),
    ("/usr/src/app", "system tree /usr"),
    ("/proc/1", "system tree /proc"),
    ("/sys/fs", "system tree /sys"),
    ("/dev/shm", "system tree /dev"),
    ("/run/user/1000/x", "system tree /run"),
    ("/var/lib/containers", "system tree /var/lib"),
    ("/home/dev", "home directory"),
    ("/home/dev/.ssh", "credentials"),
    ("/home/dev/.ssh/keys", "credentials"),
    ("/home/dev/.local", "credentials"),
    ("/home/dev/.local/state/aisb/sessions", "credentials"),
    ("/home/dev/.config/gh", "credentials"),
    # Every dot-directory directly in the home, listed or not, and anything inside one.
    ("/home/dev/.pi", "dot-directories directly in the home directory"),
    ("/home/dev/.pi/agent", "is /home/dev/.pi or inside it"),
    ("/home/dev/.cache", "dot-directories directly in the home directory"),
    ("/home/dev/.aws", "dot-directories directly in the home directory"),
    ("/home/dev/.kube/config.d", "is /home/dev/.kube or inside it"),
    ("/home/dev/.docker", "dot-directories directly in the home directory"),
    ("/home/dev/.gnupg", "dot-directories directly in the home directory"),
    ("/home/dev/.some-new-tool/cache", "is /home/dev/.some-new-tool or inside it"),
    ("/home/dev/..x", "dot-directories directly in the home directory"),
    ("/srv/a:b", "misread"),
    ("/srv/a,ro", "misread"),
    ("/srv/a\nb", "misread"),
    ("/srv/a\tb", "misread"),
    ("relative/path", "absolute"),
    ("/srv/app/../app", "normalised"),
    ("", "non-empty"),
]


@pytest.mark.parametrize("path,reason", BAD_PROJECTS)
def test_bad_projects_are_refused_with_the_path_named(path, reason):
    with pytest.raises(InputError) as error:
        check_project(path, HOME, PROTECTED)
    assert reason in str(error.value)
    assert repr(path) in str(error.value) or not path


def test_a_dot_directory_refusal_says_what_is_allowed():
    with pytest.raises(InputError) as error:
        check_project("/home/dev/.pi/agent", HOME, PROTECTED)
    assert "name a directory elsewhere, such as /home/dev/src/app" in str(error.value)


# A dot only deeper down, or a dot-directory outside the home, is an ordinary project.
@pytest.mark.parametrize("path", ["/home/dev/src/app", "/srv/projects/x", "/opt/work/app", "/tmp/scratch",
                                  "/home/dev/src/.hidden-app", "/home/dev/src/app/.git", "/srv/.projects/x"])
def test_ordinary_projects_pass(path):
    assert check_project(path, HOME, PROTECTED) == path


def test_resolve_follows_symlinks_to_what_is_really_mounted(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    link = home / "innocent"
    link.symlink_to(home / ".ssh")
    with pytest.raises(InputError, match="credentials"):
        resolve_project(str(link), str(home))


def test_resolve_requires_an_existing_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not an existing directory"):
        resolve_project(str(tmp_path / "file"), "/nonexistent-home")
    with pytest.raises(InputError, match="not an existing directory"):
        resolve_project(str(tmp_path / "missing"), "/nonexistent-home")


def test_a_path_cut_at_a_space_is_named_with_the_json_form(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "src" / "with space").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    # What -e project=~/src/with space hands the module: the value up to the space.
    for raw, whole in [("~/src/with", "~/src/with space"), (str(home / "src" / "with"), str(home / "src" / "with space"))]:
        with pytest.raises(InputError) as error:
            resolve_project(raw, str(home))
        message = str(error.value)
        assert "%r (resolved to %r) is not an existing directory" % (raw, str(home / "src" / "with")) in message
        assert "looks cut at a space" in message
        assert """-e '{"project": "%s"}'""" % whole in message


@pytest.mark.parametrize("missing", ["other", "wit", "with-space"])
def test_a_missing_path_without_a_longer_name_gets_no_space_hint(tmp_path, missing):
    (tmp_path / "with space").mkdir()
    with pytest.raises(InputError, match="not an existing directory") as error:
        resolve_project(str(tmp_path / missing), "/nonexistent-home")
    assert "cut at a space" not in str(error.value)


def test_resolve_expands_the_tilde(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "src" / "app").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert resolve_project("~/src/app", str(home)) == os.path.realpath(home / "src" / "app")


@pytest.mark.parametrize("name", ["", "1ABC", "A-B", "A B", "A=B", "A\nB", "Ä", None, 3, "HTTPS_PROXY", "no_proxy"])
def test_bad_environment_names_are_refused(name):
    with pytest.raises(InputError) as error:
        build_environment({name: "x"}, [], {})
    assert repr(name) in str(error.value)


def test_pass_through_takes_only_named_variables_from_the_controller():
    controller = {"ANTHROPIC_API_KEY": "k", "SECRET": "s"}
    assert build_environment({"A": "1"}, ["ANTHROPIC_API_KEY"], controller) == {"A": "1", "ANTHROPIC_API_KEY": "k"}


def test_pass_through_of_an_unset_variable_is_refused():
    with pytest.raises(InputError, match="'MISSING' is not set"):
        build_environment({}, ["MISSING"], {})


def test_environment_values_must_be_strings_without_nul():
    with pytest.raises(InputError, match="NUL"):
        build_environment({"A": "x\0y"}, [], {})
    with pytest.raises(InputError, match="must be a string"):
        build_environment({"A": 1}, [], {})


@pytest.mark.parametrize("argv", ["echo hi", [1], ["a\0b"], None])
def test_harness_argv_must_be_a_list_of_strings(argv):
    with pytest.raises(InputError):
        check_command(argv)


def test_shell_metacharacters_are_passed_as_they_are():
    argv = ["sh", "-c", "echo $HOME; rm -rf / `x`"]
    assert check_command(argv) is argv


@pytest.mark.parametrize("first", ["--allow-unenforced", "--check", "-x", "FOO=bar", "", "A=B=C"])
def test_the_first_word_must_name_a_program(first):
    # The entrypoint takes a leading '-' word as its own flag; env(1) after the drop
    # takes a word with '=' for a variable.
    with pytest.raises(InputError, match="must name a program"):
        check_command([first, "bash"])


def test_later_words_may_look_like_flags_or_variables():
    argv = ["bash", "--allow-unenforced", "A=B", "-"]
    assert check_command(argv) is argv


@pytest.mark.parametrize("text,expected", [('{"A": "0"}', {"A": "0"}), ({"B": "1"}, {"B": "1"}), (None, {})])
def test_environment_is_a_dict_or_its_json_text(text, expected):
    assert build_environment(text, [], {}) == expected


@pytest.mark.parametrize("text", ["[1]", "not json", "5"])
def test_environment_text_that_is_no_dict_is_refused(text):
    with pytest.raises(InputError, match="environment"):
        build_environment(text, [], {})


@pytest.mark.parametrize("budget", [0, -5, True, "50000", 1.5])
def test_a_token_budget_is_a_whole_number_of_tokens(budget):
    with pytest.raises(InputError, match=r"^aisb_token_budget must be a whole number of tokens, 1 or more, "
                                         r"got %s$" % repr(budget).replace(".", r"\.")):
        check_token_budget(budget)
    assert check_token_budget(1) == 1 and check_token_budget(None) is None
