"""sglang_services on the B300 lab node: the three units verify, EAGLE-3 is enabled (not started: no
GPU), and its ExecStartPre= pre-warm check, run as sglang with the units' env files, finds the
10.3a cache warm and compiles nothing. Last, a service's env and GPUs: what the env file holds, and
that a secret in it never reaches Ansible's output."""

import re

import pytest
from conftest import B300, VENV_ENV, LAB_EAGLE3, ROLE_PLAYBOOK, _run_playbook, jit_dir

testinfra_hosts = ["podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order

SERVICES = ("eagle3", "autoregressive", "dflash")


@pytest.mark.parametrize("name", SERVICES)
def test_unit_verifies(host, name):
    out = host.run("systemd-analyze verify /etc/systemd/system/sglang-%s.service" % name)
    assert out.rc == 0 and out.stdout.strip() == "" and out.stderr.strip() == "", out.stderr
    expected = "enabled" if name == "eagle3" else "disabled"
    assert host.run("systemctl is-enabled sglang-%s.service" % name).stdout.strip() == expected


def test_prewarm_check_is_warm_for_103a(host):
    unit = host.file("/etc/systemd/system/sglang-eagle3.service").content_string
    [command] = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    so = jit_dir(host, "103a") + "/sampling/sampling.so"
    before = host.check_output("stat -c %%Y.%%s %s" % so)
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' /etc/sglang/flashinfer.env %s "
                   "/etc/sglang/sglang-eagle3.env | xargs) %s" % (VENV_ENV, command))
    assert out.rc == 0, out.stderr
    assert "targets 10.3a" in out.stdout and "built: none; up to date: sampling" in out.stdout
    assert host.check_output("stat -c %%Y.%%s %s" % so) == before


def test_prewarm_check_without_ninja_fails_in_one_line_and_its_advice_repairs_the_venv(host):
    # The venv's ninja gone (a broken reinstall): FlashInfer runs ninja even on a warm cache. The
    # unit's ExecStartPre= must give the journal one line naming the cause and the fix, no traceback;
    # the fix, followed as written (re-run site.yml), must bring the venv back whole: the sglang_venv
    # role finds the file the ninja wheel installed gone and reinstalls that wheel at its version.
    unit = host.file("/etc/systemd/system/sglang-eagle3.service").content_string
    [command] = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    check = "runuser -u sglang -- env -i $(grep -hv '^#' /etc/sglang/flashinfer.env %s /etc/sglang/sglang-eagle3.env | xargs) %s" % (
        VENV_ENV, command)
    ninja = "/opt/sglang/current/bin/ninja"
    host.check_output("cp -p %s /var/tmp/ninja.aside && rm %s" % (ninja, ninja))
    try:
        out = host.run(check)
        assert out.rc == 1, out
        assert "Traceback" not in out.stderr and out.stdout == "", out.stderr
        assert out.stderr == ("flashinfer_jit: error: building FlashInfer module sampling failed: ninja not found (the venv's "
                              "ninja, %s): re-run site.yml (the sglang_venv role reinstalls what is missing from the venv)\n"
                              % ninja)
        rc, played = _run_playbook("site.yml", limit=B300)
        assert rc == 0, played[-3000:]
        assert re.search(r"Repair \| Reinstall, at their versions, ninja==[0-9.]+", played), played[-3000:]
        assert host.file(ninja).exists
        again = host.run(check)
        assert again.rc == 0 and "built: none; up to date: sampling" in again.stdout, again.stderr
    finally:  # whatever failed above, the node keeps a ninja for the tests after this one
        host.check_output("test -e %s || cp -p /var/tmp/ninja.aside %s; rm -f /var/tmp/ninja.aside" % (ninja, ninja))


# Last on this node: it changes the EAGLE-3 service's env file (nothing after it reads this node).
SECRET = "hf_blackwell_sglang_not_a_real_token_0123456789"


def test_env_and_gpus_are_written_and_the_secret_stays_out_of_the_output(host):
    settings = dict(LAB_EAGLE3, env={"HF_TOKEN": SECRET, "NCCL_DEBUG": "WARN"}, cuda_visible_devices=[3, 2])
    rc, out = _run_playbook(ROLE_PLAYBOOK, {"bsg_role": "blackwell.sglang.sglang_services",
                                            "sglang_services_eagle3": settings}, limit=B300)
    assert rc == 0, out
    assert re.search(r"changed=[1-9]", out), out
    assert SECRET not in out
    env = host.file("/etc/sglang/sglang-eagle3.env")
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)
    assert [line for line in env.content_string.splitlines() if line and not line.startswith("#")] == [
        "CUDA_VISIBLE_DEVICES=3,2", "HF_TOKEN=" + SECRET, "NCCL_DEBUG=WARN"]  # the order given: CUDA numbers them so
    # The unit reads that file after FlashInfer's, as the service user only may.
    assert host.run("runuser -u nobody -- cat /etc/sglang/sglang-eagle3.env").rc != 0
    assert host.run("runuser -u sglang -- cat /etc/sglang/sglang-eagle3.env").rc == 0
