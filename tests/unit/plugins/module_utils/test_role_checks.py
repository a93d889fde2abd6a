"""The roles' preflight checks (module_utils/role_checks.py): one function per check, over the role's
variables by name, one sentence per problem naming the variable to fix. The sentences are those the
preflights spelled in Jinja before (molecule/b300/tests/test_preflight.py and
tests/unit/playbooks/test_gateway_preflight.py check them on a node)."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import cuda, flashinfer, preflight, rollout, sglang_services
from ansible_collections.blackwell.sglang.plugins.module_utils import role_checks as rc

NODE = {
    "sglang_node_home": "/var/lib/sglang", "sglang_node_base_dir": "/opt/sglang", "sglang_node_env_dir": "/etc/sglang",
    "sglang_node_lib_dir": "/usr/local/lib/sglang", "sglang_node_kernel_cache_dir": "/var/cache/sglang/kernels",
    "sglang_node_venv": "/opt/sglang/venv", "sglang_node_flashinfer_env_file": "/etc/sglang/flashinfer.env",
    "sglang_node_venv_env_name": "venv.env", "sglang_node_venv_stamp_dir": ".blackwell-sglang",
}
VENV = {
    "sglang_venv_home": "/var/lib/sglang", "sglang_venv_base_dir": "/opt/sglang",
    "sglang_venv_wheelhouse_controller_dir": "/srv/wheelhouses", "sglang_venv_python": "/usr/bin/python3.11",
    "sglang_venv_ca_bundle": "", "sglang_venv_rollback": False, "sglang_venv_switch": True,
    "sglang_venv_packages": ["sglang[all]==0.5.23"], "sglang_venv_flashinfer_version": "0.7.2",
    "sglang_venv_constraints": ["torch==2.14.1+cu130"], "sglang_venv_index_url": "https://pypi.org/simple",
    "sglang_venv_extra_index_urls": ["file:///srv/wheels"], "sglang_venv_keep": 3,
}
FLASHINFER = {
    "sglang_node_gpus": {"present": False, "compute_capabilities": []}, "flashinfer_cuda_archs": ["12.0"],
    "flashinfer_venv": "/opt/sglang/current", "flashinfer_cuda_home": "/opt/cuda/13.0.2",
    "flashinfer_env_file": "/etc/sglang/flashinfer.env", "flashinfer_patch": True,
}
KERNEL_CACHE = {
    "kernel_cache_dir": "/var/lib/sglang/kernel-caches", "kernel_cache_store_dir": "/root/.cache/blackwell-sglang/kernels",
    "kernel_cache_venv": "/opt/sglang/venvs/03cc642be31cb6ed", "kernel_cache_cuda_home": "/opt/cuda/13.0.2",
    "kernel_cache_flashinfer_env_file": "/etc/sglang/flashinfer.env", "kernel_cache_venv_id": "03cc642be31cb6ed",
}
NO_GPUS = {"present": False, "count": 0, "compute_capabilities": [], "driver_version": None}
B300_GPUS = {"present": True, "count": 8, "compute_capabilities": ["10.3"], "driver_version": "580.95.05",
             "kernel_module": "open"}
CUDA = {
    "cuda_toolkit_target_archs": ["10.3"], "cuda_toolkit_version": "13.0.2", "cuda_toolkit_install_method": "apt",
    "cuda_toolkit_pip_prefix": "/opt/cuda", "cuda_toolkit_env_file": "/etc/sglang/cuda.env",
    "cuda_toolkit_profile_script": "/etc/profile.d/cuda-sglang.sh", "cuda_toolkit_pip_python": "/usr/bin/python3",
    "cuda_toolkit_pip_ca_bundle": "/etc/ssl/certs/ca-certificates.crt", "cuda_toolkit_apt_hold": True,
    "sglang_node_gpus": NO_GPUS,
}
SERVICES_INPUT = {
    "sglang_services_venv": "/opt/sglang/venv", "sglang_services_flashinfer_env_file": "/etc/sglang/flashinfer.env",
    "sglang_services_env_dir": "/etc/sglang/services", "sglang_services_lib_dir": "/usr/local/lib/sglang",
    "sglang_services_pycache_dir": "", "sglang_services_start_without_gpus": False,
    "sglang_services_crash_on_jit_compile": False, "sglang_services_nvidia_modprobe": "/usr/bin/nvidia-modprobe",
}
SETTINGS = {"eagle3": {"tp_size": 1, "pp_size": 1, "cuda_visible_devices": [], "attention_backend": ""}}
SERVICES_GPU = {
    "sglang_services_active": "eagle3", "sglang_node_gpus": NO_GPUS, "sglang_node_gpu_archs": ["10.3a"],
    "sglang_services_nccl_p2p": "auto", "sglang_services_validate": True, "sglang_services_validate_timeout": 600,
}
GATEWAY = {
    "sglang_gateway_host": "0.0.0.0", "sglang_gateway_port": 30080, "sglang_gateway_metrics_host": "127.0.0.1",
    "sglang_gateway_metrics_port": 29000, "sglang_gateway_policy": "cache_aware", "sglang_gateway_request_timeout": 1800,
    "sglang_gateway_worker_startup_timeout": 1800, "sglang_gateway_workers": None, "sglang_gateway_extra_args": {},
    "sglang_gateway_api_key": "s3cret", "sglang_gateway_control_plane_api_keys": ["ops:Operators:admin:k3y"],
    "sglang_services_endpoints": {}, "sglang_services_active": None, "group_names": ["sglang_gateway"],
    "sglang_gateway_base_dir": "/opt/sglang-gateway", "sglang_gateway_state_dir": "/var/lib/sglang-gateway",
    "sglang_gateway_env_dir": "/etc/sglang-gateway", "sglang_gateway_python": "/usr/bin/python3",
    "sglang_gateway_wheelhouse_controller_dir": "/root/.cache/blackwell-sglang/wheelhouse",
    "sglang_gateway_ca_bundle": "/etc/ssl/certs/ca-certificates.crt", "sglang_gateway_index_url": "",
    "sglang_gateway_uv_version": "0.13.9", "sglang_gateway_dp_aware": False, "sglang_gateway_tokenizer_autoload": "no",
    "sglang_gateway_allow_plaintext_secrets": False, "sglang_gateway_version": "1.13.0",
    "sglang_gateway_wheelhouse": "none", "sglang_gateway_ready_timeout": 60,
}


def test_good_input_has_no_problems():
    assert rc.sglang_node_problems(NODE) == []
    assert rc.cuda_toolkit_problems(CUDA) == []
    assert rc.sglang_venv_problems(VENV) == []
    assert rc.flashinfer_problems(FLASHINFER) == []
    assert rc.kernel_cache_problems(KERNEL_CACHE) == []
    assert rc.cuda_toolkit_problems(dict(CUDA, sglang_node_gpus=B300_GPUS)) == []
    assert rc.sglang_services_input_problems(SERVICES_INPUT) == []
    assert rc.sglang_services_gpu_problems(SETTINGS, SERVICES_GPU) == []
    assert rc.sglang_services_gpu_problems(SETTINGS, dict(SERVICES_GPU, sglang_node_gpus=B300_GPUS)) == []
    assert rc.sglang_gateway_problems(GATEWAY) == []


def test_the_filters_are_these_functions():
    assert preflight.FilterModule().filters()["sglang_venv_problems"] is rc.sglang_venv_problems
    assert flashinfer.FilterModule().filters()["flashinfer_problems"] is rc.flashinfer_problems
    assert flashinfer.FilterModule().filters()["kernel_cache_problems"] is rc.kernel_cache_problems
    assert preflight.FilterModule().filters()["sglang_node_problems"] is rc.sglang_node_problems
    assert cuda.FilterModule().filters()["cuda_toolkit_preflight_problems"] is rc.cuda_toolkit_problems
    assert sglang_services.FilterModule().filters()["sglang_services_input_problems"] is rc.sglang_services_input_problems
    assert sglang_services.FilterModule().filters()["sglang_services_gpu_problems"] is rc.sglang_services_gpu_problems
    assert rollout.FilterModule().filters()["sglang_gateway_problems"] is rc.sglang_gateway_problems


@pytest.mark.parametrize("change, problems", [
    ({"sglang_node_home": "/var/lib/sglang\n"},
     ["sglang_node_home holds '\\n' in '/var/lib/sglang\\n'; a path here may hold only letters, digits and . _ + @ - / "
      "(':' splits PATH, spaces and newlines break env files)"]),
    ({"sglang_node_lib_dir": "/tmp/bsg"},
     ["sglang_node_lib_dir is /tmp/bsg, under /tmp/ (not kept on disk, or cleared); use a directory of its own"]),
    ({"sglang_node_venv": "venv"}, ["sglang_node_venv must be an absolute path (start with /), got 'venv'"]),
    ({"sglang_node_venv": "/opt"}, []),  # a path, not a directory the roles own
    ({"sglang_node_flashinfer_env_file": "/etc/default/f"}, [
        "sglang_node_flashinfer_env_file is /etc/default/f, a file in /etc/default, a directory the system shares; the roles keep "
        "their files out of it: put the file in a directory of its own, e.g. /etc/sglang/f"]),
    ({"sglang_node_venv_env_name": "a/b"},
     ['sglang_node_venv_env_name must be a plain file name (it lives in each venv), got "a/b"']),
    ({"sglang_node_venv_env_name": ".env"},
     ['sglang_node_venv_env_name must be a plain file name (it lives in each venv), got ".env"']),
    ({"sglang_node_venv_stamp_dir": ".."},
     ['sglang_node_venv_stamp_dir must be a plain directory name (it lives in each venv), got ".."']),
    ({"sglang_node_venv_stamp_dir": "."},
     ['sglang_node_venv_stamp_dir must be a plain directory name (it lives in each venv), got "."']),
    ({"sglang_node_venv_stamp_dir": "a b"},
     ['sglang_node_venv_stamp_dir must be a plain directory name (it lives in each venv), got "a b"']),
    ({"sglang_node_home": "/etc", "sglang_node_venv_env_name": ""}, [
        "sglang_node_home is /etc, a directory the system shares; the roles keep their files out of it. "
        "Use a directory of its own, e.g. /etc/sglang",
        'sglang_node_venv_env_name must be a plain file name (it lives in each venv), got ""']),
])
def test_sglang_node(change, problems):
    assert rc.sglang_node_problems(dict(NODE, **change)) == problems


@pytest.mark.parametrize("change, problems", [
    ({"cuda_toolkit_version": "13.0.2\n"}, ["CUDA toolkit version '13.0.2\\n' is not a full X.Y.Z version (e.g. 13.0.2)"]),
    ({"cuda_toolkit_target_archs": ["10.3"], "cuda_toolkit_version": "12.8.1"},
     ["target 10.3 needs CUDA toolkit >= 12.9, but 12.8.1 was requested"]),
    ({"sglang_node_gpus": dict(B300_GPUS, compute_capabilities=["12.1"]), "cuda_toolkit_version": "13.0.2"}, [
        "cuda_toolkit_target_archs [10.3] does not cover the GPUs found on this host (compute capability 12.1); set "
        "sglang_node_gpu_archs (or cuda_toolkit_target_archs) for this host's group to the GPUs' compute capabilities"]),
    # The pip paths are checked only for the pip method; the CA bundle only when set.
    ({"cuda_toolkit_pip_prefix": ":/opt/cuda", "cuda_toolkit_pip_python": "python3"}, []),
    ({"cuda_toolkit_install_method": "pip", "cuda_toolkit_pip_prefix": ":/opt/cuda", "cuda_toolkit_pip_python": "python3"}, [
        "cuda_toolkit_pip_prefix must be an absolute path (start with /), got ':/opt/cuda'",
        "cuda_toolkit_pip_python must be an absolute path (start with /), got 'python3'"]),
    ({"cuda_toolkit_install_method": "pip", "cuda_toolkit_pip_prefix": "/opt"}, [
        "cuda_toolkit_pip_prefix is /opt, a directory the system shares; the roles keep their files out of it. Use a directory of its own, e.g. /opt/sglang"]),
    ({"cuda_toolkit_pip_ca_bundle": ""}, []),
    ({"cuda_toolkit_pip_ca_bundle": "ca.pem"}, ["cuda_toolkit_pip_ca_bundle must be an absolute path (start with /), got 'ca.pem'"]),
    ({"cuda_toolkit_env_file": "/etc/cuda.env/"},
     ["cuda_toolkit_env_file must not end with / (got '/etc/cuda.env/'); write '/etc/cuda.env'"]),
    ({"cuda_toolkit_apt_hold": "perhaps"}, ["cuda_toolkit_apt_hold: 'perhaps' is not a boolean (use true or false)"]),
    ({"cuda_toolkit_apt_hold": "yes"}, []),
    ({"cuda_toolkit_target_archs": ["bogus"]}, [
        "cuda_toolkit_target_archs (by default sglang_node_gpu_archs): target arch 'bogus' is not of the form M.m "
        "(e.g. '12.0' for RTX PRO 6000, '10.3' for B300)"]),
])
def test_cuda_toolkit(change, problems):
    assert rc.cuda_toolkit_problems(dict(CUDA, **change)) == problems


def test_cuda_toolkit_with_gpus_the_driver_and_kernel_modules():
    old_driver = dict(CUDA, sglang_node_gpus=dict(B300_GPUS, driver_version="570.172.08"))
    [problem] = rc.cuda_toolkit_problems(old_driver)
    assert problem.startswith("NVIDIA driver 570.172.08 is too old for CUDA toolkit 13.0.2: CUDA 13.x needs a driver "
                              ">= 580 (>= 580.95.05 for 13.0.2 itself")
    [problem] = rc.cuda_toolkit_problems(dict(CUDA, sglang_node_gpus=dict(B300_GPUS, kernel_module="proprietary")))
    assert problem.startswith("the proprietary NVIDIA kernel module is loaded, but Blackwell GPUs (compute capability "
                              "10.3) need the open kernel modules")
    # Without GPUs neither is read (nvidia_gpu_info has no driver then); a fact without kernel_module is fine.
    assert rc.cuda_toolkit_problems(dict(CUDA, sglang_node_gpus=dict(NO_GPUS, kernel_module="proprietary"))) == []
    gpus = dict(B300_GPUS)
    del gpus["kernel_module"]
    assert rc.cuda_toolkit_problems(dict(CUDA, sglang_node_gpus=gpus)) == []


def test_cuda_toolkit_reports_every_problem_in_order():
    problems = rc.cuda_toolkit_problems(dict(
        CUDA, cuda_toolkit_version="12.8.1", cuda_toolkit_install_method="pip", cuda_toolkit_pip_prefix="/tmp/cuda",
        cuda_toolkit_profile_script="x", cuda_toolkit_apt_hold="maybe",
        sglang_node_gpus=dict(B300_GPUS, compute_capabilities=["12.0"], kernel_module="proprietary")))
    assert [p.split(" ")[0] for p in problems] == [
        "target", "cuda_toolkit_target_archs", "cuda_toolkit_pip_prefix", "cuda_toolkit_profile_script",
        "cuda_toolkit_apt_hold:", "the"]


@pytest.mark.parametrize("change, problems", [
    ({"sglang_services_env_dir": "/etc"}, [
        "sglang_services_env_dir is /etc, a directory the system shares; the roles keep their files out of it. Use a directory of its own, e.g. /etc/sglang"]),
    ({"sglang_services_pycache_dir": "/tmp/pyc"},
     ["sglang_services_pycache_dir is /tmp/pyc, under /tmp/ (not kept on disk, or cleared); use a directory of its own"]),
    ({"sglang_services_venv": "/opt/v/../w", "sglang_services_flashinfer_env_file": "f.env"}, [
        "sglang_services_venv must be normalised, without . or .. components, got '/opt/v/../w'",
        "sglang_services_flashinfer_env_file must be an absolute path (start with /), got 'f.env'"]),
    ({"sglang_services_start_without_gpus": "maybe"},
     ["sglang_services_start_without_gpus: 'maybe' is not a boolean (use true or false)"]),
    ({"sglang_services_crash_on_jit_compile": "always"},
     ["sglang_services_crash_on_jit_compile: 'always' is not a boolean (use true or false)"]),
    ({"sglang_services_nvidia_modprobe": "nvidia-modprobe"},
     ["sglang_services_nvidia_modprobe must be an absolute path (start with /), got 'nvidia-modprobe'"]),
    ({"sglang_services_lib_dir": "/usr"}, [
        "sglang_services_lib_dir is /usr, a directory the system shares; the roles keep their files out of it. Use a directory of its own, e.g. /usr/sglang"]),
])
def test_sglang_services_input(change, problems):
    assert rc.sglang_services_input_problems(dict(SERVICES_INPUT, **change)) == problems


@pytest.mark.parametrize("timeout, good", [
    (600, True), ("600", True), (1, True), ("007", True), (0, False), ("0", False), (-1, False), ("10m", False),
    ("", False), (None, False), (True, False), (1.5, False),
])
def test_sglang_services_validate_timeout(timeout, good):
    problems = rc.sglang_services_gpu_problems(SETTINGS, dict(SERVICES_GPU, sglang_services_validate_timeout=timeout))
    import json
    assert problems == ([] if good else [
        "sglang_services_validate_timeout must be a whole number of seconds > 0, got %s" % json.dumps(timeout)])


def test_sglang_services_gpu_checks():
    assert rc.sglang_services_gpu_problems(SETTINGS, dict(SERVICES_GPU, sglang_services_nccl_p2p="maybe")) == [
        "sglang_services_nccl_p2p must be one of auto, on, off, got 'maybe'"]
    assert rc.sglang_services_gpu_problems(SETTINGS, dict(SERVICES_GPU, sglang_services_validate="sure")) == [
        "sglang_services_validate: 'sure' is not a boolean (use true or false)"]
    # Without GPUs, the backends are checked against sglang_node_gpu_archs (suffix dropped) and no count.
    fa3 = {"eagle3": dict(SETTINGS["eagle3"], attention_backend="fa3", tp_size=16)}
    [problem] = rc.sglang_services_gpu_problems(fa3, SERVICES_GPU)
    assert problem.startswith("sglang_services_eagle3: attention_backend fa3 cannot run on compute capability 10.3 "
                              "(sglang_node_gpu_archs; ")
    # With GPUs: the host's GPUs, and the count.
    problems = rc.sglang_services_gpu_problems(fa3, dict(SERVICES_GPU, sglang_node_gpus=dict(B300_GPUS, count="8")))
    assert "(this host's GPUs; " in problems[0]
    assert problems[1] == "sglang_services_eagle3: needs 16 GPUs (tp_size 16 x pp_size 1) but has 8 (all of this host's GPUs)"
    # Only the active services.
    assert rc.sglang_services_gpu_problems(fa3, dict(SERVICES_GPU, sglang_services_active="none")) == []


@pytest.mark.parametrize("change, problem", [
    ({"sglang_gateway_index_url": "pypi.org/simple"},
     'malformed sglang_gateway_index_url "pypi.org/simple" (want http(s)://host[:port]/path or file:///path)'),
    ({"sglang_gateway_index_url": "https://pypi.org/simple x"},
     'malformed sglang_gateway_index_url "https://pypi.org/simple x" (want http(s)://host[:port]/path or file:///path)'),
    ({"sglang_gateway_uv_version": "latest"}, 'sglang_gateway_uv_version must be X.Y.Z (a uv release), got "latest"'),
    ({"sglang_gateway_version": "1.13"}, 'sglang_gateway_version must be X.Y.Z (an exact smg release), got "1.13"'),
    ({"sglang_gateway_wheelhouse": "host"}, 'sglang_gateway_wheelhouse must be none or controller, got "host"'),
    ({"sglang_gateway_ready_timeout": 0}, "sglang_gateway_ready_timeout must be a whole number of seconds >= 1"),
    ({"sglang_gateway_ready_timeout": "1m"}, "sglang_gateway_ready_timeout must be a whole number of seconds >= 1"),
    ({"sglang_gateway_ca_bundle": "certs.pem"}, "sglang_gateway_ca_bundle must be an absolute path (start with /), got 'certs.pem'"),
    ({"sglang_gateway_state_dir": "/var/lib"}, "sglang_gateway_state_dir is /var/lib, a directory the system shares"),
    ({"sglang_gateway_python": "python3"}, "sglang_gateway_python must be an absolute path (start with /), got 'python3'"),
    ({"sglang_gateway_wheelhouse_controller_dir": "wheels"},
     "sglang_gateway_wheelhouse_controller_dir must be an absolute path (start with /), got 'wheels'"),
    ({"sglang_gateway_dp_aware": "perhaps"}, "sglang_gateway_dp_aware: 'perhaps' is not a boolean (use true or false)"),
    ({"sglang_gateway_port": 70000}, "sglang_gateway_port must be a port number in 1-65535, got 70000"),
    ({"sglang_services_endpoints": {"eagle3": {"url": "http://127.0.0.1:30080", "port": 30080}}},
     "sglang_gateway_port 30080 is the port of the SGLang service eagle3 on this host"),
    ({"sglang_services_active": "eagle3", "group_names": ["sglang", "sglang_gateway"]},
     'this host is in sglang_gateway and also serves (sglang_services_active "eagle3", from its groups sglang)'),
])
def test_sglang_gateway(change, problem):
    problems = rc.sglang_gateway_problems(dict(GATEWAY, **change))
    assert len(problems) == 1 and problems[0].startswith(problem), problems


@pytest.mark.parametrize("change", [
    {"sglang_gateway_index_url": "https://mirror.lan:8443/simple"}, {"sglang_gateway_index_url": "file:///srv/wheels"},
    {"sglang_gateway_index_url": "http://pypi"}, {"sglang_gateway_ca_bundle": ""}, {"sglang_gateway_ready_timeout": "30"},
    {"sglang_gateway_wheelhouse": "controller"}, {"sglang_gateway_allow_plaintext_secrets": "true"},
    {"sglang_gateway_ready_timeout": 1},
])
def test_sglang_gateway_good_values(change):
    assert rc.sglang_gateway_problems(dict(GATEWAY, **change)) == []


def test_sglang_gateway_never_shows_a_key():
    problems = rc.sglang_gateway_problems(dict(GATEWAY, sglang_gateway_api_key="top\nsecret",
                                               sglang_gateway_control_plane_api_keys=["hunter2"]))
    assert len(problems) == 2 and not any("secret" in p.split(" ", 1)[1] or "hunter" in p for p in problems), problems


# The messages molecule/default/tests/test_bad_input.py checks on a node (sglang_venv's preflight).
@pytest.mark.parametrize("change, problems", [
    ({"sglang_venv_packages": ["sglang"]}, ['unpinned package specs ["sglang"] (use name==version: a fleet must not drift)']),
    # -e name=value gives a string; the spec reads it as a list split at commas.
    ({"sglang_venv_packages": "sglang==0.5.23,torch"},
     ['unpinned package specs ["torch"] (use name==version: a fleet must not drift)']),
    ({"sglang_venv_constraints": ["torch>=2"], "sglang_venv_flashinfer_version": "0.7"}, [
        'unpinned package specs ["torch>=2"] (use name==version: a fleet must not drift)',
        'sglang_venv_flashinfer_version "0.7" is not X.Y.Z']),
    ({"sglang_venv_flashinfer_version": ""}, []),  # the packages' own pin
    ({"sglang_venv_index_url": "htps:/pypi.example", "sglang_venv_extra_index_urls": ["http://m:8080/simple", "ftp://x"]},
     ['malformed index URLs ["htps:/pypi.example", "ftp://x"] (want http(s)://host[:port]/path or file:///path)']),
    ({"sglang_venv_index_url": ""}, []),
    ({"sglang_venv_keep": 0}, ["sglang_venv_keep must be >= 1 (got 0): the venv in service is always kept"]),
    ({"sglang_venv_keep": "two"}, ["sglang_venv_keep must be >= 1 (got two): the venv in service is always kept"]),
    ({"sglang_venv_base_dir": "/opt", "sglang_venv_ca_bundle": "ca.pem", "sglang_venv_switch": "maybe"}, [
        "sglang_venv_base_dir is /opt, a directory the system shares; the roles keep their files out of it. Use a directory of its own, e.g. /opt/sglang",
        "sglang_venv_ca_bundle must be an absolute path (start with /), got 'ca.pem'",
        "sglang_venv_switch: 'maybe' is not a boolean (use true or false)"]),
    ({"sglang_venv_python": "python3", "sglang_venv_keep": 1},
     ["sglang_venv_python must be an absolute path (start with /), got 'python3'"]),
    # The FlashInfer version becomes a spec of its own, checked with the others.
    ({"sglang_venv_flashinfer_version": ">=0.7"}, [
        'unpinned package specs ["flashinfer-python==>=0.7"] (use name==version: a fleet must not drift)',
        'sglang_venv_flashinfer_version ">=0.7" is not X.Y.Z']),
])
def test_sglang_venv(change, problems):
    assert rc.sglang_venv_problems(dict(VENV, **change)) == problems


@pytest.mark.parametrize("change, problems", [
    ({"sglang_node_gpus": {"present": True, "compute_capabilities": ["12.1"]}}, [
        "flashinfer_cuda_archs 12.0 does not match the GPUs found on this host (compute capability 12.1); fix the "
        "inventory or leave flashinfer_cuda_archs unset to use the GPUs"]),
    ({"flashinfer_cuda_home": ""}, []),  # the cuda_toolkit role's fact, not known yet
    ({"flashinfer_cuda_home": "cuda", "flashinfer_patch": "sometimes"}, [
        "flashinfer_cuda_home must be an absolute path (start with /), got 'cuda'",
        "flashinfer_patch: 'sometimes' is not a boolean (use true or false)"]),
    ({"flashinfer_env_file": "/etc/default/f"}, [
        "flashinfer_env_file is /etc/default/f, a file in /etc/default, a directory the system shares; the roles keep "
        "their files out of it: put the file in a directory of its own, e.g. /etc/sglang/f"]),
    ({"flashinfer_venv": "venv"}, ["flashinfer_venv must be an absolute path (start with /), got 'venv'"]),
])
def test_flashinfer(change, problems):
    assert rc.flashinfer_problems(dict(FLASHINFER, **change)) == problems


@pytest.mark.parametrize("change, problems", [
    ({"kernel_cache_dir": "/var/lib/sglang/../cache"},
     ["kernel_cache_dir must be normalised, without . or .. components, got '/var/lib/sglang/../cache'"]),
    ({"kernel_cache_dir": "/tmp/kernels"},
     ["kernel_cache_dir is /tmp/kernels, under /tmp/ (not kept on disk, or cleared); use a directory of its own"]),
    ({"kernel_cache_store_dir": "", "kernel_cache_venv": "", "kernel_cache_cuda_home": "", "kernel_cache_venv_id": ""}, []),
    ({"kernel_cache_store_dir": "kernels"}, ["kernel_cache_store_dir must be an absolute path (start with /), got 'kernels'"]),
    ({"kernel_cache_venv_id": "../x"},
     ['kernel_cache_venv_id must be a plain directory name (the venv id, a workspace in kernel_cache_dir), got "../x"']),
    ({"kernel_cache_venv": "v", "kernel_cache_cuda_home": "c", "kernel_cache_flashinfer_env_file": "/etc/x.env/"}, [
        "kernel_cache_venv must be an absolute path (start with /), got 'v'",
        "kernel_cache_cuda_home must be an absolute path (start with /), got 'c'",
        "kernel_cache_flashinfer_env_file must not end with / (got '/etc/x.env/'); write '/etc/x.env'"]),
])
def test_kernel_cache(change, problems):
    assert rc.kernel_cache_problems(dict(KERNEL_CACHE, **change)) == problems


# ---- SGLang's custom all-reduce per active service ----------------------------------------------
PRO_PAIR = {"present": True, "count": 2, "compute_capabilities": ["12.0"], "gpus": [{"index": 0}, {"index": 1}],
            "topology": {"0": {"1": "PHB"}, "1": {"0": "PHB"}}}
PIX_PAIR = dict(PRO_PAIR, topology={"0": {"1": "PIX"}, "1": {"0": "PIX"}})
ALL_REDUCE = {"sglang_services_active": "eagle3", "sglang_node_gpus": PRO_PAIR, "p2p_off": [],
              "sglang_services_custom_all_reduce": "auto"}


def test_custom_all_reduce_per_service_from_the_topology_and_the_p2p_decision():
    decide = sglang_services.FilterModule().filters()["sglang_services_custom_all_reduce"]
    assert decide is rc.sglang_services_custom_all_reduce
    settings = {"eagle3": dict(SETTINGS["eagle3"], tp_size=2), "dflash": dict(SETTINGS["eagle3"], cuda_visible_devices=[1])}
    decided = decide(settings, ALL_REDUCE)
    assert list(decided) == ["eagle3"]
    decision = decided["eagle3"]
    assert (decision["disable"], decision["add_flag"]) == (True, True)
    assert "through the host bridge (PHB)" in decision["why"]
    # Behind a PCIe switch: SGLang's own; with NCCL's P2P off on those GPUs: disabled.
    assert decide(settings, dict(ALL_REDUCE, sglang_node_gpus=PIX_PAIR))["eagle3"]["disable"] is False
    assert decide(settings, dict(ALL_REDUCE, sglang_node_gpus=PIX_PAIR, p2p_off=["eagle3"]))["eagle3"]["add_flag"] is True
    # The service's own flag: disabled, not added twice; one GPU: nothing; no GPUs on the host: nothing.
    own = {"eagle3": dict(SETTINGS["eagle3"], tp_size=2, extra_args={"disable_custom_all_reduce": "yes"})}
    assert decide(own, dict(ALL_REDUCE, sglang_node_gpus=PIX_PAIR))["eagle3"] == {
        "disable": True, "why": "extra_args disable-custom-all-reduce", "add_flag": False}
    assert decide(settings, dict(ALL_REDUCE, sglang_services_active="dflash"))["dflash"]["disable"] is False
    assert decide(settings, dict(ALL_REDUCE, sglang_node_gpus=NO_GPUS)) == {}


def test_custom_all_reduce_settings_that_contradict_each_other_are_refused():
    own = {"eagle3": dict(SETTINGS["eagle3"], extra_args={"disable-custom-all-reduce": True})}
    assert rc.sglang_services_gpu_problems(own, dict(SERVICES_GPU, sglang_services_custom_all_reduce="on")) == [
        "sglang_services_custom_all_reduce is on, but sglang_services_eagle3 extra_args disable-custom-all-reduce turns "
        "SGLang's custom all-reduce off: remove one of the two"]
    assert rc.sglang_services_gpu_problems(own, dict(SERVICES_GPU, sglang_services_custom_all_reduce="off")) == []
    assert rc.sglang_services_gpu_problems(SETTINGS, dict(SERVICES_GPU, sglang_services_custom_all_reduce=True)) == [
        "sglang_services_custom_all_reduce must be one of auto, on, off, got true"]


def test_custom_all_reduce_on_an_eight_gpu_rtx_pro_6000_server():
    # tests/unit/plugins/fixtures/nvidia_smi/rtx_pro_6000_x8.topo.txt: pairs behind a PCIe switch (PIX),
    # pairs of one socket through its host bridges (NODE), across sockets (SYS).
    from ansible_collections.blackwell.sglang.plugins.module_utils.nvidia_smi import parse_topology
    here = os.path.dirname(os.path.dirname(__file__))
    with open(os.path.join(here, "fixtures", "nvidia_smi", "rtx_pro_6000_x8.topo.txt"), encoding="utf-8") as handle:
        matrix = parse_topology(handle.read())
    gpus = {"present": True, "gpus": [{"index": i} for i in range(8)],
            "topology": {str(g): {str(p): link for p, link in peers.items()} for g, peers in matrix.items()}}
    settings = {"eagle3": {"cuda_visible_devices": [], "tp_size": 8}, "dflash": {"cuda_visible_devices": [0, 1], "tp_size": 2},
                "autoregressive": {"cuda_visible_devices": [1, 2], "tp_size": 2}}
    decided = rc.sglang_services_custom_all_reduce(settings, dict(ALL_REDUCE, sglang_services_active=[
        "eagle3", "dflash", "autoregressive"], sglang_node_gpus=gpus))
    assert {name: d["disable"] for name, d in decided.items()} == {"eagle3": False, "dflash": False, "autoregressive": True}
    assert "more than two GPUs over PCIe: SGLang turns its custom all-reduce off itself" in decided["eagle3"]["why"]
    # The same eight GPUs with tp_size 2: four consecutive pairs, each behind one PCIe switch (PIX):
    # SGLang's own all-reduce.
    eight_by_two = {"eagle3": {"cuda_visible_devices": [], "tp_size": 2}}
    assert rc.sglang_services_custom_all_reduce(eight_by_two, dict(ALL_REDUCE, sglang_node_gpus=gpus))["eagle3"]["disable"] is False
    one_two = {"eagle3": {"cuda_visible_devices": [1, 2, 3, 4], "tp_size": 2}}  # pairs 1,2 (NODE) and 3,4 (SYS)
    assert "GPUs 1,2 reach each other through the host bridge (NODE)" in rc.sglang_services_custom_all_reduce(
        one_two, dict(ALL_REDUCE, sglang_node_gpus=gpus))["eagle3"]["why"]
    assert "through the host bridge (NODE)" in decided["autoregressive"]["why"]
