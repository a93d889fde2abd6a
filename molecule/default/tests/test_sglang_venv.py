"""The SGLang venv on the PRO 6000 lab node after site.yml."""

import json

import pytest

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

CURRENT = "/opt/sglang/current"


def test_service_user(host):
    user = host.user("sglang")
    assert user.exists
    assert user.group == "sglang"
    assert user.home == "/var/lib/sglang"
    assert user.shell == "/usr/sbin/nologin"
    assert user.uid < 1000  # a system account


def test_current_points_at_a_complete_built_venv(host):
    current = host.file(CURRENT)
    assert current.is_symlink
    target = current.linked_to
    assert target.startswith("/opt/sglang/venvs/")
    marker = json.loads(host.file(target + "/.sglang-venv.json").content_string)
    assert marker["id"] == target.rsplit("/", 1)[1]
    assert marker["packages"] == ["sglang==0.5.23"]
    assert marker["installer"] == "uv"


def test_venv_is_owned_by_the_service_user(host):
    target = host.file(CURRENT).linked_to
    for path in (target, target + "/bin", target + "/lib", target + "/.sglang-venv.json"):
        assert host.file(path).user == "sglang", path
    assert host.file("/opt/sglang").user == "root"  # the service cannot repoint current
    not_sglang = host.check_output("find %s -xdev ! -user sglang | head -5" % target)
    assert not_sglang == ""


def test_sglang_imports_at_the_pinned_version_as_the_service_user(host):
    out = host.check_output(
        "runuser -u sglang -- %s/bin/python -c 'import sglang, flashinfer, torch; "
        "print(sglang.__version__, flashinfer.__version__, torch.__version__, torch.version.cuda)'" % CURRENT
    )
    sglang, flashinfer, torch, cuda = out.split()
    assert sglang == "0.5.23"
    assert flashinfer == "0.7.2"
    assert torch.startswith("2.14.1")
    assert cuda == "13.0"


def test_launch_server_knows_eagle3_and_dflash(host):
    out = host.check_output("runuser -u sglang -- %s/bin/python -m sglang.launch_server --help" % CURRENT)
    assert "--speculative-algorithm" in out
    help_text = " ".join(out.split())
    assert "EAGLE3" in help_text
    assert "DFLASH" in help_text
