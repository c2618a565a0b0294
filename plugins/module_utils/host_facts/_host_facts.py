# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's capability facts: where they live, what they depend on, when to trust them.

Plain functions, no AnsibleModule: the host_capabilities module and the session action
plugin both use them. Commands go through a RUN callable, RUN(argv) -> (rc, stdout,
stderr), so the caller decides how and where they execute.
"""

import calendar
import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _files, _host_tools, _podman, _state_layout

# 2: verdict.no_gate_holds, and the sandbox probes record the network they ran on.
# 3: probes.tcp_forward_sandbox (the sandbox probes on the -T gate path).
# 4: probes.seccomp_profile (the sandbox's seccomp profile holds), needed by the verdict.
SCHEMA_VERSION = 4
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# The probe image the last network check used carries this name too, so the fingerprint can
# name "the probe image" without knowing how it was chosen.
PROBE_IMAGE_ALIAS = "localhost/aisb-probe:current"
FINGERPRINT_KEYS = ("podman", "passt", "runtime", "kernel", "distro", "probe_image")


def format_time(epoch):
    return time.strftime(TIME_FORMAT, time.gmtime(epoch))


def parse_time(text):
    """Seconds since the epoch for a TIME_FORMAT string; ValueError otherwise."""
    return calendar.timegm(time.strptime(text, TIME_FORMAT))


def load(path):
    """The facts stored at PATH, or None when there are none to read."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def save(path, facts):
    """Write FACTS to PATH atomically, readable by the user only."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    _files.write_whole(path, json.dumps(facts, indent=2, sort_keys=True) + "\n", 0o600)


def local_fact_current(path, facts):
    """Whether the local fact file at PATH (fleet reporting's copy, 0644) holds FACTS."""
    try:
        if os.stat(path).st_mode & 0o7777 != 0o644:
            return False
    except OSError:
        return False
    return load(path) == facts


def change_key(facts):
    """What a new measurement must change to count as a change: not the time, the
    evidence or the wording."""
    if not facts:
        return None
    decision = dict((facts.get("verdict") or {}), reasons=None, notes=None)
    return (facts.get("fingerprint"), facts.get("probe_source"), decision,
            dict((name, entry.get("ok")) for name, entry in (facts.get("probes") or {}).items()))


def _podman_info(run, podman):
    rc, out, _err = run(_podman.info(podman))
    if rc != 0:
        return {}
    try:
        return json.loads(out)
    except ValueError:
        return {}


def _pasta_version(run, host):
    # podman 5 reports the passt package; `pasta --version` prints nothing when its
    # output is not a terminal (measured with passt 2025-05-03), so it is the fallback.
    package = (host.get("pasta") or {}).get("package") or ""
    if package:
        return package
    pasta = _host_tools.resolve("pasta")[0]
    if not pasta:
        return ""
    rc, out, err = run([pasta, "--version"])
    return (out or err).strip().splitlines()[0] if rc == 0 and (out or err).strip() else ""


def current_fingerprint(run, probe_image=PROBE_IMAGE_ALIAS, podman="podman", environ=None):
    """What the measured capabilities depend on, recomputed without starting a container.

    Returns {podman, passt, runtime, kernel, distro, probe_image, hash}: versions as
    podman reports them ("" when unknown), probe_image as an image ID (it covers the
    nftables inside it), hash = sha256 over the other keys. With ENVIRON, the result
    also becomes cached_fingerprint()'s, so a fresh measurement is never outlived by an
    older cached one.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Each podman command pays podman's start-up: the two overlap instead of adding up.
        image_id = pool.submit(run, _podman.image_id(podman, probe_image))
        info = _podman_info(run, podman)
        rc, out, _err = image_id.result()
    host = info.get("host") or {}
    runtime = host.get("ociRuntime") or {}
    distro = host.get("distribution") or {}
    fingerprint = {
        "podman": (info.get("version") or {}).get("Version", ""),
        "passt": _pasta_version(run, host),
        # "crun version 1.21": the first line names the runtime and its version.
        "runtime": ((runtime.get("version") or "").splitlines() or [runtime.get("name", "")])[0],
        "kernel": host.get("kernel", ""),
        "distro": " ".join(filter(None, [distro.get("distribution", ""), distro.get("version", "")])),
        "probe_image": out.strip() if rc == 0 else "",
    }
    fingerprint["hash"] = fingerprint_hash(fingerprint)
    if environ is not None:
        # The executables podman runs may live outside PATH (helper_binaries_dir).
        executables = [(host.get("conmon") or {}).get("path"), runtime.get("path"),
                       (host.get("pasta") or {}).get("executable")]
        _save_fingerprint_cache(environ, podman, sorted(filter(None, executables)), fingerprint,
                                image_store_file(info))
    return fingerprint


def host_key(environ, podman="podman", executables=()):
    """What podman info's part of the fingerprint stands on, read without podman: the
    kernel (uname), /etc/os-release, the podman, pasta, OCI runtime and conmon executables
    (on ENVIRON's PATH, the system's for a session: _host_env; and EXECUTABLES: where
    podman info last said they are) and podman's containers.conf and storage.conf files,
    each by inode, size and times (a package upgrade replaces the file), and
    XDG_DATA_HOME (where a rootless podman's image store lives unless storage.conf says).
    Equal keys: what podman info reports, its image store's place included, is unchanged."""
    search = environ.get("PATH") or os.defpath
    programs = [shutil.which(name, path=search) or name for name in (podman, "pasta", "passt", "crun", "runc", "conmon")]
    programs += list(executables)
    config_home = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME", "~"), ".config")
    configs = [environ.get("CONTAINERS_CONF", ""), environ.get("CONTAINERS_STORAGE_CONF", "")]
    for directory in ("/usr/share/containers", "/etc/containers", os.path.join(config_home, "containers")):
        drop_ins = os.path.join(directory, "containers.conf.d")
        configs += [os.path.join(directory, "containers.conf"), os.path.join(directory, "storage.conf"), drop_ins]
        configs += sorted(os.path.join(drop_ins, name) for name in _listdir(drop_ins))
    files = [[path] + (_file_stat(path) or [None]) for path in programs + ["/etc/os-release"] + configs]
    return {"uname": list(os.uname()), "files": files, "data_home": environ.get("XDG_DATA_HOME")}


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def cached_fingerprint(run, environ, probe_image=PROBE_IMAGE_ALIAS, podman="podman"):
    """current_fingerprint(), kept in the state directory for as long as host_key() is
    unchanged: podman info costs more than everything else a session checks before it
    starts. The probe image's ID is kept for as long as podman's image store file is
    unchanged too (any tag, build or removal rewrites it), else read afresh."""
    try:
        with open(_state_layout.fingerprint_cache_path(environ)) as handle:
            cache = json.load(handle)
    except (OSError, ValueError):
        cache = None
    if (isinstance(cache, dict) and isinstance(cache.get("fingerprint"), dict)
            and isinstance(cache.get("executables"), list) and "image_store" in cache
            and cache.get("key") == host_key(environ, podman, cache["executables"])):
        fingerprint = dict(cache["fingerprint"], probe_image=_cached_probe_image(run, environ, cache, probe_image, podman))
        fingerprint["hash"] = fingerprint_hash(fingerprint)
        return fingerprint
    return current_fingerprint(run, probe_image, podman, environ)


def _cached_probe_image(run, environ, cache, probe_image, podman):
    """The probe image's ID: the cache's while the image store file has the stat it had
    before that ID was read; else podman's answer, kept when the store file itself holds
    it under PROBE_IMAGE's name (an image from an additional store is read every time)."""
    store = cache.get("image_store")
    before = _file_stat(store) if isinstance(store, str) else None
    kept = cache.get("probe_image")
    if before is not None and isinstance(kept, dict) and kept.get("store_stat") == before:
        return kept.get("id", "")
    rc, out, _err = run(_podman.image_id(podman, probe_image))
    image = out.strip() if rc == 0 else ""
    if before is not None and image and _store_names(store, image, probe_image):
        _write_fingerprint_cache(environ, dict(cache, probe_image={"id": image, "store_stat": before}))
    return image


def image_store_file(info):
    """The file podman's image store keeps its images and their names in, from podman
    info (containers/storage: GRAPH_ROOT/DRIVER-images/images.json); None if unknown."""
    store = info.get("store") or {}
    if not store.get("graphRoot") or not store.get("graphDriverName"):
        return None
    return os.path.join(store["graphRoot"], "%s-images" % store["graphDriverName"], "images.json")


def _file_stat(path):
    """PATH's inode, size and times (a file replaced or written changes one), None if it cannot be read."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _store_names(path, image, name):
    """Whether the image store file at PATH lists IMAGE (an ID) under NAME."""
    try:
        with open(path) as handle:
            images = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(images, list) and any(
        isinstance(entry, dict) and entry.get("id") == image and name in (entry.get("names") or ())
        for entry in images)


def _save_fingerprint_cache(environ, podman, executables, fingerprint, image_store):
    _write_fingerprint_cache(environ, {
        "key": host_key(environ, podman, executables), "executables": executables, "image_store": image_store,
        "fingerprint": dict((k, fingerprint[k]) for k in FINGERPRINT_KEYS if k != "probe_image")})


def _write_fingerprint_cache(environ, cache):
    path = _state_layout.fingerprint_cache_path(environ)
    try:
        os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
        _files.write_whole(path, json.dumps(cache))
    except OSError:
        pass  # Only a cache: the next session measures again.


def fingerprint_hash(fingerprint):
    canonical = json.dumps(dict((k, fingerprint.get(k, "")) for k in FINGERPRINT_KEYS), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def stale_reasons(facts, fingerprint, now, max_age, schema_version=SCHEMA_VERSION):
    """Why FACTS cannot stand for this host now (empty list: they can).

    FINGERPRINT comes from current_fingerprint(); NOW is seconds since the epoch;
    MAX_AGE is in seconds. The verdict itself is not judged here.
    """
    fix = "run provision.yml (or aisb.sandbox.host_capabilities with cached=false) as this user"
    if not facts:
        return ["aisb_host facts are missing: %s." % fix]
    if facts.get("schema_version") != schema_version:
        return ["aisb_host.schema_version is %r but this collection reads %r: %s."
                % (facts.get("schema_version"), schema_version, fix)]
    recorded = facts.get("fingerprint") or {}
    # The recorded values are recomputed too: a hash that no longer matches its own
    # values means the file was edited, and is as stale as a changed host.
    if recorded.get("hash") != fingerprint.get("hash") or fingerprint_hash(recorded) != fingerprint.get("hash"):
        changes = ["%s %r -> %r" % (key, recorded.get(key, ""), fingerprint.get(key, ""))
                   for key in FINGERPRINT_KEYS if recorded.get(key, "") != fingerprint.get(key, "")]
        return ["aisb_host.fingerprint is stale (%s): the host changed since it was measured; %s."
                % (", ".join(changes) or "hash differs", fix)]
    try:
        age = now - parse_time(facts.get("measured_at") or "")
    except ValueError:
        return ["aisb_host.measured_at %r is not a time: %s." % (facts.get("measured_at"), fix)]
    if age > max_age:
        return ["aisb_host.measured_at is %s, %d s ago, older than the %d s allowed: %s."
                % (facts["measured_at"], age, max_age, fix)]
    return []


def check_host_facts(facts, fingerprint, now, max_age, schema_version=SCHEMA_VERSION, network="allow"):
    """Every reason not to start a sandbox on these facts, each naming the fact and the fix.

    Empty list: the facts are current and say the enforcement NETWORK needs holds: the
    networking model, or for network no-gate the table on plain pasta (no_gate_holds).
    """
    problems = stale_reasons(facts, fingerprint, now, max_age, schema_version)
    verdict = (facts or {}).get("verdict") or {}
    holds = "no_gate_holds" if network == "no-gate" else "model_holds"
    if not problems and verdict.get(holds) is not True:
        reasons = verdict.get("reasons") or ["no reason recorded"]
        problems.append("aisb_host.verdict.%s is false on this host: %s" % (holds, " ".join(reasons)))
    return problems
