# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the CUDA arch table in module_utils/cuda_arch.py, and the cuda_toolkit role's
preflight check (module_utils/role_checks.py). Documented in plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError, compute_name, min_toolkit, nvcc_release
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import cuda_toolkit_problems


def cuda_compute_name(arch):
    """module_utils/cuda_arch.compute_name, its ArchError as Ansible's filter error."""
    try:
        return compute_name(arch)
    except ArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cuda_min_toolkit(arch):
    """module_utils/cuda_arch.min_toolkit, its ArchError as Ansible's filter error."""
    try:
        return min_toolkit(arch)
    except ArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cuda_nvcc_release(text):
    """`nvcc --version` output -> its release 'M.m' ('' when it names none)."""
    return nvcc_release(text) or ""


class FilterModule:
    def filters(self):
        return {
            "cuda_toolkit_preflight_problems": cuda_toolkit_problems,
            "cuda_compute_name": cuda_compute_name,
            "cuda_min_toolkit": cuda_min_toolkit,
            "cuda_nvcc_release": cuda_nvcc_release,
        }
