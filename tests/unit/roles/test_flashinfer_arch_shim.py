"""The flashinfer role's patch for FlashInfer 0.2.0-0.3.0 (files/flashinfer_arch_shim.py), and how
flashinfer_jit reads the target set of those releases (torch's -gencode flags).

torch is not installed here: a stand-in `torch.utils.cpp_extension` records how it is called and
answers the way torch 2.14.1 does (torch/utils/cpp_extension.py, _get_cuda_arch_flags): with no
TORCH_CUDA_ARCH_LIST and no visible GPU its arch list is empty and `arch_list[-1] += '+PTX'`
(line 2727) raises IndexError; a list is split on ';' into -gencode flags.
"""

import importlib.util
import os
import sys
import types

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj

SHIM = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "flashinfer", "files",
                    "flashinfer_arch_shim.py")


@pytest.fixture
def torch_ext(monkeypatch):
    calls = []

    def original(cflags=None):
        calls.append(cflags)
        listed = os.environ.get("TORCH_CUDA_ARCH_LIST")
        if not listed:
            raise IndexError("list index out of range")
        return ["-gencode=arch=compute_%s,code=sm_%s" % (a.replace(".", ""), a.replace(".", ""))
                for a in listed.split(";")]

    cpp_ext = types.ModuleType("torch.utils.cpp_extension")
    cpp_ext._get_cuda_arch_flags = original
    cpp_ext.calls = calls
    utils = types.ModuleType("torch.utils")
    utils.cpp_extension = cpp_ext
    torch = types.ModuleType("torch")
    torch.utils = utils
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.utils", utils)
    monkeypatch.setitem(sys.modules, "torch.utils.cpp_extension", cpp_ext)
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST", raising=False)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    return cpp_ext


def load_shim():
    spec = importlib.util.spec_from_file_location("flashinfer._blackwell_sglang_arch", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("listed,flags", [
    ("12.0a", ["-gencode=arch=compute_120a,code=sm_120a"]),
    ("10.3a", ["-gencode=arch=compute_103a,code=sm_103a"]),
    ("12.0a 10.3a", ["-gencode=arch=compute_120a,code=sm_120a", "-gencode=arch=compute_103a,code=sm_103a"]),
    ("12.0a;9.0a", ["-gencode=arch=compute_120a,code=sm_120a", "-gencode=arch=compute_90a,code=sm_90a"]),
    ("12.0f", ["-gencode=arch=compute_120f,code=sm_120f"]),
    ("8.9+PTX", ["-gencode=arch=compute_89,code=sm_89", "-gencode=arch=compute_89,code=compute_89"]),
])
def test_shim_answers_from_flashinfer_cuda_arch_list(torch_ext, monkeypatch, listed, flags):
    load_shim()
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", listed)
    assert torch_ext._get_cuda_arch_flags() == flags
    assert torch_ext.calls == []  # torch's own function was not asked


def test_shim_unset_list_runs_torch_unchanged(torch_ext, monkeypatch):
    load_shim()
    with pytest.raises(IndexError):
        torch_ext._get_cuda_arch_flags()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert torch_ext._get_cuda_arch_flags(["-O3"]) == ["-gencode=arch=compute_90,code=sm_90"]
    assert torch_ext.calls == [None, ["-O3"]]


def test_shim_keeps_arch_flags_already_given(torch_ext, monkeypatch):
    load_shim()
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0a")
    assert torch_ext._get_cuda_arch_flags(["-gencode=arch=compute_90a,code=sm_90a"]) == []
    assert torch_ext._get_cuda_arch_flags(["-DTORCH_EXTENSION_NAME=arch_x"]) == [
        "-gencode=arch=compute_120a,code=sm_120a"]


@pytest.mark.parametrize("bad", ["sm120", "12", "12.0x", "12.10a"])
def test_shim_rejects_what_it_cannot_read(torch_ext, monkeypatch, bad):
    load_shim()
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", bad)
    with pytest.raises(ValueError) as info:
        torch_ext._get_cuda_arch_flags()
    assert repr(bad) in str(info.value)


def test_shim_loaded_twice_still_wraps_torch(torch_ext, monkeypatch):
    original = torch_ext._get_cuda_arch_flags
    first = load_shim()
    second = load_shim()  # a reload (importlib.reload, a second import path): must not wrap the first wrapper
    # Each load wraps torch's own function, not the wrapper the load before installed: without the
    # reload guard the second would call the first, and every reload would add a layer.
    assert first._torch_get_cuda_arch_flags is original
    assert second._torch_get_cuda_arch_flags is original
    assert torch_ext._get_cuda_arch_flags is second._get_cuda_arch_flags
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    assert torch_ext._get_cuda_arch_flags() == ["-gencode=arch=compute_80,code=sm_80"]
    assert torch_ext.calls == [None]


# ---- flashinfer_jit: the target set of FlashInfer < 0.3.1 is torch's flags -------------------

@pytest.mark.parametrize("listed,archs", [
    ("12.0a", {(12, "0a")}),
    ("10.3a;12.0a", {(10, "3a"), (12, "0a")}),
    ("9.0a", {(9, "0a")}),
    ("12.0", {(12, "0")}),
    ("8.0", {(8, "0")}),
])
def test_torch_archs_parse_gencode_flags(torch_ext, monkeypatch, listed, archs):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", listed)
    assert fj.FlashInferCache._torch_archs() == archs


def test_torch_archs_empty_when_torch_has_no_targets(torch_ext):
    assert fj.FlashInferCache._torch_archs() == set()


def test_torch_archs_follow_the_shim(torch_ext, monkeypatch):
    load_shim()
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0a 10.3a")
    assert fj.FlashInferCache._torch_archs() == {(12, "0a"), (10, "3a")}


# One line naming the cause and the fix, never a traceback (the import and the unit journal show it).
def test_shim_for_a_torch_ext_the_function_is_one_import_error(torch_ext):
    del torch_ext._get_cuda_arch_flags
    with pytest.raises(ImportError) as info:
        load_shim()
    assert str(info.value) == (
        "blackwell.sglang arch patch: this torch has no torch.utils.cpp_extension._get_cuda_arch_flags to answer from "
        "FLASHINFER_CUDA_ARCH_LIST; install FlashInfer >= 0.3.1, which reads the list itself (set "
        "sglang_venv_flashinfer_version, re-run site.yml)")


@pytest.mark.parametrize("listed, bad", [("sm120", "sm120"), ("12.0a 12", "12")])
def test_shim_names_the_entry_it_cannot_read_and_the_fix(torch_ext, monkeypatch, listed, bad):
    load_shim()
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", listed)
    with pytest.raises(ValueError) as info:
        torch_ext._get_cuda_arch_flags()
    assert str(info.value) == (
        "FLASHINFER_CUDA_ARCH_LIST: cannot read %r (expected e.g. 12.0a or 10.3a): fix it where it is set (the "
        "flashinfer role writes it from flashinfer_cuda_archs; re-run site.yml)" % bad)
