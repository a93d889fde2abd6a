"""flashinfer_jit helpers: env files, broken shared objects, stale locks, library fingerprints."""

import errno
import fcntl
import os
import struct
import subprocess
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj
from run_program import run


def elf64(payload=64, shnum=3, shentsize=64):
    """A small but whole ELF64 shared object: header, payload, then the section header table."""
    shoff = 64 + payload
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, little endian, EV_CURRENT
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, shentsize, shnum, 0)
    assert len(header) == 64
    return header + b"\xab" * payload + bytes(shentsize * shnum)


# ---- read_env_file ---------------------------------------------------------------------------

def test_read_env_file_comments_quotes_and_export(tmp_path):
    env = tmp_path / "flashinfer.env"
    env.write_text(
        "# written by the flashinfer role\n"
        "; also a comment\n"
        "\n"
        "FLASHINFER_CUDA_ARCH_LIST=12.0f\n"
        "export CUDA_HOME=/opt/cuda/13.0.2\n"
        "FLASHINFER_WORKSPACE_BASE=\"/var/lib/sglang\"\n"
        "PATH='/opt/cuda/13.0.2/bin:/usr/bin'\n"
        "   INDENTED=  padded  \n"
        "EMPTY=\n"
        "HALF=\"unbalanced\n"
        "EQUALS=a=b\n"
    )
    assert fj.read_env_file(str(env)) == {
        "FLASHINFER_CUDA_ARCH_LIST": "12.0f",
        "CUDA_HOME": "/opt/cuda/13.0.2",
        "FLASHINFER_WORKSPACE_BASE": "/var/lib/sglang",
        "PATH": "/opt/cuda/13.0.2/bin:/usr/bin",
        "INDENTED": "padded",
        "EMPTY": "",
        "HALF": "\"unbalanced",
        "EQUALS": "a=b",
    }


def test_env_files_apply_in_order_a_later_one_wins(tmp_path, monkeypatch):
    # The units' order: the shared flashinfer.env, then the venv's venv.env (its PATH, its workspace).
    shared = tmp_path / "flashinfer.env"
    shared.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0f\nPATH=/shared/bin\n")
    venv = tmp_path / "venv.env"
    venv.write_text("PATH=/opt/sglang/venvs/abc/bin\nFLASHINFER_WORKSPACE_BASE=/var/lib/sglang/kernel-caches/abc\n")
    for name in ("FLASHINFER_CUDA_ARCH_LIST", "PATH", "FLASHINFER_WORKSPACE_BASE"):
        monkeypatch.delenv(name, raising=False)
    fj.prepare_environment([str(shared), str(venv)])
    assert (os.environ["FLASHINFER_CUDA_ARCH_LIST"], os.environ["PATH"], os.environ["FLASHINFER_WORKSPACE_BASE"]) == (
        "12.0f", "/opt/sglang/venvs/abc/bin", "/var/lib/sglang/kernel-caches/abc")
    # A missing second file is named as such, not the first.
    with pytest.raises(fj.JitCacheError) as info:
        fj.prepare_environment([str(shared), str(tmp_path / "gone.env")])
    assert "cannot read env_file %s" % (tmp_path / "gone.env") in str(info.value)


@pytest.mark.parametrize("line", ["not an assignment", "1BAD=x", "KEY WITH SPACE=x", "=value"])
def test_read_env_file_bad_line_raises(tmp_path, line):
    env = tmp_path / "bad.env"
    env.write_text("GOOD=1\n%s\n" % line)
    with pytest.raises(fj.JitCacheError) as info:
        fj.read_env_file(str(env))
    assert str(env) in str(info.value)
    assert repr(line) in str(info.value)


def test_read_env_file_missing_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        fj.read_env_file(str(tmp_path / "absent.env"))


# ---- so_problem ------------------------------------------------------------------------------

def test_so_problem_whole_elf_is_none(tmp_path):
    so = tmp_path / "sampling.so"
    so.write_bytes(elf64())
    assert fj.so_problem(str(so)) is None


def test_so_problem_missing(tmp_path):
    assert fj.so_problem(str(tmp_path / "nope.so")) == "missing"


def test_so_problem_empty(tmp_path):
    so = tmp_path / "sampling.so"
    so.write_bytes(b"")
    assert fj.so_problem(str(so)) == "empty (0 bytes)"


def test_so_problem_not_elf(tmp_path):
    so = tmp_path / "sampling.so"
    so.write_bytes(b"#!/bin/sh\necho not a library\n" * 4)
    assert fj.so_problem(str(so)) == "not an ELF file"


def test_so_problem_truncated_section_headers(tmp_path):
    whole = elf64(payload=256, shnum=5)
    so = tmp_path / "sampling.so"
    so.write_bytes(whole[:200])
    assert fj.so_problem(str(so)) == "truncated: section headers end at byte %d, file has 200" % len(whole)


def test_so_problem_one_byte_short_is_truncated(tmp_path):
    whole = elf64()
    so = tmp_path / "sampling.so"
    so.write_bytes(whole[:-1])
    assert fj.so_problem(str(so)).startswith("truncated")
    so.write_bytes(whole)
    assert fj.so_problem(str(so)) is None


def test_so_problem_truncated_header(tmp_path):
    so = tmp_path / "sampling.so"
    so.write_bytes(elf64()[:40])
    assert fj.so_problem(str(so)) == "truncated ELF header (40 bytes)"


# ---- stale_locks -----------------------------------------------------------------------------

def test_stale_locks_missing_dir_is_empty(tmp_path):
    assert fj.stale_locks(str(tmp_path / "no-such-dir")) == []


def test_stale_locks_lists_unheld_lock_files_only(tmp_path):
    (tmp_path / "sampling.lock").write_text("")
    (tmp_path / "topk.lock").write_text("")
    (tmp_path / "sampling.so").write_text("not a lock")
    assert fj.stale_locks(str(tmp_path)) == [str(tmp_path / "sampling.lock"), str(tmp_path / "topk.lock")]


def test_stale_locks_skips_a_held_lock(tmp_path):
    held = tmp_path / "sampling.lock"
    free = tmp_path / "topk.lock"
    held.write_text("")
    free.write_text("")
    # flock belongs to the open file description: a separate os.open in this process conflicts
    # with the one stale_locks makes, exactly as a lock held by a running build would.
    fd = os.open(str(held), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert fj.stale_locks(str(tmp_path)) == [str(free)]
        # stale_locks must not have taken or released the holder's lock.
        probe = os.open(str(held), os.O_RDWR)
        try:
            with pytest.raises(OSError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert fj.stale_locks(str(tmp_path)) == [str(held), str(free)]


def test_stale_locks_skips_a_lock_it_cannot_open_and_goes_on(tmp_path):
    (tmp_path / "a.lock").symlink_to(tmp_path / "gone")  # cannot be opened
    (tmp_path / "b.lock").write_text("")
    assert fj.stale_locks(str(tmp_path)) == [str(tmp_path / "b.lock")]


def test_stale_locks_leaves_files_in_place(tmp_path):
    lock = tmp_path / "sampling.lock"
    lock.write_text("")
    fj.stale_locks(str(tmp_path))
    assert lock.exists()


# ---- library_fingerprint ---------------------------------------------------------------------

def test_library_fingerprint_missing_is_none(tmp_path):
    assert fj.library_fingerprint(str(tmp_path / "sampling.so")) is None


def test_library_fingerprint_stable_until_relinked(tmp_path):
    so = tmp_path / "sampling.so"
    so.write_bytes(elf64())
    first = fj.library_fingerprint(str(so))
    stat = os.stat(str(so))
    assert first == (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    assert fj.library_fingerprint(str(so)) == first
    # A relink writes a new file and renames it over the old one: new inode, new fingerprint.
    new = tmp_path / "sampling.so.tmp"
    new.write_bytes(elf64(payload=128))
    os.replace(str(new), str(so))
    assert fj.library_fingerprint(str(so)) != first
    # Same size, rewritten in place with a later mtime: still a different fingerprint.
    second = fj.library_fingerprint(str(so))
    os.utime(str(so), ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    assert fj.library_fingerprint(str(so)) != second


# ---- has_files -------------------------------------------------------------------------------

def test_has_files_ignores_empty_directories(tmp_path):
    assert fj.has_files(str(tmp_path / "missing")) is False
    workspace = tmp_path / ".cache" / "flashinfer" / "0.7.2" / "120f"
    workspace.mkdir(parents=True)  # what importing FlashInfer creates
    assert fj.has_files(str(tmp_path / ".cache")) is False
    lock = workspace / "cached_ops" / "tmp" / "sampling.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    assert fj.has_files(str(tmp_path / ".cache")) is True
    assert fj.has_files(str(workspace)) is True


# ---- edges the table above does not reach --------------------------------------------------------

def test_read_env_file_edges(tmp_path):
    env = tmp_path / "edges.env"
    env.write_text(
        "   # an indented comment\n"
        "  ; another\n"
        'EMPTY_QUOTED=""\n'
        "ONE_QUOTE='\n"
        "BOX=BOX\n"
        "XQ=XinsideX\n"
    )
    assert fj.read_env_file(str(env)) == {"EMPTY_QUOTED": "", "ONE_QUOTE": "'", "BOX": "BOX", "XQ": "XinsideX"}


def test_read_env_file_names_the_bad_line_exactly(tmp_path):
    env = tmp_path / "bad.env"
    for line in ("not an assignment  ", "PATH X"):
        env.write_text("GOOD=1\n%s\n" % line)
        with pytest.raises(fj.JitCacheError) as info:
            fj.read_env_file(str(env))
        assert str(info.value) == "%s: cannot parse line %r" % (env, line)


def elf64_big_endian(payload=64, shnum=3, shentsize=64, shoff=None):
    shoff = 64 + payload if shoff is None else shoff
    header = b"\x7fELF" + bytes([2, 2, 1, 0]) + bytes(8)  # ELFCLASS64, big endian, EV_CURRENT
    header += struct.pack(">HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, shentsize, shnum, 0)
    return header + b"\xab" * payload + bytes(shentsize * shnum)


def test_so_problem_reads_a_big_endian_header(tmp_path):
    so = tmp_path / "be.so"
    whole = elf64_big_endian()
    so.write_bytes(whole)
    assert fj.so_problem(str(so)) is None
    so.write_bytes(whole[:300])
    assert fj.so_problem(str(so)) == "truncated: section headers end at byte %d, file has 300" % len(whole)


def test_so_problem_reads_offsets_and_counts_unsigned(tmp_path):
    # e_shoff past 2**63 and e_shnum past 2**15: read as signed they would go negative and the
    # file would look whole.
    so = tmp_path / "odd.so"
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 2 ** 63 + 64, 0, 64, 0, 0, 64, 1, 0)
    so.write_bytes(header + bytes(128))
    assert fj.so_problem(str(so)).startswith("truncated: section headers end at byte %d" % (2 ** 63 + 128))
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 64, 0, 64, 0, 0, 40000, 40000, 0)
    so.write_bytes(header + bytes(128))
    assert fj.so_problem(str(so)) == "truncated: section headers end at byte %d, file has 192" % (64 + 40000 * 40000)


def test_so_problem_32_bit_elf_is_reported(tmp_path):
    so = tmp_path / "elf32.so"
    so.write_bytes(b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(120))
    assert fj.so_problem(str(so)) == "truncated ELF header (64 bytes)"


def test_timed_rounds_to_a_tenth_of_a_second(monkeypatch):
    clock = iter([10.0, 12.345])
    monkeypatch.setattr(fj.time, "monotonic", lambda: next(clock))
    calls = []
    assert fj.timed(calls.append, "spec") == 2.3
    assert calls == ["spec"]


RUN_UNUSED = object()


class FakeCache:
    def __init__(self, release):
        self.release = release

    def nvcc(self, run):
        assert run is RUN_UNUSED  # the caller's run, handed through
        return "/cuda/bin/nvcc", self.release


def test_check_toolkit_reports_every_target_it_is_too_old_for():
    # The table is cuda_arch's (toolkit_gap); 7.0 is not in it: FlashInfer's to judge, not reported.
    archs = ["7.0", "9.0a", "10.3a", "12.0f"]
    assert fj.check_toolkit(FakeCache("13.0"), archs, RUN_UNUSED, True) == {"path": "/cuda/bin/nvcc", "version": "13.0"}
    with pytest.raises(fj.JitCacheError) as info:
        fj.check_toolkit(FakeCache("12.8"), ["7.0", "9.0a", "10.3a", "8.0", "12.0f"], RUN_UNUSED, True)
    assert str(info.value) == "nvcc 12.8 at /cuda/bin/nvcc is too old: 10.3a needs CUDA >= 12.9; 12.0f needs CUDA >= 12.9"
    # Without the check only nvcc itself is read.
    assert fj.check_toolkit(FakeCache("11.0"), ["12.0f"], RUN_UNUSED, False) == {"path": "/cuda/bin/nvcc", "version": "11.0"}
    assert fj.check_toolkit(FakeCache("11.0"), ["12.0f"], RUN_UNUSED) == {"path": "/cuda/bin/nvcc", "version": "11.0"}


def test_remove_tree(tmp_path):
    tree = tmp_path / "cache" / "a"
    tree.mkdir(parents=True)
    (tree / "f").write_text("x")
    assert fj.remove_tree(str(tmp_path / "cache")) is True
    assert not (tmp_path / "cache").exists()
    assert fj.remove_tree(str(tmp_path / "cache")) is False


def test_parse_args_jobs_bounds(capsys):
    assert fj.parse_args(["--jobs", "1"]).jobs == 1
    with pytest.raises(SystemExit) as info:
        fj.parse_args(["--jobs", "0"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith("flashinfer_prewarm.py: error: --jobs must be >= 1, got 0\n")


def test_help_is_what_an_operator_reads_of_the_units_pre_warm(capsys, monkeypatch):
    # The units' ExecStartPre= command (the launcher flashinfer_prewarm_command installs) prints this;
    # a wide terminal, so argparse does not break a line inside a word such as "compile-only".
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as info:
        fj.parse_args(["--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: flashinfer_prewarm.py [-h] [--modules MODULES] [--expected-archs EXPECTED_ARCHS] "
                          "[--env-file ENV_FILE] [--workspace-base WORKSPACE_BASE] [--jobs JOBS] [--check] ")
    for text in [
        "Check FlashInfer's targets and make sure its JIT modules are built (compile-only, no GPU needed); "
        "repairs what a killed build left. Reads the environment it runs in (the unit's EnvironmentFile=).",
        "--modules MODULES modules to ensure, comma or space separated (default: %s)" % ",".join(fj.DEFAULT_MODULES),
        "--expected-archs EXPECTED_ARCHS FlashInfer's target set must equal this (default: "
        "FLASHINFER_CUDA_ARCH_LIST); '' checks nothing",
        "--env-file ENV_FILE apply a KEY=VALUE file first, repeatable, later ones win (systemd already did for units)",
        "--workspace-base WORKSPACE_BASE overrides FLASHINFER_WORKSPACE_BASE",
        "--jobs JOBS parallel compile jobs (MAX_JOBS)",
        "--check report what would be built or repaired; change nothing",
    ]:
        assert text in out


def test_a_target_the_collection_cannot_read_is_a_clear_error():
    # FlashInfer's own set normally holds (12, '0f'); anything else is reported, not a traceback.
    class Context:
        TARGET_CUDA_ARCHS = {(12, "0f"), (12, "0+PTX")}

    class Core:
        current_compilation_context = Context()

    cache = object.__new__(fj.FlashInferCache)
    cache.core, cache.version = Core(), "0.7.2"
    with pytest.raises(fj.JitCacheError) as info:
        cache.target_archs()
    assert str(info.value) == ("FlashInfer 0.7.2 has a target this collection cannot read: "
                               "target '12.0+PTX' is not of the form M.m[a|f]")
    Context.TARGET_CUDA_ARCHS = {(12, "0f"), (10, "3a"), (9, "0a")}
    assert cache.target_archs() == ["9.0a", "10.3a", "12.0f"]


# ---- one line, never a traceback: what the host can get wrong ------------------------------------

VENV_NINJA_FIX = "re-run site.yml (the sglang_venv role reinstalls what is missing from the venv)"
NVCC_FIX = "reinstall the CUDA toolkit (re-run site.yml) or set CUDA_HOME to a toolkit whose bin/nvcc runs"
OWNER_FIX = ("run as the service user that owns FlashInfer's cache (the units' User=; become_user for the module) "
             "or give that user the path")


@pytest.fixture
def venv_bin(tmp_path, monkeypatch):
    """This interpreter as if it were <tmp>/venv/bin/python: where the venv's ninja would be."""
    directory = tmp_path / "venv" / "bin"
    directory.mkdir(parents=True)
    monkeypatch.setattr(fj.sys, "executable", str(directory / "python"))
    return directory


def executable(path, text="#!/bin/sh\nexit 0\n"):
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("case, expected", [
    ("no venv ninja", "ninja not found (the venv's ninja, {bin}/ninja): " + VENV_NINJA_FIX),
    ("venv ninja off PATH", "ninja not found on PATH=/usr/bin:/bin (the venv's ninja, {bin}/ninja, is not on it): "
                            "put the venv's bin first on PATH (the flashinfer role's environment file does; re-run site.yml)"),
    ("venv ninja broken", "cannot run ninja (No such file or directory; the venv's ninja, {bin}/ninja): remove the venv's "
                          "ninja and " + VENV_NINJA_FIX),
    ("venv ninja not executable", "the venv's ninja, {bin}/ninja, cannot be run (not executable): remove it and " + VENV_NINJA_FIX),
])
def test_ninja_that_cannot_be_started_is_one_line_with_the_fix(venv_bin, monkeypatch, case, expected):
    # FlashInfer runs the bare name "ninja" from PATH (subprocess.run(["ninja", ...])): what Python raises then.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if case == "venv ninja off PATH":
        executable(venv_bin / "ninja")
    elif case == "venv ninja broken":  # on PATH, but its interpreter (the wheel's script) is gone
        executable(venv_bin / "ninja", "#!/gone/python\n")
        monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % venv_bin)
    elif case == "venv ninja not executable":
        (venv_bin / "ninja").write_text("")
        monkeypatch.setenv("PATH", str(venv_bin))
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", "ninja")
    assert fj.os_error_reason(exc) == expected.format(bin=venv_bin)


@pytest.mark.parametrize("exc, expected", [
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/opt/cuda/bin/nvcc"),
     "cannot run /opt/cuda/bin/nvcc (No such file or directory): " + NVCC_FIX),
    (OSError(errno.ENOEXEC, "Exec format error", "/opt/cuda/bin/nvcc"),
     "cannot run /opt/cuda/bin/nvcc (Exec format error): " + NVCC_FIX),
    (PermissionError(errno.EACCES, "Permission denied", "/var/lib/sglang/.cache/flashinfer/0.7.2/120f/cached_ops"),
     "permission denied on /var/lib/sglang/.cache/flashinfer/0.7.2/120f/cached_ops: " + OWNER_FIX),
    (PermissionError(errno.EPERM, "Operation not permitted", "/c/sampling.lock"), "permission denied on /c/sampling.lock: " + OWNER_FIX),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "/c/sampling/sampling.so"),
     "/c/sampling/sampling.so is a directory where a file was expected: remove it"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/c/cached_ops/tmp"),
     "a part of /c/cached_ops/tmp is a file where a directory was expected: remove that file"),
    (OSError(errno.ENOSPC, "No space left on device", "/c/sampling/sampling.so"),
     "no space left on the device of /c/sampling/sampling.so: free space there"),
    (OSError(errno.EROFS, "Read-only file system", "/c/tmp"),
     "/c/tmp is on a read-only file system: set FLASHINFER_WORKSPACE_BASE to a writable directory"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/c/tmp/sampling.lock"),
     "/c/tmp/sampling.lock does not exist (removed while this ran?): run again"),
    (FileExistsError(errno.EEXIST, "File exists", "/c/tmp"), "/c/tmp: File exists: fix that path and run again"),
    (OSError("libcudart.so.13: cannot open shared object file: No such file or directory"),
     "OSError: libcudart.so.13: cannot open shared object file: No such file or directory"),
])
def test_os_errors_become_one_line_naming_the_path_and_the_fix(exc, expected):
    assert fj.os_error_reason(exc) == expected
    assert "\n" not in expected


def test_nvcc_that_cannot_run_is_a_jit_cache_error(tmp_path, monkeypatch):
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    nvcc = executable(cuda / "bin" / "nvcc", "#!/gone/sh\n")  # executable, but its interpreter is gone

    class CppExt:
        @staticmethod
        def get_cuda_path():
            return str(cuda)

    monkeypatch.setattr(fj.importlib, "import_module", lambda name: CppExt)
    cache = object.__new__(fj.FlashInferCache)
    with pytest.raises(fj.JitCacheError) as info:
        cache.nvcc(run)
    assert str(info.value) == "cannot run %s (No such file or directory): %s" % (nvcc, NVCC_FIX)
    nvcc.write_bytes(b"\x00\x01 not a program")
    with pytest.raises(fj.JitCacheError) as info:
        cache.nvcc(run)
    assert str(info.value) == "cannot run %s (Exec format error): %s" % (nvcc, NVCC_FIX)


ENV_FIX = "point it at the flashinfer role's environment file (re-run site.yml to write it)"


@pytest.mark.parametrize("case, reason", [
    ("missing", "No such file or directory"),
    ("directory", "Is a directory"),
    ("not text", "not UTF-8 text: invalid start byte"),
])
def test_env_file_that_cannot_be_read_is_one_line(tmp_path, monkeypatch, capsys, case, reason):
    monkeypatch.setattr(fj, "ensure", lambda **kwargs: pytest.fail("ensure() must not run"))
    env_file = tmp_path / "flashinfer.env"
    if case == "directory":
        env_file.mkdir()
    elif case == "not text":
        env_file.write_bytes(b"\xff\xfe\x00binary")
    status, line = fj.command(["--env-file", str(env_file)], run)
    fix = ENV_FIX + (" and run as a user that can read it" if case != "not text" else "")
    assert (status, line) == (1, "flashinfer_jit: error: cannot read env_file %s (%s): %s" % (env_file, reason, fix))
    assert capsys.readouterr() == ("", "")


def raising(exc):
    def ensure(*_args, **_kwargs):
        raise exc
    return ensure


@pytest.mark.parametrize("exc, line", [
    (KeyError("HOME"), "flashinfer_jit: error: unexpected KeyError: 'HOME'"),
    (AttributeError("module 'flashinfer.jit' has no attribute 'env'"),
     "flashinfer_jit: error: unexpected AttributeError: module 'flashinfer.jit' has no attribute 'env'"),
    (TypeError("bad\noperand\n  type"), "flashinfer_jit: error: unexpected TypeError: bad operand type"),
    (fj.JitCacheError("FlashInfer 0.7.2 has no JIT module 'x'"), "flashinfer_jit: error: FlashInfer 0.7.2 has no JIT module 'x'"),
])
def test_command_reports_anything_unexpected_in_one_line(monkeypatch, capsys, exc, line):
    monkeypatch.setattr(fj, "ensure", raising(exc))
    assert fj.command(["--modules", "sampling"], run) == (1, line)
    assert capsys.readouterr() == ("", "")


def test_ensure_turns_an_os_error_on_the_cache_into_one_line(monkeypatch):
    errors = [IsADirectoryError(errno.EISDIR, "Is a directory", "/c/sampling/sampling.so"), KeyError("x")]

    def cache():
        raise errors.pop(0)

    monkeypatch.setattr(fj, "FlashInferCache", cache)
    with pytest.raises(fj.JitCacheError) as info:
        fj.ensure(run, modules=["sampling"])
    assert str(info.value) == "/c/sampling/sampling.so is a directory where a file was expected: remove it"
    with pytest.raises(KeyError):  # only OSError is the host's to fix; the rest stays for command() to report
        fj.ensure(run, modules=["sampling"])


# The launcher in a fresh interpreter, as a unit's ExecStartPre= runs it: stderr is the one line.

STUB_FLASHINFER = {
    "import error": "raise ImportError('No module named torch')\n",
    "library": "raise OSError('libcudart.so.13: cannot open shared object file: No such file or directory')\n",
    "unexpected": "import os\nHOME = os.environ['NO_SUCH_VARIABLE_SET']\n",
}


@pytest.mark.parametrize("case, line", [
    ("import error", "flashinfer_jit: error: cannot import flashinfer (No module named torch); "
                     "run this with the SGLang venv's interpreter"),
    ("library", "flashinfer_jit: error: cannot import flashinfer (OSError: libcudart.so.13: cannot open shared object "
                "file: No such file or directory): reinstall the venv (re-run site.yml)"),
    ("unexpected", "flashinfer_jit: error: unexpected KeyError: 'NO_SUCH_VARIABLE_SET'"),
    ("no package copy", "flashinfer_jit: error: cannot load the pre-warm code beside {launcher} (No module named "
                        "'ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch'): run it with the SGLang "
                        "venv's interpreter; re-run site.yml to reinstall it"),
])
def test_the_installed_launcher_fails_in_one_line_without_a_traceback(tmp_path, case, line):
    from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_prewarm_command

    lib = tmp_path / "lib"
    for path, text in flashinfer_prewarm_command.wanted_files(str(lib)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    site = tmp_path / "site"
    (site / "flashinfer").mkdir(parents=True)
    (site / "flashinfer" / "__init__.py").write_text(STUB_FLASHINFER.get(case, "__version__ = '0.7.2'\n"))
    if case == "no package copy":
        os.unlink(os.path.join(str(lib), *fj.__name__.split(".")[:-1] + ["cuda_arch.py"]))
    launcher = lib / "flashinfer_prewarm.py"
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_VARIABLE_SET"}
    env["PYTHONPATH"] = str(site)
    proc = subprocess.run([sys.executable, str(launcher), "--modules", "sampling"], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), check=False)
    assert "Traceback" not in proc.stderr
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", line.format(launcher=launcher) + "\n")


def test_ninja_off_an_unset_path_names_the_default_search_path(venv_bin, monkeypatch):
    # Without PATH a child's exec searches os.defpath; the message names what was searched.
    monkeypatch.delenv("PATH", raising=False)
    executable(venv_bin / "ninja")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", "ninja")
    assert fj.os_error_reason(exc).startswith("ninja not found on PATH=%s (the venv's ninja" % os.defpath)


@pytest.mark.parametrize("exc, expected", [
    # nvcc run while FlashInfer imports (0.7.2 asks it for the CUDA version): the tool's own line.
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/opt/cuda/bin/nvcc"),
     "cannot run /opt/cuda/bin/nvcc (No such file or directory): " + NVCC_FIX),
    # A library torch loads while FlashInfer imports: the venv is broken.
    (OSError("libcudart.so.13: cannot open shared object file: No such file or directory"),
     "cannot import flashinfer (OSError: libcudart.so.13: cannot open shared object file: No such file or directory): "
     "reinstall the venv (re-run site.yml)"),
])
def test_an_os_error_while_flashinfer_imports_is_one_line(monkeypatch, exc, expected):
    def import_module(name):
        raise exc

    monkeypatch.setattr(fj.importlib, "import_module", import_module)
    with pytest.raises(fj.JitCacheError) as info:
        fj.FlashInferCache()
    assert str(info.value) == expected


def test_ninja_missing_while_flashinfer_imports_is_the_ninja_line(venv_bin, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    def import_module(name):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "ninja")

    monkeypatch.setattr(fj.importlib, "import_module", import_module)
    with pytest.raises(fj.JitCacheError) as info:
        fj.FlashInferCache()
    assert str(info.value) == "ninja not found (the venv's ninja, %s/ninja): %s" % (venv_bin, VENV_NINJA_FIX)


def test_old_flashinfer_without_an_importable_torch_is_one_line(monkeypatch):
    def import_module(name):
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(fj.importlib, "import_module", import_module)
    cache = object.__new__(fj.FlashInferCache)
    with pytest.raises(fj.JitCacheError) as info:
        cache._torch_archs()
    assert str(info.value) == ("this FlashInfer reads its targets from torch, which cannot be imported (No module named "
                               "'torch'): reinstall the venv (re-run site.yml)")
