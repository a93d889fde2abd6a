"""The sglang_gateway role's preflight entry point, run as playbooks/preflight.yml runs it, on this
machine (a local connection: the role asks the interpreter on the host): each bad setting is named
in the message an operator sees, with the variable, and no key is printed at any verbosity."""

import os
import sys
import tempfile

import pytest

from real_gateway import run_role_entry

SECRET = "not-a-real-key-5f0d"


def preflight(tmp_path, verbosity=0, check_mode=False, **settings):
    hosts = {"gw": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        # The workers given (no serving host in this inventory), a plain-text key allowed (a test).
        "sglang_gateway_workers": ["http://127.0.0.1:30000"], "sglang_gateway_api_key": SECRET,
        "sglang_gateway_allow_plaintext_secrets": True}}
    return run_role_entry(tmp_path, "sglang_gateway", "preflight", hosts, settings,
                          (["-" + "v" * verbosity] if verbosity else []) + (["--check"] if check_mode else []))


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


@pytest.fixture
def system_config():
    """A directory like /etc/sudoers.d (root:root 0750), outside /tmp (refused first) and not named for sglang."""
    path = tempfile.mkdtemp(prefix="gateway-preflight-", dir="/var/local")
    os.chown(path, 0, 0)  # not /var/local's group (staff, setgid on Debian)
    os.chmod(path, 0o750)
    yield path
    os.rmdir(path)


@pytest.mark.parametrize("check_mode", [False, True], ids=["normal", "check"])
def test_a_foreign_directory_is_refused_by_the_preflight_and_left_as_it_was(tmp_path, system_config, check_mode):
    before = os.stat(system_config)
    rc, out = preflight(tmp_path, check_mode=check_mode, sglang_gateway_env_dir=system_config)
    assert rc != 0
    said = " ".join(out.replace('\\"', '"').split())
    assert ("sglang_gateway_env_dir: %s exists and is not the roles' own (they did not create it and no part of its path "
            "names sglang): owner root, group root, mode 0750; sglang-gateway needs to read and enter it (r-x) and may not "
            "(the user does not exist yet)." % system_config) in said, out[-3000:]
    after = os.stat(system_config)
    assert (after.st_uid, after.st_gid, after.st_mode, after.st_mtime_ns) == (
        before.st_uid, before.st_gid, before.st_mode, before.st_mtime_ns)


def test_an_interpreter_that_prints_first_is_named_with_its_variable(tmp_path):
    """The common role's probe (tasks/python.yml) read by host_output: a stand-in interpreter prints a
    login banner, then the real interpreter's answer. Before, from_json failed raw ("Expecting value")."""
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\necho 'Welcome to the login banner'\nexec %s \"$@\"\n" % sys.executable)
    python.chmod(0o755)
    rc, out = preflight(tmp_path, sglang_gateway_python=str(python))
    said = " ".join(out.replace('\\"', '"').split())
    assert rc != 0
    assert ("%s host_python.py printed 'Welcome to the login banner" % python) in said, said[-3000:]
    assert "where a JSON object with version, abi, platforms was expected; check sglang_gateway_python" in said, said[-3000:]
    assert "Expecting value" not in said
