# SPDX-License-Identifier: GPL-3.0-or-later
"""A session with provider credentials: what the sandbox, the gate and pi get. Never a key."""

import json

import pytest

from ansible_collections.aisb.sandbox.plugins.module_utils.common import _podman
from ansible_collections.aisb.sandbox.plugins.module_utils.credentials import _credential_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.session import _session_plan
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._ruleset import expected
from ansible_collections.aisb.sandbox.plugins.module_utils.session._session import credentials_report
from ansible_collections.aisb.sandbox.plugins.module_utils.policy._squid import parse_gate_log

from builders import FACTS, inputs

KEY = "sk-unit-secret-value"
ENTRIES = [{"host": "api.anthropic.com", "port": 443, "header": "x-api-key", "prefix": "", "variable": "ANTHROPIC_API_KEY",
            "key": KEY},
           {"host": "models.test", "port": 9443, "header": "Authorization", "prefix": "Bearer ",
            "variable": "OPENAI_API_KEY", "key": KEY}]
PLACEHOLDERS = {"ANTHROPIC_API_KEY": "aisb-placeholder-a", "OPENAI_API_KEY": "aisb-placeholder-b"}


def planned(facts=None):
    return _session_plan.plan_session("sid", "/s", inputs(credentials=ENTRIES), facts or FACTS, 40001,
                                      (PLACEHOLDERS, 40002))


def test_the_sandbox_gets_placeholders_and_the_injector_at_the_gates_address():
    plan = planned()
    environment = plan.environment
    assert environment["ANTHROPIC_API_KEY"] == "aisb-placeholder-a"
    assert environment["AISB_CREDENTIAL_PROXY"] == "http://100.64.0.1:40002"
    assert environment["NO_PROXY"] == "localhost,127.0.0.1,::1,100.64.0.1" == environment["no_proxy"]
    assert "pin 100.64.0.1 40002" in plan.policy_text.splitlines()
    assert "rule inet aisb output: ip 100.64.0.1 tcp dport 40002" in expected(plan.policy_text)
    assert KEY not in json.dumps(plan)


def test_pi_is_moved_to_the_injector_by_a_read_only_models_json():
    plan = planned()
    (name, text), = plan.session_files
    (name_again, inside), = plan.read_only_mounts
    assert (name, name_again, inside) == ("pi-models.json", "pi-models.json", "/home/agent/.pi/agent/models.json")
    assert json.loads(text) == {"providers": {
        "anthropic": {"baseUrl": "http://100.64.0.1:40002/api.anthropic.com"},
        "openai": {"baseUrl": "http://100.64.0.1:40002/models.test:9443/v1"}}}
    argv = _podman.sandbox_run("podman", plan.sandbox_options)
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/home/agent/.pi/agent:rw,nosuid,nodev,mode=1777"
    assert argv.index("/s/pi-models.json:/home/agent/.pi/agent/models.json:ro") > tmpfs


def test_tcp_forward_forwards_the_injector_port_too():
    plan = planned({"verdict": dict(FACTS["verdict"], gate_path="tcp-forward")})
    assert plan.sandbox_options.network == "pasta:-4,-T,40001,-T,40002,--no-map-gw"
    assert plan.environment["AISB_CREDENTIAL_PROXY"] == "http://127.0.0.1:40002"
    assert plan.environment["NO_PROXY"] == "localhost,127.0.0.1,::1"


def test_without_credentials_nothing_changes():
    plan = _session_plan.plan_session("sid", "/s", inputs(), FACTS, 40001)
    assert plan.session_files == [] and plan.sandbox_options.writable_dirs == []
    assert "AISB_CREDENTIAL_PROXY" not in plan.environment
    assert "aisb_placeholder" not in plan.gate.conf_text


def test_credentials_need_the_gate():
    with pytest.raises(_session_plan.SessionError, match="need network allow"):
        _session_plan.plan_session("sid", "/s", inputs(network="none", credentials=ENTRIES), FACTS, None,
                                   (PLACEHOLDERS, 40002))


def test_the_gate_refuses_a_placeholder_before_the_policy_allows_anything():
    conf = planned().gate.conf_text
    lines = conf.splitlines()
    assert lines.index("http_access deny aisb_placeholder") < lines.index("include " + _podman.GATE_POLICY_CONF)
    either = "aisb-placeholder-a|aisb-placeholder-b"
    assert "acl aisb_placeholder_url url_regex " + either in lines
    headers = [line.split()[3].lower() for line in lines if " req_header " in line]
    assert sorted(headers) == ["api-key", "authorization", "x-api-key", "x-goog-api-key"]
    assert all(line.endswith(" " + either) for line in lines if " req_header " in line)
    assert "acl aisb_placeholder any-of aisb_placeholder_url " + " ".join(
        "aisb_placeholder_header_%d" % index for index in range(4)) in lines
    assert KEY not in conf


def test_a_refusal_is_read_back_from_the_gate_log_and_not_counted_twice():
    log = "\n".join([
        "1796069612.510 session=sid credential-elsewhere client=127.0.0.1 TCP_DENIED/403 GET http://allowed.test/leak",
        "1796069612.510 session=sid client=127.0.0.1 TCP_DENIED/403 GET http://allowed.test/leak dst=-"
        " hier=HIER_NONE tls=- sni=-",
    ])
    assert _credential_plan.parse_refusals(log, _credential_plan.ELSEWHERE) == [
        {"time": 1796069612.51, "method": "GET", "url": "http://allowed.test/leak", "status": "TCP_DENIED/403"}]
    assert _credential_plan.parse_refusals(log, _credential_plan.PROVIDER_DIRECT) == []
    assert len(parse_gate_log(log)["denied"]) == 1


def test_the_gate_refuses_a_provider_the_injector_serves_before_the_policy():
    lines = planned().gate.conf_text.splitlines()
    include = lines.index("include " + _podman.GATE_POLICY_CONF)
    hosts = sorted(set(entry["host"] for entry in ENTRIES))
    assert "acl aisb_provider_direct dstdomain -n " + " ".join(hosts) in lines
    # Plain HTTP refused by http_access; a CONNECT marked at the first peek, so the
    # policy's miss_access answers it 403 (an http_access refusal would be a handshake).
    assert lines.index("http_access deny !aisb_provider_connect aisb_provider_direct") < include
    assert lines.index("ssl_bump splice aisb_client_hello aisb_provider_direct aisb_provider_refuse") < include
    assert "acl aisb_provider_refuse annotate_transaction aisb_verdict=refused" in lines
    log = "2.000 session=sid provider-direct client=127.0.0.1 TCP_DENIED/403 CONNECT api.anthropic.com:443"
    assert _credential_plan.parse_refusals(log, _credential_plan.PROVIDER_DIRECT)[0]["url"] == "api.anthropic.com:443"


def test_only_variables_pi_knows_get_a_models_json():
    entry = dict(ENTRIES[0], variable="SOME_KEY")
    assert _credential_plan.pi_models([entry], "http://x:1") is None


def test_the_record_keeps_the_entries_without_their_keys():
    log = "1.000 session=sid credential-elsewhere client=127.0.0.1 TCP_DENIED/403 GET http://allowed.test/leak"
    report = credentials_report(inputs(credentials=ENTRIES), None, log)
    assert report["entries"][1] == {"host": "models.test", "port": 9443, "header": "Authorization",
                                    "prefix": "Bearer ", "variable": "OPENAI_API_KEY"}
    assert report["injected"] == [] and report["elsewhere"][0]["url"] == "http://allowed.test/leak"
    assert report["provider_direct"] == []
    assert KEY not in json.dumps(report)
    assert credentials_report(inputs(), None, log) is None


URLS = {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL", "OPENAI_API_KEY": "OPENAI_BASE_URL"}


def test_a_recipes_base_url_variables_lead_to_the_injector_for_their_entry():
    """Claude Code reads ANTHROPIC_BASE_URL: the session points it at the injector's route
    for the entry of the key variable it goes with, and the placeholder beside it."""
    plan = _session_plan.plan_session("sid", "/s", inputs(credentials=ENTRIES, credential_urls=URLS), FACTS, 40001,
                                      (PLACEHOLDERS, 40002))
    environment = plan.environment
    assert environment["ANTHROPIC_BASE_URL"] == "http://100.64.0.1:40002/api.anthropic.com"
    assert environment["OPENAI_BASE_URL"] == "http://100.64.0.1:40002/models.test:9443"
    assert environment["ANTHROPIC_API_KEY"] == "aisb-placeholder-a"
    assert KEY not in json.dumps(plan)


def test_an_operators_base_url_on_the_entrys_host_keeps_its_path_behind_the_injector():
    urls = _credential_plan.base_urls(ENTRIES, URLS, "http://g:1", {"OPENAI_BASE_URL": "https://models.test:9443/v1/"})
    assert urls == {"ANTHROPIC_BASE_URL": "http://g:1/api.anthropic.com", "OPENAI_BASE_URL": "http://g:1/models.test:9443/v1"}


def test_without_a_recipes_base_url_variables_nothing_is_added():
    assert _credential_plan.base_urls(ENTRIES, {}, "http://g:1", {}) == {}
    assert "ANTHROPIC_BASE_URL" not in planned().environment


def test_codex_gets_a_provider_behind_the_injector_for_an_openai_key():
    entry = dict(ENTRIES[1], host="api.openai.com", port=443)
    plan = _session_plan.plan_session("sid", "/s", inputs(credentials=[entry]), FACTS, 40001,
                                      ({"OPENAI_API_KEY": "aisb-placeholder-b"}, 40002))
    assert ("codex-config.toml", "/home/agent/.codex/config.toml") in plan.read_only_mounts
    text = dict(plan.session_files)["codex-config.toml"]
    injector = plan.environment["AISB_CREDENTIAL_PROXY"]
    assert 'model_provider = "aisb-injected-openai"' in text.splitlines()
    assert 'base_url = "%s/api.openai.com/v1"' % injector in text.splitlines()
    assert 'env_key = "OPENAI_API_KEY"' in text.splitlines() and KEY not in text
    assert "/home/agent/.codex" in plan.sandbox_options.writable_dirs


def test_codex_config_only_for_openai_itself():
    # A key variable for another server (a gateway) or another provider's: nothing to write.
    assert _credential_plan.codex_config([ENTRIES[1]], "http://x:1") is None
    assert _credential_plan.codex_config([ENTRIES[0]], "http://x:1") is None
