"""sglang_services on the PRO 6000 lab node (no GPU): three verified units, EAGLE-3 enabled but not
started, env files, Conflicts=, the ExecStartPre= pre-warm check as the service user; then the
role alone (changed=0) and bad input, each case a playbook with only this role: a clear message,
changed=0, and the node exactly as it was (tests/fingerprint.sh: units, env files, unit states and
every other path the roles own). The cases are independent: they run together, one inventory host
each (conftest.run_cases), in one ansible-playbook run.
"""

import json
import os
import re
import subprocess

import pytest
from conftest import FLASHINFER_ENV, VENV_ENV, LAB_EAGLE3, ROOT, ansible_env, assert_unchanged, fingerprint, jit_dir, run_cases

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

SERVICES = ("eagle3", "autoregressive", "dflash")
UNIT = "/etc/systemd/system/sglang-%s.service"
ENV = "/etc/sglang/sglang-%s.env"
ROLE = "blackwell.sglang.sglang_services"


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
    assert unit_lines(host, name, "EnvironmentFile") == [FLASHINFER_ENV, VENV_ENV, ENV % name]
    assert unit_lines(host, name, "Restart") == ["on-failure"]
    assert int(unit_lines(host, name, "TimeoutStartSec")[0]) >= 1800
    assert unit_lines(host, name, "LimitMEMLOCK") == ["infinity"]
    text = unit.content_string
    assert "\nPrivateDevices=" not in text and "\nMemoryDenyWriteExecute=" not in text
    assert "\nDeviceAllow=" not in text and "\nProtectClock=" not in text


# The role's defaults for what systemd does on failure, OOM, and what the service may reach
# (roles/sglang_services/defaults/main.yml and templates/sglang.service.j2): systemd's own reading.
UNIT_PROPERTIES = {
    "Restart": "on-failure", "RestartUSec": "30s", "StartLimitIntervalUSec": "2h", "StartLimitBurst": "3",
    "TimeoutStartUSec": "30min", "TimeoutStopUSec": "2min", "LimitNOFILE": "1048576",
    "LimitMEMLOCK": "infinity", "OOMPolicy": "stop", "OOMScoreAdjust": "-500", "MemoryMax": "infinity",
    "NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "ProtectSystem": "full", "ProtectHome": "read-only",
    "PrivateTmp": "yes", "PrivateDevices": "no", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "ProtectHostname": "yes", "RestrictSUIDSGID": "yes",
    "RestrictRealtime": "yes", "RestrictNamespaces": "yes", "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "no", "SystemCallArchitectures": "native", "UMask": "0027", "DevicePolicy": "auto",
}


@pytest.mark.parametrize("name", SERVICES)
def test_systemd_reads_the_restart_oom_and_hardening_settings(host, name):
    shown = host.check_output("systemctl show sglang-%s.service %s" % (
        name, " ".join("-p " + key for key in UNIT_PROPERTIES)))
    properties = dict(line.split("=", 1) for line in shown.splitlines())
    assert properties == UNIT_PROPERTIES


@pytest.mark.parametrize("name", SERVICES)
def test_security_exposure_is_ok(host, name):
    # README: systemd-analyze security puts the exposure at about 4.1 ("OK").
    out = host.check_output("systemd-analyze security --no-pager sglang-%s.service" % name)
    match = re.search(r"Overall exposure level for sglang-%s.service: ([0-9.]+) (\w+)" % name, out)
    assert match, out
    assert float(match.group(1)) <= 4.5 and match.group(2) == "OK", match.group(0)


def test_verify_unit_refuses_a_broken_unit_and_passes_a_good_one(host):
    # files/verify-unit.sh, the units' validate: systemd-analyze prints some problems as warnings
    # and still exits 0; the script fails on any of them.
    verify = "/bin/sh /usr/local/lib/blackwell-sglang/verify-unit.sh"
    good = host.run("%s %s sglang-eagle3.service" % (verify, UNIT % "eagle3"))
    assert good.rc == 0 and good.stdout == "" and good.stderr == "", good.stderr
    host.check_output("sed 's/^OOMPolicy=/MemoryMax=lots\\nOOMPolicy=/' %s > /tmp/broken.service" % (UNIT % "eagle3"))
    broken = host.run("%s /tmp/broken.service sglang-eagle3.service" % verify)
    assert broken.rc == 1
    assert broken.stderr.startswith("systemd-analyze verify sglang-eagle3.service failed (rc=0):\n")
    assert "Invalid memory limit 'lots', ignoring" in broken.stderr


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
    so = jit_dir(host, "120f") + "/sampling/sampling.so"
    before = host.check_output("stat -c %%Y.%%s %s" % so)
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' %s %s %s | xargs) %s"
                   % (FLASHINFER_ENV, VENV_ENV, ENV % "eagle3", command))
    assert out.rc == 0, out.stderr
    assert "targets 12.0f" in out.stdout and "built: none; up to date: sampling" in out.stdout
    assert host.check_output("stat -c %%Y.%%s %s" % so) == before


def test_prewarm_command_is_the_collections_own_code_root_owned(host):
    # The sglang_services role installs it with the flashinfer_prewarm_command module, from the module's
    # own copy of module_utils: the same text as this checkout's, root-owned, not writable by sglang.
    lib = "/usr/local/lib/blackwell-sglang/ansible_collections/blackwell/sglang/plugins/module_utils/"
    for name in ("flashinfer_jit.py", "cuda_arch.py"):
        with open(os.path.join(ROOT, "plugins", "module_utils", name)) as handle:
            ours = handle.read()
        installed = host.file(lib + name)
        assert (installed.user, installed.group, installed.mode) == ("root", "root", 0o644)
        assert installed.content_string == ours
    assert host.file("/usr/local/lib/blackwell-sglang/flashinfer_prewarm.py").user == "root"


def test_the_argument_parse_compiles_sglang_into_its_own_cache_not_the_venv(host):
    # The converge's parse ran as the service user with PYTHONPYCACHEPREFIX: SGLang's ServerArgs
    # module was compiled into the service user's cache (Python mirrors the source path below it),
    # and left no bytecode of that module in the venv's own __pycache__ (checked before the next
    # test, which imports SGLang as the service user without the cache and so writes some there).
    cache = host.file("/var/cache/sglang/pycache")
    assert (cache.is_directory, cache.user, cache.group, cache.mode) == (True, "sglang", "sglang", 0o750)
    found = host.check_output("find /var/cache/sglang/pycache -path '*/site-packages/sglang/srt/server_args.cpython-311.pyc'")
    assert found.startswith("/var/cache/sglang/pycache/opt/sglang/"), found
    assert host.check_output("find /opt/sglang/venvs/ -path '*/sglang/srt/__pycache__/server_args.*.pyc'") == ""


def test_validate_args_reports_sglangs_own_words_for_an_unknown_algorithm(host):
    # The role's argument check (the sglang_server_args module, run as the service user with the
    # venv's python) against the installed SGLang 0.5.23: what follows the module's prefix is SGLang's
    # own SpeculativeAlgorithm.from_string message, not a test double's.
    services = {"dflash": ["--model-path", "/models/x", "--speculative-algorithm", "DFLASHX"]}
    proc = subprocess.run(
        ["ansible", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "molecule-pro6000", "-b", "--become-user", "sglang",
         "-e", "ansible_python_interpreter=/opt/sglang/current/bin/python", "-m", "blackwell.sglang.sglang_server_args",
         "-a", json.dumps({"services": services})],
        capture_output=True, text=True, env=ansible_env(ANSIBLE_CALLBACK_RESULT_FORMAT="json"), cwd=ROOT, check=False)
    assert proc.returncode != 0
    assert ('"msg": "SGLang 0.5.23 rejects the arguments: sglang-dflash: --speculative-algorithm DFLASHX: '
            'Unknown speculative algorithm name: DFLASHX"') in proc.stdout, proc.stdout + proc.stderr


def test_sglang_resolves_the_backends_it_picks_and_a_pro6000_refuses_sm100_only_kernels(host):
    # The real SGLang 0.5.23 of the venv resolves, as the server does before it starts, services whose
    # models are two public configs (molecule/default/files/models) on an RTX PRO 6000 (12.0) and a
    # B300 (10.3): Qwen3-8B gets FlashInfer's attention on 12.0 and trtllm_mha on 10.3, each named as
    # SGLang's own choice; DeepSeek-V3.2 gets trtllm DSA kernels on both, which 12.0 cannot run: the
    # task fails naming them and the flag that fixes each; with that flag it resolves.
    models = os.path.join(ROOT, "molecule", "default", "files", "models")
    host.check_output("install -d -m 0755 /var/tmp/bsg-models")
    subprocess.run(["podman", "cp", models + "/.", "molecule-pro6000:/var/tmp/bsg-models/"], check=True)
    host.check_output("chmod -R a+rX /var/tmp/bsg-models")
    qwen = ["--model-path", "/var/tmp/bsg-models/Qwen3-8B"]
    dsa = ["--model-path", "/var/tmp/bsg-models/DeepSeek-V3.2", "--tp-size", "8"]
    fixed = dsa + ["--dsa-prefill-backend", "tilelang", "--dsa-decode-backend", "tilelang"]
    # And the example inventory's PRO 6000 service (Kimi K2 Thinking, INT4, with its EAGLE-3 draft), as
    # the role renders it (recorded with the real SGLang; tests/unit/test_example_inventory.py ties the
    # record to inventories/example), its models read from the configs copied here.
    with open(os.path.join(ROOT, "tests", "unit", "plugins", "fixtures", "sglang-0.5.23-resolved.json")) as handle:
        recorded = json.load(handle)
    key = "example-pro6000-eagle3"
    example = ["/var/tmp/bsg-models/" + os.path.basename(arg) if arg.startswith("/models/") else arg
               for arg in recorded["argv"][key]]
    args = {"services": {"qwen": qwen, "dsa": dsa, "fixed": fixed, "later": ["--model-path", "/models/none"],
                         "example": example},
            "resolve": ["qwen", "dsa", "fixed", "later", "example"], "compute_capabilities": ["12.0", "10.3"],
            "environments": {"example": recorded["environments"][key]}}
    proc = subprocess.run(
        ["ansible", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "molecule-pro6000", "-b", "--become-user", "sglang",
         "-e", "ansible_python_interpreter=/opt/sglang/current/bin/python", "-m", "blackwell.sglang.sglang_server_args",
         "-a", json.dumps(args)],
        capture_output=True, text=True, env=ansible_env(ANSIBLE_CALLBACK_RESULT_FORMAT="json"), cwd=ROOT, check=False)
    assert proc.returncode != 0, proc.stdout
    result = json.loads(proc.stdout[proc.stdout.index(" => {") + 4:])
    for field in ("dsa_decode_backend", "dsa_prefill_backend"):
        assert ("sglang_services_dsa: SGLang 0.5.23 resolves %s trtllm on compute capability 12.0 (chosen by SGLang's "
                "_dsa_split_backend_resolution), which runs only on compute capability 10.x (FlashInfer 0.7.2 ships "
                % field) in result["msg"]
        assert "Set extra_args %s to one of: tilelang" % field.replace("_", "-") in result["msg"]
    assert "10.3 (chosen" not in result["msg"] and "sglang_services_fixed" not in result["msg"]
    picked = {(name, cc): (entry["backends"].get("attention_backend"), entry["backends"].get("dsa_decode_backend"),
                           entry["chosen_by"].get("attention_backend"))
              for name, by_cc in result["resolved"].items() for cc, entry in by_cc.items()}
    assert picked[("qwen", "12.0")] == ("flashinfer", None, "SGLang's _attention_backend_default")
    assert picked[("qwen", "10.3")] == ("trtllm_mha", None, "SGLang's _attention_backend_default")
    assert picked[("dsa", "10.3")][:2] == picked[("dsa", "12.0")][:2] == ("dsa", "trtllm")
    assert picked[("fixed", "12.0")][:2] == ("dsa", "tilelang")
    assert result["resolved"]["fixed"]["12.0"]["chosen_by"]["dsa_decode_backend"] == "the service's arguments"
    assert result["resolved"]["dsa"]["10.3"]["backends"]["moe_runner_backend"] == "flashinfer_trtllm"
    assert result["unresolved"] == {"later": "the model config /models/none/config.json is not on this host"}
    # The NCCL variables the server would run with: SGLang's launcher step (engine.py
    # _set_envs_and_config) turns NVLink SHARP and cuMem off unless a flag asks for them.
    assert result["resolved"]["qwen"]["12.0"]["nccl_environment"] == {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    # The node's SGLang resolves the example's PRO 6000 service as recorded: FlashInfer attention and
    # sampling, the MoE runner left to the model's loader, its env file's NCCL variables kept; it passes.
    assert result["resolved"]["example"]["12.0"] == recorded["resolved"][key]["12.0"]
    assert "sglang_services_example" not in result["msg"]


def test_prewarm_check_fails_clearly_with_wrong_targets(host):
    [command] = unit_lines(host, "eagle3", "ExecStartPre")
    out = host.run("runuser -u sglang -- env -i $(grep -hv '^#' %s | xargs) %s --expected-archs 10.3a"
                   % (FLASHINFER_ENV, command))
    assert out.rc == 1
    assert "flashinfer_jit: error: FlashInfer 0.7.2 targets ['12.0f'] with this environment, expected ['10.3a']" in out.stderr


@pytest.fixture(scope="module")
def role_runs(host):
    """The role alone ("ok") and every bad case at once; the units' fingerprint before and after."""
    before = fingerprint(host)
    cases = {"ok": {"bsg_role": ROLE}}
    cases.update((str(index), dict(extra_vars, bsg_role=ROLE)) for index, (extra_vars, _message) in enumerate(BAD))
    results = run_cases(cases)
    return results, before, fingerprint(host)


def test_role_alone_is_idempotent(role_runs):
    results, before, after = role_runs
    result = results["ok"]
    assert not result.failed, result
    assert result.changed == 0, result
    assert "not started: no GPUs" in result.text, result
    # The GPU validation ran as the service user with the venv's python, and said why it probed nothing.
    [validation] = [r for name, r in zip(result.tasks, result.results)
                    if name.endswith("GPUs | Validate the GPUs of the active services (CUDA kernel, FlashInfer, NCCL all-reduce)")]
    assert (validation["status"], validation["reason"], validation["changed"]) == ("skipped", "no GPUs (nvidia-smi found none)", False)
    assert_unchanged(before, after)


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
    # A DFlash service with prefill/decode disaggregation: SGLang's parser and resolution accept it
    # (sglang#36140); refused before its unit is rewritten or enabled.
    ({"sglang_services_active": "dflash",
      "sglang_services_dflash": {"draft_model_path": "/models/d", "extra_args": {"disaggregation-mode": "prefill"}}},
     "DFlash speculative decoding with prefill/decode disaggregation (extra_args disaggregation-mode prefill)"),
    ({"sglang_services_dflash": {"draft_model_path": "/models/d", "pp_size": 2}},
     "DFlash does not work with pipeline parallelism; pp_size is 2, must be 1"),
    ({"sglang_services_common": {"model_path": "/models/x", "port": 70000}}, "port 70000 is out of range (1-65535)"),
    ({"sglang_services_active": ["eagle3", "autoregressive"],
      "sglang_services_autoregressive": {"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
      "sglang_services_eagle3": {"draft_model_path": "/m/d", "cuda_visible_devices": "3,4,5,6,7"}},
     "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (3)"),
    ({"sglang_services_pycache_dir": "var/cache/sglang/pycache"},
     "sglang_services_pycache_dir must be an absolute path (start with /), got 'var/cache/sglang/pycache'"),
    # Passes every check before the unit is rendered; systemd-analyze refuses the unit, so the
    # installed one stays (the template's validate: files/verify-unit.sh).
    ({"sglang_services_eagle3": dict(LAB_EAGLE3, memory_max="lots")},
     "systemd-analyze verify sglang-eagle3.service failed (rc=0): "),
]


@pytest.mark.parametrize("index", range(len(BAD)), ids=[m[:40] for _v, m in BAD])
def test_bad_input_fails_before_any_unit_changes(role_runs, index):
    results, before, after = role_runs
    result = results[str(index)]
    assert result.failed, result
    assert BAD[index][1] in result.text, result
    assert result.changed == 0, result
    assert_unchanged(before, after)


def test_an_edited_unit_env_file_or_verifier_is_rewritten_and_verified(host):
    # The role reads its files with one find and runs a template or copy task only for a file that
    # is not as rendered (module_utils/in_place.py): a hand edit of a unit, an env file made
    # world-readable and a verifier chowned away are each rewritten (the unit through its
    # systemd-analyze validate), and the run after is a no-op again.
    verifier = "/usr/local/lib/blackwell-sglang/verify-unit.sh"
    unit, env = UNIT % "dflash", ENV % "autoregressive"
    rendered = host.file(unit).sha256sum
    host.check_output("echo '# edited by hand' >> %s && chmod 0644 %s && chown sglang %s" % (unit, env, verifier))
    [repair] = run_cases({"repair": {"bsg_role": ROLE}}).values()
    assert not repair.failed, repair
    changed = [name.split(" : ")[-1] for name, result in zip(repair.tasks, repair.results) if result.get("changed")]
    assert "Install | Units, each verified with systemd-analyze before it replaces the installed one" in changed, changed
    assert [name for name in changed if name.startswith("Install | Per-service environment files")], changed
    assert "Verifier | The unit verifier, %s" % verifier in changed, changed  # the common role's
    assert host.file(unit).sha256sum == rendered
    assert host.file(env).mode == 0o640
    assert host.file(verifier).user == "root"
    [again] = run_cases({"again": {"bsg_role": ROLE}}).values()
    assert not again.failed and again.changed == 0, again
