# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""flashinfer_targets: GPU facts + inventory -> FLASHINFER_CUDA_ARCH_LIST for this FlashInfer/CUDA."""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.arch_select import (
    cache_arch_dir,
    render_archs,
    select_archs,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError


def flashinfer_targets(gpu_ccs, inventory_archs, cuda_version, flashinfer_version):
    """{'archs': ['12.0f'], 'cache_arch': '120f', 'source': 'gpus'|'inventory', 'error': None}.

    Errors (inventory disagreeing with the GPUs, a toolkit too old for a target, nothing to target)
    are returned in 'error', so a preflight can fail with that text before anything is compiled.
    """
    try:
        selected = select_archs(gpu_ccs, inventory_archs)
        archs = render_archs(selected, cuda_version, flashinfer_version)
        return {
            "archs": archs,
            "cache_arch": cache_arch_dir(archs),
            "source": "gpus" if gpu_ccs else "inventory",
            "error": None,
        }
    except ArchError as exc:
        return {"archs": [], "cache_arch": None, "source": None, "error": str(exc)}


def flashinfer_select_problems(gpu_ccs, inventory_archs):
    """The targets check that needs nothing installed (no nvcc, no FlashInfer): the GPUs found and
    flashinfer_cuda_archs name the same compute capabilities, and there is something to target.
    [] when good, else [the sentence] (module_utils/arch_select.select_archs)."""
    try:
        select_archs(gpu_ccs, inventory_archs)
    except ArchError as exc:
        return [str(exc)]
    return []


class FilterModule:
    def filters(self):
        return {"flashinfer_targets": flashinfer_targets, "flashinfer_select_problems": flashinfer_select_problems}
