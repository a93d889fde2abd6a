# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flashinfer role's target filters (module_utils/arch_select.py): GPU facts + inventory ->
FLASHINFER_CUDA_ARCH_LIST for this FlashInfer/CUDA; the flashinfer and kernel_cache roles' preflight
checks (module_utils/role_checks.py); the kernel_cache role's environment (module_utils/cache_census.py). Documented in plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils import cache_census
from ansible_collections.blackwell.sglang.plugins.module_utils.arch_select import flashinfer_select_problems, flashinfer_targets
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import flashinfer_problems, kernel_cache_problems


def kernel_cache_environment(workspace, locations=None):
    """Every cache the serving stack keeps, placed in `workspace`: variable -> path."""
    try:
        return cache_census.environment(workspace, locations)
    except cache_census.CensusError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {
            "flashinfer_targets": flashinfer_targets,
            "flashinfer_select_problems": flashinfer_select_problems,
            "flashinfer_problems": flashinfer_problems,
            "kernel_cache_problems": kernel_cache_problems,
            "kernel_cache_environment": kernel_cache_environment,
        }
