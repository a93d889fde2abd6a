# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over module_utils/gpu_compat.py: whether a node can serve. Each returns a list of
sentences. The preflights' GPU checks (driver, kernel modules, GPU counts, attention backends, NCCL
P2P setting) are the role checks of module_utils/role_checks.py (filters cuda_toolkit_preflight_problems
and sglang_services_gpu_problems). Documented in plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.gpu_compat import (
    backends_summary, driver_warnings, host_compute_capabilities, torch_cuda_problems)


def gpu_compute_capabilities(gpus, archs):
    """The compute capabilities of a host (module_utils/gpu_compat.host_compute_capabilities)."""
    return host_compute_capabilities(gpus, archs)[0]


class FilterModule:
    def filters(self):
        return {
            "gpu_compute_capabilities": gpu_compute_capabilities,
            "sglang_backends_summary": backends_summary,
            "gpu_driver_warnings": driver_warnings,
            "gpu_torch_cuda_problems": torch_cuda_problems,
        }
