"""The gateway role's Python: its workers from the inventory (module_utils/gateway.py
inventory_worker_urls, filter gateway_inventory_worker_urls) and its preflight (gateway_problems,
through module_utils/role_checks.py's sglang_gateway_problems)."""

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import rollout as f
from ansible_collections.blackwell.sglang.plugins.filter.sglang_services import extra_argv, systemd_exec
from ansible_collections.blackwell.sglang.plugins.module_utils import gateway as g

EAGLE3 = {"eagle3": {"url": "http://127.0.0.1:30000", "port": 30000}}

GOOD = {
    "host": "0.0.0.0", "port": 30080, "metrics_host": "127.0.0.1", "metrics_port": 29000,
    "policy": "cache_aware", "request_timeout": 1800, "worker_startup_timeout": 1800, "workers": None,
    "extra_args": {}, "api_key": "s3cret", "control_plane_api_keys": ["ops:Operators:admin:k3y"],
    "service_ports": {},
}


@pytest.mark.parametrize("hostvars, urls", [
    # the worker address, else ansible_host, else the inventory name
    ({"n1": {"sglang_services_endpoints": EAGLE3, "ansible_host": "10.0.0.5", "sglang_gateway_worker_address": "n1.lan"}},
     ["http://n1.lan:30000"]),
    ({"n1": {"sglang_services_endpoints": EAGLE3, "ansible_host": "10.0.0.5"}}, ["http://10.0.0.5:30000"]),
    ({"n1": {"sglang_services_endpoints": EAGLE3}}, ["http://n1:30000"]),
    # an IPv6 literal is bracketed once
    ({"n1": {"sglang_services_endpoints": EAGLE3, "ansible_host": "FD00::5"}}, ["http://[FD00::5]:30000"]),
    ({"n1": {"sglang_services_endpoints": EAGLE3, "ansible_host": "[fd00::5]"}}, ["http://[fd00::5]:30000"]),
    # one URL per active service, in the hosts' order; a host without an active service has none
    ({"b": {"sglang_services_endpoints": {"eagle3": {"port": 30000}, "dflash": {"port": 30001}}},
      "a": {"sglang_services_endpoints": {}}},
     ["http://b:30001", "http://b:30000"]),
    # two names of one endpoint count once
    ({"n1": {"sglang_services_endpoints": EAGLE3, "ansible_host": "10.0.0.5"},
      "n2": {"sglang_services_endpoints": EAGLE3, "ansible_host": "10.0.0.5"}}, ["http://10.0.0.5:30000"]),
    ({}, []),
])
def test_inventory_worker_urls(hostvars, urls):
    assert g.inventory_worker_urls(hostvars) == urls
    assert f.gateway_inventory_worker_urls(hostvars) == urls


def test_a_host_without_the_fact_is_named_with_what_to_do():
    hostvars = {"n1": {"sglang_services_endpoints": EAGLE3}, "n2": {}, "n3": {"ansible_host": "x"}}
    with pytest.raises(g.MissingEndpointsError) as error:
        g.inventory_worker_urls(hostvars)
    assert error.value.hosts == ["n2", "n3"]
    assert str(error.value) == (
        "no sglang_services_endpoints fact for n2, n3: the sglang_services preflight sets it on each serving "
        "host earlier in the same run (site.yml runs the serving hosts' play first), so include the "
        "serving hosts in this run (no --limit to the gateway alone) or give the workers explicitly "
        "with sglang_gateway_workers")
    with pytest.raises(AnsibleFilterError, match="^gateway_inventory_worker_urls: no sglang_services_endpoints fact for n2, n3"):
        f.gateway_inventory_worker_urls(hostvars)


# The role's other variables, good (its defaults); the preflight's filter takes them by their names.
ROLE_DEFAULTS = {
    "sglang_gateway_base_dir": "/opt/sglang-gateway", "sglang_gateway_state_dir": "/var/lib/sglang-gateway",
    "sglang_gateway_env_dir": "/etc/sglang-gateway", "sglang_gateway_python": "/usr/bin/python3",
    "sglang_gateway_wheelhouse_controller_dir": "/root/.cache/blackwell-sglang/wheelhouse",
    "sglang_gateway_ca_bundle": "/etc/ssl/certs/ca-certificates.crt", "sglang_gateway_index_url": "",
    "sglang_gateway_uv_version": "0.13.9", "sglang_gateway_dp_aware": False, "sglang_gateway_tokenizer_autoload": False,
    "sglang_gateway_allow_plaintext_secrets": False, "sglang_gateway_version": "1.13.0",
    "sglang_gateway_wheelhouse": "none", "sglang_gateway_ready_timeout": 60,
}


def role_vars(settings):
    """gateway_problems' settings as the preflight passes them: the variables by their names."""
    names = {"service_ports": "sglang_services_endpoints", "serves": "sglang_services_active", "groups": "group_names"}
    return dict(ROLE_DEFAULTS, **{names.get(key, "sglang_gateway_" + key): value for key, value in settings.items()})


def test_good_settings_have_no_problems():
    assert g.gateway_problems(GOOD) == []
    for serves in (None, "", "none", [], ["none"]):
        assert g.gateway_problems(dict(GOOD, serves=serves, groups=["sglang_gateway"])) == []
    assert g.gateway_problems(dict(GOOD, workers=["http://10.0.0.5:30000", "https://[fd00::5]:443"],
                                   control_plane_api_keys=[], extra_args={"log-level": "debug"},
                                   service_ports=EAGLE3)) == []


# Each problem whole, as the preflight prints it.
@pytest.mark.parametrize("change, problems", [
    ({'port': 0},
     ['sglang_gateway_port must be a port number in 1-65535, got 0']),
    ({'port': 65536},
     ['sglang_gateway_port must be a port number in 1-65535, got 65536']),
    ({'port': 'x'},
     ["sglang_gateway_port must be a port number in 1-65535, got 'x'"]),
    ({'metrics_port': True},
     ['sglang_gateway_metrics_port must be a port number in 1-65535, got True']),
    ({'port': 29000},
     ['sglang_gateway_port and sglang_gateway_metrics_port are both 29000: give the metrics their own '
      'port']),
    ({'port': 30000, 'service_ports': EAGLE3},
     ['sglang_gateway_port 30000 is the port of the SGLang service eagle3 on this host: pick another '
      '(e.g. 30080)']),
    ({'metrics_port': 30000, 'service_ports': {'eagle3': 30000}},
     ['sglang_gateway_metrics_port 30000 is the port of the SGLang service eagle3 on this host: pick '
      'another']),
    ({'host': ''},
     ["sglang_gateway_host must be an address to bind (e.g. 0.0.0.0, 127.0.0.1, ::), got ''"]),
    ({'metrics_host': '1.2.3.4 5'},
     ['sglang_gateway_metrics_host must be an address to bind (e.g. 0.0.0.0, 127.0.0.1, ::), got '
      "'1.2.3.4 5'"]),
    ({'policy': 'roundrobin'},
     ['sglang_gateway_policy must be one of random, round_robin, passthrough, cache_aware, '
      "power_of_two, least_load, manual, consistent_hashing, prefix_hash (smg 1.13.0's --policy), got "
      "'roundrobin'"]),
    ({'request_timeout': 0},
     ['sglang_gateway_request_timeout must be a whole number of seconds >= 1, got 0']),
    ({'worker_startup_timeout': 'soon'},
     ["sglang_gateway_worker_startup_timeout must be a whole number of seconds >= 1, got 'soon'"]),
    ({'workers': ['10.0.0.1:30000']},
     ["sglang_gateway_workers: '10.0.0.1:30000' is not an absolute http(s) URL (http://host:port)"]),
    ({'workers': ['ftp://x']},
     ["sglang_gateway_workers: 'ftp://x' is not an absolute http(s) URL (http://host:port)"]),
    ({'workers': ['http://:30000']},
     ["sglang_gateway_workers: 'http://:30000' is not an absolute http(s) URL (http://host:port)"]),
    ({'workers': ['http://h:1/v1']},
     ["sglang_gateway_workers: 'http://h:1/v1' is not a server's base URL (http://host:port, no path, "
      'query or user)']),
    ({'workers': 'http://h:1'},
     ["sglang_gateway_workers must be a list of worker URLs (http://host:port), got 'http://h:1'"]),
    ({'extra_args': {'port': 1}},
     ['sglang_gateway_extra_args sets --port, which the role manages: use sglang_gateway_port']),
    ({'extra_args': {'api_key': 'x'}},
     ['sglang_gateway_extra_args sets --api-key, which the role manages: use sglang_gateway_api_key']),
    ({'extra_args': {'--worker-urls': ['http://a:1']}},
     ['sglang_gateway_extra_args sets --worker-urls, which the role manages: use sglang_gateway_workers']),
    ({'extra_args': ['--x']},
     ["sglang_gateway_extra_args must be a dict {flag: value}, got ['--x']"]),
    ({'api_key': ''},
     ["sglang_gateway_api_key is empty: the gateway needs an API key (vault-encrypted, see the role's "
      'README)']),
    ({'api_key': None},
     ["sglang_gateway_api_key is empty: the gateway needs an API key (vault-encrypted, see the role's "
      'README)']),
    ({'api_key': 'a\nb'},
     ['sglang_gateway_api_key holds a control character (a newline?): an env file line cannot carry '
      "it: the gateway needs an API key (vault-encrypted, see the role's README)"]),
    ({'control_plane_api_keys': ['ops:Operators:root:k']},
     ['sglang_gateway_control_plane_api_keys[0]: the role (third field) must be admin or user']),
    ({'control_plane_api_keys': ['ops:admin:k']},
     ["sglang_gateway_control_plane_api_keys[0] is not 'id:name:role:key' (four fields, none empty)"]),
    ({'control_plane_api_keys': 'ops:Operators:admin:k'},
     ["sglang_gateway_control_plane_api_keys must be a list of 'id:name:role:key'"]),
    ({'serves': 'eagle3', 'groups': ['sglang', 'pro6000', 'sglang_gateway']},
     ['this host is in sglang_gateway and also serves (sglang_services_active "eagle3", from its '
      'groups sglang, pro6000): site.yml and rollout.yml never run an SGLang server on a gateway host '
      '(all:!sglang_gateway), so it would serve nothing; take it out of sglang_gateway, or out of the '
      'serving group']),
    ({'serves': ['eagle3', 'dflash']},
     ['this host is in sglang_gateway and also serves (sglang_services_active ["eagle3", "dflash"]): '
      'site.yml and rollout.yml never run an SGLang server on a gateway host (all:!sglang_gateway), so '
      'it would serve nothing; take it out of sglang_gateway, or out of the serving group']),
    ({'control_plane_api_keys': [None, 'a:b:admin:c:d', 'a\x7f:b:user:c', 'a:b: :c']},
     ['sglang_gateway_control_plane_api_keys[0] is empty',
      'sglang_gateway_control_plane_api_keys[2] holds a control character (a newline?): an env file '
      'line cannot carry it',
      'sglang_gateway_control_plane_api_keys[3]: the role (third field) must be admin or user']),
    ({'api_key': 'a b'},   # a space is no control character
     []),
    ({'port': 1, 'metrics_port': 65535},   # the ends of the range
     []),
    ({'request_timeout': 1, 'worker_startup_timeout': '1'},
     []),
    ({'request_timeout': True},
     ['sglang_gateway_request_timeout must be a whole number of seconds >= 1, got True']),
    ({'extra_args': {'Xport': 1}},   # only leading dashes are taken off a flag: --Xport is not the role's --port
     []),
    ({'extra_args': ['--port']},   # not a dict: refused whole, its items not read as flags
     ["sglang_gateway_extra_args must be a dict {flag: value}, got ['--port']"]),
])
def test_bad_settings_are_named(change, problems):
    assert g.gateway_problems(dict(GOOD, **change)) == problems
    if problems:
        assert f.sglang_gateway_problems(role_vars(dict(GOOD, **change))) == problems  # the preflight's filter


def test_a_secret_is_never_in_a_problem():
    problems = g.gateway_problems(dict(GOOD, api_key="top\nsecret", control_plane_api_keys=["a:b:c:hunter2", "hunter3"]))
    assert len(problems) == 3
    assert not any("secret" in p.replace("_", " ").split("holds")[0] and "top" in p for p in problems)
    assert not any("hunter" in problem for problem in problems)


def test_extra_args_render_as_the_services_do():
    argv = extra_argv({"log-level": "debug", "retry_max_retries": 3, "enable-igw": True, "off": False,
                       "cors-allowed-origins": ["https://a", "https://b"]})
    assert argv == ["--cors-allowed-origins", "https://a", "https://b", "--enable-igw", "--log-level", "debug",
                    "--retry-max-retries", "3"]
    assert systemd_exec(["/opt/x/python", "launch.py", "launch", "--host", "0.0.0.0"] + argv).splitlines()[0] == \
        "/opt/x/python launch.py launch \\"


def launcher():
    """roles/sglang_gateway/files/launch.py, the unit's ExecStart (it runs in the gateway's venv)."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "sglang_gateway", "files", "launch.py")
    spec = importlib.util.spec_from_file_location("sglang_gateway_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_launcher_starts_smg_with_the_manifest_s_workers_and_the_keys_from_the_environment(tmp_path):
    launch = launcher()
    manifest = tmp_path / "workers.json"
    manifest.write_text('{"version": 1, "workers": [{"url": "http://10.0.0.5:30000"}, {"url": "http://10.0.0.6:30000"}]}')
    environ = {"SGLANG_GATEWAY_MANIFEST": str(manifest), "SGLANG_GATEWAY_API_KEY": "k",
               "SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_10": "b:B:user:k2", "SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_2": "a:A:admin:k1"}
    assert launch.manifest_args(environ) == ["--worker-urls", "http://10.0.0.5:30000", "http://10.0.0.6:30000"]
    assert launch.secret_args(environ) == ["--api-key", "k", "--control-plane-api-keys", "a:A:admin:k1", "b:B:user:k2"]
    assert environ == {}  # taken out of the environment
    # No manifest yet (a gateway before its first worker), an empty one, none named: no workers.
    assert launch.manifest_args({"SGLANG_GATEWAY_MANIFEST": str(tmp_path / "absent.json")}) == []
    manifest.write_text('{"version": 1, "workers": []}')
    assert launch.manifest_args({"SGLANG_GATEWAY_MANIFEST": str(manifest)}) == []
    assert launch.manifest_args({}) == []


@pytest.mark.parametrize("text, said", [
    ("{not json", "cannot read the worker manifest"),
    ('{"version": 1, "workers": [{"id": "x"}]}', "is not {\"version\": 1, \"workers\": [{\"url\": ...}]}"),
    ('[]', "is not {\"version\": 1"),
    ('{"version": 2, "workers": []}', "has version 2, not 1"),
    ('{"version": 1, "workers": [{"url": "http://p:1", "worker_type": "prefill"}]}', "has prefill/decode workers (http://p:1)"),
])
def test_the_launcher_refuses_a_manifest_it_cannot_read(tmp_path, text, said):
    launch = launcher()
    manifest = tmp_path / "workers.json"
    manifest.write_text(text)
    with pytest.raises(launch.ManifestError, match=re.escape(said)):
        launch.manifest_args({"SGLANG_GATEWAY_MANIFEST": str(manifest)})
