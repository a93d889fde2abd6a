"""sglang_services on the B300 lab node: the three units verify, EAGLE-3 is enabled (not started: no
GPU), and its ExecStartPre= pre-warm check, run as sglang with the units' env files, finds the
10.3a cache warm and compiles nothing."""

import pytest

testinfra_hosts = ["podman://molecule-b300"]

SERVICES = ("eagle3", "autoregressive", "dflash")
SO = "/var/lib/sglang/.cache/flashinfer/0.7.2/103a/cached_ops/sampling/sampling.so"


@pytest.mark.parametrize("name", SERVICES)
def test_unit_verifies(host, name):
    out = host.run("systemd-analyze verify /etc/systemd/system/sglang-%s.service" % name)
    assert out.rc == 0 and out.stdout.strip() == "" and out.stderr.strip() == "", out.stderr
    expected = "enabled" if name == "eagle3" else "disabled"
    assert host.run("systemctl is-enabled sglang-%s.service" % name).stdout.strip() == expected


def test_prewarm_check_is_warm_for_103a(host):
    unit = host.file("/etc/systemd/system/sglang-eagle3.service").content_string
    [command] = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    before = host.check_output("stat -c %%Y.%%s %s" % SO)
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' /etc/sglang/flashinfer.env "
                   "/etc/sglang/sglang-eagle3.env | xargs) %s" % command)
    assert out.rc == 0, out.stderr
    assert "targets 10.3a" in out.stdout and "built: none; up to date: sampling" in out.stdout
    assert host.check_output("stat -c %%Y.%%s %s" % SO) == before
