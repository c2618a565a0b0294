# SPDX-License-Identifier: GPL-3.0-or-later
"""Every harness recipe's image and warm start (issue 16 item 8).

usage: python3 bench/recipes.py [RUNS]   (as root on the build machine; default 3 runs;
bench/run runs it with the rest)

For each built-in recipe (plugins/module_utils/harness/_recipes.py), in a provisioned
workstation:
  - its image's build, cold from the cached base image (once: minutes; a refresh
    build, without podman's layer cache), as the image role's content_image reports
    it, and the image's size beside the base image's;
  - the warm session start: run_agent.yml, wall time, running the harness's own
    `--version` (every recipe starts its harness that way, with no provider: a prompt
    would measure a provider's answer, and a harness whose provider the gate refuses
    retries for many minutes, as codex does). Beside it, run_agent.yml with the command
    `true` on the same image: the session without the harness.
A measurement, not a test: it asserts nothing.
"""

import json
import re

from measure import median, playbook_argv, row, run_alone, timed
from scenario import ANSIBLE_ENV, PROVISION_VARS, operator_vars
from sessions import image_recipes

PROJECT = "/home/dev/bench-recipes"
BUILD_PLAY = "/home/dev/bench-recipe-image.yml"
# The image role alone, as run_agent.yml includes it, saying what it built and how long it took.
PLAY = """- hosts: localhost
  gather_facts: false
  tasks:
    - name: Build the recipe's image
      ansible.builtin.include_role:
        name: aisb.sandbox.image
      vars:
        image_state_dir: /home/dev/.local/state/aisb
    - name: Say what was built
      ansible.builtin.debug:
        msg: "BENCH-IMAGE {{ ansible_facts['aisb_sandbox_image'] }} {{ image_build.seconds | default('none') }}"
"""


def cold_build(ws, name):
    """(tag, seconds) of a build of recipe NAME's image from the cached base alone: a
    refresh (aisb_refresh), which builds without podman's layer cache, so no layer of an
    earlier build (the tests', another recipe's) is reused."""
    done = ws.run(["ansible-playbook", BUILD_PLAY, "-e", operator_vars(ws), "-e", f"aisb_harness={name}",
                   "-e", "aisb_refresh=true"], env=ANSIBLE_ENV, timeout=3600)
    tag, seconds = re.search(r"BENCH-IMAGE (\S+) (\S+)\"", done.stdout).groups()
    return tag, float(seconds)


def size(ws, image):
    """IMAGE's size in MB (podman's, 10^6 bytes)."""
    return int(ws.run(["podman", "image", "inspect", "--format", "{{.Size}}", image]).stdout) / 1e6


def session_argv(ws, name, command):
    """run_agent.yml with recipe NAME's image running COMMAND."""
    return playbook_argv(ws, "run_agent", "-e", f"aisb_harness={name}", "-e", f"project={PROJECT}",
                         "-e", json.dumps({"command": command}))


def measure(ws, runs):
    """Figure rows for a provisioned workstation WS."""
    ws.sh(f"mkdir -p {PROJECT}")
    ws.path(BUILD_PLAY).write_text(PLAY)
    base_size = size(ws, PROVISION_VARS["aisb_base_image"])
    rows = []
    for name, recipe in image_recipes().items():
        tag, seconds = cold_build(ws, name)
        rows.append(row("recipes", f"{name}: image build, cold from the cached base", round(seconds), "s",
                        runs=1, samples=[seconds]))
        rows.append(row("recipes", f"{name}: image size", round(size(ws, tag)), "MB", round(base_size),
                        "the base image"))
        version = recipe["command"] + ["--version"]
        floor_runs = timed(ws, session_argv(ws, name, ["true"]), runs)
        start_runs = timed(ws, session_argv(ws, name, version), runs)
        rows.append(row("recipes", "%s: `run_agent.yml` warm, `%s`" % (name, " ".join(version)),
                        round(median(start_runs), 2), "s", round(median(floor_runs), 2),
                        "the same with the command `true`", runs=runs, samples=start_runs, floor_samples=floor_runs))
    return rows


if __name__ == "__main__":
    run_alone(measure, 3)
