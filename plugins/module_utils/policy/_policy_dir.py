# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A rendered policy directory (policies/<hash>/): what gate_policy writes, and what a
session reads back.

Two files: squid-policy.conf, the gate's policy part, and policy.json, the entries as
the operator gave them and what they parsed to. A session takes its one policy from
the directory: policy.json's entries parsed again, and refused unless the record and
squid's part both are what those entries render to, so the gate's names and the
sandbox's pins cannot disagree.
"""

import json
import os

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _content_hash
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._policy import PolicyError, parse_policy
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import render_policy_conf
from ansible_collections.aisb.sandbox.plugins.module_utils.common._state_layout import SQUID_POLICY_CONF

POLICY_RECORD = "policy.json"
# In the directory's hash: a change to what is rendered makes a new directory.
POLICY_SCHEME = "aisb-policy-1"


def policy_hash(directory):
    """The policy's (shortened) hash: its directory's name, a trailing slash aside."""
    return os.path.basename(directory.rstrip("/"))


def policy_record(allow_entries, policy):
    """What policy.json keeps of POLICY, parsed from ALLOW_ENTRIES: the entries as given
    (read_policy parses them again) and what they became."""
    record = {"allow": sorted(allow_entries), "connect_ports": list(policy.connect_ports),
              "domains": list(policy.domains), "host_ports": [list(p) for p in policy.host_ports],
              "pins": [list(p) for p in policy.pins], "private": [list(p) for p in policy.private]}
    if policy.methods:
        # Only where there are some: every other policy's record, and hash, stays as it was.
        record["methods"] = dict((name, list(methods)) for name, methods in policy.methods)
    return record


def _files(policy, record):
    return {
        SQUID_POLICY_CONF: render_policy_conf(policy).encode("ascii"),
        POLICY_RECORD: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("ascii"),
    }


def render(allow, connect_ports):
    """(Policy, policy.json record, {file name: bytes}, hash) for a policy; PolicyError
    naming the entry when one is refused."""
    policy = parse_policy(allow, connect_ports)
    record = policy_record(allow, policy)
    files = _files(policy, record)
    digest = _content_hash.content_hash({"scheme": POLICY_SCHEME, "files": _content_hash.file_digests(files)})
    return policy, record, files, digest


def write_files(directory, files):
    """Write FILES into DIRECTORY, readable by the gate's unprivileged user."""
    os.chmod(directory, 0o755)
    for name, data in files.items():
        path = os.path.join(directory, name)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o644)


def _read(directory, name):
    with open(os.path.join(directory, name), "rb") as handle:
        return handle.read()


def read_policy(directory):
    """(Policy, its allow entries as given) rendered into DIRECTORY, or PolicyError saying
    which file is not what policy.json's entries render to. Each file is read once: what
    is parsed is what is compared."""
    fix = "run the gate role (provision.yml or run_agent.yml) to render the policy again"
    try:
        record_bytes = _read(directory, POLICY_RECORD)
        record = json.loads(record_bytes.decode("utf-8"))
        policy = parse_policy(record["allow"], record["connect_ports"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise PolicyError("policy_dir %r: %s is not a policy record the gate role wrote (%s); %s"
                          % (directory, POLICY_RECORD, getattr(error, "strerror", None) or error, fix))
    wanted = _files(policy, policy_record(record["allow"], policy))

    def refuse_unless_rendered(name, found):
        if found != wanted[name]:
            raise PolicyError("policy_dir %r: %s is not what %s's allow entries render to; %s"
                              % (directory, name, POLICY_RECORD, fix))

    refuse_unless_rendered(POLICY_RECORD, record_bytes)
    try:
        squid_bytes = _read(directory, SQUID_POLICY_CONF)
    except OSError as error:
        raise PolicyError("policy_dir %r: %s cannot be read (%s); %s"
                          % (directory, SQUID_POLICY_CONF, error.strerror, fix))
    refuse_unless_rendered(SQUID_POLICY_CONF, squid_bytes)
    return policy, list(record["allow"])
