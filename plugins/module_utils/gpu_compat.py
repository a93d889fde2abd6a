# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a node can serve: driver <-> CUDA toolkit <-> torch, kernel modules, GPU counts,
attention backends <-> compute capability, and the NCCL peer-to-peer decision.

The one home of these tables and decisions: the roles' preflights call them through the filters of
plugins/filter/gpu.py and the roles' checks in role_checks.py, the nvidia_gpu_validate module imports the NCCL decision. Pure Python, no I/O;
each check returns sentences that name what was found and what to change ([] when all is well).
"""

from __future__ import annotations

import re

from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import InvalidVersion, Version
from ansible_collections.blackwell.sglang.plugins.module_utils.nvidia_smi import NVLINK_RE
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import extra_arg, gpu_set

DRIVER_TABLE_SOURCE = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver"
# CUDA release notes, "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64; arm64-sbsa uses
# the same driver releases): toolkit release -> the driver it shipped with. A driver at least this
# new runs everything the toolkit builds, PTX JIT included. Newest first.
CORRESPONDING_DRIVER = (
    ("13.2.2", "595.71.05"), ("13.2.1", "595.58.03"), ("13.2.0", "595.45.04"),
    ("13.1.1", "590.48.01"), ("13.1.0", "590.44.01"),
    ("13.0.2", "580.95.05"), ("13.0.1", "580.82.07"), ("13.0.0", "580.65.06"),
    ("12.9.1", "575.57.08"), ("12.9.0", "575.51.03"),
    ("12.8.1", "570.124.06"), ("12.8.0", "570.26"),
    ("12.6.3", "560.35.05"), ("12.6.2", "560.35.03"), ("12.6.1", "560.35.03"), ("12.6.0", "560.28.03"),
    ("12.5.1", "555.42.06"), ("12.5.0", "555.42.02"),
    ("12.4.1", "550.54.15"), ("12.4.0", "550.54.14"),
)
# Same notes, "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
# Compatibility": a driver of this branch or newer runs code built by any toolkit of that major
# (cubins for the exact target, as FlashInfer and the validation kernel build; not PTX JIT of a newer
# toolkit, not features that need a newer driver: cudaErrorCallRequiresNewerDriver).
MINOR_COMPAT_DRIVER = {13: "580", 12: "525.60.13"}
MINOR_COMPAT_SOURCE = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"

# NVIDIA, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules" (2024): "For cutting-edge
# platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the open-source GPU kernel
# modules. The proprietary drivers are unsupported on these platforms." Blackwell = compute capability
# 10.x (B200, B300), 11.x and 12.x (RTX PRO 6000, GB10).
OPEN_MODULES_SOURCE = "https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/"
OPEN_MODULES_FROM_MAJOR = 10

NCCL_P2P_MODES = ("auto", "on", "off")
CUSTOM_ALL_REDUCE_MODES = ("auto", "on", "off")
# SGLang 0.5.23's custom all-reduce (sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py,
# can_use_custom_all_reduce_with_nvlink) runs for 2, 4, 6 or 8 GPUs of one node when NVLink joins them
# all, or for exactly two PCIe GPUs whose P2P test passes; it turns itself off for more than two
# PCIe-only GPUs and after a failed P2P test. What it does not see: a P2P path that passes the test
# and then hangs, and two GPUs that reach each other only through the host bridge.
CUSTOM_ALL_REDUCE_SOURCE = "SGLang 0.5.23 custom_all_reduce_utils.py can_use_custom_all_reduce_with_nvlink"
HOST_BRIDGE_LINKS = ("PHB", "NODE", "SYS", "SOC")  # SOC: older drivers' name for SYS


def _version(text):
    try:
        return Version(str(text))
    except (InvalidVersion, TypeError, ValueError):
        return None


def corresponding_driver(toolkit_version):
    """The driver the toolkit release shipped with ('580.95.05' for 13.0.2); None when the table has no row."""
    wanted = _version(toolkit_version)
    for toolkit, driver in CORRESPONDING_DRIVER:
        if wanted is not None and _version(toolkit) == wanted:
            return driver
    return None


def driver_problems(driver_version, toolkit_version):
    """(problems, warnings) for running code the toolkit builds under this driver.

    A problem: the driver is older than the minor-version-compatibility minimum of the toolkit's major
    (the first kernel load fails with cudaErrorInsufficientDriver). A warning: it meets that but is
    older than the driver the toolkit release shipped with (minor version compatibility: cubins run,
    PTX JIT and newer-driver features do not)."""
    driver, toolkit = _version(driver_version), _version(toolkit_version)
    if driver is None:
        return ["the NVIDIA driver version %r could not be read (nvidia-smi); the toolkit %s needs a driver >= %s"
                % (driver_version, toolkit_version, MINOR_COMPAT_DRIVER.get(_major(toolkit_version), "?"))], []
    if toolkit is None:
        return [], []  # the cuda_toolkit preflight reports a malformed toolkit version
    major = toolkit.release[0]
    floor = MINOR_COMPAT_DRIVER.get(major)
    exact = corresponding_driver(toolkit_version)
    if floor is None:
        return ["CUDA toolkit %s: no driver minimum known for CUDA %d.x (%s); use a 12.x or 13.x toolkit"
                % (toolkit_version, major, DRIVER_TABLE_SOURCE)], []
    if driver < _version(floor):
        return ["NVIDIA driver %s is too old for CUDA toolkit %s: CUDA %d.x needs a driver >= %s (>= %s for %s "
                "itself; %s). Kernels it builds would fail to load (cudaErrorInsufficientDriver). Upgrade the "
                "driver, or set cuda_toolkit_version to a release this driver supports"
                % (driver_version, toolkit_version, major, floor, exact or floor, toolkit_version, DRIVER_TABLE_SOURCE)], []
    if exact and driver < _version(exact):
        return [], ["NVIDIA driver %s is older than %s, the driver of CUDA toolkit %s: it runs through CUDA minor "
                    "version compatibility (cubins for the exact targets load; PTX JIT and features of the newer "
                    "driver do not; %s)" % (driver_version, exact, toolkit_version, MINOR_COMPAT_SOURCE)]
    return [], []


def driver_warnings(driver_version, toolkit_version):
    """The warnings of driver_problems: one sentence when the driver runs the toolkit's code only
    through CUDA minor version compatibility, else []."""
    return driver_problems(driver_version, toolkit_version)[1]


def _major(version):
    parsed = _version(version)
    return parsed.release[0] if parsed is not None else None


def torch_cuda_problems(torch_cuda_version, toolkit_version):
    """The venv's torch must be built for the toolkit's CUDA major: FlashInfer's JIT modules are built
    with the toolkit and loaded into torch's process (its CUDA runtime, libraries and ABI)."""
    if torch_cuda_version in (None, "", "None"):
        return ["torch in the SGLang venv has no CUDA (torch.version.cuda is None: a CPU build); install a "
                "CUDA %s build (sglang_venv_packages, sglang_venv_index_url)" % (_major(toolkit_version),)]
    torch_major, toolkit_major = _major(torch_cuda_version), _major(toolkit_version)
    if torch_major != toolkit_major:
        return ["torch in the SGLang venv is built for CUDA %s but the toolkit is %s: FlashInfer's kernels, built "
                "with the toolkit, load into torch's CUDA %s runtime. Install torch for CUDA %s (e.g. "
                "sglang_venv_index_url https://download.pytorch.org/whl/cu%s0) or set cuda_toolkit_version to a %s.x release"
                % (torch_cuda_version, toolkit_version, torch_major, toolkit_major, toolkit_major, torch_major)]
    return []


def kernel_module_problems(kernel_module, compute_capabilities):
    """Blackwell GPUs need NVIDIA's open kernel modules (/proc/driver/nvidia/version)."""
    blackwell = sorted(cc for cc in compute_capabilities or [] if _major(cc) is not None and _major(cc) >= OPEN_MODULES_FROM_MAJOR)
    if blackwell and kernel_module == "proprietary":
        return ["the proprietary NVIDIA kernel module is loaded, but Blackwell GPUs (compute capability %s) need the "
                "open kernel modules (%s). Install the driver's open flavour (e.g. nvidia-open, or the .run "
                "installer with -m=kernel-open) and reboot" % (", ".join(blackwell), OPEN_MODULES_SOURCE)]
    return []


def host_compute_capabilities(gpus, archs):
    """(compute capabilities 'M.m', where they come from) of a host: its GPUs (nvidia_gpu_info's
    facts, when present), else the group's declared archs (sglang_node_gpu_archs; '12.0f' -> '12.0')."""
    gpus = gpus or {}
    if gpus.get("present"):
        return sorted(set(str(cc) for cc in gpus.get("compute_capabilities") or [])), "this host's GPUs"
    return sorted(set(re.sub(r"[af]$", "", "%s" % (arch,)) for arch in archs or [])), "sglang_node_gpu_archs"


def nccl_p2p_problem(mode):
    if mode not in NCCL_P2P_MODES:
        return "sglang_services_nccl_p2p must be one of %s, got %r" % (", ".join(NCCL_P2P_MODES), mode)
    return None


def nccl_p2p_outcome(mode, with_p2p, without_p2p):
    """What the node runs with after the all-reduce attempts: (p2p_disable, failed, message).

    ``with_p2p`` / ``without_p2p``: None (not tried) or {'ok': bool, 'error': str} of the attempt with
    P2P enabled / with NCCL_P2P_DISABLE=1. on: P2P must work. off: only the attempt without P2P counts.
    auto: P2P if it works, else NCCL_P2P_DISABLE=1 for the service (with a warning) if that works."""
    if mode == "off":
        if without_p2p and without_p2p["ok"]:
            return True, False, "NCCL all-reduce passed with NCCL_P2P_DISABLE=1 (sglang_services_nccl_p2p: off)"
        return True, True, "NCCL all-reduce failed with NCCL_P2P_DISABLE=1: %s" % _error(without_p2p)
    if with_p2p and with_p2p["ok"]:
        return False, False, "NCCL all-reduce passed with P2P"
    if mode == "on":
        return False, True, ("NCCL all-reduce failed with P2P: %s. sglang_services_nccl_p2p is on; fix the GPUs' P2P "
                             "path (IOMMU in passthrough, ACS off) or set it to auto or off" % _error(with_p2p))
    if without_p2p and without_p2p["ok"]:
        return True, False, ("NCCL all-reduce failed with P2P (%s) and passed with NCCL_P2P_DISABLE=1, which is now "
                             "in the service's environment: traffic goes through host memory, slower. Check the "
                             "IOMMU (passthrough) and PCIe ACS settings" % _error(with_p2p))
    return False, True, "NCCL all-reduce failed with P2P (%s) and with NCCL_P2P_DISABLE=1 (%s)" % (
        _error(with_p2p), _error(without_p2p))


def custom_all_reduce(devices, topology, p2p_disabled, mode="auto", tp_size=None):
    """SGLang's custom all-reduce for a service on `devices` (host GPU indices), given the host's
    topology (nvidia_gpu_info's: {"0": {"1": "PHB"}}) and whether its GPUs run with NCCL_P2P_DISABLE=1
    (the NCCL probe's decision): (disable, why). disable True: the service gets
    --disable-custom-all-reduce. The all-reduce runs within each tensor-parallel group: `tp_size`
    consecutive GPUs of `devices` (SGLang's ranks in order; pipeline stages and replicas are further
    groups); None takes `devices` as one group. `mode` (sglang_services_custom_all_reduce): auto decides
    by the rule below per group (one that disables it disables it for the service), off always
    disables it, on leaves it to SGLang."""
    devices = sorted(set(int(device) for device in devices))
    size = int(tp_size) if tp_size else len(devices)
    if len(devices) < 2 or size < 2:
        return False, "one GPU per tensor-parallel group: no all-reduce"
    if mode == "off":
        return True, "sglang_services_custom_all_reduce is off"
    if mode == "on":
        return False, "sglang_services_custom_all_reduce is on: SGLang decides (%s)" % CUSTOM_ALL_REDUCE_SOURCE
    groups = [devices[start:start + size] for start in range(0, len(devices) - size + 1, size)]
    decisions = [_custom_all_reduce_group(group, topology, p2p_disabled) for group in groups]
    return next((decision for decision in decisions if decision[0]), decisions[0])


def _custom_all_reduce_group(devices, topology, p2p_disabled):
    """The rule for one tensor-parallel group of two or more GPUs (auto)."""
    links = [str(((topology or {}).get(str(a)) or {}).get(str(b)) or "") for a in devices for b in devices if a < b]
    if not all(links):
        return False, "the GPUs' topology is not known (nvidia-smi topo -m): SGLang decides"
    if all(NVLINK_RE.match(link) for link in links):
        return False, "NVLink joins its GPUs: SGLang's custom all-reduce runs over NVLink"
    if len(devices) > 2:
        return False, ("more than two GPUs over PCIe: SGLang turns its custom all-reduce off itself (%s)"
                       % CUSTOM_ALL_REDUCE_SOURCE)
    link = links[0]
    if p2p_disabled:
        return True, ("GPUs %s (%s) run NCCL with NCCL_P2P_DISABLE=1 (the NCCL probe's P2P attempt failed): SGLang's "
                      "custom all-reduce uses the same P2P path, and its own P2P test can pass where transfers hang "
                      "(local-inference-lab/rtx6kpro#15, NVIDIA/nccl#1999)" % (",".join(map(str, devices)), link))
    if link in HOST_BRIDGE_LINKS:
        return True, ("GPUs %s reach each other through the host bridge (%s): a custom PCIe all-reduce there never "
                      "completes while NCCL works (local-inference-lab/rtx6kpro#21, 2x RTX PRO 6000 on PHB)"
                      % (",".join(map(str, devices)), link))
    return False, ("GPUs %s share a PCIe switch (%s): SGLang's custom all-reduce, after its own P2P test (%s)"
                   % (",".join(map(str, devices)), link, CUSTOM_ALL_REDUCE_SOURCE))


def _error(attempt):
    if not attempt:
        return "not run"
    return attempt.get("error") or "failed"


# Attention backends that run only on some GPU generations: backend -> (compute capability majors
# they run on, MLA models only?, source). Rows read from SGLang 0.5.23 (the release the collection
# pins) and the kernels' own projects; a backend not listed runs on every NVIDIA GPU SGLang supports
# (flashinfer, triton, torch_native, flex_attention). SGLang makes these checks itself only when the
# server starts on the GPUs; this table makes them in the preflight. A service's
# `attention_backend_support` ({backend: [compute capabilities]}) replaces a row for that service.
ATTENTION_BACKENDS = {
    "trtllm_mla": ((10, 12), True, "SGLang 0.5.23 sglang/srt/arg_groups/overrides.py _mla_kv_cache_dtype_checks: "
                                   "'only supported on Blackwell GPUs (SM100/SM12x)'"),
    "trtllm_mha": ((9, 10, 12), False, "SGLang 0.5.23 sglang/srt/arg_groups/attention_hook.py: 'requires Hopper (SM90), "
                                       "Blackwell (SM100), or SM120 GPUs'"),
    "cutedsl_mla": ((10,), True, "SGLang 0.5.23 sglang/srt/arg_groups/overrides.py _cutedsl_prefill_backend_fill: "
                                 "'only supported on Blackwell GPUs (SM100)'"),
    "fa3": ((8, 9), False, "SGLang 0.5.23 sglang/srt/layers/attention/attention_registry.py "
                           "create_flashattention_v3_backend: 'requires SM>=80 and SM<=90'"),
    "flashmla": ((9, 10), True, "FlashMLA (deepseek-ai/FlashMLA README): kernels for SM90 and SM100"),
    "cutlass_mla": ((10,), True, "sgl-kernel cutlass_mla_decode: CUTLASS SM100 kernels"),
    "aiter": ((), False, "AMD ROCm only (SGLang server_args)"),
    "wave": ((), False, "AMD ROCm only (SGLang server_args)"),
    "ascend": ((), False, "Ascend NPU only (SGLang server_args)"),
    "intel_amx": ((), False, "Intel CPU (AMX) only (SGLang server_args)"),
    "intel_xpu": ((), False, "Intel XPU only (SGLang server_args)"),
}
# Backends that run on any NVIDIA GPU SGLang supports: the alternatives a rejection offers.
PORTABLE_BACKENDS = ("flashinfer", "triton")
BACKEND_FLAGS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")
DRAFT_BACKEND_FLAG = "speculative-draft-attention-backend"


def _flag_value(settings, flag):
    value = extra_arg(settings.get("extra_args"), flag)
    return str(value) if value not in (None, "", False, True) else None


def _cc_list(value):
    return [str(item).strip() for item in (value if isinstance(value, list) else [value]) if str(item).strip()]


def backend_support_problems(where, support):
    """A service's attention_backend_support override: {known backend: [compute capabilities]}."""
    if support in (None, {}):
        return []
    if not isinstance(support, dict):
        return ["%s: attention_backend_support must be a dict of backend: [compute capabilities], got %r" % (where, support)]
    problems = []
    for backend, ccs in sorted(support.items()):
        if backend not in ATTENTION_BACKENDS and backend not in PORTABLE_BACKENDS:
            problems.append("%s: attention_backend_support names an unknown backend %r; the table knows %s"
                            % (where, backend, ", ".join(sorted(set(ATTENTION_BACKENDS) | set(PORTABLE_BACKENDS)))))
        bad = [cc for cc in _cc_list(ccs) if not re.match(r"^[0-9]{1,2}\.[0-9]$", cc)]
        if bad or not isinstance(ccs, list):
            problems.append("%s: attention_backend_support %s must list compute capabilities like \"12.0\", got %r"
                            % (where, backend, ccs))
    return problems


def _runs_on(backend, cc, support):
    if backend in support:
        return cc in _cc_list(support[backend])
    row = ATTENTION_BACKENDS.get(backend)
    return row is None or _major(cc) in row[0]


def _alternatives(ccs, support):
    names = sorted(set(ATTENTION_BACKENDS) | set(PORTABLE_BACKENDS) | set(support))
    return [name for name in names if all(_runs_on(name, cc, support) for cc in ccs)]


def backend_problems(settings_by_name, active, compute_capabilities, source="the host's GPUs"):
    """Attention backends of the active services (and the EAGLE-3 draft's) that cannot run on
    `compute_capabilities` ('M.m' strings), each with the backends that can."""
    ccs = sorted(set(str(cc) for cc in compute_capabilities or [] if cc))
    problems = []
    for name in active:
        settings = settings_by_name.get(name) or {}
        where = "sglang_services_%s" % name
        support = settings.get("attention_backend_support") or {}
        problems += backend_support_problems(where, support)
        if not isinstance(support, dict):
            support = {}
        chosen = [("attention_backend", settings.get("attention_backend"))]
        chosen += [("extra_args %s" % flag, _flag_value(settings, flag)) for flag in BACKEND_FLAGS[1:]]
        draft = None
        if name == "eagle3":
            draft = _flag_value(settings, DRAFT_BACKEND_FLAG)
            chosen.append(("extra_args %s" % DRAFT_BACKEND_FLAG, draft))
        for label, backend in chosen:
            if not backend or not ccs:
                continue
            cannot = [cc for cc in ccs if not _runs_on(str(backend), cc, support)]
            if cannot:
                row = ATTENTION_BACKENDS.get(str(backend))
                problems.append("%s: %s %s cannot run on compute capability %s (%s; %s). Use one of: %s, or "
                                "override the table with attention_backend_support"
                                % (where, label, backend, ", ".join(cannot), source, row[2] if row else "override",
                                   ", ".join(_alternatives(ccs, support)) or "none known"))
        target = settings.get("attention_backend")
        row = ATTENTION_BACKENDS.get(str(target)) if target else None
        if name == "eagle3" and not draft and row and row[1]:
            problems.append("%s: attention_backend %s is for MLA models only, and the EAGLE-3 draft (a Llama-style "
                            "model) inherits it; set extra_args %s to one of: %s"
                            % (where, target, DRAFT_BACKEND_FLAG,
                               ", ".join(b for b in _alternatives(ccs, support)
                                         if not (ATTENTION_BACKENDS.get(b) or ((), False))[1]) or "none known"))
    return problems


# What SGLang resolves itself when a service leaves it unset (sglang_server_args resolves it with the
# installed SGLang): resolved field -> (its table, the backends that run on any NVIDIA Blackwell or
# Hopper GPU, offered as the fix). The attention fields use ATTENTION_BACKENDS.
TRTLLM_GEN_SOURCE = ("FlashInfer 0.7.2 ships its trtllm-gen kernels as cubins for Sm100a, Sm100f and Sm103a only "
                     "(flashinfer/jit/trtllm_gen_metainfo.py BLACKWELL_CUBIN_ARCHS)")
DSA_BACKENDS = {
    "trtllm": ((10,), True, TRTLLM_GEN_SOURCE + "; on RTX PRO 6000 the server starts and dies at the first request "
                                                "(sglang#37105)"),
    "flashmla_sparse": ((9, 10), True, "FlashMLA (deepseek-ai/FlashMLA README): sparse kernels for SM90 and SM100"),
    "flashmla_kv": ((9, 10), True, "FlashMLA (deepseek-ai/FlashMLA README): sparse kernels for SM90 and SM100"),
    "fa3": ((8, 9), True, "SGLang 0.5.23 attention_registry.py: FlashAttention 3 'requires SM>=80 and SM<=90'"),
    "triton": ((), True, "SGLang 0.5.23 overrides.py _check_dsa_backend_constraints: the triton DSA backend is "
                         "ROCm only"),
}
MOE_RUNNERS = {
    "flashinfer_trtllm": ((10,), False, TRTLLM_GEN_SOURCE),
    "flashinfer_trtllm_routed": ((10,), False, TRTLLM_GEN_SOURCE),
}
RESOLVED_FIELDS = {
    "attention_backend": (ATTENTION_BACKENDS, PORTABLE_BACKENDS),
    "prefill_attention_backend": (ATTENTION_BACKENDS, PORTABLE_BACKENDS),
    "decode_attention_backend": (ATTENTION_BACKENDS, PORTABLE_BACKENDS),
    "speculative_draft_attention_backend": (ATTENTION_BACKENDS, PORTABLE_BACKENDS),
    # SGLang 0.5.23 overrides.py _check_dsa_backend_constraints: CUDA TileLang (FP8 KV) needs SM89+.
    "dsa_prefill_backend": (DSA_BACKENDS, ("tilelang",)),
    "dsa_decode_backend": (DSA_BACKENDS, ("tilelang",)),
    "moe_runner_backend": (MOE_RUNNERS, ("triton",)),
    "speculative_moe_runner_backend": (MOE_RUNNERS, ("triton",)),
}


def _fix_flag(field):
    return "attention_backend" if field == "attention_backend" else "extra_args %s" % field.replace("_", "-")


def resolved_backend_problems(where, version, cc, backends, chosen_by, support=None, speculative=True):
    """The backends SGLang `version` resolved for a service on compute capability `cc` ('M.m';
    backends: {field: value}, chosen_by: {field: the SGLang step or "the service's arguments"}) that
    cannot run there, each naming the step that chose it, the source and the flag that fixes it.
    `support` (the service's attention_backend_support) replaces rows for the attention fields; the
    speculative_* fields count only for a service with speculative decoding (SGLang fills them in,
    copied from the target's, for every service)."""
    support = support if isinstance(support, dict) else {}
    problems = []
    for field, (table, portable) in sorted(RESOLVED_FIELDS.items()):
        backend = backends.get(field)
        if backend in (None, "", "auto") or (field.startswith("speculative_") and not speculative):
            continue
        backend = str(backend)
        attention = table is ATTENTION_BACKENDS
        if attention and backend in support:
            runs = cc in _cc_list(support[backend])
        else:
            row = table.get(backend)
            runs = row is None or _major(cc) in row[0]
        if runs:
            continue
        row = table.get(backend)
        offered = [name for name in sorted(set(table) | set(portable))
                   if name not in table or _major(cc) in table[name][0]]
        if attention:
            offered = _alternatives([cc], support)
        if attention and backend in support:
            runs_on = "%s (the service's attention_backend_support)" % ", ".join(_cc_list(support[backend]))
        else:
            runs_on = ", ".join("%d.x" % major for major in row[0]) if row and row[0] else "no NVIDIA GPU"
        problems.append("%s: SGLang %s resolves %s %s on compute capability %s (chosen by %s), which runs only on "
                        "compute capability %s (%s). Set %s to one of: %s" % (
                            where, version, field, backend, cc, chosen_by.get(field) or "SGLang", runs_on,
                            row[2] if row else "attention_backend_support", _fix_flag(field),
                            ", ".join(offered) or "none known"))
    return problems


# What the fleet report shows of a resolution: the checked fields and the sampling backend.
SUMMARY_FIELDS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend",
                  "speculative_draft_attention_backend", "dsa_prefill_backend", "dsa_decode_backend",
                  "moe_runner_backend", "sampling_backend")


def backends_summary(result):
    """One line of what sglang_server_args resolved (its result: resolved, unresolved), e.g.
    'eagle3 on 12.0: attention flashinfer, moe_runner auto, sampling flashinfer'; 'not resolved' when
    nothing was asked."""
    result = result if isinstance(result, dict) else {}
    parts = []
    for name, by_cc in sorted((result.get("resolved") or {}).items()):
        for cc, entry in sorted(by_cc.items()):
            backends = entry.get("backends") or {}
            parts.append("%s on %s: %s" % (name, cc, ", ".join(
                "%s %s" % (field[:-len("_backend")], backends[field]) for field in SUMMARY_FIELDS
                if backends.get(field) not in (None, ""))))
    for name, why in sorted((result.get("unresolved") or {}).items()):
        parts.append("%s: not resolved (%s)" % (name, why))
    return "; ".join(parts) or "not resolved"


def _int(value, default=1):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def tp_size(settings):
    """A service's tensor-parallel size (its tp_size setting; 1 when unset or not a number, which the
    settings checks report)."""
    return max(_int((settings or {}).get("tp_size")), 1)


def gpu_count_problems(settings_by_name, active, gpu_count):
    """Each active service needs tp_size x pp_size GPUs (x dp-size without DP attention) among its
    cuda_visible_devices (all of the host's when empty), and those must exist."""
    problems = []
    for name in active:
        settings = settings_by_name.get(name) or {}
        where = "sglang_services_%s" % name
        try:
            devices = gpu_set(settings.get("cuda_visible_devices"))
        except ValueError:
            continue  # reported by the settings checks
        dp = _int(_flag_value(settings, "dp-size") or _flag_value(settings, "data-parallel-size"))
        dp_attention = str(settings.get("enable_dp_attention")).lower() in ("true", "yes", "on", "1")
        need = _int(settings.get("tp_size")) * _int(settings.get("pp_size")) * (1 if dp_attention else max(dp, 1))
        missing = [index for index in devices if index >= gpu_count]
        if missing:
            problems.append("%s: cuda_visible_devices names GPU %s, but this host has %d GPU(s) (indices 0-%d)"
                            % (where, ", ".join(str(i) for i in missing), gpu_count, gpu_count - 1))
        have = len(devices) if devices else gpu_count
        if need > have:
            problems.append("%s: needs %d GPUs (tp_size %s x pp_size %s%s) but has %d (%s)" % (
                where, need, settings.get("tp_size", 1), settings.get("pp_size", 1),
                "" if dp_attention or dp <= 1 else " x dp-size %d" % dp, have,
                "cuda_visible_devices %s" % devices if devices else "all of this host's GPUs"))
    return problems
