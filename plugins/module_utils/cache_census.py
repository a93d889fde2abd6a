# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every cache the serving stack keeps, in the venv's workspace, and a census that proves it.

The one home of the table of cache locations: the kernel_cache role renders the venv's environment
file from it (filter blackwell.sglang.kernel_cache_environment), the sglang_services role refuses a
service environment that moves one of them into /tmp or into the kernel caches of every venv
(module_utils/sglang_services.py), and the census (module blackwell.sglang.kernel_cache_census)
checks the installed venv against it.

The census learns what the installed packages declare, from the packages themselves:

- SGLang's registry of its environment (``sglang/srt/environ.py``, class ``Envs``, loaded from its
  file: it is standard library only, and SGLang's package ``__init__`` would import torch): every
  string variable named like a cache location, and every one whose default is computed from
  ``SGLANG_CACHE_DIR`` (``_default_cache_subdir``), resolved by SGLang's own ``get()`` with the
  units' environment applied; and ``third_party_cache_defaults()``, the other libraries' caches
  SGLang points at its own base (Triton, TorchInductor, the CUDA driver's PTX cache, TileLang,
  FlashInfer).
- Every other package: each quoted name of the form ``*CACHE_DIR``, ``*CACHE_PATH``,
  ``*CACHE_HOME``, ``*CACHE_ROOT``, ``*WORKSPACE_BASE`` or ``*WORKSPACE_DIR`` in its Python sources
  (34575 files in SGLang 0.5.23's venv, about 2 seconds; the census runs again only when the venv
  changes, module_utils/verified.py).

A declared name is placed (the environment names a path inside the workspace), or one this table
knows is not a kernel cache (with why), or the census fails naming it and the file that reads it.

Triton's compiles on the serving path need a ``ptxas`` that knows every target (a Triton whose
bundled ptxas predates sm_103a breaks B300 schedulers, sglang#14075): ``triton_ptxas`` asks Triton
itself which ptxas it runs for each target (``triton.backends.nvidia.compiler.get_ptxas``, which
honours TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH) and checks its CUDA release against the
collection's table of targets (module_utils/cuda_arch.py).
Runs on the hosts in the SGLang venv's interpreter: the standard library and cuda_arch (packaging).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys

from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_arch

# A name that says it holds a cache location, as it is spelt in the sources.
NAME = re.compile(r"^[A-Z][A-Z0-9_]*(?:CACHE_DIR|CACHE_PATH|CACHE_HOME|CACHE_ROOT|WORKSPACE_BASE|WORKSPACE_DIR)$")
LITERAL = re.compile(rb"""["']([A-Z][A-Z0-9_]*(?:CACHE_DIR|CACHE_PATH|CACHE_HOME|CACHE_ROOT|WORKSPACE_BASE|WORKSPACE_DIR))["']""")

# Each cache the serving stack keeps: variable -> (directory in the workspace, who reads it and its
# default there; the sources of SGLang 0.5.23's venv). The FlashInfer JIT cache keeps its place
# (<workspace>/.cache/flashinfer) and Triton's, TorchInductor's and DeepGEMM's theirs.
LOCATIONS = {
    "FLASHINFER_WORKSPACE_BASE": ("", "flashinfer/jit/env.py: its JIT cache is <base>/.cache/flashinfer (default the home)"),
    "SGLANG_CACHE_DIR": ("sglang", "sglang/srt/environ.py: the base SGLang's own caches follow (default ~/.cache/sglang)"),
    "SGLANG_JIT_CACHE_DIR": ("sglang/jit", "sglang/kernels/jit/utils/compile/cache.py: SGLang's JIT kernels (~/.cache/sglang/jit, not under SGLANG_CACHE_DIR)"),
    "SGLANG_DG_CACHE_DIR": ("deep_gemm", "sglang/srt/environ.py: DeepGEMM's JIT kernels (SGLang sets DG_JIT_CACHE_DIR from it)"),
    "DG_JIT_CACHE_DIR": ("deep_gemm", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py: DeepGEMM's own name of the same cache"),
    "TRTLLM_DG_CACHE_DIR": ("trtllm_deep_gemm", "flashinfer: TRT-LLM DeepGEMM's JIT kernels"),
    "TRITON_CACHE_DIR": ("triton", "triton/knobs.py: Triton's kernels (~/.triton/cache)"),
    "TORCHINDUCTOR_CACHE_DIR": ("torchinductor", "torch/_inductor: TorchInductor's (/tmp/torchinductor_<user>, emptied by PrivateTmp=)"),
    "CUDA_CACHE_PATH": ("nv", "the CUDA driver's PTX JIT cache (~/.nv/ComputeCache); sglang/srt/environ.py"),
    "TILELANG_CACHE_DIR": ("tilelang", "tilelang: its kernels (DeepSeek-V4 MHC prenorm); sglang/srt/environ.py"),
    "CUTE_DSL_CACHE_DIR": ("cute_dsl", "CuTe DSL (cutlass/base_dsl/cache_helpers.py): /tmp/<user>/..., emptied by PrivateTmp= on every start"),
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": ("flash_attn_cute", "flash_attn/cute/cache_utils.py and FlashInfer's copy: FlashAttention 4's CuTe kernels"),
    "FLEX_ATTENTION_CUTE_DSL_CACHE_DIR": ("flex_attn_cute", "cudnn/flex_attention/runtime/compile_cache.py"),
    "QUACK_CACHE_DIR": ("quack", "quack/cache/__init__.py (and torch's vendored copy)"),
    "B12X_COMPILE_CACHE_DIR": ("b12x", "flashinfer/experimental/b12x/_lib/compiler.py (~/.cache/b12x)"),
    "B12X_ROCE_CACHE_DIR": ("b12x_roce", "flashinfer/experimental/b12x/comm/roce/_proxy.py"),
    "HUMMING_CACHE_DIR": ("humming", "humming/utils/jit.py (~/.humming/cache)"),
    "TVM_FFI_CACHE_DIR": ("tvm-ffi", "tvm_ffi/cpp/extension.py (~/.cache/tvm-ffi)"),
    "FLASHINFER_AUTOTUNE_CACHE_DIR": ("flashinfer_autotune", "flashinfer/autotune_cache.py: the autotuner's results"),
    "FLASHINFER_KDA_PTX_CACHE_DIR": ("flashinfer_kda_ptx", "flashinfer/kda_kernels/ptx/static_runtime.py"),
    "CUDA_TILE_CACHE_DIR": ("cutile", "cutile_cache/_env.py (~/.cache)"),
    "CUDNN_FRONTEND_CAKE_CACHE_DIR": ("cudnn_cake", "cudnn/linear_attention/cake/compiler.py"),
    "NUMBA_CACHE_DIR": ("numba", "numba/core/config.py: numba's compiled functions"),
    "OUTLINES_CACHE_DIR": ("outlines", "outlines/caching.py: compiled grammars (~/.cache/outlines)"),
    "CYTHON_CACHE_DIR": ("cython", "Cython/Build/Cache.py"),
    "SGLANG_DIFFUSION_CACHE_ROOT": ("sgl_diffusion", "sglang/multimodal_gen/envs.py (~/.cache/sgl_diffusion)"),
    # Not named like a cache, so the scan cannot find it: torch.utils.cpp_extension's JIT builds.
    "TORCH_EXTENSIONS_DIR": ("torch_extensions", "torch/utils/cpp_extension.py: JIT-built C++/CUDA extensions (~/.cache/torch_extensions)"),
}

# Names the sources declare that are not kernel caches: name -> why they stay where they are.
NOT_KERNEL_CACHES = {
    "XDG_CACHE_HOME": "the base of every XDG cache, the Hugging Face hub's model downloads among them: one per venv would download models again",
    "TIKTOKEN_CACHE_DIR": "tiktoken's downloaded vocabularies (tiktoken/load.py): data, not kernels",
    "DATA_GYM_CACHE_DIR": "tiktoken's older name of its vocabulary downloads (tiktoken/load.py)",
    "DEFAULT_MODEL_CACHE_DIR": "SGLang's test suite only (sglang/test/test_utils.py)",
    "DNNLIB_CACHE_DIR": "a modelscope pipeline's model downloads (modelscope/ops/.../dnnlib/util.py)",
    "MS_CACHE_HOME": "modelscope's model downloads (modelscope/hub/__init__.py)",
    "FLASHINFER_CACHE_DIR": "a name FlashInfer prints (flashinfer/__main__.py), not read from the environment: <FLASHINFER_WORKSPACE_BASE>/.cache/flashinfer",
}

SGLANG_ENVIRON = os.path.join("sglang", "srt", "environ.py")
SKIP_DIRS = frozenset(("__pycache__",))


class CensusError(Exception):
    """The venv's packages could not be read."""


SUBDIR = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$")


def subdir_problems(name, subdir):
    """Why the operator's `subdir` cannot be the directory of cache `name` in the workspace."""
    if not NAME.match(name):
        return ["%s is not named like a cache location (…CACHE_DIR, …CACHE_PATH, …CACHE_HOME, …CACHE_ROOT, "
                "…WORKSPACE_BASE, …WORKSPACE_DIR)" % name]
    if not isinstance(subdir, str) or not SUBDIR.match(subdir) or ".." in subdir.split("/"):
        return ["%s: %r must be a relative directory inside the workspace, of letters, digits, '.', '_', '-' and '/' "
                "(not the workspace itself, no '..')" % (name, subdir)]
    return []


def locations(extra=None):
    """variable -> directory in the workspace: the table, and `extra` (the operator's additions,
    name -> relative directory), which may not move a cache of the table."""
    table = {name: subdir for name, (subdir, _why) in LOCATIONS.items()}
    taken = {subdir: name for name, subdir in table.items()}
    problems = []
    for name, subdir in sorted((extra or {}).items()):
        if name in table:
            if table[name] != subdir:
                problems.append("%s is placed by the collection (%s): leave it out" % (name, table[name] or "the workspace"))
            continue
        found = subdir_problems(name, subdir)
        if not found and subdir in taken:
            found = ["%s: %s is %s's directory already; give each cache its own" % (name, subdir, taken[subdir])]
        taken.setdefault(subdir, name)
        problems += found
    if problems:
        raise CensusError("kernel_cache_locations: " + "; ".join(problems))
    table.update(extra or {})
    return table


def environment(workspace, extra=None):
    """variable -> path: every cache in `workspace`, in the table's order, then `extra`'s."""
    workspace = workspace.rstrip("/") or "/"
    return {name: (os.path.join(workspace, subdir) if subdir else workspace) for name, subdir in locations(extra).items()}


def inside(path, root):
    """Whether `path` (after ~ and links) is `root` or below it."""
    if not path:
        return False
    real, base = os.path.realpath(os.path.expanduser(path)), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def scan(dirs):
    """(name -> the first file, relative to its directory, whose source quotes it; the number of
    files read), over every ``*.py`` under `dirs`, in sorted walk order."""
    found, count = {}, 0
    for directory in dirs:
        for root, subdirs, files in os.walk(directory):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS)
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                try:
                    with open(path, "rb") as handle:
                        data = handle.read()
                except OSError:
                    continue
                count += 1
                for match in LITERAL.finditer(data):
                    found.setdefault(match.group(1).decode("ascii"), os.path.relpath(path, directory))
    return found, count


def load_sglang_environ(dirs):
    """SGLang's environ module, loaded from its file in `dirs` (None when SGLang is not installed)."""
    for directory in dirs:
        path = os.path.join(directory, SGLANG_ENVIRON)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_blackwell_sglang_census_environ", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # pylint: disable=broad-except  # any error of SGLang's code is named
                raise CensusError("cannot load SGLang's %s: %s: %s" % (path, type(exc).__name__, exc)) from exc
            finally:
                sys.modules.pop(spec.name, None)
            return module
    return None


def sglang_locations(environ_module):
    """SGLang's cache locations as its own code resolves them now: name -> path or None (a
    hard-coded default elsewhere). Its string variables named like a cache, those whose default
    is computed (from SGLANG_CACHE_DIR), and third_party_cache_defaults() (a variable set in the
    environment wins, as in redirect_third_party_caches())."""
    if environ_module is None:
        return {}
    registry, text_field = getattr(environ_module, "Envs", None), getattr(environ_module, "EnvStr", None)
    if registry is None or text_field is None:
        raise CensusError("SGLang's %s has no Envs registry or EnvStr: this collection reads SGLang >= 0.5.23's; "
                          "update the census (module_utils/cache_census.py) for this SGLang" % SGLANG_ENVIRON)
    found = {}
    for name, field in vars(registry).items():
        if isinstance(field, text_field) and (NAME.match(name) or callable(field.default)):
            try:
                value = field.get()
            except Exception as exc:  # pylint: disable=broad-except  # SGLang's code: named, not a traceback
                raise CensusError("SGLang's %s fails to resolve %s: %s: %s" % (SGLANG_ENVIRON, name, type(exc).__name__, exc)) from exc
            if value is None or isinstance(value, str) and (value.startswith(("/", "~")) or value == ""):
                found[name] = value
    defaults = getattr(environ_module, "third_party_cache_defaults", None)
    try:
        resolved = defaults() if defaults else {}
    except Exception as exc:  # pylint: disable=broad-except
        raise CensusError("SGLang's third_party_cache_defaults() fails: %s: %s" % (type(exc).__name__, exc)) from exc
    for name, value in resolved.items():
        found[name] = os.environ.get(name) or value
    return found


def census(workspace, dirs, extra=None, exempt=None):
    """What the venv in `dirs` declares against where the environment (os.environ, with the units'
    env files applied) places it.

    Returns a dict: files (how many were read), declared (name -> the file that reads it), sglang (name -> resolved path),
    placed (name -> path inside `workspace`), exempt (name -> why), unplaced (name -> the file
    that reads it) and misplaced (name -> "NAME=path (set in the env files|its default)", outside
    the workspace). The census passes when unplaced and misplaced are empty."""
    table = locations(extra)
    reasons = dict(NOT_KERNEL_CACHES, **(exempt or {}))
    declared, files = scan(dirs)
    sglang = sglang_locations(load_sglang_environ(dirs))
    for name in sglang:
        declared.setdefault(name, SGLANG_ENVIRON)
    result = {"files": files, "declared": declared, "sglang": sglang, "placed": {}, "exempt": {}, "unplaced": {}, "misplaced": {}}
    for name in sorted(set(declared) | set(table)):
        value = sglang[name] if name in sglang else os.environ.get(name)
        if name in reasons and name not in table:
            result["exempt"][name] = reasons[name]
        elif value and inside(value, workspace):
            result["placed"][name] = value
        elif value:
            result["misplaced"][name] = "%s=%s (%s)" % (name, value, "set in the environment" if name in os.environ else "its default")
        elif name in declared:
            result["unplaced"][name] = declared[name]
    return result


def problem(result, workspace):
    """One sentence for a census that failed (None when it passed)."""
    parts = []
    if result["unplaced"]:
        parts.append("the installed packages declare cache locations the kernel_cache role does not place in the "
                     "venv's workspace %s: %s. A compile, a tune or a download there lands in the service user's "
                     "home or /tmp on the serving path: add each to kernel_cache_locations (name: a directory in the "
                     "workspace) or, when it is no kernel cache, to kernel_cache_census_exempt (name: why)"
                     % (workspace, ", ".join("%s (read in %s)" % item for item in sorted(result["unplaced"].items()))))
    if result["misplaced"]:
        parts.append("these cache locations resolve outside the venv's workspace %s: %s. Place each the collection "
                     "does not with kernel_cache_locations (or say why it is none with kernel_cache_census_exempt), and "
                     "remove what sets one of its caches elsewhere from the env files the units read"
                     % (workspace, ", ".join(value for _name, value in sorted(result["misplaced"].items()))))
    return "kernel_cache: " + "; ".join(parts) if parts else None


def _ptxas_of(get_ptxas, arch):
    """(path, version) from Triton's get_ptxas in each of its shapes: get_ptxas(arch) -> NvidiaTool
    (Triton >= 3.6), get_ptxas() -> NvidiaTool (3.4, 3.5: one ptxas for every arch), get_ptxas() ->
    (path, version) (<= 3.3)."""
    try:
        tool = get_ptxas(arch)
    except TypeError:
        tool = get_ptxas()
    if isinstance(tool, tuple):
        path, version = tool[0], tool[1]
    else:
        path, version = tool.path, tool.version
    return path, str(version)


def triton_ptxas(targets, get_ptxas=None):
    """Triton's own choice of ptxas for each target ('10.3a'): {target: {path, version, problem}}
    (problem None when that ptxas builds the target). {} when Triton is not installed (nothing
    compiles with it). `get_ptxas(arch_int)` is Triton's, imported here unless given."""
    if not targets:
        return {}
    if get_ptxas is None:
        try:
            from triton.backends.nvidia.compiler import get_ptxas  # pylint: disable=import-outside-toplevel
        except ImportError:
            return {}
    found = {}
    for target in targets:
        base, _suffix = cuda_arch.parse_arch(target)
        try:
            path, version = _ptxas_of(get_ptxas, int(base.replace(".", "")))
            need, gone = cuda_arch.toolkit_gap(target, version)
        except Exception as exc:  # pylint: disable=broad-except  # Triton's code, or a version it read: named
            found[target] = {"path": None, "version": None, "problem": "Triton finds no ptxas for %s: %s" % (target, exc)}
            continue
        problem = None
        if need or gone:
            problem = ("Triton compiles for %s with %s (CUDA %s), which %s: its kernels would fail to build on the serving path "
                       "(sglang#14075). Point Triton at a ptxas that does (the kernel_cache role: kernel_cache_triton_ptxas: "
                       "toolkit, the CUDA home's)" % (target, path, version,
                                                      "predates it (needs CUDA >= %s)" % need if need else "no longer builds it (CUDA >= %s)" % gone))
        found[target] = {"path": path, "version": version, "problem": problem}
    return found
