# SPDX-License-Identifier: GPL-3.0-or-later
"""Ubuntu's AppArmor restriction of user namespaces (issue 32, item 4), tested where it can
be without Ubuntu: the role's AppArmor profile parses with Debian 13's apparmor_parser,
and on kernel switches that say "restricted" (a directory standing in for
/proc/sys/kernel) the role grants user namespaces with that profile and leaves the
switch alone, unless host_apparmor_userns_sysctl, which writes the switch and says so."""

import json

import pytest

from scenario import ANSIBLE_ENV

ROLE = "/home/dev/.ansible/collections/ansible_collections/aisb/sandbox/roles/host"
SWITCHES = "/home/dev/fake-sysctl"
PLAY = """
- name: The host role's user namespace tasks
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run them
      ansible.builtin.include_role:
        name: aisb.sandbox.host
        tasks_from: userns
"""


@pytest.fixture(scope="module")
def parser(workstation):
    workstation.run(["sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q apparmor >/dev/null"],
                    user="root", timeout=600)
    return "/usr/sbin/apparmor_parser"


def test_the_profile_parses_with_apparmor_parser(workstation, parser):
    rendered = "/home/dev/aisb-userns"
    done = workstation.run(["ansible", "localhost", "-m", "ansible.builtin.template", "-e", f"@{ROLE}/vars/main.yml",
                            "-a", json.dumps({"src": f"{ROLE}/templates/aisb-userns.apparmor.j2", "dest": rendered,
                                              "validate": f"{parser} -Q -K %s"})],
                           check=False, env=ANSIBLE_ENV)
    assert done.returncode == 0, done.stdout[-3000:]
    text = workstation.path(rendered).read_text()
    for program in ("/usr/bin/podman", "/usr/bin/crun", "/usr/bin/pasta", "/usr/libexec/podman/conmon"):
        assert f"profile aisb-userns{program.replace('/', '-')} {program} flags=(unconfined) {{\n  userns,\n}}" in text
    # The control: the parser refuses a broken profile (so the validation can fail).
    workstation.path(rendered + ".broken").write_text(text.replace("userns,", "userns"))
    assert workstation.run([parser, "-Q", "-K", rendered + ".broken"], check=False).returncode != 0


@pytest.mark.parametrize("sysctl", [False, True])
def test_on_a_restricting_host_the_role_grants_podman_alone_unless_told(workstation, sysctl):
    workstation.sh(f"mkdir -p {SWITCHES} && echo 1 >{SWITCHES}/apparmor_restrict_unprivileged_userns "
                   f"&& echo 0 >{SWITCHES}/unprivileged_userns_clone")
    workstation.path("/home/dev/userns-play.yml").write_text(PLAY)
    done = workstation.run(["ansible-playbook", "/home/dev/userns-play.yml", "--check", "--diff",
                            "-e", json.dumps({"host_sysctl_dir": SWITCHES, "host_apparmor_userns_sysctl": sysctl})],
                           check=False, env=ANSIBLE_ENV)
    assert done.returncode == 0, done.stdout[-3000:]
    out = done.stdout
    grant = out.split("TASK [aisb.sandbox.host : Grant user namespaces to rootless podman's programs only", 1)[1]
    grant = grant.split("TASK [", 1)[0]
    assert "kernel.unprivileged_userns_clone = 1" in out
    if sysctl:
        assert "kernel.apparmor_restrict_unprivileged_userns = 0" in out
        assert "lifts the restriction of unprivileged user namespaces for every program on this host" in out
        assert "skipping:" in grant
    else:
        assert "kernel.apparmor_restrict_unprivileged_userns" not in out
        # Check mode: the profile would be written (its diff shows it), nothing is loaded.
        assert "changed: [localhost]" in grant and "+profile aisb-userns-usr-bin-podman /usr/bin/podman" in grant


def task_output(out, task):
    """What OUT says under the host role's task named TASK (to the next task)."""
    return out.split(f"TASK [aisb.sandbox.host : {task}", 1)[1].split("TASK [", 1)[0]


def run_userns_tasks(workstation, switches, sysctl=False):
    """The role's userns tasks in check mode with --diff, over SWITCHES ({name: value}) as the kernel's."""
    workstation.sh(f"rm -rf {SWITCHES} && mkdir -p {SWITCHES}")
    for name, value in switches.items():
        workstation.path(f"{SWITCHES}/{name}").write_text(f"{value}\n")
    workstation.path("/home/dev/userns-play.yml").write_text(PLAY)
    done = workstation.run(["ansible-playbook", "/home/dev/userns-play.yml", "--check", "--diff",
                            "-e", json.dumps({"host_sysctl_dir": SWITCHES, "host_apparmor_userns_sysctl": sysctl})],
                           check=False, env=ANSIBLE_ENV)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def test_a_switch_an_earlier_provision_turned_off_still_gets_the_profile(workstation):
    """Ubuntu's switch reading 0 (an earlier provision wrote the sysctl): the profile is
    installed all the same and the switch left out of the sysctl file, so the next boot,
    which no longer lifts the restriction, keeps rootless podman working."""
    out = run_userns_tasks(workstation, {"apparmor_restrict_unprivileged_userns": 0, "unprivileged_userns_clone": 1})
    grant = task_output(out, "Grant user namespaces to rootless podman's programs only")
    assert "changed: [localhost]" in grant and "+profile aisb-userns-usr-bin-podman /usr/bin/podman" in grant, grant
    assert "kernel.apparmor_restrict_unprivileged_userns" not in task_output(out, "Set them")


@pytest.fixture
def old_sysctl_file(workstation):
    """/etc/sysctl.d/60-aisb-userns.conf as an earlier provision with the AppArmor sysctl
    left it; the workstation's own file is put back after."""
    path = workstation.path("/etc/sysctl.d/60-aisb-userns.conf")
    kept = path.read_text() if path.exists() else None
    path.write_text("# aisb.sandbox: rootless podman needs unprivileged user namespaces.\n"
                    "kernel.apparmor_restrict_unprivileged_userns = 0\n")
    yield path
    if kept is None:
        path.unlink()
    else:
        path.write_text(kept)


def test_the_old_sysctl_file_goes_when_no_switch_is_wanted(workstation, old_sysctl_file):
    """A kernel with Ubuntu's switch alone and the sysctl not asked for: no switch is set,
    so the file an earlier provision wrote (lifting the restriction for every program,
    for good) is removed, and the profile takes its place."""
    out = run_userns_tasks(workstation, {"apparmor_restrict_unprivileged_userns": 1})
    assert "skipping:" in task_output(out, "Set them")
    assert "changed: [localhost]" in task_output(out, "Remove the switches an earlier provision set")
    assert "changed: [localhost]" in task_output(out, "Grant user namespaces to rootless podman's programs only")
    # Check mode: the file is still there; the run said it would go.
    assert old_sysctl_file.exists()


def test_the_sysctl_file_stays_when_a_switch_is_wanted(workstation, old_sysctl_file):
    """The control: with Debian's switch present the file is rewritten, not removed."""
    out = run_userns_tasks(workstation, {"apparmor_restrict_unprivileged_userns": 1, "unprivileged_userns_clone": 0})
    assert "skipping:" in task_output(out, "Remove the switches an earlier provision set")
    assert "kernel.unprivileged_userns_clone = 1" in task_output(out, "Set them")
