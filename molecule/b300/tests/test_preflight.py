"""Bad input never reaches a host: the site-level preflight (playbooks/preflight.yml, first in
site.yml and rollout.yml) refuses every kind of bad input before any role changes any host, in
normal and in check mode, and one bad host stops a site.yml run before any host changed.

The cases run against the converged B300 node (the `b300` scenario runs beside `default`'s PRO 6000
node), one inventory host each (conftest.run_cases),
with the preflight's max_fail_percentage at 100 so that they stay independent (one run per mode); the
node's fingerprint must be the same after all of them.

Stand-in: the lab nodes have no GPU. Where a case needs GPUs, it sets the fact the sglang_node role
publishes from nvidia-smi (sglang_node_gpus; the role reads the GPUs only when it is not defined)
to what nvidia_gpu_info returns on a host with one GB10-like GPU (compute capability 12.1).
"""

import os

import pytest
import yaml
from conftest import B300, LAB_EAGLE3, ROOT, assert_unchanged, fingerprint, run_cases

testinfra_hosts = ["podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order

PREFLIGHT = "playbooks/preflight.yml"
GROUPS = ("lab", "b300")
INDEPENDENT = ["-e", "sglang_preflight_max_fail_percentage=100"]
# The case hosts get the node's group_vars through GROUPS, not its host_vars: the setting that makes
# this Debian 13 node buildable (its CPython 3.12) is read from there, so the good cases are the node's.
with open(os.path.join(ROOT, "molecule/default/host_vars/molecule-b300/python.yml"), encoding="utf-8") as _handle:
    NODE_VARS = yaml.safe_load(_handle)
GB10 = {"present": True, "count": 1, "compute_capabilities": ["12.1"], "driver_version": "580.95.05",
        "interconnect": "none", "error": None,
        "gpus": [{"index": 0, "name": "NVIDIA GB10", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                  "compute_capability": "12.1", "memory_total_mib": 122502, "driver_version": "580.95.05"}]}


def eagle3_env(env):
    return {"sglang_services_eagle3": dict(LAB_EAGLE3, env=env)}


CASES = [
    # 1. Paths: absolute and normalised, named.
    ({"cuda_toolkit_pip_prefix": ":/opt/cuda"},
     "cuda_toolkit: cuda_toolkit_pip_prefix must be an absolute path (start with /), got ':/opt/cuda'"),
    ({"kernel_cache_dir": "/var/lib/sglang/../cache"},
     "kernel_cache: kernel_cache_dir must be normalised, without . or .. components, got '/var/lib/sglang/../cache'"),
    ({"sglang_node_home": "/var/lib/sglang\n"}, "sglang_node: sglang_node_home holds '\\n' in '/var/lib/sglang\\n'"),
    ({"cuda_toolkit_version": "13.0.2\n"}, "CUDA toolkit version '13.0.2\\n' is not a full X.Y.Z version"),
    # 2. Role-managed environment in a service's env.
    (eagle3_env({"CUDA_HOME": "/usr/local/cuda", "PATH": "/usr/bin", "FLASHINFER_CUDA_ARCH_LIST": "12.0a"}),
     "sglang_services_eagle3: env CUDA_HOME is managed by the roles; set cuda_toolkit_version / cuda_toolkit_pip_prefix "
     "(flashinfer_cuda_home) instead; sglang_services_eagle3: env FLASHINFER_CUDA_ARCH_LIST is managed by the roles; "
     "set sglang_node_gpu_archs (or flashinfer_cuda_archs) instead; sglang_services_eagle3: env PATH is managed by the roles"),
    (eagle3_env({"CUDA_VISIBLE_DEVICES": "0,1"}),
     "sglang_services_eagle3: env CUDA_VISIBLE_DEVICES is managed by the roles; set the service's cuda_visible_devices instead"),
    # 3. Dedicated directories.
    ({"sglang_services_env_dir": "/etc"},
     "sglang_services_env_dir is /etc, a directory the system shares; the roles keep their files out of it"),
    ({"flashinfer_env_file": "/etc/default/flashinfer"},
     "flashinfer_env_file is /etc/default/flashinfer, a file in /etc/default, a directory the system shares; the roles keep "
     "their files out of it"),
    ({"sglang_venv_base_dir": "/opt"}, "sglang_venv_base_dir is /opt, a directory the system shares"),
    ({"sglang_node_lib_dir": "/tmp/bsg"}, "sglang_node_lib_dir is /tmp/bsg, under /tmp/ (not kept on disk, or cleared)"),
    # The kernel caches: never under /tmp (the units' PrivateTmp= loses it); the store is the controller's.
    ({"sglang_node_kernel_cache_dir": "/tmp/kernels"},
     "sglang_node_kernel_cache_dir is /tmp/kernels, under /tmp/ (not kept on disk, or cleared)"),
    ({"kernel_cache_store_dir": "/etc/hostname"},
     "kernel_cache: kernel_cache_store_dir /etc/hostname on the controller is not a directory"),
    # Own only what you create: a directory that exists and is not the roles' own (they did not create
    # it, its path does not name sglang) is refused when the service user lacks the access it needs,
    # unchanged (FOREIGN below); a drop-in directory under /etc first, with its own message.
    ({"sglang_services_env_dir": "/etc/sudoers.d"},
     "sglang_services_env_dir is /etc/sudoers.d, in /etc/sudoers.d, a drop-in directory whose every file another program reads"),
    ({"sglang_venv_home": "/etc/ssh"},  # system configuration
     "sglang_venv_home: /etc/ssh exists and is not the roles' own (they did not create it and no part of its path names sglang): "
     "owner root, group root, mode 0755; sglang needs to create files in it (rwx) and may not."),
    ({"sglang_services_env_dir": "/etc/ssl/private"},  # secrets
     "sglang_services_env_dir: /etc/ssl/private exists and is not the roles' own (they did not create it and no part of its path "
     "names sglang): owner root, group root, mode 0700; sglang needs to read and enter it (r-x) and may not."),
    ({"kernel_cache_dir": "/var/lib/dpkg"},  # another package's data
     "kernel_cache_dir: /var/lib/dpkg exists and is not the roles' own (they did not create it and no part of its path names "
     "sglang): owner root, group root, mode 0755; sglang needs to create files in it (rwx) and may not."),
    # 4. GPUs against both target lists, before anything is installed (12.9.1 is not installed on the node).
    ({"sglang_node_gpus": GB10, "cuda_toolkit_version": "12.9.1"},
     "cuda_toolkit: cuda_toolkit_target_archs [10.3] does not cover the GPUs found on this host (compute capability 12.1)"),
    ({"sglang_node_gpus": GB10, "cuda_toolkit_target_archs": ["10.3", "12.1"]},
     "flashinfer: flashinfer_cuda_archs 10.3 does not match the GPUs found on this host (compute capability 12.1)"),
    # 5. Booleans as operators pass them (-e name=value gives a string).
    ({"sglang_venv_rollback": "true"}, "there is no previous venv to roll back to"),
    ({"sglang_services_start_without_gpus": "maybe"}, "sglang_services_start_without_gpus"),
    ({"flashinfer_patch": "perhaps"}, "flashinfer_patch"),
    # 6. Can the node serve (issue 15): the driver against the toolkit (CUDA release notes' table),
    # Blackwell on the open kernel modules, GPUs for tp x pp, attention backends against the GPUs
    # (or, without GPUs, sglang_node_gpu_archs: 10.3 here), the validation's own settings.
    ({"sglang_node_gpus": dict(GB10, driver_version="570.172.08"), "sglang_node_gpu_archs": ["12.1"]},
     "cuda_toolkit: NVIDIA driver 570.172.08 is too old for CUDA toolkit 13.0.2: CUDA 13.x needs a driver >= 580 "
     "(>= 580.95.05 for 13.0.2 itself"),
    ({"sglang_node_gpus": dict(GB10, kernel_module="proprietary"), "sglang_node_gpu_archs": ["12.1"]},
     "cuda_toolkit: the proprietary NVIDIA kernel module is loaded, but Blackwell GPUs (compute capability 12.1) "
     "need the open kernel modules"),
    ({"sglang_node_gpus": GB10, "sglang_node_gpu_archs": ["12.1"], "sglang_services_eagle3": dict(LAB_EAGLE3, tp_size=2)},
     "sglang_services_eagle3: needs 2 GPUs (tp_size 2 x pp_size 1) but has 1 (all of this host's GPUs)"),
    ({"sglang_services_eagle3": dict(LAB_EAGLE3, attention_backend="fa3")},
     "sglang_services_eagle3: attention_backend fa3 cannot run on compute capability 10.3 (sglang_node_gpu_archs; "),
    ({"sglang_services_eagle3": dict(LAB_EAGLE3, attention_backend="trtllm_mla")},
     "sglang_services_eagle3: attention_backend trtllm_mla is for MLA models only, and the EAGLE-3 draft"),
    ({"sglang_services_eagle3": dict(LAB_EAGLE3, attention_backend_support={"fa9": ["10.3"]})},
     "sglang_services_eagle3: attention_backend_support names an unknown backend 'fa9'"),
    (eagle3_env({"NCCL_P2P_DISABLE": "1"}),
     "sglang_services_eagle3: env NCCL_P2P_DISABLE is managed by the roles; set sglang_services_nccl_p2p"),
    ({"sglang_services_nccl_p2p": "maybe"}, "sglang_services_nccl_p2p must be one of"),  # the argument spec's choices
    ({"sglang_services_validate_timeout": 0}, "sglang_services_validate_timeout must be a whole number of seconds > 0, got 0"),
]
IDS = [m[:40] for _v, m in CASES]
MODES = {"normal": [], "check": ["--check"]}
# In check mode, one case of each kind (the same checks run; check mode changes only what runs after
# them): the CUDA prefix, a service's env, /etc as env dir, every foreign directory, the GB10-like GPU
# with a toolkit that is not installed, a boolean, an old driver, a backend the GPUs cannot run.
CHECK_MODE_CASES = [0, 4, 6, 12, 13, 14, 15, 16, 18, 21, 24]
# The foreign directories of the cases above, whose every file must be as it was after both modes.
FOREIGN = ("/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/var/lib/dpkg")


@pytest.fixture(scope="module")
def preflight_runs(host):
    """Every case in both modes (and a good case each), then the one-bad-host site.yml run."""
    before, foreign_before = fingerprint(host), fingerprint(host, *FOREIGN)
    runs = {}
    for mode, args in MODES.items():
        cases = {"ok": dict(NODE_VARS)}
        cases.update((str(index), dict(NODE_VARS, **extra_vars)) for index, (extra_vars, _message) in enumerate(CASES)
                     if mode == "normal" or index in CHECK_MODE_CASES)
        runs[mode] = run_cases(cases, playbook=PREFLIGHT, node=B300, groups=GROUPS, extra_args=INDEPENDENT + args)
    runs["site"] = run_cases({"good": dict(NODE_VARS), "bad": dict(NODE_VARS, sglang_services_env_dir="/etc")}, playbook="site.yml",
                             node=B300, groups=GROUPS)
    runs["foreign"] = (foreign_before, fingerprint(host, *FOREIGN))
    return runs, before, fingerprint(host)


@pytest.mark.parametrize("mode", MODES)
def test_good_input_passes_the_preflight_unchanged(preflight_runs, mode):
    result = preflight_runs[0][mode]["ok"]
    assert not result.failed, result
    assert result.changed == 0, result


@pytest.mark.parametrize("mode,index", [("normal", index) for index in range(len(CASES))]
                         + [("check", index) for index in CHECK_MODE_CASES],
                         ids=["normal-" + IDS[index] for index in range(len(CASES))]
                         + ["check-" + IDS[index] for index in CHECK_MODE_CASES])
def test_bad_input_fails_in_preflight_and_changes_nothing(preflight_runs, mode, index):
    runs, before, after = preflight_runs
    result = runs[mode][str(index)]
    assert result.failed, result
    assert CASES[index][1] in result.text, result
    assert result.changed == 0, result
    assert_unchanged(before, after)


def test_foreign_directories_are_as_they_were(preflight_runs):
    before, after = preflight_runs[0]["foreign"]
    assert_unchanged(before, after, "a foreign directory (%s)" % ", ".join(FOREIGN))


def test_argument_specs_refuse_a_non_boolean_by_name(preflight_runs):
    result = preflight_runs[0]["normal"][str(next(i for i, (_v, m) in enumerate(CASES) if m == "sglang_services_start_without_gpus"))]
    assert "sglang_services_start_without_gpus" in result.text and "not a valid boolean" in result.text, result


def test_one_bad_host_stops_site_before_any_host_changes(preflight_runs):
    runs, before, after = preflight_runs
    bad, good = runs["site"]["bad"], runs["site"]["good"]
    assert bad.failed and "sglang_services_env_dir is /etc" in bad.text, bad
    # The good host passed its preflight, then the run stopped: no task of the main play ran anywhere.
    assert good.changed == 0 and bad.changed == 0
    assert "Summary of this host" not in good.tasks, good.tasks
    assert not any(name.startswith("Host packages") or "Build" in name for name in good.tasks), good.tasks
    assert any("preflight" in name.lower() for name in good.tasks), good.tasks
    assert_unchanged(before, after)
