# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""FlashInfer's JIT cache as the installed FlashInfer sees it: where it is, what is built, what
is broken, and building it compile-only (no GPU needed).

Runs inside the SGLang venv's interpreter. Every path and spec comes from the installed
FlashInfer (``flashinfer.jit.env.FLASHINFER_JIT_DIR``, ``flashinfer.jit.<name>.gen_<name>_module``),
never from a guess. Stdlib only besides FlashInfer and this collection's ``cuda_arch`` (which needs
``packaging``, as FlashInfer does).

``ensure()`` is the whole check/build/repair run. Two callers share it: the
``flashinfer_jit_cache`` module, and the pre-warm command (``command()``): the
``flashinfer_prewarm_command`` module installs its own copy of this file and of ``cuda_arch`` with a
launcher, which every unit runs as ``ExecStartPre=`` with the environment systemd already loaded::

    /opt/sglang/current/bin/python /usr/local/lib/blackwell-sglang/flashinfer_prewarm.py --modules sampling

It exits 0 when every module is built (seconds when warm), compiles what is missing (the serving
process then never compiles), and exits 1 with a one-line reason on failure.

Programs (``nvcc --version``) run through the caller's ``run(argv)``, which returns an object with
``returncode``, ``stdout`` and ``stderr`` (text) and raises OSError when the program cannot start: in a
module ``module_utils/run.py``'s ``module_runner`` (AnsibleModule.run_command, as ansible-test's
sanity wants of modules and module_utils), in the pre-warm command the launcher's own.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import importlib
import os
import re
import shutil
import struct
import sys
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError, nvcc_release, target_key, toolkit_gap

ELF_MAGIC = b"\x7fELF"
# Debug builds (-G -O0) are many times slower and not what the services load: never pre-warm them.
DEBUG_VARIABLES = ("FLASHINFER_JIT_VERBOSE", "FLASHINFER_JIT_DEBUG")
ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# Modules warmed when none are named, restricted to those the installed FlashInfer has.
DEFAULT_MODULES = ("sampling", "topk")


class JitCacheError(Exception):
    """A condition the operator must fix (message says what)."""


# ---- OSError -> one line that names the cause and the fix -----------------------------------------

def ninja_problem(exc):
    """Why FlashInfer could not start ``ninja`` and the fix. FlashInfer runs the bare name from PATH;
    the ``ninja`` wheel the venv carries puts it in the venv's bin, beside this interpreter."""
    venv_ninja = os.path.join(os.path.dirname(sys.executable), "ninja")
    search = os.environ.get("PATH", os.defpath)
    if isinstance(exc, FileNotFoundError) and os.path.lexists(venv_ninja) and not os.access(venv_ninja, os.X_OK):
        return ("the venv's ninja, %s, cannot be run (not executable): remove it and re-run site.yml (the sglang_venv role "
                "reinstalls what is missing from the venv)" % venv_ninja)
    if isinstance(exc, FileNotFoundError) and not os.access(venv_ninja, os.X_OK):
        return ("ninja not found (the venv's ninja, %s): re-run site.yml (the sglang_venv role reinstalls what is missing "
                "from the venv)" % venv_ninja)
    if os.path.dirname(venv_ninja) not in search.split(os.pathsep):
        return ("ninja not found on PATH=%s (the venv's ninja, %s, is not on it): put the venv's bin first on PATH "
                "(the flashinfer role's environment file does; re-run site.yml)" % (search, venv_ninja))
    return ("cannot run ninja (%s; the venv's ninja, %s): remove the venv's ninja and re-run site.yml (the sglang_venv "
            "role reinstalls what is missing from the venv)" % (exc.strerror or exc, venv_ninja))


def nvcc_problem(exc):
    return ("cannot run %s (%s): reinstall the CUDA toolkit (re-run site.yml) or set CUDA_HOME to a toolkit "
            "whose bin/nvcc runs" % (exc.filename, exc.strerror or exc))


def file_problem(exc):
    """An OSError on a file or directory: what is wrong with which path, and what to do."""
    path = exc.filename
    if path is None:  # no path to name (a shared library the loader cannot open, ...)
        return "%s: %s" % (type(exc).__name__, exc)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ("permission denied on %s: run as the service user that owns FlashInfer's cache (the units' User=; "
                "become_user for the module) or give that user the path" % path)
    if exc.errno == errno.EISDIR:
        return "%s is a directory where a file was expected: remove it" % path
    if exc.errno == errno.ENOTDIR:
        return "a part of %s is a file where a directory was expected: remove that file" % path
    if exc.errno == errno.ENOSPC:
        return "no space left on the device of %s: free space there" % path
    if exc.errno == errno.EROFS:
        return "%s is on a read-only file system: set FLASHINFER_WORKSPACE_BASE to a writable directory" % path
    if exc.errno == errno.ENOENT:
        return "%s does not exist (removed while this ran?): run again" % path
    return "%s: %s: fix that path and run again" % (path, exc.strerror or exc)


# The tools FlashInfer's JIT runs: an OSError naming one is about that tool, not a file.
TOOLS = {"ninja": ninja_problem, "nvcc": nvcc_problem}


def tool_name(exc):
    """The executable an OSError names ('ninja' for '/venv/bin/ninja'); '' when it names none."""
    return os.path.basename(str(exc.filename or ""))


def os_error_reason(exc):
    """One line for an OSError: ninja or nvcc that cannot be started, else the path and its problem."""
    return TOOLS.get(tool_name(exc), file_problem)(exc)


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
        except OSError as exc:
            # Importing FlashInfer loads torch's CUDA libraries and may run nvcc (0.7.2 asks it for the
            # CUDA version while it reads FLASHINFER_CUDA_ARCH_LIST).
            if tool_name(exc) in TOOLS:
                raise JitCacheError(os_error_reason(exc)) from exc
            raise JitCacheError(
                "cannot import flashinfer (%s): reinstall the venv (re-run site.yml)" % os_error_reason(exc)
            ) from exc
        except (ValueError, RuntimeError) as exc:
            # FlashInfer reads FLASHINFER_CUDA_ARCH_LIST while flashinfer.jit.env imports: 0.7.2 raises
            # ValueError for an entry that is not M.m (an empty value too) and RuntimeError for a
            # target the CUDA toolkit is too old for ("SM 120 requires CUDA >= 12.8").
            raise JitCacheError(
                "FlashInfer rejects FLASHINFER_CUDA_ARCH_LIST=%r: %s: %s"
                % (os.environ.get("FLASHINFER_CUDA_ARCH_LIST"), type(exc).__name__, exc)
            ) from exc
        # Every release the role supports (0.2.0-0.7.2) sets flashinfer.__version__ (0.3.0 from
        # _build_meta.py, "0.0.0+unknown" without it; later ones from version.py) and
        # jit/env.py's FLASHINFER_CACHE_DIR (<FLASHINFER_WORKSPACE_BASE>/.cache/flashinfer). The
        # workspace is <cache>/<arch> up to 0.4 and <cache>/<version>/<arch> since.
        self.version = self.flashinfer.__version__
        self.jit_dir = str(self.jit_env.FLASHINFER_JIT_DIR)
        self.workspace_dir = os.path.dirname(self.jit_dir)
        self.cache_root = str(self.jit_env.FLASHINFER_CACHE_DIR)

    # ---- targets -----------------------------------------------------------------------------
    def target_archs(self):
        """FlashInfer's own target-arch set, as '12.0f' strings, sorted."""
        context = getattr(self.core, "current_compilation_context", None)
        archs = getattr(context, "TARGET_CUDA_ARCHS", None)
        if archs is None:
            archs = getattr(self.core, "TARGET_CUDA_ARCHS", None) or getattr(self.jit_env, "TARGET_CUDA_ARCHS", None)
        if archs is None:
            archs = self._torch_archs()
        try:
            return sorted((_arch_string(major, minor) for major, minor in archs), key=target_key)
        except ArchError as exc:
            raise JitCacheError("FlashInfer %s has a target this collection cannot read: %s" % (self.version, exc)) from exc

    @staticmethod
    def _torch_archs():
        """FlashInfer < 0.3.1 has no target set of its own: it compiles for (and checks) the
        -gencode flags of torch's _get_cuda_arch_flags(), so read the same flags
        ('compute_120a' -> (12, '0a')). No usable flags is no target."""
        try:
            cpp_ext = importlib.import_module("torch.utils.cpp_extension")
        except ImportError as exc:
            raise JitCacheError("this FlashInfer reads its targets from torch, which cannot be imported (%s): "
                                "reinstall the venv (re-run site.yml)" % exc) from exc
        try:
            flags = cpp_ext._get_cuda_arch_flags()
        except (ValueError, IndexError, RuntimeError):
            return set()
        return {(int(m.group(1)), m.group(2) + m.group(3))
                for m in re.finditer(r"compute_(\d+?)(\d)([af]?)\b", " ".join(flags))}

    def check_cuda_arch(self):
        """FlashInfer's own check; raises JitCacheError with FlashInfer's error text."""
        check = getattr(self.core, "check_cuda_arch", None)
        if check is None:
            return
        try:
            check()
        except RuntimeError as exc:
            raise JitCacheError(str(exc)) from exc
        except (ValueError, IndexError) as exc:
            # FlashInfer < 0.3.1 asks torch for its targets: torch rejects an arch it does not know
            # (ValueError) or, with no list and no GPU, fails on an empty list (IndexError).
            raise JitCacheError("FlashInfer's check_cuda_arch() failed in torch's arch flags: %s: %s"
                                % (type(exc).__name__, exc)) from exc

    # ---- toolkit -----------------------------------------------------------------------------
    def nvcc(self, run):
        """(path, 'X.Y') of the nvcc FlashInfer will run (CUDA_HOME/bin/nvcc), asked with `run` (see above)."""
        cpp_ext = importlib.import_module("flashinfer.jit.cpp_ext")
        try:
            cuda_home = cpp_ext.get_cuda_path()
        except RuntimeError as exc:
            raise JitCacheError("no CUDA toolkit: %s" % exc) from exc
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        if not os.access(nvcc, os.X_OK):
            raise JitCacheError("nvcc not found at %s (CUDA_HOME=%s)" % (nvcc, cuda_home))
        try:
            out = run([nvcc, "--version"]).stdout
        except OSError as exc:
            raise JitCacheError(nvcc_problem(exc)) from exc
        release = nvcc_release(out)
        if not release:
            raise JitCacheError("cannot read the version of %s: %r" % (nvcc, out[-200:]))
        return nvcc, release

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


def prepare_environment(env_file=None, workspace_base=None, jobs=None):
    """Apply the units' environment files (a path or a list, in order: a later file wins, as with
    systemd's EnvironmentFile= lines), overrides and MAX_JOBS before FlashInfer is imported."""
    for one in [env_file] if isinstance(env_file, str) else (env_file or []):
        _apply_env_file(one)
    if workspace_base:
        os.environ["FLASHINFER_WORKSPACE_BASE"] = workspace_base
    if jobs:
        os.environ["MAX_JOBS"] = str(jobs)
    for name in DEBUG_VARIABLES:
        os.environ.pop(name, None)


def _apply_env_file(env_file):
    if env_file:
        try:
            os.environ.update(read_env_file(env_file))
        except OSError as exc:
            raise JitCacheError("cannot read env_file %s (%s): point it at the flashinfer role's environment file "
                                "(re-run site.yml to write it) and run as a user that can read it"
                                % (env_file, exc.strerror or exc)) from exc
        except UnicodeDecodeError as exc:
            raise JitCacheError("cannot read env_file %s (not UTF-8 text: %s): point it at the flashinfer role's "
                                "environment file (re-run site.yml to write it)" % (env_file, exc.reason)) from exc


def check_toolkit(cache, archs, run, check_targets=False):
    """nvcc under CUDA_HOME, and (with `check_targets`) new enough for each target the CUDA table
    knows (cuda_arch.toolkit_gap; a target it does not know is FlashInfer's to judge)."""
    nvcc, release = cache.nvcc(run)
    too_old = []
    for arch in archs if check_targets else ():
        try:
            need, _gone = toolkit_gap(arch, release)
        except ArchError:
            continue
        if need:
            too_old.append("%s needs CUDA >= %s" % (arch, need))
    if too_old:
        raise JitCacheError("nvcc %s at %s is too old: %s" % (release, nvcc, "; ".join(too_old)))
    return {"path": nvcc, "version": release}


def ensure(run, state="present", modules=None, expected_archs=None, scope="version", check_mode=False,
           check_targets=False):
    """Check FlashInfer's targets, then remove and/or build the JIT modules, repairing what a
    killed build left. Import FlashInfer only after prepare_environment().

    `run` runs nvcc (see above). Returns the module's result (changed, cache_dir, flashinfer_version, archs, nvcc, built,
    skipped_modules, repaired, removed, seconds) plus `before`/`after`: compiled module names.
    Raises JitCacheError with a message that says what to fix, an OSError on the cache's files too.
    """
    try:
        return _ensure(run, state, modules, expected_archs, scope, check_mode, check_targets)
    except OSError as exc:  # a cache file or dir this user cannot read, remove or write
        raise JitCacheError(os_error_reason(exc)) from exc


def _ensure(run, state, modules, expected_archs, scope, check_mode, check_targets):
    cache = FlashInferCache()
    cache.check_cuda_arch()
    result = dict(cache_dir=cache.jit_dir, flashinfer_version=cache.version, archs=cache.target_archs(),
                  built=[], skipped_modules=[], repaired=[], removed=[], seconds={})
    if expected_archs is not None and sorted(expected_archs) != sorted(result["archs"]):
        raise JitCacheError(
            "FlashInfer %s targets %s with this environment, expected %s"
            % (cache.version, result["archs"] or "nothing", sorted(expected_archs))
        )
    before = cache.compiled_modules()

    if state in ("absent", "rebuilt"):
        target = cache.cache_root if scope == "all" else cache.workspace_dir
        if has_files(target):  # not the empty dirs importing FlashInfer just created
            result["removed"].append(target)
            if not check_mode:
                remove_tree(target)

    if state in ("present", "rebuilt"):
        names = modules
        if names is None:
            names = [name for name in DEFAULT_MODULES if cache.has_module(name)]
        specs = {}
        for name in names:
            spec = cache.spec(name)
            if spec is None:
                raise JitCacheError("FlashInfer %s has no JIT module %r" % (cache.version, name))
            specs[name] = spec
        if specs:
            result["nvcc"] = check_toolkit(cache, result["archs"], run, check_targets)
        removing = bool(result["removed"])
        unheld = stale_locks(cache.lock_dir())
        for name, spec in specs.items():
            library = cache.library_path(spec)
            # FlashInfer's locks stay on disk after every build; one matters only when no process
            # holds it and its module never finished (the build that took it was killed).
            lock = os.path.join(cache.lock_dir(), name + ".lock")
            if lock in unheld and so_problem(library):
                result["repaired"].append("%s: lock file left by a killed build" % os.path.basename(lock))
                if not check_mode:
                    os.unlink(lock)
            problem = None if removing else so_problem(library)
            if problem not in (None, "missing"):
                result["repaired"].append("%s: %s" % (os.path.basename(library), problem))
                if not check_mode:
                    os.unlink(library)
            if check_mode:
                (result["built"] if removing or problem else result["skipped_modules"]).append(name)
                continue
            fingerprint = library_fingerprint(library)
            try:
                result["seconds"][name] = timed(cache.build, spec)
            except RuntimeError as exc:
                raise JitCacheError("building FlashInfer module %s failed: %s" % (name, exc)) from exc
            except OSError as exc:  # ninja or nvcc that cannot be started, a cache dir it cannot write
                raise JitCacheError("building FlashInfer module %s failed: %s" % (name, os_error_reason(exc))) from exc
            still_broken = so_problem(library)
            if still_broken:
                raise JitCacheError("%s is %s after building %s" % (library, still_broken, name))
            changed = library_fingerprint(library) != fingerprint
            (result["built"] if changed else result["skipped_modules"]).append(name)

    if check_mode:
        after = sorted(set(n for n in before if not result["removed"]) | set(result["built"]))
    else:
        after = cache.compiled_modules()
    result["changed"] = bool(result["built"] or result["repaired"] or result["removed"])
    result["before"], result["after"] = before, after
    return result


# ---- command line (the units' ExecStartPre=) ---------------------------------------------------

def split_list(text):
    """'12.0f 10.3a' / 'sampling,topk' -> list; FLASHINFER_CUDA_ARCH_LIST separates by spaces."""
    return [item for item in re.split(r"[\s,;]+", text or "") if item]


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="flashinfer_prewarm.py",
        description="Check FlashInfer's targets and make sure its JIT modules are built (compile-only, "
                    "no GPU needed); repairs what a killed build left. Reads the environment it runs in "
                    "(the unit's EnvironmentFile=).",
    )
    parser.add_argument("--modules", type=split_list, default=None,
                        help="modules to ensure, comma or space separated (default: %s)" % ",".join(DEFAULT_MODULES))
    parser.add_argument("--expected-archs", type=split_list, default=None,
                        help="FlashInfer's target set must equal this (default: FLASHINFER_CUDA_ARCH_LIST); "
                             "'' checks nothing")
    parser.add_argument("--env-file", action="append",
                        help="apply a KEY=VALUE file first, repeatable, later ones win (systemd already did for units)")
    parser.add_argument("--workspace-base", help="overrides FLASHINFER_WORKSPACE_BASE")
    parser.add_argument("--jobs", type=int, help="parallel compile jobs (MAX_JOBS)")
    parser.add_argument("--check", action="store_true", help="report what would be built or repaired; change nothing")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be >= 1, got %d" % args.jobs)
    return args


def command(argv, run):
    """The pre-warm check as a command (the units' ExecStartPre=, the launcher flashinfer_prewarm_command installs,
    which passes its `run`: see above).

    Returns (exit status, one line): 0 and the summary when every module is built, 1 and
    "flashinfer_jit: error: <reason>" otherwise ("unexpected <type>: <message>" for an exception it does
    not know, so the unit's journal never gets a traceback). The caller prints the line (stdout for 0,
    stderr for 1).
    """
    args = parse_args(argv)
    try:
        prepare_environment(args.env_file, args.workspace_base, args.jobs)
        expected = args.expected_archs
        if expected is None and os.environ.get("FLASHINFER_CUDA_ARCH_LIST"):
            expected = split_list(os.environ["FLASHINFER_CUDA_ARCH_LIST"])
        result = ensure(run, modules=args.modules, expected_archs=expected or None, check_mode=args.check)
    except JitCacheError as exc:
        return 1, "flashinfer_jit: error: %s" % exc
    except Exception as exc:  # the unit's journal gets one line, not a traceback
        return 1, "flashinfer_jit: error: unexpected %s: %s" % (type(exc).__name__, " ".join(str(exc).split()))
    words = "would build" if args.check else "built"
    return 0, "flashinfer_jit: FlashInfer %s targets %s, cache %s; %s: %s; up to date: %s%s%s" % (
        result["flashinfer_version"], " ".join(result["archs"]), result["cache_dir"], words,
        ", ".join(result["built"]) or "none", ", ".join(result["skipped_modules"]) or "none",
        "; repaired: " + "; ".join(result["repaired"]) if result["repaired"] else "",
        " (%s s)" % " ".join("%s=%s" % item for item in sorted(result["seconds"].items())) if result["seconds"] else "",
    )
