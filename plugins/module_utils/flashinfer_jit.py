# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""FlashInfer's JIT cache as the installed FlashInfer sees it: where it is, what is built, what
is broken, and building it compile-only (no GPU needed).

Runs inside the SGLang venv's interpreter. Every path and spec comes from the installed
FlashInfer (``flashinfer.jit.env.FLASHINFER_JIT_DIR``, ``flashinfer.jit.<name>.gen_<name>_module``),
never from a guess. Used by the ``flashinfer_jit_cache`` module; stdlib only besides FlashInfer.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import re
import shutil
import struct
import subprocess
import time

ELF_MAGIC = b"\x7fELF"
# Debug builds (-G -O0) are many times slower and not what the services load: never pre-warm them.
DEBUG_VARIABLES = ("FLASHINFER_JIT_VERBOSE", "FLASHINFER_JIT_DEBUG")
ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


class JitCacheError(Exception):
    """A condition the operator must fix (message says what)."""


def read_env_file(path):
    """KEY=VALUE lines of a systemd EnvironmentFile (comments with # or ;, optional quotes)."""
    env = {}
    with open(path) as handle:
        for line in handle:
            if not line.strip() or line.lstrip().startswith(("#", ";")):
                continue
            match = ENV_LINE.match(line.rstrip("\n"))
            if not match:
                raise JitCacheError("%s: cannot parse line %r" % (path, line.rstrip("\n")))
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[match.group(1)] = value
    return env


def so_problem(path):
    """Why the shared object at `path` cannot be loaded, or None when it looks whole.

    Checks what a killed or interrupted link leaves: a zero-byte file, no ELF magic, or a file
    shorter than the section header table its ELF header announces (truncated).
    """
    try:
        size = os.path.getsize(path)
    except OSError:
        return "missing"
    if size == 0:
        return "empty (0 bytes)"
    with open(path, "rb") as handle:
        header = handle.read(64)
    if header[:4] != ELF_MAGIC:
        return "not an ELF file"
    if len(header) < 64 or header[4] != 2:  # ELFCLASS64
        return "truncated ELF header (%d bytes)" % len(header)
    endian = "<" if header[5] == 1 else ">"
    e_shoff = struct.unpack_from(endian + "Q", header, 0x28)[0]
    e_shentsize, e_shnum = struct.unpack_from(endian + "HH", header, 0x3A)
    end = e_shoff + e_shentsize * e_shnum
    if end > size:
        return "truncated: section headers end at byte %d, file has %d" % (end, size)
    return None


def stale_locks(directory):
    """Lock files in `directory` that no process holds (left by a killed build)."""
    stale = []
    if not os.path.isdir(directory):
        return stale
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".lock"):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: a build is running right now
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            stale.append(path)
        finally:
            os.close(fd)
    return stale


def _arch_string(major, minor):
    return "%s.%s" % (major, minor)


class FlashInferCache:
    """The installed FlashInfer's JIT cache. Import FlashInfer only after the environment is set."""

    def __init__(self):
        try:
            self.flashinfer = importlib.import_module("flashinfer")
            self.jit_env = importlib.import_module("flashinfer.jit.env")
            self.core = importlib.import_module("flashinfer.jit.core")
        except ImportError as exc:
            raise JitCacheError(
                "cannot import flashinfer (%s); run this with the SGLang venv's interpreter" % exc
            ) from exc
        self.version = getattr(self.flashinfer, "__version__", None) or self.jit_env.flashinfer_version
        self.jit_dir = str(self.jit_env.FLASHINFER_JIT_DIR)
        self.workspace_dir = os.path.dirname(self.jit_dir)  # .../<version>/<arch>
        self.cache_root = str(getattr(self.jit_env, "FLASHINFER_CACHE_DIR", os.path.dirname(os.path.dirname(self.workspace_dir))))

    # ---- targets -----------------------------------------------------------------------------
    def target_archs(self):
        """FlashInfer's own target-arch set, as '12.0f' strings, sorted."""
        context = getattr(self.core, "current_compilation_context", None)
        archs = getattr(context, "TARGET_CUDA_ARCHS", None)
        if archs is None:
            archs = getattr(self.core, "TARGET_CUDA_ARCHS", None) or getattr(self.jit_env, "TARGET_CUDA_ARCHS", set())
        return sorted((_arch_string(major, minor) for major, minor in archs),
                      key=lambda a: (int(a.split(".")[0]), a.split(".")[1]))

    def check_cuda_arch(self):
        """FlashInfer's own check; raises JitCacheError with FlashInfer's error text."""
        check = getattr(self.core, "check_cuda_arch", None)
        if check is None:
            return
        try:
            check()
        except RuntimeError as exc:
            raise JitCacheError(str(exc)) from exc

    # ---- toolkit -----------------------------------------------------------------------------
    def nvcc(self):
        """(path, 'X.Y') of the nvcc FlashInfer will run (CUDA_HOME/bin/nvcc)."""
        cpp_ext = importlib.import_module("flashinfer.jit.cpp_ext")
        try:
            cuda_home = cpp_ext.get_cuda_path()
        except RuntimeError as exc:
            raise JitCacheError("no CUDA toolkit: %s" % exc) from exc
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        if not os.access(nvcc, os.X_OK):
            raise JitCacheError("nvcc not found at %s (CUDA_HOME=%s)" % (nvcc, cuda_home))
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
        match = re.search(r"release (\d+\.\d+),", out)
        if not match:
            raise JitCacheError("cannot read the version of %s: %r" % (nvcc, out[-200:]))
        return nvcc, match.group(1)

    # ---- modules -----------------------------------------------------------------------------
    def spec(self, name):
        """FlashInfer's JitSpec for module `name` (flashinfer.jit.<name>.gen_<name>_module)."""
        for module_name in ("flashinfer.jit.%s" % name, "flashinfer.jit"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            factory = getattr(module, "gen_%s_module" % name, None)
            if factory is not None:
                return factory()
        return None

    def has_module(self, name):
        try:
            importlib.import_module("flashinfer.jit.%s" % name)
        except ImportError:
            return False
        return True

    def library_path(self, spec):
        return str(getattr(spec, "jit_library_path", None) or spec.get_library_path())

    def lock_dir(self):
        return os.path.join(self.jit_dir, "tmp")

    def compiled_modules(self):
        """Names of modules in this version/arch cache whose .so looks whole."""
        names = []
        if os.path.isdir(self.jit_dir):
            for name in sorted(os.listdir(self.jit_dir)):
                if so_problem(os.path.join(self.jit_dir, name, name + ".so")) is None:
                    names.append(name)
        return names

    def build(self, spec):
        """Build one module compile-only with FlashInfer's own ninja build (no GPU needed)."""
        spec.build(verbose=False, need_lock=True)


def library_fingerprint(path):
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def has_files(path):
    """True when the tree at `path` holds anything but directories. Importing FlashInfer creates
    its (empty) workspace dir, so an empty tree is no cache: counting it made absent never idempotent."""
    for _root, _dirs, files in os.walk(path):
        if files:
            return True
    return False


def remove_tree(path):
    if os.path.lexists(path):
        shutil.rmtree(path)
        return True
    return False


def timed(func, *args):
    start = time.monotonic()
    func(*args)
    return round(time.monotonic() - start, 1)
