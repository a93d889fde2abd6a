"""The cuda and flashinfer filters, as the roles call them: thin wrappers over module_utils
(cuda_arch.py, arch_select.py), which have their own table tests. These pin what the wrappers add:
Ansible's error type, the result shape the flashinfer role's preflight reads, the filter names."""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter import cuda, flashinfer
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import gpu_coverage_problems, toolkit_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import (
    cuda_toolkit_problems,
    flashinfer_problems,
    kernel_cache_problems,
)


def test_cuda_filters():
    assert cuda.cuda_compute_name("12.0") == "compute_120"
    assert cuda.cuda_compute_name("10.3a") == "compute_103"  # as nvcc --list-gpu-arch names it
    assert cuda.cuda_min_toolkit("10.3") == "12.9"
    assert toolkit_problems(["12.0", "10.3"], "13.0.2") == []
    assert toolkit_problems(["10.3"], "12.8.1") == [
        "target 10.3 needs CUDA toolkit >= 12.9, but 12.8.1 was requested"]


def test_cuda_nvcc_release_filter():
    assert cuda.cuda_nvcc_release("Cuda compilation tools, release 12.8, V12.8.93\n") == "12.8"
    assert cuda.cuda_nvcc_release("") == ""


@pytest.mark.parametrize("call,arch", [(cuda.cuda_compute_name, "sm120"), (cuda.cuda_min_toolkit, "12")])
def test_cuda_filters_raise_ansibles_filter_error(call, arch):
    with pytest.raises(AnsibleFilterError) as info:
        call(arch)
    assert str(info.value) == "target arch %r is not of the form M.m (e.g. '12.0' for RTX PRO 6000, '10.3' for B300)" % arch


def test_flashinfer_targets_from_the_inventory_and_from_gpus():
    assert flashinfer.flashinfer_targets([], ["12.0"], "13.0", "0.7.2") == {
        "archs": ["12.0f"], "cache_arch": "120f", "source": "inventory", "error": None}
    assert flashinfer.flashinfer_targets(["10.3", "10.3"], [], "13.0", "0.7.2") == {
        "archs": ["10.3a"], "cache_arch": "103a", "source": "gpus", "error": None}
    assert flashinfer.flashinfer_targets(["12.0"], ["12.0"], "12.8", "0.7.2") == {
        "archs": ["12.0a"], "cache_arch": "120a", "source": "gpus", "error": None}


def test_flashinfer_targets_returns_the_error_instead_of_raising():
    result = flashinfer.flashinfer_targets(["12.1"], ["12.0"], "13.0", "0.7.2")
    assert result["archs"] == [] and result["cache_arch"] is None and result["source"] is None
    assert result["error"] == ("flashinfer_cuda_archs 12.0 does not match the GPUs found on this host (compute "
                               "capability 12.1); fix the inventory or leave flashinfer_cuda_archs unset to use the GPUs")
    assert flashinfer.flashinfer_targets([], ["10.3"], "12.8", "0.7.2")["error"] == "10.3a needs CUDA >= 12.9; nvcc is 12.8"


def test_filter_names():
    assert cuda.FilterModule().filters() == {
        "cuda_toolkit_preflight_problems": cuda_toolkit_problems, "cuda_compute_name": cuda.cuda_compute_name,
        "cuda_min_toolkit": cuda.cuda_min_toolkit, "cuda_nvcc_release": cuda.cuda_nvcc_release}
    assert flashinfer.FilterModule().filters() == {"flashinfer_targets": flashinfer.flashinfer_targets,
                                                   "flashinfer_select_problems": flashinfer.flashinfer_select_problems,
                                                   "flashinfer_problems": flashinfer_problems,
                                                   "kernel_cache_problems": kernel_cache_problems,
                                                   "kernel_cache_environment": flashinfer.kernel_cache_environment}


def test_preflight_target_checks_need_nothing_installed():
    # A GB10-like GPU (12.1) on a host whose group says 12.0: both target lists are refused.
    assert flashinfer.flashinfer_select_problems(["12.1"], ["12.0"]) == [
        "flashinfer_cuda_archs 12.0 does not match the GPUs found on this host (compute capability 12.1); fix the "
        "inventory or leave flashinfer_cuda_archs unset to use the GPUs"]
    assert gpu_coverage_problems(["12.1"], ["12.0"], "cuda_toolkit_target_archs")[0].startswith(
        "cuda_toolkit_target_archs [12.0] does not cover the GPUs found on this host (compute capability 12.1)")
    assert flashinfer.flashinfer_select_problems([], ["12.0"]) == []
    assert flashinfer.flashinfer_select_problems(["10.3"], []) == []
    assert flashinfer.flashinfer_select_problems([], [])[0].startswith("no FlashInfer target arch")
