# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' preflight checks, one function per check: {variable: value} (the role's variables by
their own names, and the facts the check reads) -> one sentence per problem, each naming the
variable to fix; [] when the input is good. A role's preflight calls one of these through its filter
and fails with the sentences (ansible.builtin.assert, ``that: problems | length == 0``), so an
operator sees every problem at once.

The sentences come from the shared checks (module_utils/preflight.py: paths, directories, env files,
booleans) and the role's own tables (cuda_arch.py, gpu_compat.py, gateway.py, sglang_services.py);
the few checks written here are the format checks a preflight used to spell in Jinja, with the same
messages (a value is shown as Ansible's to_json shows it).
"""

from __future__ import annotations

import json
import re

from ansible_collections.blackwell.sglang.plugins.module_utils import cache_census, gpu_compat
from ansible_collections.blackwell.sglang.plugins.module_utils.arch_select import flashinfer_select_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import gpu_coverage_problems, toolkit_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.gateway import gateway_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import (
    bool_problems,
    env_file_problems,
    path_problems,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import (
    extra_flag_on,
    gpu_set,
    sglang_services_active_list,
)

# Jinja's `is match` (re.match) patterns, as the preflights spelled them.
PLAIN_FILE_NAME = r"^[A-Za-z0-9_][A-Za-z0-9._-]*$"
PLAIN_DIR_NAME = r"^[A-Za-z0-9_.][A-Za-z0-9._-]*$"
WHOLE_NUMBER = r"^[0-9]+$"
RELEASE = r"^[0-9]+\.[0-9]+\.[0-9]+$"
INDEX_URL = r"^(https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?|file:///[^\s]*)$"
GATEWAY_WHEELHOUSES = ("none", "controller")
# A pinned requirement, name[extras]==version (pip's own grammar is wider; a fleet pins exactly).
PINNED = r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$"
# sglang_venv_flashinfer_version: empty (the packages' own pin) or X.Y.Z with a release suffix.
FLASHINFER_RELEASE = r"^([0-9]+\.[0-9]+\.[0-9]+([.a-z0-9]*)?)?$"


def _matches(pattern, value):
    """Jinja's `value is match(pattern)`: the value as text, matched at its start."""
    return re.match(pattern, "%s" % (value,)) is not None


def _json(value):
    """A value as Ansible's to_json shows it in a message."""
    return json.dumps(value)


def _given(value):
    """A path variable that may be left empty (Jinja's `value | length > 0`)."""
    return value is not None and len(value) > 0


def _as_list(value):
    """A list setting as the role's argument spec reads it: a string is split at commas (Ansible's
    `type: list` conversion, e.g. `-e sglang_venv_packages=sglang`), None is empty."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return list(value)


def _whole_number(value, minimum):
    """Jinja's `value | string is match('^[0-9]+$') and value | int >= minimum`."""
    return _matches(WHOLE_NUMBER, value) and int("%s" % (value,)) >= minimum


def sglang_node_problems(variables):
    """The sglang_node role's shared paths and names: sglang_node_home, _base_dir, _env_dir, _lib_dir
    and _kernel_cache_dir are directories the roles own; sglang_node_venv a path;
    sglang_node_flashinfer_env_file an env file the roles write; sglang_node_venv_env_name a plain file
    name and sglang_node_venv_stamp_dir a plain directory name (both live in each venv)."""
    v = variables
    problems = path_problems({name: v.get(name) for name in (
        "sglang_node_home", "sglang_node_base_dir", "sglang_node_env_dir", "sglang_node_lib_dir",
        "sglang_node_kernel_cache_dir")}, dedicated=True)
    problems += path_problems({"sglang_node_venv": v.get("sglang_node_venv")})
    problems += env_file_problems({"sglang_node_flashinfer_env_file": v.get("sglang_node_flashinfer_env_file")})
    name = v.get("sglang_node_venv_env_name")
    if not _matches(PLAIN_FILE_NAME, name):
        problems.append("sglang_node_venv_env_name must be a plain file name (it lives in each venv), got " + _json(name))
    stamp_dir = v.get("sglang_node_venv_stamp_dir")
    if not (_matches(PLAIN_DIR_NAME, stamp_dir) and stamp_dir not in (".", "..")):
        problems.append("sglang_node_venv_stamp_dir must be a plain directory name (it lives in each venv), got "
                        + _json(stamp_dir))
    return problems


def sglang_venv_problems(variables):
    """The sglang_venv role's settings: sglang_venv_home, _base_dir and _wheelhouse_controller_dir
    directories the role owns; sglang_venv_python and sglang_venv_ca_bundle (when set) paths;
    sglang_venv_rollback and _switch booleans; every package spec and constraint pinned
    (name==version; sglang_venv_packages, sglang_venv_flashinfer_version, sglang_venv_constraints);
    the index URLs well formed (sglang_venv_index_url, _extra_index_urls); sglang_venv_keep >= 1."""
    v = variables
    problems = path_problems({name: v.get(name) for name in (
        "sglang_venv_home", "sglang_venv_base_dir", "sglang_venv_wheelhouse_controller_dir")}, dedicated=True)
    paths = {"sglang_venv_python": v.get("sglang_venv_python")}
    if _given(v.get("sglang_venv_ca_bundle")):
        paths["sglang_venv_ca_bundle"] = v.get("sglang_venv_ca_bundle")
    problems += path_problems(paths)
    problems += bool_problems({name: v.get(name) for name in ("sglang_venv_rollback", "sglang_venv_switch")})
    flashinfer = v.get("sglang_venv_flashinfer_version") or ""
    specs = _as_list(v.get("sglang_venv_packages")) + (["flashinfer-python==%s" % flashinfer] if flashinfer else [])
    unpinned = [spec for spec in specs + _as_list(v.get("sglang_venv_constraints")) if not _matches(PINNED, spec)]
    if unpinned:
        problems.append("unpinned package specs %s (use name==version: a fleet must not drift)" % _json(unpinned))
    if not _matches(FLASHINFER_RELEASE, flashinfer):
        problems.append("sglang_venv_flashinfer_version %s is not X.Y.Z" % _json(flashinfer))
    index_url = v.get("sglang_venv_index_url")
    urls = ([index_url] if _given(index_url) else []) + _as_list(v.get("sglang_venv_extra_index_urls"))
    bad = [url for url in urls if not _matches(INDEX_URL, url)]
    if bad:
        problems.append("malformed index URLs %s (want http(s)://host[:port]/path or file:///path)" % _json(bad))
    keep = v.get("sglang_venv_keep")
    if not _whole_number(keep, 1):
        problems.append("sglang_venv_keep must be >= 1 (got %s): the venv in service is always kept" % (keep,))
    return problems


def flashinfer_problems(variables):
    """The flashinfer role's checks that need nothing installed: the GPUs found (sglang_node_gpus,
    the sglang_node role's fact) and flashinfer_cuda_archs name the same compute capabilities;
    flashinfer_venv and flashinfer_cuda_home (when set) paths; flashinfer_env_file an env file the
    role writes; flashinfer_patch a boolean."""
    v = variables
    gpus = v.get("sglang_node_gpus") or {}
    problems = flashinfer_select_problems(gpus.get("compute_capabilities"), v.get("flashinfer_cuda_archs"))
    paths = {"flashinfer_venv": v.get("flashinfer_venv")}
    if _given(v.get("flashinfer_cuda_home")):
        paths["flashinfer_cuda_home"] = v.get("flashinfer_cuda_home")
    problems += path_problems(paths)
    problems += env_file_problems({"flashinfer_env_file": v.get("flashinfer_env_file")})
    problems += bool_problems({"flashinfer_patch": v.get("flashinfer_patch")})
    return problems


def kernel_cache_problems(variables):
    """The kernel_cache role's paths: kernel_cache_dir a directory the role owns (not under /tmp);
    kernel_cache_store_dir, kernel_cache_venv and kernel_cache_cuda_home (each when set) paths;
    kernel_cache_flashinfer_env_file an env file; kernel_cache_venv_id empty or a plain directory
    name (the venv's workspace in kernel_cache_dir); kernel_cache_locations (name: a directory in
    the workspace, module_utils/cache_census.py) and kernel_cache_census_exempt (name: why) dicts;
    kernel_cache_triton_ptxas triton or toolkit."""
    v = variables
    problems = path_problems({"kernel_cache_dir": v.get("kernel_cache_dir")}, dedicated=True)
    problems += path_problems({name: v.get(name) for name in (
        "kernel_cache_store_dir", "kernel_cache_venv", "kernel_cache_cuda_home") if _given(v.get(name))})
    problems += env_file_problems({"kernel_cache_flashinfer_env_file": v.get("kernel_cache_flashinfer_env_file")})
    venv_id = v.get("kernel_cache_venv_id") or ""
    if venv_id and not _matches(PLAIN_FILE_NAME, venv_id):
        problems.append("kernel_cache_venv_id must be a plain directory name (the venv id, a workspace in "
                        "kernel_cache_dir), got " + _json(venv_id))
    locations, exempt = v.get("kernel_cache_locations") or {}, v.get("kernel_cache_census_exempt") or {}
    if not isinstance(locations, dict):
        problems.append("kernel_cache_locations must be a dict (a cache variable: a directory in the venv's workspace), got " + _json(locations))
    else:
        try:
            cache_census.locations(locations)
        except cache_census.CensusError as exc:
            problems.append(str(exc))
    if v.get("kernel_cache_triton_ptxas", "triton") not in ("triton", "toolkit"):
        problems.append("kernel_cache_triton_ptxas must be triton (Triton's bundled ptxas) or toolkit (the CUDA home's), got "
                        + _json(v.get("kernel_cache_triton_ptxas")))
    if not isinstance(exempt, dict) or not all(isinstance(why, str) and why.strip() for why in exempt.values()):
        problems.append("kernel_cache_census_exempt must be a dict (a variable: why it is no kernel cache), got " + _json(exempt))
    return problems


def cuda_toolkit_problems(variables):
    """The cuda_toolkit role's preflight: the toolkit version against the target archs
    (cuda_toolkit_target_archs), the targets against the GPUs found (sglang_node_gpus, the
    sglang_node role's fact), the paths (cuda_toolkit_pip_prefix, _pip_python and _pip_ca_bundle only
    where they are used), cuda_toolkit_apt_hold a boolean, and with GPUs the driver against the
    toolkit and the kernel modules Blackwell needs."""
    v = variables
    archs, version, method = v.get("cuda_toolkit_target_archs"), v.get("cuda_toolkit_version"), v.get("cuda_toolkit_install_method")
    gpus = v.get("sglang_node_gpus") or {}
    problems = toolkit_problems(archs, version, "cuda_toolkit_target_archs (by default sglang_node_gpu_archs)")
    problems += gpu_coverage_problems(gpus.get("compute_capabilities"), archs, "cuda_toolkit_target_archs")
    pip = method == "pip"
    problems += path_problems({"cuda_toolkit_pip_prefix": v.get("cuda_toolkit_pip_prefix")} if pip else {}, dedicated=True)
    paths = {"cuda_toolkit_env_file": v.get("cuda_toolkit_env_file"),
             "cuda_toolkit_profile_script": v.get("cuda_toolkit_profile_script")}
    if pip:
        paths["cuda_toolkit_pip_python"] = v.get("cuda_toolkit_pip_python")
    if _given(v.get("cuda_toolkit_pip_ca_bundle")):
        paths["cuda_toolkit_pip_ca_bundle"] = v.get("cuda_toolkit_pip_ca_bundle")
    problems += path_problems(paths)
    problems += bool_problems({"cuda_toolkit_apt_hold": v.get("cuda_toolkit_apt_hold")})
    if gpus.get("present"):
        problems += gpu_compat.driver_problems(gpus.get("driver_version"), version)[0]
        problems += gpu_compat.kernel_module_problems(gpus.get("kernel_module"), gpus.get("compute_capabilities"))
    return problems


def sglang_services_input_problems(variables):
    """The sglang_services role's paths and booleans (its services' settings are checked by
    sglang_services.sglang_services_problems): sglang_services_venv and _flashinfer_env_file paths;
    sglang_services_env_dir, _lib_dir and _pycache_dir (when set) directories the role owns;
    sglang_services_nvidia_modprobe a path; sglang_services_start_without_gpus and
    sglang_services_crash_on_jit_compile booleans."""
    v = variables
    problems = path_problems({"sglang_services_venv": v.get("sglang_services_venv"),
                              "sglang_services_flashinfer_env_file": v.get("sglang_services_flashinfer_env_file")})
    dedicated = {"sglang_services_env_dir": v.get("sglang_services_env_dir"),
                 "sglang_services_lib_dir": v.get("sglang_services_lib_dir")}
    if _given(v.get("sglang_services_pycache_dir")):
        dedicated["sglang_services_pycache_dir"] = v.get("sglang_services_pycache_dir")
    problems += path_problems(dedicated, dedicated=True)
    problems += path_problems({"sglang_services_nvidia_modprobe": v.get("sglang_services_nvidia_modprobe")})
    problems += bool_problems({name: v.get(name) for name in ("sglang_services_start_without_gpus", "sglang_services_crash_on_jit_compile")})
    return problems


def sglang_services_gpu_problems(settings_by_name, variables):
    """The active services (sglang_services_active; their merged settings `settings_by_name`) against
    the host's GPUs (sglang_node_gpus; without GPUs the compute capabilities of sglang_node_gpu_archs):
    attention backends that run on them and, with GPUs, enough GPUs for tp x pp (x dp); and the GPU
    validation's own settings (sglang_services_nccl_p2p, sglang_services_validate,
    sglang_services_validate_timeout)."""
    v = variables
    gpus = v.get("sglang_node_gpus") or {}
    active = sglang_services_active_list(v.get("sglang_services_active"))
    ccs, source = gpu_compat.host_compute_capabilities(gpus, v.get("sglang_node_gpu_archs"))
    problem = gpu_compat.nccl_p2p_problem(v.get("sglang_services_nccl_p2p"))
    problems = [problem] if problem else []
    mode = v.get("sglang_services_custom_all_reduce", "auto")
    if mode not in gpu_compat.CUSTOM_ALL_REDUCE_MODES:
        problems.append("sglang_services_custom_all_reduce must be one of %s, got %s"
                        % (", ".join(gpu_compat.CUSTOM_ALL_REDUCE_MODES), _json(mode)))
    elif mode == "on":
        problems += ["sglang_services_custom_all_reduce is on, but sglang_services_%s extra_args disable-custom-all-reduce "
                     "turns SGLang's custom all-reduce off: remove one of the two" % name
                     for name in active if extra_flag_on((settings_by_name.get(name) or {}).get("extra_args"), "disable-custom-all-reduce")]
    problems += bool_problems({"sglang_services_validate": v.get("sglang_services_validate"),
                               "sglang_services_resolve_backends": v.get("sglang_services_resolve_backends", True)})
    timeout = v.get("sglang_services_validate_timeout")
    if not _whole_number(timeout, 1):
        problems.append("sglang_services_validate_timeout must be a whole number of seconds > 0, got " + _json(timeout))
    problems += gpu_compat.backend_problems(settings_by_name, active, ccs, source)
    if gpus.get("present"):
        problems += gpu_compat.gpu_count_problems(settings_by_name, active, int(gpus.get("count")))
    return problems


def sglang_services_custom_all_reduce(settings_by_name, variables):
    """SGLang's custom all-reduce of each active service (module_utils/gpu_compat.custom_all_reduce):
    {service: {"disable": bool, "why": str, "add_flag": bool}} from the host's GPUs and topology
    (sglang_node_gpus), the services whose NCCL runs without P2P (p2p_off: the GPU validation's
    decision) and sglang_services_custom_all_reduce. add_flag: the role adds --disable-custom-all-reduce
    (false where the service's extra_args already has it). Without GPUs: {}."""
    v = variables
    gpus = v.get("sglang_node_gpus") or {}
    if not gpus.get("present"):
        return {}
    indices = [gpu.get("index") for gpu in gpus.get("gpus") or []]
    decisions = {}
    for name in sglang_services_active_list(v.get("sglang_services_active")):
        settings = settings_by_name.get(name) or {}
        try:
            devices = gpu_set(settings.get("cuda_visible_devices")) or indices
        except ValueError:
            continue  # reported by the preflight
        disable, why = gpu_compat.custom_all_reduce(devices, gpus.get("topology") or {}, name in (v.get("p2p_off") or []),
                                                    v.get("sglang_services_custom_all_reduce") or "auto",
                                                    tp_size=gpu_compat.tp_size(settings))
        explicit = extra_flag_on(settings.get("extra_args"), "disable-custom-all-reduce")
        if explicit:
            disable, why = True, "extra_args disable-custom-all-reduce"
        decisions[name] = {"disable": disable, "why": why, "add_flag": disable and not explicit}
    return decisions


def sglang_gateway_problems(variables):
    """The sglang_gateway role's settings (module_utils/gateway.gateway_problems: ports, policy,
    timeouts, workers, extra_args, keys, against the host's sglang_services_endpoints,
    sglang_services_active and group_names), its directories and paths, index URL, uv and smg
    releases, wheelhouse mode, booleans and ready timeout. Keys are checked, never shown."""
    v = variables
    problems = gateway_problems({
        "host": v.get("sglang_gateway_host"), "port": v.get("sglang_gateway_port"),
        "metrics_host": v.get("sglang_gateway_metrics_host"), "metrics_port": v.get("sglang_gateway_metrics_port"),
        "policy": v.get("sglang_gateway_policy"), "request_timeout": v.get("sglang_gateway_request_timeout"),
        "worker_startup_timeout": v.get("sglang_gateway_worker_startup_timeout"),
        "workers": v.get("sglang_gateway_workers"), "extra_args": v.get("sglang_gateway_extra_args"),
        "api_key": v.get("sglang_gateway_api_key"),
        "control_plane_api_keys": v.get("sglang_gateway_control_plane_api_keys"),
        "service_ports": v.get("sglang_services_endpoints") or {},
        "serves": v.get("sglang_services_active"), "groups": v.get("group_names")})
    problems += path_problems({name: v.get(name) for name in (
        "sglang_gateway_base_dir", "sglang_gateway_state_dir", "sglang_gateway_env_dir")}, dedicated=True)
    paths = {"sglang_gateway_python": v.get("sglang_gateway_python"),
             "sglang_gateway_wheelhouse_controller_dir": v.get("sglang_gateway_wheelhouse_controller_dir")}
    if _given(v.get("sglang_gateway_ca_bundle")):
        paths["sglang_gateway_ca_bundle"] = v.get("sglang_gateway_ca_bundle")
    problems += path_problems(paths)
    index_url = v.get("sglang_gateway_index_url")
    if _given(index_url) and not _matches(INDEX_URL, index_url):
        problems.append("malformed sglang_gateway_index_url " + _json(index_url)
                        + " (want http(s)://host[:port]/path or file:///path)")
    uv_version = v.get("sglang_gateway_uv_version")
    if not _matches(RELEASE, uv_version):
        problems.append("sglang_gateway_uv_version must be X.Y.Z (a uv release), got " + _json(uv_version))
    problems += bool_problems({name: v.get(name) for name in (
        "sglang_gateway_dp_aware", "sglang_gateway_tokenizer_autoload", "sglang_gateway_allow_plaintext_secrets")})
    version = v.get("sglang_gateway_version")
    if not _matches(RELEASE, version):
        problems.append("sglang_gateway_version must be X.Y.Z (an exact smg release), got " + _json(version))
    wheelhouse = v.get("sglang_gateway_wheelhouse")
    if wheelhouse not in GATEWAY_WHEELHOUSES:
        problems.append("sglang_gateway_wheelhouse must be none or controller, got " + _json(wheelhouse))
    if not _whole_number(v.get("sglang_gateway_ready_timeout"), 1):
        problems.append("sglang_gateway_ready_timeout must be a whole number of seconds >= 1")
    return problems
