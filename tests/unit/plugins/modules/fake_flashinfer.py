"""A small fake `flashinfer` package for the flashinfer_jit_cache tests (the module and its command).

The fake mirrors what the module relies on in the real FlashInfer: jit/env.py computes
FLASHINFER_JIT_DIR at import time from FLASHINFER_WORKSPACE_BASE and FLASHINFER_CUDA_ARCH_LIST
(<base>/.cache/flashinfer/<version>/<arch>/cached_ops), importing jit/core.py creates the
workspace dir, core.check_cuda_arch() raises FlashInfer's own error for an empty target set,
cpp_ext.get_cuda_path() is CUDA_HOME, and a JitSpec builds <jit_dir>/<name>/<name>.so under
<jit_dir>/tmp/<name>.lock like FlashInfer's ninja build (a no-op when the .so exists). The
real FlashInfer is exercised in Molecule.
"""

import inspect
import json
import stat
import struct
import sys

from module_runner import run_module
from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_jit_cache

VERSION = "0.7.2"
LOCK_LINE = "sampling.lock: lock file left by a killed build"
ENV_NAMES = (
    "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_CUDA_ARCH_LIST", "FLASHINFER_JIT_VERBOSE",
    "FLASHINFER_JIT_DEBUG", "CUDA_HOME", "MAX_JOBS", "FAKE_FLASHINFER_FAIL", "FAKE_FLASHINFER_BROKEN",
)


def elf64(payload=64, shnum=3, shentsize=64):
    """A small but whole ELF64 shared object: header, payload, then the section header table."""
    shoff = 64 + payload
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, little endian, EV_CURRENT
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, shentsize, shnum, 0)
    return header + b"\xab" * payload + bytes(shentsize * shnum)


FAKE_FILES = {
    "flashinfer/__init__.py": '__version__ = "@VERSION@"\n',
    # What flashinfer-python 0.7.2's flashinfer/compilation_context.py does (CompilationContext.__init__
    # and _normalize_cuda_arch): FLASHINFER_CUDA_ARCH_LIST split on single spaces; a suffixed entry
    # ("12.0f") kept as it is; an unsuffixed one normalised with the nvcc release under CUDA_HOME
    # (12.0 -> 12.0f from CUDA 12.9, 12.0a on 12.8; 9.x -> a; 10+ -> a); unset, the visible GPUs
    # (none here). An empty value fails as 0.7.2 does: ValueError, while flashinfer.jit.env imports.
    "flashinfer/compilation_context.py": '''
import os


class CompilationContext:
    @staticmethod
    def _normalize_cuda_arch(major, minor):
        if major == 9:
            return (major, str(minor) + "a")
        elif major == 12:
            from flashinfer.jit.cpp_ext import is_cuda_version_at_least

            if minor == 0:
                if is_cuda_version_at_least("12.9"):
                    return (major, "0f")
                if is_cuda_version_at_least("12.8"):
                    return (major, "0a")
                raise RuntimeError("SM 120 requires CUDA >= 12.8")
            if is_cuda_version_at_least("12.9"):
                return (major, str(minor) + "a")
            raise RuntimeError("SM 12.1+ requires CUDA >= 12.9")
        elif major >= 10:
            return (major, str(minor) + "a")
        return (major, str(minor))

    def __init__(self):
        self.TARGET_CUDA_ARCHS = set()
        if "FLASHINFER_CUDA_ARCH_LIST" in os.environ:
            for arch in os.environ["FLASHINFER_CUDA_ARCH_LIST"].split(" "):
                major, minor = arch.split(".")
                major = int(major)
                if minor[-1].isalpha():
                    self.TARGET_CUDA_ARCHS.add((major, minor))
                else:
                    self.TARGET_CUDA_ARCHS.add(self._normalize_cuda_arch(major, int(minor)))
        # else: torch.cuda.get_device_capability() of each visible GPU; this machine has none.
''',
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/env.py": '''
import os
import pathlib

from ..compilation_context import CompilationContext

flashinfer_version = "@VERSION@"
FLASHINFER_BASE_DIR = pathlib.Path(os.getenv("FLASHINFER_WORKSPACE_BASE", pathlib.Path.home().as_posix()))
FLASHINFER_CACHE_DIR = FLASHINFER_BASE_DIR / ".cache" / "flashinfer"


def _get_workspace_dir_name():
    context = CompilationContext()
    arch = "_".join("%s%s" % (major, minor) for major, minor in sorted(context.TARGET_CUDA_ARCHS))
    return FLASHINFER_CACHE_DIR / flashinfer_version / arch


FLASHINFER_WORKSPACE_DIR = _get_workspace_dir_name()
FLASHINFER_JIT_DIR = FLASHINFER_WORKSPACE_DIR / "cached_ops"
''',
    "flashinfer/jit/core.py": '''
import fcntl
import json
import os
import struct
import time

from ..compilation_context import CompilationContext
from . import env as jit_env

# Like FlashInfer: importing the JIT core creates the workspace dir.
os.makedirs(jit_env.FLASHINFER_WORKSPACE_DIR, exist_ok=True)
current_compilation_context = CompilationContext()
BUILD_LOG = "@LOG@"


def check_cuda_arch():
    if not any(major >= 8 or (major == 7 and minor.isdigit() and int(minor) >= 5)
               for major, minor in current_compilation_context.TARGET_CUDA_ARCHS):
        raise RuntimeError("FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=%s."
                           % sorted(current_compilation_context.TARGET_CUDA_ARCHS))


@ELF64@


class JitSpec:
    def __init__(self, name):
        self.name = name

    @property
    def jit_library_path(self):
        return jit_env.FLASHINFER_JIT_DIR / self.name / (self.name + ".so")

    @property
    def lock_path(self):
        return jit_env.FLASHINFER_JIT_DIR / "tmp" / (self.name + ".lock")

    # flashinfer-python 0.7.2, JitSpecNvcc.write_ninja: the module's build.ninja as generated for this
    # environment (absolute paths, as FlashInfer writes them), written only where it differs. The fake's
    # generator: one copy of a source FlashInfer generates into the workspace (FAKE_FLASHINFER_FLAGS
    # stands in for a flag that differs, another CUDA or compiler).
    def write_ninja(self):
        path = jit_env.FLASHINFER_JIT_DIR / self.name / "build.ninja"
        text = "rule cp\\n  command = cp%s $in $out\\nbuild %s/%s.so: cp %s/generated/payload.elf\\n" % (
            os.environ.get("FAKE_FLASHINFER_FLAGS", ""), path.parent, self.name, jit_env.FLASHINFER_BASE_DIR)
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    # flashinfer-python 0.7.2, flashinfer/jit/core.py line 577 (JitSpecNvcc.build): no lock unless asked.
    def build(self, verbose=None, need_lock=False):
        record = {
            "name": self.name, "verbose": verbose, "need_lock": need_lock,
            "lock_existed": self.lock_path.exists(),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("FLASHINFER_", "MAX_JOBS", "CUDA_HOME"))},
        }
        fd = None
        if need_lock:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(str(self.lock_path), os.O_RDWR | os.O_CREAT, 0o644)
            deadline = time.monotonic() + 2  # FileLock waits forever; a test must not
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        os.close(fd)
                        fd = None
                        raise RuntimeError("fake build: %s is held" % self.lock_path)
                    time.sleep(0.05)
        try:
            if os.environ.get("FAKE_FLASHINFER_FAIL"):
                record["compiled"] = False
                raise RuntimeError("Ninja build failed. Ninja output:\\nnvcc fatal   : Unsupported gpu architecture")
            library = self.jit_library_path
            record["compiled"] = not library.exists()  # ninja: up to date when the output exists
            if record["compiled"]:
                library.parent.mkdir(parents=True, exist_ok=True)
                # FAKE_FLASHINFER_BROKEN: a link that "succeeds" but leaves an empty file (a full disk).
                library.write_bytes(b"" if os.environ.get("FAKE_FLASHINFER_BROKEN") else elf64(payload=512))
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            with open(BUILD_LOG, "a") as log:
                log.write(json.dumps(record) + "\\n")
''',
    # flashinfer-python 0.7.2's flashinfer/jit/cpp_ext.py: the CUDA version is nvcc's "release X.Y,"
    # under CUDA_HOME (its torch.version.cuda fallback is not needed here: the fixture has an nvcc).
    "flashinfer/jit/cpp_ext.py": '''
import os
import re
import subprocess


def get_cuda_path():
    cuda_home = os.environ.get("CUDA_HOME")
    if not cuda_home:
        raise RuntimeError("Could not find CUDA_HOME")
    return cuda_home


def get_cuda_version():
    txt = subprocess.check_output([os.path.join(get_cuda_path(), "bin/nvcc"), "--version"], text=True)
    return tuple(int(part) for part in re.findall(r"release (\\d+)\\.(\\d+),", txt)[0])


def is_cuda_version_at_least(version_str):
    return get_cuda_version() >= tuple(int(part) for part in version_str.split("."))
''',
    "flashinfer/jit/sampling.py": '''
from .core import JitSpec


def gen_sampling_module():
    return JitSpec("sampling")
''',
}

# nvcc as it answers --version (an unknown option: "nvcc fatal   : Unknown option", exit 1).
NVCC = """#!/bin/sh
if [ "$1" != --version ]; then echo "nvcc fatal   : Unknown option '$1'" >&2; exit 1; fi
echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Cuda compilation tools, release {release}, V{release}.88"
"""


def drop_flashinfer_modules():
    for name in [n for n in sys.modules if n == "flashinfer" or n.startswith("flashinfer.")]:
        del sys.modules[name]


class FakeFlashInfer:
    """The fake package on sys.path, a workspace base, and a CUDA_HOME with a fake nvcc."""

    def __init__(self, tmp_path, monkeypatch):
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch
        self.log = tmp_path / "builds.jsonl"
        self.site = tmp_path / "site"
        for rel, text in FAKE_FILES.items():
            path = self.site / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                text.replace("@VERSION@", VERSION).replace("@LOG@", str(self.log))
                .replace("@ELF64@", inspect.getsource(elf64))
            )
        # Installed as a wheel leaves it: a RECORD listing its files (the verification stamp reads it).
        record = self.site / ("flashinfer_python-%s.dist-info" % VERSION) / "RECORD"
        record.parent.mkdir(parents=True)
        record.write_text("".join("%s,,\n" % rel for rel in sorted(FAKE_FILES)) + "%s,,\n" % record.relative_to(self.site))
        self.base = tmp_path / "sglang-home"
        self.base.mkdir()
        self.cuda_home = tmp_path / "cuda"
        self.set_nvcc("13.0")
        monkeypatch.syspath_prepend(str(self.site))
        monkeypatch.setenv("CUDA_HOME", str(self.cuda_home))
        monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0f")

    def set_nvcc(self, release, cuda_home=None):
        nvcc = (cuda_home or self.cuda_home) / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True, exist_ok=True)
        nvcc.write_text(NVCC.format(release=release))
        nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
        return nvcc

    def cache_root(self, base=None):
        return (base or self.base) / ".cache" / "flashinfer"

    def workspace(self, arch="120f", base=None):
        return self.cache_root(base) / VERSION / arch

    def jit_dir(self, arch="120f", base=None):
        return self.workspace(arch, base) / "cached_ops"

    def so(self, arch="120f", base=None):
        return self.jit_dir(arch, base) / "sampling" / "sampling.so"

    def lock(self, arch="120f", base=None):
        return self.jit_dir(arch, base) / "tmp" / "sampling.lock"

    @property
    def builds(self):
        """Every call of spec.build(), in order, with what it saw."""
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    @property
    def compiles(self):
        return [record for record in self.builds if record["compiled"]]

    def run(self, capsys, check_mode=False, diff=False, **args):
        """One module run, like Ansible's: a fresh interpreter state, so FlashInfer is imported anew."""
        args.setdefault("workspace_base", str(self.base))
        args = {name: value for name, value in args.items() if value is not None}  # None: not given
        drop_flashinfer_modules()
        try:
            return run_module(flashinfer_jit_cache.main, capsys, args, check_mode, diff)
        finally:
            drop_flashinfer_modules()
