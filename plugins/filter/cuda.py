# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the CUDA arch table in module_utils/cuda_arch.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import (
    ArchError,
    compute_name,
    gpu_coverage_problems,
    min_toolkit,
    nvcc_release,
    toolkit_problems,
)


def cuda_toolkit_problems(archs, toolkit_version, name="target archs"):
    return toolkit_problems(archs, toolkit_version, name)


def cuda_compute_name(arch):
    try:
        return compute_name(arch)
    except ArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cuda_min_toolkit(arch):
    try:
        return min_toolkit(arch)
    except ArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cuda_nvcc_release(text):
    """`nvcc --version` output -> its release 'M.m' ('' when it names none)."""
    return nvcc_release(text) or ""


def cuda_gpu_problems(gpu_ccs, archs, name):
    """GPUs found on the host that the target list `name` does not cover (one sentence, or [])."""
    return gpu_coverage_problems(gpu_ccs, archs, name)


class FilterModule:
    def filters(self):
        return {
            "cuda_toolkit_problems": cuda_toolkit_problems,
            "cuda_compute_name": cuda_compute_name,
            "cuda_min_toolkit": cuda_min_toolkit,
            "cuda_nvcc_release": cuda_nvcc_release,
            "cuda_gpu_problems": cuda_gpu_problems,
        }
