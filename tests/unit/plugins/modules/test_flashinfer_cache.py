"""flashinfer_jit.FlashInferCache against the fake FlashInfer, including the layouts of other
FlashInfer releases it reads: 0.3.0's "0.0.0+unknown" version and <cache>/<arch> workspace, a
target set on jit.core or jit.env instead of current_compilation_context, a JIT module whose
gen_<name>_module lives in flashinfer.jit itself, a JitSpec with get_library_path() instead of
jit_library_path. The fake stands in for FlashInfer (not installed here; Molecule runs the real one).
"""

import types

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj
from run_program import run
from fake_flashinfer import VERSION, drop_flashinfer_modules


@pytest.fixture
def cache(fake, monkeypatch):
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(fake.base))

    def load():
        drop_flashinfer_modules()
        return fj.FlashInferCache()
    return load


def edit(fake, rel, old, new):
    path = fake.site / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new))


def test_what_the_cache_reads_from_flashinfer(fake, cache):
    c = cache()
    assert c.version == VERSION
    assert c.jit_dir == str(fake.jit_dir())
    assert c.workspace_dir == str(fake.workspace())
    assert c.cache_root == str(fake.cache_root())
    assert c.lock_dir() == str(fake.jit_dir() / "tmp")
    assert c.target_archs() == ["12.0f"]
    assert c.nvcc(run) == (str(fake.cuda_home / "bin" / "nvcc"), "13.0")


def test_release_030_layout_version_and_cache_root(fake, cache):
    # FlashInfer 0.3.0 (sdist, flashinfer/__init__.py and jit/env.py): __version__ comes from
    # _build_meta.py and is "0.0.0+unknown" without it; jit/env.py has no flashinfer_version and its
    # workspace is FLASHINFER_CACHE_DIR / arch, one level less than 0.7.2's <cache>/<version>/<arch>.
    edit(fake, "flashinfer/__init__.py", '__version__ = "%s"' % VERSION, '__version__ = "0.0.0+unknown"')
    edit(fake, "flashinfer/jit/env.py", 'flashinfer_version = "%s"' % VERSION, "")
    edit(fake, "flashinfer/jit/env.py", "return FLASHINFER_CACHE_DIR / flashinfer_version / arch",
         "return FLASHINFER_CACHE_DIR / arch")
    c = cache()
    assert c.version == "0.0.0+unknown"
    assert c.workspace_dir == str(fake.cache_root() / "120f")
    assert c.cache_root == str(fake.cache_root())


@pytest.mark.parametrize("where", ["flashinfer/jit/core.py", "flashinfer/jit/env.py"])
def test_target_set_of_releases_without_a_compilation_context(fake, cache, where):
    edit(fake, "flashinfer/jit/core.py", "current_compilation_context = CompilationContext()",
         "_context = CompilationContext()")
    edit(fake, "flashinfer/jit/core.py", "current_compilation_context.TARGET_CUDA_ARCHS", "_context.TARGET_CUDA_ARCHS")
    path = fake.site / where
    path.write_text(path.read_text() + "\nTARGET_CUDA_ARCHS = {(9, '0a'), (12, '0f'), (10, '3a')}\n")
    assert cache().target_archs() == ["9.0a", "10.3a", "12.0f"]


def test_targets_sort_by_number(fake, cache, monkeypatch):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0f 9.0a 10.3a")
    assert cache().target_archs() == ["9.0a", "10.3a", "12.0f"]


def test_a_module_generated_in_flashinfer_jit_itself(fake, cache):
    (fake.site / "flashinfer/jit/__init__.py").write_text(
        "from .core import JitSpec\n\n\ndef gen_norm_module():\n    return JitSpec('norm')\n")
    c = cache()
    assert c.spec("norm").name == "norm"
    assert c.spec("sampling").name == "sampling"
    assert c.spec("no_such_module") is None
    assert c.has_module("sampling") and not c.has_module("norm")


def test_library_path_of_a_spec_with_get_library_path():
    class OldSpec:
        def get_library_path(self):
            return "/ws/cached_ops/norm/norm.so"

    assert fj.FlashInferCache.library_path(None, OldSpec()) == "/ws/cached_ops/norm/norm.so"


def test_build_is_compile_only_with_flashinfers_lock(fake, cache):
    c = cache()
    c.build(c.spec("sampling"))
    [record] = fake.builds
    assert (record["verbose"], record["need_lock"]) == (False, True)


def test_nvcc_problems_are_one_line_each(fake, cache, monkeypatch):
    long_garbage = "x" * 150 + "no release here" + "y" * 150
    nvcc = fake.cuda_home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho %s\nexit 3\n" % long_garbage)
    with pytest.raises(fj.JitCacheError) as info:
        cache().nvcc(run)
    assert str(info.value) == "cannot read the version of %s: %r" % (nvcc, (long_garbage + "\n")[-200:])
    fake.set_nvcc("12.9")
    nvcc.write_text(nvcc.read_text().replace('echo "nvcc: NVIDIA', 'exit_later=1; echo "nvcc: NVIDIA') + "exit 1\n")
    assert cache().nvcc(run) == (str(nvcc), "12.9")  # nvcc's exit status does not matter, its words do
    nvcc.unlink()
    with pytest.raises(fj.JitCacheError) as info:
        cache().nvcc(run)
    assert str(info.value) == "nvcc not found at %s (CUDA_HOME=%s)" % (nvcc, fake.cuda_home)
    monkeypatch.delenv("CUDA_HOME")
    with pytest.raises(fj.JitCacheError) as info:
        cache().nvcc(run)
    assert str(info.value) == "no CUDA toolkit: Could not find CUDA_HOME"


def raising(exc):
    def check():
        raise exc
    return check


@pytest.mark.parametrize("exc,message", [
    (RuntimeError("FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=[]."),
     "FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=[]."),
    # FlashInfer < 0.3.1 asks torch: torch 2.14's _get_cuda_arch_flags() with no list and no GPU.
    (IndexError("list index out of range"),
     "FlashInfer's check_cuda_arch() failed in torch's arch flags: IndexError: list index out of range"),
    (ValueError("Unknown CUDA arch (12.0a) or GPU not supported"),
     "FlashInfer's check_cuda_arch() failed in torch's arch flags: ValueError: Unknown CUDA arch (12.0a) or GPU not supported"),
])
def test_check_cuda_arch_turns_flashinfers_and_torchs_errors_into_one_line(exc, message):
    cache = fj.FlashInferCache.__new__(fj.FlashInferCache)
    cache.core = types.SimpleNamespace(check_cuda_arch=raising(exc))
    with pytest.raises(fj.JitCacheError) as info:
        cache.check_cuda_arch()
    assert str(info.value) == message
    cache.core = types.SimpleNamespace()  # a release without check_cuda_arch(): nothing to check
    assert cache.check_cuda_arch() is None


def test_target_set_of_releases_that_ask_torch(fake, cache, monkeypatch):
    # FlashInfer < 0.3.1: no target set of its own anywhere; torch's -gencode flags decide
    # (_torch_archs, tested with a torch stand-in in tests/unit/roles/test_flashinfer_arch_shim.py).
    edit(fake, "flashinfer/jit/core.py", "current_compilation_context = CompilationContext()",
         "_context = CompilationContext()")
    edit(fake, "flashinfer/jit/core.py", "current_compilation_context.TARGET_CUDA_ARCHS", "_context.TARGET_CUDA_ARCHS")
    monkeypatch.setattr(fj.FlashInferCache, "_torch_archs", staticmethod(lambda: {(12, "0a"), (8, "0")}))
    assert cache().target_archs() == ["8.0", "12.0a"]
