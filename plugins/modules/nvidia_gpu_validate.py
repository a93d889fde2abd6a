#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_validate
short_description: Prove a node can serve before traffic - a CUDA kernel, FlashInfer's pre-warmed modules and an NCCL all-reduce on its GPUs
version_added: "0.1.0"
description:
  - Runs three probes on the GPUs the services use, each in its own process with a timeout, in the
    environment the services get - the module's own environment (set the services' own variables
    with the task's C(environment) keyword, which keeps their values out of the result), then
    O(env_file) in order.
  - B(Kernel.) Builds a tiny CUDA program with the installed C(nvcc) for every target in O(targets)
    (device code only, C(-gencode=arch=compute_120f,code=sm_120f), as FlashInfer builds) and runs it on
    each GPU. Catches a driver too old for the toolkit (C(cudaErrorInsufficientDriver)), a target the
    GPU cannot run (C(cudaErrorNoKernelImageForDevice)) and a kernel module that does not answer.
  - B(FlashInfer.) Loads each module of O(flashinfer_modules) from the JIT cache (it never builds one;
    a module that is not pre-warmed is a failure) and runs each once on each GPU with a tiny call of
    FlashInfer's public API, checked against torch - C(sampling) C(top_k_sampling_from_probs), C(topk)
    C(top_k), C(quantization) C(packbits), C(norm) C(rmsnorm); a module without a call here is loaded
    only and named in C(loaded_only) of RV(flashinfer). Every module's C(.so) must keep its mtime (nothing compiled).
  - B(NCCL.) For each distinct GPU set of O(services), an all-reduce with torch.distributed (one process
    per GPU) - a correctness check, then 20 timed all-reduces of O(allreduce_mib) MiB, reported as bus
    bandwidth in GB/s (nccl-tests' definition). With P2P allowed (O(nccl_p2p=auto) or V(on)) a hang or
    error is retried with C(NCCL_P2P_DISABLE=1); O(nccl_p2p) decides what follows (see there). Each set
    runs with the NCCL variables its services run with (O(resolved)), and the transports NCCL used
    (C(P2P), C(SHM), C(NET), C(NVLS)) are read from its INFO log (C(NCCL_DEBUG=INFO) for the probe).
  - B(Backends.) For each service of O(resolved), the backends SGLang resolved for the compute capability
    its GPUs report to the kernel probe (C(cudaGetDeviceProperties)) are returned (RV(backends)) and named
    in RV(summary). A service resolved for other compute capabilities than its GPUs have fails, since the backends
    SGLang picks on these GPUs were never checked (C(sglang_server_args) resolves and checks them).
  - Must run with the SGLang venv's interpreter (C(ansible_python_interpreter)), which has torch and
    FlashInfer, and as the service user, so the probes load what the services will load.
  - Without GPUs (O(gpus) empty) or in check mode it runs nothing and reports RV(status=skipped) with
    the reason. It never changes the host; C(changed) is always V(false).
  - The module fails (after running every probe) when any probe fails, with one line per failure in
    C(msg); the results are returned all the same.
author:
  - blackwell.sglang developers (!UNKNOWN)
options:
  gpus:
    description:
      - The host's GPU indices (nvidia-smi's numbering; the C(nvidia_gpu_info) module's C(gpus[].index)).
      - Empty means the host has no GPUs; the module reports RV(status=skipped).
    type: list
    elements: int
    required: true
  services:
    description:
      - Service name -> the GPU indices it uses (its C(cuda_visible_devices)); an empty list means all of O(gpus).
      - The probes run on the union of these GPUs; the all-reduce once per distinct set.
      - Empty (no active service) means every GPU in O(gpus), in one set.
    type: dict
    default: {}
  targets:
    description: FlashInfer's rendered targets (C(M.m), C(M.ma) or C(M.mf)), for example V(12.0f) or V(10.3a).
    type: list
    elements: str
    required: true
  nvcc:
    description:
      - The C(nvcc) that builds the kernel. Default C($CUDA_HOME/bin/nvcc) of the environment the
        probes get (the flashinfer role's env file sets C(CUDA_HOME)).
    type: path
  flashinfer_modules:
    description: FlashInfer JIT modules that must load from the cache (the pre-warm list). Empty skips the FlashInfer probe.
    type: list
    elements: str
    default: []
  env_file:
    description:
      - Environment files (C(KEY=VALUE), as systemd reads them), applied in order over the module's own
        environment - the flashinfer role's file, then the venv's C(venv.env).
      - A file that cannot be read fails the module naming it.
    type: list
    elements: path
    default: []
  nccl_p2p:
    description:
      - V(auto) tries the all-reduce with P2P; on a hang or error it retries with C(NCCL_P2P_DISABLE=1) and,
        if that passes, returns the services in RV(nccl_p2p_disable_services) (the role writes the
        setting to their environment) with a warning; if both fail, the module fails.
      - V(on) needs P2P to work (no retry); V(off) runs only with C(NCCL_P2P_DISABLE=1).
      - A set of one GPU runs once, as configured (P2P does not apply).
    type: str
    choices: [auto, "on", "off"]
    default: auto
  timeout:
    description:
      - Seconds each probe may take (the kernel build, the kernel on one GPU, the FlashInfer probe, one
        all-reduce attempt) before it is killed and reported as a hang. Must be > 0.
    type: int
    default: 300
  allreduce_mib:
    description: Size of the timed all-reduce in MiB (bf16). Must be > 0.
    type: int
    default: 64
  python:
    description: The interpreter that runs the FlashInfer and NCCL probes. Default the one running the module (the venv's).
    type: path
  resolved:
    description:
      - What C(blackwell.sglang.sglang_server_args) resolved for the services (its RV(blackwell.sglang.sglang_server_args#module:resolved)),
        each service's C(nccl_environment) (the C(NCCL_*) variables the server runs with once SGLang's launcher
        set its own) is the environment of the all-reduce of its GPU set, over the env files and the module's
        environment. Services of one GPU set with different NCCL variables are probed once each.
      - Each service's entry for the compute capability of its GPUs is reported in RV(backends); a service
        resolved only for other compute capabilities fails the validation.
      - Empty, or a service missing (not resolved), leaves that service's set with the env files, the
        module's environment and the defaults (C(NCCL_NVLS_ENABLE=0), as SGLang's launcher sets it without
        C(--enable-nccl-nvls) or C(--enable-symm-mem)).
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs nothing on the GPUs; reports RV(status=skipped).
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - "Failure modes, each a line of C(msg): the kernel build fails (nvcc's last lines); the kernel on a GPU
    fails with the CUDA error's name, for example V(cudaErrorInsufficientDriver) (the driver is older than
    the toolkit's minimum, see the cuda_toolkit preflight) or V(cudaErrorNoKernelImageForDevice) (no target
    for this GPU's compute capability); a FlashInfer module is not pre-warmed or does not load; the sampling
    call fails or compiled; the all-reduce fails or hangs (killed after O(timeout) s); a service of O(resolved)
    was resolved for compute capabilities its GPUs do not have (C(sglang-<service> was resolved for 12.0, but
    GPU 0 is compute capability 9.0 ...))."
  - Takes about 30-60 s on a node whose caches are warm (imports of torch and FlashInfer, one nvcc build).
  - Each probe runs through C(AnsibleModule.run_command) under coreutils' C(timeout) (on PATH; Debian and Ubuntu always
    have it), which stops the probe's whole process group when it hangs.
  - Unless the services' NCCL variables (O(resolved)) or the environment say otherwise, the NVLink-multicast
    paths are off in every probe (C(NCCL_NVLS_ENABLE=0), C(TORCH_SYMM_MEM_DISABLE_MULTICAST=1),
    C(NVSHMEM_DISABLE_NVLS=1)); C(CUDA_DEVICE_ORDER=PCI_BUS_ID) makes CUDA's numbering nvidia-smi's.
seealso:
  - module: blackwell.sglang.nvidia_gpu_info
  - name: nccl-tests, performance
    description: The bus bandwidth the all-reduce reports (algorithm bandwidth x 2 (n-1) / n).
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
  - name: NCCL environment variables
    description: C(NCCL_P2P_DISABLE), C(NCCL_NVLS_ENABLE) and the others the probes set.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

EXAMPLES = r"""
- name: Validate the GPUs before the services start
  blackwell.sglang.nvidia_gpu_validate:
    gpus: "{{ sglang_node_gpus.gpus | map(attribute='index') | list }}"
    services: {eagle3: [0, 1, 2, 3]}
    targets: "{{ flashinfer_target_archs }}"
    flashinfer_modules: [sampling]
    env_file:
      - /etc/sglang/flashinfer.env
      - /opt/sglang/current/venv.env
      - /etc/sglang/sglang-eagle3.env
  environment:  # the services' own env settings, as their env files will hold them
    NCCL_DEBUG: WARN
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python
  register: gpu_validation
"""

RETURN = r"""
status:
  description: V(passed), V(failed) or V(skipped) (no GPUs, or check mode; RV(reason) says which).
  returned: always
  type: str
  sample: passed
reason:
  description: Why the probes were skipped; V(null) when they ran.
  returned: always
  type: str
  sample: no GPUs (nvidia-smi found none)
backends:
  description:
    - Service name -> C(compute_capability) (of its GPUs, from the kernel probe), C(gpus), C(backends) (what SGLang
      resolved there, the fields the fleet report shows - attention, DSA, MoE runner, sampling - from O(resolved)),
      C(chosen_by) (for each, the SGLang step that chose it, or the service's arguments). Only services of O(resolved)
      whose GPUs answered the kernel probe; empty otherwise.
  returned: always
  type: dict
  sample: {"eagle3": {"compute_capability": "9.0", "gpus": [0], "backends": {"attention_backend": "fa3",
           "moe_runner_backend": "auto", "sampling_backend": "flashinfer"}, "chosen_by": {"attention_backend":
           "SGLang's _attention_backend_default", "moe_runner_backend": "SGLang's default",
           "sampling_backend": "SGLang's _sampling_backend_default"}}}
summary:
  description: One line for the site summary and the fleet report.
  returned: always
  type: str
  sample: "2 GPU(s): kernel 9.0a ran on 0,1; FlashInfer sampling topk ran on 0,1; all-reduce 0,1 302.1 GB/s via NVLS+P2P/CUMEM; 41.3 s"
seconds:
  description: Wall time of all probes, in seconds.
  returned: always
  type: float
  sample: 41.3
kernel:
  description: The kernel probe. V(null) when skipped.
  returned: always
  type: dict
  contains:
    nvcc:
      description: The nvcc that built it.
      type: str
    flags:
      description: Its -gencode flags.
      type: list
      elements: str
    build_seconds:
      description: Seconds nvcc took.
      type: float
    gpus:
      description:
        - One entry per GPU, with C(index), C(ok), C(error) (the CUDA error's name and text), C(compute_capability),
          C(driver_api) and C(runtime_api) (CUDA's integer versions, for example 13000).
      type: list
      elements: dict
flashinfer:
  description:
    - The FlashInfer probe - C(ok), C(loaded) (modules loaded from the cache), C(ran) (modules whose tiny call ran
      on every GPU), C(loaded_only) (modules without a call here), C(gpus) (each with C(ran) and C(sampled)),
      C(error), C(seconds); V(null) when skipped or no modules.
  returned: always
  type: dict
nccl:
  description:
    - One entry per distinct GPU set (and NCCL environment), with C(devices), C(services), C(environment) (the
      services' NCCL variables it ran with, from O(resolved)), C(ok), C(p2p) (V(true) when it passed with P2P allowed),
      C(busbw_gbps) (bus bandwidth in GB/s; V(null) for one GPU), C(transports) (what NCCL's INFO log says each channel
      used, for example V([P2P/CUMEM]), V([SHM/direct]), V([NET/Socket]), V([NVLS]); empty for one GPU),
      C(nccl) (NCCL's version), C(seconds) and C(attempts) (each attempt's C(p2p_disabled), C(ok), C(error), C(seconds)).
  returned: always
  type: list
  elements: dict
nccl_p2p_disable_services:
  description: Services that must run with C(NCCL_P2P_DISABLE=1) (O(nccl_p2p=off), or V(auto) after P2P failed and the retry passed).
  returned: always
  type: list
  elements: str
  sample: []
nccl_p2p_tested:
  description: Services whose P2P setting the probes decided (their GPU set has two or more GPUs and the all-reduce ran).
  returned: always
  type: list
  elements: str
  sample: [eagle3]
"""

import json
import os
import shutil
import sys
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError
from ansible_collections.blackwell.sglang.plugins.module_utils.flashinfer_jit import JitCacheError, read_env_file
from ansible_collections.blackwell.sglang.plugins.module_utils.gpu_compat import SUMMARY_FIELDS, backends_summary, nccl_p2p_outcome
from ansible_collections.blackwell.sglang.plugins.module_utils.gpu_validate import (
    FLASHINFER_PROBE,
    KERNEL_SOURCE,
    PROBE_ENV,
    ProbeError,
    gencode_args,
    run_allreduce,
    run_probe,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.run import module_runner


def _skipped(reason):
    return {"changed": False, "status": "skipped", "reason": reason, "summary": "skipped: %s" % reason,
            "seconds": 0.0, "kernel": None, "flashinfer": None, "nccl": [], "nccl_p2p_disable_services": [],
            "nccl_p2p_tested": [], "backends": {}}


def probe_environment(module):
    env = dict(os.environ)
    for path in module.params["env_file"]:
        try:
            env.update(read_env_file(path))
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read env_file %s (%s)" % (path, exc.strerror or exc))
        except (JitCacheError, UnicodeDecodeError) as exc:
            module.fail_json(msg="cannot read env_file %s: %s" % (path, exc))
    for key, value in PROBE_ENV.items():
        env.setdefault(key, value)
    env.pop("CUDA_VISIBLE_DEVICES", None)  # each probe names its GPUs
    return env


def service_nccl_environment(resolved, name):
    """The NCCL variables `name` runs with, from sglang_server_args' result (the same for every compute
    capability it was resolved for); {} when it was not resolved."""
    for _cc, entry in sorted(((resolved or {}).get(name) or {}).items()):
        if isinstance(entry, dict) and isinstance(entry.get("nccl_environment"), dict):
            return {str(k): str(v) for k, v in entry["nccl_environment"].items()}
    return {}


def device_sets(module):
    """{((indices...), ((NCCL variable, value), ...)): [services]} and the union of the GPUs used, sorted."""
    gpus = sorted(module.params["gpus"])
    sets = {}
    for name, devices in sorted((module.params["services"] or {}).items()):
        devices = [int(d) for d in devices or []] or gpus
        unknown = [d for d in devices if d not in gpus]
        if unknown:
            module.fail_json(msg="service %s uses GPU %s, which this host does not have (GPUs %s)"
                             % (name, ",".join(str(d) for d in unknown), ",".join(str(g) for g in gpus)))
        nccl = tuple(sorted(service_nccl_environment(module.params["resolved"], name).items()))
        sets.setdefault((tuple(devices), nccl), []).append(name)
    if not sets:
        sets[(tuple(gpus), ())] = []
    used = sorted(set(d for devices, _nccl in sets for d in devices))
    return sets, used


def kernel_probe(module, env, used, workdir, flags):
    nvcc = module.params["nvcc"] or os.path.join(env.get("CUDA_HOME", ""), "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        return {"nvcc": nvcc, "flags": flags, "build_seconds": 0.0,
                "gpus": [], "error": "nvcc not found at %s (set CUDA_HOME in the env files, or nvcc)" % nvcc}
    source = os.path.join(workdir, "validate.cu")
    with open(source, "w") as handle:
        handle.write(KERNEL_SOURCE)
    binary = os.path.join(workdir, "validate")
    run = module_runner(module)
    built = run_probe(run, [nvcc, "-O2", "-o", binary, source] + flags, env, module.params["timeout"], cwd=workdir)
    result = {"nvcc": nvcc, "flags": flags, "build_seconds": built["seconds"], "gpus": []}
    if not built["ok"] or not os.path.exists(binary):
        result["error"] = "nvcc could not build the kernel for %s: %s" % (", ".join(module.params["targets"]), built.get("error"))
        return result
    for index in used:
        ran = run_probe(run, [binary], dict(env, CUDA_VISIBLE_DEVICES=str(index)), module.params["timeout"], cwd=workdir)
        ran["index"] = index
        result["gpus"].append(ran)
    return result


def flashinfer_probe(module, env, used, python):
    modules = module.params["flashinfer_modules"]
    if not modules:
        return None
    result = run_probe(module_runner(module), [python, "-c", FLASHINFER_PROBE, json.dumps(modules)],
                       dict(env, CUDA_VISIBLE_DEVICES=",".join(str(d) for d in used)), module.params["timeout"])
    for gpu in result.get("gpus", []):
        gpu["index"] = used[gpu.pop("device")]
    return result


def nccl_probe(module, env, devices, nccl, services, python):
    mode, timeout = module.params["nccl_p2p"], module.params["timeout"]
    size = module.params["allreduce_mib"] * 1024 * 1024
    if nccl:  # a resolved service: its NCCL variables, not the other services' (the task's environment merges them all)
        env = dict({name: value for name, value in env.items() if not name.startswith("NCCL_")}, **dict(nccl))
    with_p2p = dict(env)
    with_p2p.pop("NCCL_P2P_DISABLE", None)
    without_p2p = dict(env, NCCL_P2P_DISABLE="1")
    entry = {"devices": list(devices), "services": services, "environment": dict(nccl), "attempts": []}

    def attempt(environment, disabled):
        answer = run_allreduce(module_runner(module), python, devices, environment, timeout, size)
        entry["attempts"].append({"p2p_disabled": disabled, "ok": answer["ok"], "error": answer.get("error"),
                                  "seconds": answer["seconds"]})
        return answer

    if len(devices) < 2:
        answer = attempt(env, env.get("NCCL_P2P_DISABLE") == "1")
        entry.update(ok=answer["ok"], p2p=None, busbw_gbps=None, nccl=answer.get("nccl"), error=answer.get("error"),
                     p2p_disable=False, tested=False, transports=answer.get("transports") or [])
    else:
        first = attempt(without_p2p if mode == "off" else with_p2p, mode == "off")
        second = None
        if mode == "auto" and not first["ok"]:
            second = attempt(without_p2p, True)
        disable, failed, message = nccl_p2p_outcome(
            mode, None if mode == "off" else first, first if mode == "off" else second)
        good = second if second and second["ok"] else first
        entry.update(ok=not failed, p2p=not disable, busbw_gbps=good.get("busbw_gbps") if not failed else None,
                     nccl=good.get("nccl"), message=message, error=None if not failed else message,
                     p2p_disable=disable, tested=True, transports=good.get("transports") or [] if not failed else [])
    entry["seconds"] = round(sum(a["seconds"] for a in entry["attempts"]), 1)
    return entry


def service_backends(resolved, sets, kernel):
    """What SGLang resolved for each service of `resolved` at the compute capability its GPUs report
    (the kernel probe's cudaGetDeviceProperties): ({service: entry}, [problem]). A service resolved for
    other compute capabilities only is a problem: what SGLang picks on these GPUs was never checked."""
    reported = {gpu["index"]: gpu["compute_capability"] for gpu in kernel.get("gpus", [])
                if gpu.get("ok") and gpu.get("compute_capability")}
    found, problems = {}, []
    for (devices, _nccl), services in sorted(sets.items()):
        for name in services:
            by_cc = (resolved or {}).get(name)
            if not isinstance(by_cc, dict) or not by_cc:
                continue
            for cc in sorted(set(reported[d] for d in devices if d in reported)):
                gpus = [d for d in devices if reported.get(d) == cc]
                entry = by_cc.get(cc)
                if not isinstance(entry, dict):
                    problems.append("sglang-%s was resolved for %s, but GPU %s %s compute capability %s: the backends "
                                    "SGLang picks there were never checked (re-run site.yml: it resolves for the GPUs "
                                    "nvidia-smi reports)" % (name, ", ".join(sorted(by_cc)), ",".join(str(g) for g in gpus),
                                                             "is" if len(gpus) == 1 else "are", cc))
                    continue
                backends, chosen_by = entry.get("backends") or {}, entry.get("chosen_by") or {}
                fields = [field for field in SUMMARY_FIELDS if backends.get(field) not in (None, "")]
                found[name] = {"compute_capability": cc, "gpus": gpus,
                               "backends": {field: backends[field] for field in fields},
                               "chosen_by": {field: chosen_by.get(field) for field in fields}}
    return found, problems


def summarize(used, kernel, flashinfer, nccl, seconds, targets, backends=None):
    gpus = ",".join(str(i) for i in used)
    parts = ["%d GPU(s)" % len(used)]
    ran = [str(g["index"]) for g in kernel.get("gpus", []) if g.get("ok")]
    parts.append("kernel %s ran on %s" % (" ".join(targets), ",".join(ran) or "none"))
    if flashinfer is not None:
        if flashinfer.get("ok"):
            only = flashinfer.get("loaded_only") or []
            ran = " ".join(flashinfer.get("ran") or []) or "nothing"
            parts.append("FlashInfer %s ran on %s%s" % (ran, gpus, " (loaded only: %s)" % " ".join(only) if only else ""))
        else:
            parts.append("FlashInfer %s FAILED on %s" % (" ".join(flashinfer.get("loaded") or []) or "modules", gpus))
    for entry in nccl:
        where = ",".join(str(d) for d in entry["devices"])
        if not entry["ok"]:
            parts.append("all-reduce %s FAILED" % where)
        elif entry["busbw_gbps"] is not None:
            parts.append("all-reduce %s %s GB/s%s%s" % (
                where, entry["busbw_gbps"], " via " + "+".join(entry["transports"]) if entry.get("transports") else "",
                " (NCCL_P2P_DISABLE=1)" if entry.get("p2p_disable") else ""))
        else:
            parts.append("NCCL on %s" % where)
    if backends:
        parts.append("SGLang backends " + backends_summary({"resolved": {
            name: {entry["compute_capability"]: entry} for name, entry in backends.items()}}))
    parts.append("%.1f s" % seconds)
    return "; ".join(parts)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="int", required=True),
            services=dict(type="dict", default={}),
            targets=dict(type="list", elements="str", required=True),
            nvcc=dict(type="path"),
            flashinfer_modules=dict(type="list", elements="str", default=[]),
            env_file=dict(type="list", elements="path", default=[]),
            nccl_p2p=dict(type="str", choices=["auto", "on", "off"], default="auto"),
            timeout=dict(type="int", default=300),
            allreduce_mib=dict(type="int", default=64),
            python=dict(type="path"),
            resolved=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    for name in ("timeout", "allreduce_mib"):
        if module.params[name] <= 0:
            module.fail_json(msg="%s must be > 0, got %d" % (name, module.params[name]))
    if not module.params["gpus"]:
        module.exit_json(**_skipped("no GPUs (nvidia-smi found none)"))
    if module.check_mode:
        module.exit_json(**_skipped("check mode: nothing runs on the GPUs"))

    try:
        flags = gencode_args(module.params["targets"])
    except ArchError as exc:
        module.fail_json(msg="targets: %s" % exc)
    start = time.monotonic()
    env = probe_environment(module)
    sets, used = device_sets(module)
    python = module.params["python"] or sys.executable
    workdir = tempfile.mkdtemp(prefix="bsg-validate-")
    try:
        kernel = kernel_probe(module, env, used, workdir, flags)
        flashinfer = flashinfer_probe(module, env, used, python)
        nccl = [nccl_probe(module, env, devices, variables, services, python)
                for (devices, variables), services in sorted(sets.items())]
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = round(time.monotonic() - start, 1)

    failures = []
    if kernel.get("error"):
        failures.append("kernel: %s" % kernel["error"])
    for gpu in kernel["gpus"]:
        if not gpu["ok"]:
            failures.append("kernel on GPU %d (targets %s): %s" % (gpu["index"], " ".join(module.params["targets"]), gpu.get("error")))
    if flashinfer is not None and not flashinfer["ok"]:
        failures.append("FlashInfer: %s" % flashinfer.get("error"))
    backends, mismatched = service_backends(module.params["resolved"], sets, kernel)
    failures += mismatched
    for entry in nccl:
        if not entry["ok"]:
            failures.append("NCCL all-reduce on GPUs %s: %s" % (",".join(str(d) for d in entry["devices"]), entry.get("error")))
        elif entry.get("p2p_disable") and module.params["nccl_p2p"] == "auto":
            where = ",".join(str(d) for d in entry["devices"])
            module.warn("GPUs %s (%s): %s" % (where, ", ".join(entry["services"]) or "all", entry["message"]))
    result = {
        "changed": False,
        "status": "failed" if failures else "passed",
        "reason": None,
        "seconds": seconds,
        "kernel": kernel,
        "flashinfer": flashinfer,
        "nccl": nccl,
        "nccl_p2p_disable_services": sorted(s for e in nccl if e.get("p2p_disable") for s in e["services"]),
        "nccl_p2p_tested": sorted(s for e in nccl if e.get("tested") and e["ok"] for s in e["services"]),
        "backends": backends,
        "summary": summarize(used, kernel, flashinfer, nccl, seconds, module.params["targets"], backends),
    }
    if failures:
        module.fail_json(msg="GPU validation failed: " + "; ".join(failures), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
