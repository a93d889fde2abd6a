# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/gpu_compat.py: whether a node can serve (driver, toolkit, torch, kernel
modules, GPU counts, attention backends, NCCL P2P setting). Each returns a list of sentences."""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.filter.sglang_services import sglang_services_active_list
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_compat


def gpu_driver_problems(driver_version, toolkit_version):
    """The driver (nvidia_gpu_info's driver_version) against the CUDA toolkit: [] when it runs its kernels."""
    return gpu_compat.driver_problems(driver_version, toolkit_version)[0]


def gpu_driver_warnings(driver_version, toolkit_version):
    """Runs only through CUDA minor version compatibility: one sentence, else []."""
    return gpu_compat.driver_problems(driver_version, toolkit_version)[1]


def gpu_kernel_module_problems(kernel_module, compute_capabilities):
    return gpu_compat.kernel_module_problems(kernel_module, compute_capabilities)


def gpu_torch_cuda_problems(torch_cuda_version, toolkit_version):
    return gpu_compat.torch_cuda_problems(torch_cuda_version, toolkit_version)


def gpu_backend_problems(settings_by_name, active, compute_capabilities, source="the host's GPUs"):
    return gpu_compat.backend_problems(settings_by_name, sglang_services_active_list(active), compute_capabilities, source)


def gpu_count_problems(settings_by_name, active, gpu_count):
    return gpu_compat.gpu_count_problems(settings_by_name, sglang_services_active_list(active), int(gpu_count))


def gpu_nccl_p2p_problems(mode):
    problem = gpu_compat.nccl_p2p_problem(mode)
    return [problem] if problem else []


class FilterModule:
    def filters(self):
        return {
            "gpu_driver_problems": gpu_driver_problems,
            "gpu_driver_warnings": gpu_driver_warnings,
            "gpu_kernel_module_problems": gpu_kernel_module_problems,
            "gpu_torch_cuda_problems": gpu_torch_cuda_problems,
            "gpu_backend_problems": gpu_backend_problems,
            "gpu_count_problems": gpu_count_problems,
            "gpu_nccl_p2p_problems": gpu_nccl_p2p_problems,
        }
