"""The sglang_gateway role's preflight entry point, run as playbooks/preflight.yml runs it, on this
machine (a local connection: the role asks the interpreter on the host): each bad setting is named
in the message an operator sees, with the variable, and no key is printed at any verbosity."""

import json
import subprocess
import sys
import textwrap

import pytest

from real_gateway import ansible_env

PLAY = textwrap.dedent("""\
    - name: The gateway role's preflight
      hosts: gw
      gather_facts: false
      tasks:
        - name: Preflight
          ansible.builtin.include_role:
            name: blackwell.sglang.sglang_gateway
            tasks_from: preflight
    """)
SECRET = "not-a-real-key-5f0d"


def preflight(tmp_path, verbosity=0, **settings):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"gw": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        # The workers given (no serving host in this inventory), a plain-text key allowed (a test).
        "sglang_gateway_workers": ["http://127.0.0.1:30000"], "sglang_gateway_api_key": SECRET,
        "sglang_gateway_allow_plaintext_secrets": True}}}}))
    proc = subprocess.run(["ansible-playbook", "-i", "hosts.yml", "play.yml", "-e", json.dumps(settings)]
                          + (["-" + "v" * verbosity] if verbosity else []),
                          capture_output=True, text=True, env=ansible_env(), cwd=str(tmp_path), check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_good_settings_pass_and_the_interpreter_is_published(tmp_path):
    rc, out = preflight(tmp_path)
    assert rc == 0, out
    assert '"changed": true' not in out


@pytest.mark.parametrize("settings, said", [
    ({"sglang_gateway_index_url": "pypi.org/simple"},
     'malformed sglang_gateway_index_url "pypi.org/simple" (want http(s)://host[:port]/path or file:///path)'),
    ({"sglang_gateway_uv_version": "latest"}, 'sglang_gateway_uv_version must be X.Y.Z (a uv release), got "latest"'),
    ({"sglang_gateway_ca_bundle": "certs.pem"}, "sglang_gateway_ca_bundle must be an absolute path"),
    ({"sglang_gateway_port": 0}, "sglang_gateway_port"),
    ({"sglang_gateway_python": "/nonexistent/python3"},
     "sglang_gateway: /nonexistent/python3 is not a working interpreter"),
])
def test_each_bad_setting_is_named_and_no_key_is_printed(tmp_path, settings, said):
    rc, out = preflight(tmp_path, verbosity=3, **settings)
    assert rc != 0
    assert said in " ".join(out.replace('\\"', '"').split()), out[-3000:]  # the message as printed (JSON at -vvv)
    assert SECRET not in out
