"""The B300 lab node: CUDA 13.0 builds compute_103, FlashInfer targets 10.3a and its cache is warm."""

import pytest

testinfra_hosts = ["podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order

ENV = "/etc/sglang/flashinfer.env"
CACHE = "/var/lib/sglang/.cache/flashinfer/0.7.2/103a/cached_ops"
PY = "/opt/sglang/current/bin/python"


def test_toolkit_builds_sm103a(host):
    assert "compute_103" in host.check_output("/opt/cuda/13.0.2/bin/nvcc --list-gpu-arch").split()


def test_env_file_targets_10_3a(host):
    assert "FLASHINFER_CUDA_ARCH_LIST=10.3a\n" in host.file(ENV).content_string


def test_flashinfer_itself_targets_10_3a(host):
    out = host.check_output(
        "runuser -u sglang -- env -i $(grep -v '^#' %s | xargs) %s -c 'from flashinfer.jit import core, env; "
        "core.check_cuda_arch(); print(sorted(core.current_compilation_context.TARGET_CUDA_ARCHS), env.FLASHINFER_JIT_DIR)'"
        % (ENV, PY)
    )
    assert out.split() == ["[(10,", "'3a')]", CACHE]


def test_sampling_is_warm_for_103a(host):
    so = host.file(CACHE + "/sampling/sampling.so")
    assert so.is_file and so.user == "sglang" and so.size > 100000
    # FlashInfer's own build file for it compiled for exactly this target.
    ninja = host.file(CACHE + "/sampling/build.ninja").content_string
    assert "-gencode=arch=compute_103a,code=sm_103a" in ninja
    assert "compute_120" not in ninja
