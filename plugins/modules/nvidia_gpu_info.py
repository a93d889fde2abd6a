#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_info
short_description: Report the NVIDIA GPUs of a host, their compute capability and interconnect
version_added: "0.1.0"
description:
  - Reads the GPUs of the target host with C(nvidia-smi) and returns them, with the facts the
    C(flashinfer) role needs to choose JIT targets (compute capabilities) and the roles need to
    choose tensor-parallel settings (NVLink or PCIe between the GPUs).
  - The per-GPU facts come from one call of
    C(nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version --format=csv,noheader,nounits).
  - The interconnect comes from C(nvidia-smi topo -m), which is run only when there are two or more GPUs.
  - Read-only. It never changes the host, so it runs in check mode and always reports C(changed=false).
  - A host without GPUs is not an error. When C(nvidia-smi) is not installed, cannot talk to the
    driver, finds no device, or exits non-zero for any other reason, the module succeeds with
    RV(present=false) and the reason in RV(error); use M(ansible.builtin.assert) or C(failed_when)
    on RV(present) where GPUs are required.
  - The module fails only when C(nvidia-smi) exits 0 but prints a GPU list it cannot parse, or when
    an executable C(nvidia-smi) cannot be started at all (for example C(Exec format error)); the
    message names the path and says to reinstall the driver or set O(nvidia_smi_path).
  - The kernel module's flavour (open or proprietary) comes from the first line of
    C(/proc/driver/nvidia/version), read when GPUs were found (Blackwell GPUs need the open modules).
  - Needs only the Python standard library on the target, and a driver recent enough to know the
    C(compute_cap) query field. Older drivers reject that field; the module then reports
    RV(present=false) with the driver's message in RV(error).
author:
  - blackwell.sglang developers (!UNKNOWN)
options:
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) executable.
      - When not set, C(nvidia-smi) is looked up on E(PATH) and in the usual C(sbin) directories.
      - A path that does not exist or is not executable is reported like a missing C(nvidia-smi)
        (RV(present=false), not a failure).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: Only reads; the same commands run in check mode.
  diff_mode:
    support: none
  facts:
    support: none
    details: The results are top-level return values, not C(ansible_facts); use C(register).
  platform:
    platforms: posix
notes:
  - Fact sources, per return value. RV(gpus), RV(count), RV(compute_capabilities) and
    RV(driver_version) come from C(nvidia-smi --query-gpu=...). RV(interconnect) comes from C(nvidia-smi topo -m).
    RV(kernel_module) comes from the file C(/proc/driver/nvidia/version).
  - "Failure modes that give RV(present=false) with RV(error) set, the task itself succeeding:
    C(nvidia-smi) not found (no driver installed);
    V(NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver) (driver installed but
    its kernel module not loaded, for example before the reboot after an install, or refused by Secure Boot);
    V(No devices were found);
    V(Failed to initialize NVML: Driver/library version mismatch) (user-space library upgraded, kernel module not reloaded);
    V(Unable to determine the device handle for GPU...) (a GPU fell off the bus; the other GPUs are not reported either);
    any other non-zero exit, reported with its exit code and output."
  - When C(nvidia-smi topo -m) fails (or cannot be started) or prints link types the module does not
    know, RV(interconnect) is V(unknown) and the module warns; the GPU facts are still returned.
seealso:
  - name: nvidia-smi documentation
    description: The fields of C(--query-gpu) (C(nvidia-smi --help-query-gpu)) and the legend of C(topo -m).
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Read the GPUs
  blackwell.sglang.nvidia_gpu_info:
  register: gpu_info

- name: Require eight GPUs of one kind on serving hosts
  ansible.builtin.assert:
    that:
      - gpu_info.present
      - gpu_info.count == 8
      - gpu_info.compute_capabilities | length == 1
    fail_msg: >-
      expected 8 GPUs of one compute capability, found {{ gpu_info.count }}
      ({{ gpu_info.compute_capabilities | join(', ') }}) {{ gpu_info.error or '' }}

- name: Use an nvidia-smi outside PATH (for example from a driver container)
  blackwell.sglang.nvidia_gpu_info:
    nvidia_smi_path: /run/nvidia/driver/usr/bin/nvidia-smi
  register: gpu_info

- name: Show what was found
  ansible.builtin.debug:
    msg: >-
      {{ gpu_info.count }} GPU(s), compute capability {{ gpu_info.compute_capabilities | join(', ') }},
      driver {{ gpu_info.driver_version }}, interconnect {{ gpu_info.interconnect }}
  when: gpu_info.present
"""

RETURN = r"""
present:
  description:
    - Whether C(nvidia-smi) listed at least one GPU.
    - V(false) when C(nvidia-smi) is missing, cannot reach the driver, finds no device or exits
      non-zero; RV(error) says which.
  returned: always
  type: bool
  sample: true
gpus:
  description:
    - One entry per GPU, sorted by index, from C(nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version
      --format=csv,noheader,nounits).
    - Empty when RV(present) is V(false).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The nvidia-smi index (field C(index)); the same numbering as C(CUDA_VISIBLE_DEVICES) with C(CUDA_DEVICE_ORDER=PCI_BUS_ID).
      type: int
      sample: 0
    name:
      description: The product name (field C(name)).
      type: str
      sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
    uuid:
      description: The GPU UUID (field C(uuid)).
      type: str
      sample: GPU-5f3a9c1e-2b7d-4e8f-a1c6-0d9e8b7a6c51
    compute_capability:
      description:
        - The CUDA compute capability as C(M.m) (field C(compute_cap)), for example V(12.0) for RTX PRO 6000 Blackwell,
          V(10.3) for B300, V(9.0) for H200, V(12.1) for GB10.
        - V(null) if the driver reports it as not available.
      type: str
      sample: "12.0"
    memory_mib:
      description:
        - Total framebuffer memory in MiB (field C(memory.total), without units).
        - V(null) where the driver reports it as not available, such as GB10, whose memory is shared with the CPU.
      type: int
      sample: 97887
    driver_version:
      description: The NVIDIA driver version (field C(driver_version)).
      type: str
      sample: 580.95.05
count:
  description: The number of GPUs in RV(gpus).
  returned: always
  type: int
  sample: 8
compute_capabilities:
  description:
    - The distinct compute capabilities of RV(gpus), sorted ascending as versions.
    - The input for the C(flashinfer) role's target arch list; empty when RV(present) is V(false).
  returned: always
  type: list
  elements: str
  sample: ["12.0"]
driver_version:
  description: The NVIDIA driver version of the first GPU (all GPUs of a host share one driver); V(null) without GPUs.
  returned: always
  type: str
  sample: 580.95.05
interconnect:
  description:
    - How the GPUs reach each other, from C(nvidia-smi topo -m).
    - V(nvlink) when every pair of GPUs is joined by NVLink (C(NV#) cells, directly or through NVSwitch, as on B300 HGX).
    - V(pcie) when any pair goes over PCIe or the host (C(PIX), C(PXB), C(PHB), C(NODE), C(SYS) cells), as on RTX PRO 6000 servers.
    - V(none) for a single GPU or none.
    - V(unknown) when C(nvidia-smi topo -m) failed or printed link types not listed here (the module warns).
  returned: always
  type: str
  choices: [nvlink, pcie, none, unknown]
  sample: pcie
topology:
  description:
    - The link between each pair of GPUs, from C(nvidia-smi topo -m) (GPU index -> peer index -> the cell, for example
      C(NV18), C(PIX), C(PXB), C(PHB), C(NODE), C(SYS)); keys are strings. The custom all-reduce rule of the
      C(sglang_services) role reads it (C(plugins/module_utils/gpu_compat.py), C(custom_all_reduce)).
    - Empty for fewer than two GPUs, or when RV(interconnect) is V(unknown).
  returned: always
  type: dict
  sample: {"0": {"1": "PHB"}, "1": {"0": "PHB"}}
kernel_module:
  description:
    - The flavour of the loaded NVIDIA kernel module, from the first line of C(/proc/driver/nvidia/version),
      which names an C(Open Kernel Module) (V(open)) or a plain C(Kernel Module) (V(proprietary)).
    - V(null) without GPUs, or when the file is missing or unreadable (for example inside a container
      that does not mount C(/proc/driver/nvidia)).
  returned: always
  type: str
  choices: [open, proprietary]
  sample: open
error:
  description:
    - Why RV(present) is V(false), for example the driver's message
      V(NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.)
      or V(No devices were found).
    - V(null) when GPUs were found.
  returned: always
  type: str
  sample: No devices were found
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import arch_key
from ansible_collections.blackwell.sglang.plugins.module_utils.nvidia_smi import (
    INTERCONNECT_NONE,
    NVRM_VERSION_FILE,
    QUERY_GPU_ARGS,
    TOPO_ARGS,
    NvidiaSmiParseError,
    driver_error,
    interconnect,
    parse_nvrm_version,
    parse_query_gpu,
    parse_topology,
)

INTERCONNECT_UNKNOWN = "unknown"
# nvidia-smi output is not localised, but keep number formats predictable all the same.
COMMAND_ENV = {"LC_ALL": "C", "LANG": "C"}


def _absent(error):
    return {
        "changed": False,
        "present": False,
        "gpus": [],
        "count": 0,
        "compute_capabilities": [],
        "driver_version": None,
        "interconnect": INTERCONNECT_NONE,
        "topology": {},
        "kernel_module": None,
        "error": error,
    }


def _find_nvidia_smi(module):
    """Return (path, None) or (None, why not)."""
    path = module.params["nvidia_smi_path"]
    if path is None:
        path = module.get_bin_path("nvidia-smi")
        if path is None:
            return None, "nvidia-smi not found on PATH; the NVIDIA driver is not installed on this host"
        return path, None
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return None, "nvidia_smi_path %s is not an executable file" % path
    return path, None


def _command_failure(rc, stdout, stderr):
    output = "\n".join(part.strip() for part in (stdout, stderr) if part and part.strip())
    return driver_error(output) or "nvidia-smi exited with rc %d: %s" % (rc, output or "no output")


def _cannot_run(nvidia_smi, exc):
    return ("cannot run %s (%s): reinstall the NVIDIA driver (its nvidia-smi is damaged) or set nvidia_smi_path "
            "to a working nvidia-smi" % (nvidia_smi, exc.strerror or exc))


def _run(module, nvidia_smi, args):
    """run_command without its own exception handling: an nvidia-smi that cannot be started raises OSError."""
    return module.run_command([nvidia_smi] + list(args), environ_update=COMMAND_ENV, handle_exceptions=False)


def _read_topology(module, nvidia_smi):
    """(interconnect, {"0": {"1": link}}) from nvidia-smi topo -m; (unknown, {}) with a warning when it fails."""
    try:
        rc, stdout, stderr = _run(module, nvidia_smi, TOPO_ARGS)
    except OSError as exc:
        module.warn("nvidia-smi topo -m failed, interconnect unknown: %s" % _cannot_run(nvidia_smi, exc))
        return INTERCONNECT_UNKNOWN, {}
    if rc != 0:
        module.warn("nvidia-smi topo -m failed, interconnect unknown: %s" % _command_failure(rc, stdout, stderr))
        return INTERCONNECT_UNKNOWN, {}
    try:
        matrix = parse_topology(stdout)
        return interconnect(matrix), {str(gpu): {str(peer): link for peer, link in sorted(peers.items())}
                                      for gpu, peers in sorted(matrix.items())}
    except NvidiaSmiParseError as exc:
        module.warn("could not read nvidia-smi topo -m, interconnect unknown: %s" % exc)
        return INTERCONNECT_UNKNOWN, {}


def _read_kernel_module():
    try:
        with open(NVRM_VERSION_FILE) as handle:
            return parse_nvrm_version(handle.read())["kernel_module"]
    except (IOError, OSError):
        return None


def gather(module):
    nvidia_smi, missing = _find_nvidia_smi(module)
    if missing:
        return _absent(missing)

    try:
        rc, stdout, stderr = _run(module, nvidia_smi, QUERY_GPU_ARGS)
    except OSError as exc:  # found and executable, yet it does not start (a bad ELF, a missing loader)
        module.fail_json(msg=_cannot_run(nvidia_smi, exc))
    if rc != 0:
        return _absent(_command_failure(rc, stdout, stderr))
    reported = driver_error(stdout + "\n" + stderr)
    try:
        gpus = parse_query_gpu(stdout)
    except NvidiaSmiParseError as exc:
        if reported:
            return _absent(reported)
        module.fail_json(
            msg="could not parse the output of %s %s: %s" % (nvidia_smi, " ".join(QUERY_GPU_ARGS), exc),
            rc=rc,
            stdout=stdout,
            stderr=stderr,
        )
    if not gpus:
        return _absent(reported or "nvidia-smi listed no GPU")

    result = _absent(None)
    link, topology = _read_topology(module, nvidia_smi) if len(gpus) > 1 else (INTERCONNECT_NONE, {})
    result.update(
        present=True,
        gpus=gpus,
        count=len(gpus),
        compute_capabilities=sorted(
            set(gpu["compute_capability"] for gpu in gpus if gpu["compute_capability"]), key=arch_key
        ),
        driver_version=gpus[0]["driver_version"],
        interconnect=link,
        topology=topology,
        kernel_module=_read_kernel_module(),
    )
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(nvidia_smi_path=dict(type="path")),
        supports_check_mode=True,
    )
    module.exit_json(**gather(module))


if __name__ == "__main__":
    main()
