"""sglang_services on the PRO 6000 lab node (no GPU): three verified units, EAGLE-3 enabled but not
started, env files, Conflicts=, the ExecStartPre= pre-warm check as the service user; then the
role alone (changed=0) and bad input, each case a playbook with only this role: a clear message,
changed=0, and the units and env files byte-for-byte as they were. The cases are independent:
they run together, one inventory host each (conftest.run_cases), in one ansible-playbook run.
"""

import re

import pytest
from conftest import run_cases

testinfra_hosts = ["podman://molecule-pro6000"]

SERVICES = ("eagle3", "autoregressive", "dflash")
UNIT = "/etc/systemd/system/sglang-%s.service"
ENV = "/etc/sglang/sglang-%s.env"
FLASHINFER_ENV = "/etc/sglang/flashinfer.env"
SO = "/var/lib/sglang/.cache/flashinfer/0.7.2/120f/cached_ops/sampling/sampling.so"
ROLE = "blackwell.sglang.sglang_services"
FINGERPRINT = (
    "sha256sum /etc/systemd/system/sglang-*.service /etc/sglang/sglang-*.env; "
    "stat -c '%n %a %U %G %Y' /etc/systemd/system/sglang-*.service /etc/sglang/sglang-*.env; "
    "systemctl is-enabled sglang-eagle3 sglang-autoregressive sglang-dflash || true"
)


def unit_lines(host, name, key):
    return [line.split("=", 1)[1] for line in host.file(UNIT % name).content_string.splitlines()
            if line.startswith(key + "=")]


@pytest.mark.parametrize("name", SERVICES)
def test_unit_is_installed_and_verifies(host, name):
    unit = host.file(UNIT % name)
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    out = host.run("systemd-analyze verify %s" % (UNIT % name))
    assert out.rc == 0 and out.stdout.strip() == "" and out.stderr.strip() == "", out.stderr
    assert unit_lines(host, name, "User") == ["sglang"]
    assert unit_lines(host, name, "EnvironmentFile") == [FLASHINFER_ENV, ENV % name]
    assert unit_lines(host, name, "Restart") == ["on-failure"]
    assert int(unit_lines(host, name, "TimeoutStartSec")[0]) >= 1800
    assert unit_lines(host, name, "LimitMEMLOCK") == ["infinity"]
    text = unit.content_string
    assert "\nPrivateDevices=" not in text and "\nMemoryDenyWriteExecute=" not in text
    assert "\nDeviceAllow=" not in text and "\nProtectClock=" not in text


@pytest.mark.parametrize("name", SERVICES)
def test_units_share_the_gpus_so_each_conflicts_with_the_others(host, name):
    others = sorted("sglang-%s.service" % other for other in SERVICES if other != name)
    assert sorted(unit_lines(host, name, "Conflicts")[0].split()) == others
    # systemd itself read it so.
    conflicts = host.check_output("systemctl show -p Conflicts --value sglang-%s.service" % name).split()
    assert sorted(c for c in conflicts if c.startswith("sglang-")) == others


def test_speculative_flags(host):
    def execstart(name):
        return re.sub(r"\s*\\\n\s*", " ", host.file(UNIT % name).content_string.split("ExecStart=", 1)[1].split("\nRestart=")[0])

    eagle3 = execstart("eagle3")
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/Qwen3-8B-EAGLE3 "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4") in eagle3
    dflash = execstart("dflash")
    assert ("--speculative-algorithm DFLASH --speculative-draft-model-path /models/Qwen3-8B-DFlash-b16 "
            "--speculative-dflash-block-size 16") in dflash
    auto = execstart("autoregressive")
    assert "--speculative" not in auto
    assert auto.startswith("/opt/sglang/current/bin/python -m sglang.launch_server --model-path /models/Qwen3-8B ")


def test_active_enabled_others_disabled_none_running(host):
    assert host.run("systemctl is-enabled sglang-eagle3.service").stdout.strip() == "enabled"
    for name in ("autoregressive", "dflash"):
        assert host.run("systemctl is-enabled sglang-%s.service" % name).stdout.strip() == "disabled"
    for name in SERVICES:
        # No GPU in the lab: the start is skipped, nothing runs (and nothing failed).
        assert host.run("systemctl is-active sglang-%s.service" % name).stdout.strip() == "inactive"


@pytest.mark.parametrize("name", SERVICES)
def test_env_file_mode(host, name):
    env = host.file(ENV % name)
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)


def test_prewarm_check_as_the_service_user_compiles_nothing_when_warm(host):
    [command] = unit_lines(host, "eagle3", "ExecStartPre")
    assert command == ("/opt/sglang/current/bin/python /usr/local/lib/blackwell-sglang/flashinfer_prewarm.py "
                       "--modules sampling")
    before = host.check_output("stat -c %%Y.%%s %s" % SO)
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' %s %s | xargs) %s" % (FLASHINFER_ENV, ENV % "eagle3", command))
    assert out.rc == 0, out.stderr
    assert "targets 12.0f" in out.stdout and "built: none; up to date: sampling" in out.stdout
    assert host.check_output("stat -c %%Y.%%s %s" % SO) == before


def test_prewarm_check_fails_clearly_with_wrong_targets(host):
    [command] = unit_lines(host, "eagle3", "ExecStartPre")
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' %s | xargs) %s --expected-archs 10.3a"
                   % (FLASHINFER_ENV, command))
    assert out.rc == 1
    assert "flashinfer_jit: error: FlashInfer 0.7.2 targets ['12.0f'] with this environment, expected ['10.3a']" in out.stderr


@pytest.fixture(scope="module")
def role_runs(host):
    """The role alone ("ok") and every bad case at once; the units' fingerprint before and after."""
    before = host.check_output(FINGERPRINT)
    cases = {"ok": {"bsg_role": ROLE}}
    cases.update((str(index), dict(extra_vars, bsg_role=ROLE)) for index, (extra_vars, _message) in enumerate(BAD))
    results = run_cases(cases)
    return results, before, host.check_output(FINGERPRINT)


def test_role_alone_is_idempotent(role_runs):
    results, before, after = role_runs
    result = results["ok"]
    assert not result.failed, result
    assert result.changed == 0, result
    assert "not started: no GPUs" in result.text, result
    assert after == before


BAD = [
    ({"sglang_services_autoregressive": {"extra_args": {"no-such-flag": 1}}},
     "sglang-autoregressive: unrecognized arguments: --no-such-flag 1"),
    ({"sglang_services_common": {"model_path": "/models/x", "attention_backend": "no_such_backend"}},
     "argument --attention-backend: invalid choice: 'no_such_backend'"),
    ({"sglang_services_active": "medusa"}, "sglang_services_active: unknown service 'medusa'"),
    ({"sglang_services_eagle3": {"draft_model_path": "/models/d", "speculative_num_steps": 3}},
     "EAGLE-3 takes all three of speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens "
     "or none; speculative_num_steps set, speculative_eagle_topk, speculative_num_draft_tokens missing"),
    ({"sglang_services_dflash": {"dflash_block_size": 16}}, "sglang_services_dflash: DFlash needs draft_model_path"),
    ({"sglang_services_dflash": {"draft_model_path": "/models/d", "enable_dp_attention": True}},
     "DFlash does not work with DP attention"),
    ({"sglang_services_dflash": {"draft_model_path": "/models/d", "pp_size": 2}},
     "DFlash does not work with pipeline parallelism; pp_size is 2, must be 1"),
    ({"sglang_services_common": {"model_path": "/models/x", "port": 70000}}, "port 70000 is out of range (1-65535)"),
    ({"sglang_services_active": ["eagle3", "autoregressive"],
      "sglang_services_autoregressive": {"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
      "sglang_services_eagle3": {"draft_model_path": "/m/d", "cuda_visible_devices": "3,4,5,6,7"}},
     "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (3)"),
]


@pytest.mark.parametrize("index", range(len(BAD)), ids=[m[:40] for _v, m in BAD])
def test_bad_input_fails_before_any_unit_changes(role_runs, index):
    results, before, after = role_runs
    result = results[str(index)]
    assert result.failed, result
    assert BAD[index][1] in result.text, result
    assert result.changed == 0, result
    assert after == before
