"""flashinfer_jit_cache end to end: main() against the small fake `flashinfer` package of
fake_flashinfer.py (the `fake` fixture, conftest.py). The real FlashInfer is exercised in Molecule.
"""

import errno
import fcntl
import json
import os
import subprocess
import sys
import sysconfig

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj
from ansible_collections.blackwell.sglang.plugins.modules import cuda_home_layout, flashinfer_prewarm_command, nvidia_gpu_info
from module_runner import run_module
from fake_flashinfer import LOCK_LINE, VERSION, elf64


def ok(result):
    assert result["_rc"] == 0, result
    assert "failed" not in result, result
    return result


def failed(result):
    assert result["_rc"] == 1, result
    assert result["failed"] is True
    return result["msg"]


# ---- present ---------------------------------------------------------------------------------

def test_cold_present_builds(fake, capsys):
    result = ok(fake.run(capsys, modules=["sampling"], expected_archs=["12.0f"]))
    assert result["changed"] is True
    assert result["built"] == ["sampling"]
    assert result["skipped_modules"] == []
    assert result["repaired"] == [] and result["removed"] == []
    assert set(result["seconds"]) == {"sampling"}
    assert result["cache_dir"] == str(fake.jit_dir("120f"))
    assert result["cache_dir"].startswith(str(fake.base) + os.sep)
    assert "/120f/" in result["cache_dir"]
    assert result["flashinfer_version"] == VERSION
    assert result["archs"] == ["12.0f"]
    assert result["nvcc"] == {"path": str(fake.cuda_home / "bin" / "nvcc"), "version": "13.0"}
    assert fj.so_problem(str(fake.so())) is None
    [build] = fake.builds
    assert build["compiled"] is True
    assert build["verbose"] is False and build["need_lock"] is True
    assert fake.lock().exists()  # FlashInfer leaves its lock files behind


def test_second_run_skips(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    fingerprint = fj.library_fingerprint(str(fake.so()))
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["changed"] is False
    assert result["built"] == []
    assert result["skipped_modules"] == ["sampling"]
    assert result["repaired"] == []
    assert "sampling" in result["seconds"]  # the up-to-date check is timed too
    assert len(fake.builds) == 2 and len(fake.compiles) == 1
    assert fj.library_fingerprint(str(fake.so())) == fingerprint


def test_default_modules_are_those_flashinfer_has(fake, capsys):
    # The fake has sampling but no topk: the default list shrinks to what exists.
    result = ok(fake.run(capsys))
    assert result["built"] == ["sampling"]
    assert [b["name"] for b in fake.builds] == ["sampling"]


def test_truncated_so_is_repaired(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    whole = fake.so().read_bytes()
    fake.so().write_bytes(whole[:100])
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["changed"] is True
    # A broken .so is what a killed link leaves, so the unheld lock beside it is reported too.
    assert result["repaired"] == [LOCK_LINE, "sampling.so: truncated: section headers end at byte %d, file has 100"
                                  % len(whole)]
    assert result["built"] == ["sampling"]
    assert fake.builds[-1]["lock_existed"] is False
    assert len(fake.compiles) == 2
    assert fj.so_problem(str(fake.so())) is None


@pytest.mark.parametrize("content, problem", [(b"", "empty (0 bytes)"), (b"garbage" * 20, "not an ELF file")])
def test_empty_or_non_elf_so_is_repaired(fake, capsys, content, problem):
    ok(fake.run(capsys, modules=["sampling"]))
    fake.so().write_bytes(content)
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["repaired"] == [LOCK_LINE, "sampling.so: %s" % problem]
    assert result["built"] == ["sampling"]
    assert fj.so_problem(str(fake.so())) is None


def test_stale_lock_with_missing_so_is_reported_and_removed(fake, capsys):
    fake.lock().parent.mkdir(parents=True)
    fake.lock().write_text("")
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["repaired"] == [LOCK_LINE]
    assert result["built"] == ["sampling"]
    assert result["changed"] is True
    [build] = fake.builds
    assert build["lock_existed"] is False  # removed before FlashInfer's build took a new one


def test_lock_beside_a_whole_so_is_not_reported(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    assert fj.stale_locks(str(fake.lock().parent)) == [str(fake.lock())]  # unheld, left by the build
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["repaired"] == []
    assert result["changed"] is False
    assert fake.builds[-1]["lock_existed"] is True


def test_held_lock_is_not_removed(fake, capsys):
    # A lock held by a running build is not stale even though its .so is still missing. The held
    # lock would block the module's own build, so probe the decision in check mode.
    fake.lock().parent.mkdir(parents=True)
    fake.lock().write_text("")
    fd = os.open(str(fake.lock()), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = ok(fake.run(capsys, modules=["sampling"], check_mode=True))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert result["repaired"] == []
    assert result["built"] == ["sampling"]


# ---- check mode ------------------------------------------------------------------------------

def test_check_mode_builds_and_writes_nothing(fake, capsys):
    result = ok(fake.run(capsys, modules=["sampling"], check_mode=True))
    assert result["changed"] is True
    assert result["built"] == ["sampling"]
    assert result["seconds"] == {}
    assert fake.builds == []
    assert not fake.jit_dir().exists()  # no .so, no lock, no cached_ops


def test_check_mode_reports_repairs_but_leaves_files(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    fake.so().write_bytes(fake.so().read_bytes()[:100])
    result = ok(fake.run(capsys, modules=["sampling"], check_mode=True))
    assert result["changed"] is True
    assert result["repaired"][0] == LOCK_LINE
    assert result["repaired"][1].startswith("sampling.so: truncated")
    assert result["built"] == ["sampling"]
    assert fake.so().stat().st_size == 100
    assert fake.lock().exists()
    assert len(fake.builds) == 1


def test_check_mode_warm_cache_is_unchanged(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    result = ok(fake.run(capsys, modules=["sampling"], check_mode=True))
    assert result["changed"] is False
    assert result["skipped_modules"] == ["sampling"]
    assert len(fake.builds) == 1


# ---- absent / rebuilt ------------------------------------------------------------------------

def other_caches(fake):
    """A cache for another target set of this version and one of an older version."""
    other_arch = fake.workspace("100a") / "cached_ops" / "sampling" / "sampling.so"
    other_version = fake.cache_root() / "0.6.0" / "120f" / "cached_ops" / "sampling" / "sampling.so"
    for path in (other_arch, other_version):
        path.parent.mkdir(parents=True)
        path.write_bytes(elf64())
    return other_arch, other_version


def test_absent_removes_only_this_version_and_arch(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    other_arch, other_version = other_caches(fake)
    result = ok(fake.run(capsys, state="absent"))
    assert result["changed"] is True
    assert result["removed"] == [str(fake.workspace("120f"))]
    assert result["built"] == []
    assert "nvcc" not in result
    assert not fake.so().exists()
    assert other_arch.exists() and other_version.exists()
    assert len(fake.builds) == 1


def test_absent_twice_is_idempotent(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    ok(fake.run(capsys, state="absent"))
    result = ok(fake.run(capsys, state="absent"))
    assert result["changed"] is False
    assert result["removed"] == []
    # Importing FlashInfer recreated its empty workspace dir: that is no cache to remove.
    assert fake.workspace("120f").is_dir() and not any(fake.workspace("120f").iterdir())
    assert ok(fake.run(capsys, state="absent", scope="all"))["changed"] is False
    assert ok(fake.run(capsys, state="absent", check_mode=True))["changed"] is False


def test_absent_check_mode_removes_nothing(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    result = ok(fake.run(capsys, state="absent", check_mode=True, diff=True))
    assert result["changed"] is True
    assert result["removed"] == [str(fake.workspace("120f"))]
    assert fj.so_problem(str(fake.so())) is None
    assert result["diff"]["before"]["modules"] == ["sampling"]
    assert result["diff"]["after"]["modules"] == []


def test_absent_scope_all_removes_every_version(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    other_arch, other_version = other_caches(fake)
    keep = fake.base / ".cache" / "pip"
    keep.mkdir()
    result = ok(fake.run(capsys, state="absent", scope="all"))
    assert result["changed"] is True
    assert result["removed"] == [str(fake.cache_root())]
    assert not fake.cache_root().exists()
    assert not other_arch.exists() and not other_version.exists()
    assert keep.is_dir()


def test_rebuilt_removes_then_builds(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    other_arch = other_caches(fake)[0]
    stale = fake.jit_dir() / "old_module" / "old_module.so"
    stale.parent.mkdir()
    stale.write_bytes(elf64())
    result = ok(fake.run(capsys, state="rebuilt", modules=["sampling"], diff=True))
    assert result["changed"] is True
    assert result["removed"] == [str(fake.workspace("120f"))]
    assert result["built"] == ["sampling"]
    assert result["skipped_modules"] == []
    assert len(fake.compiles) == 2
    assert not stale.exists()
    assert other_arch.exists()
    assert fj.so_problem(str(fake.so())) is None
    assert result["diff"]["before"]["modules"] == ["old_module", "sampling"]
    assert result["diff"]["after"]["modules"] == ["sampling"]


# ---- failures --------------------------------------------------------------------------------

def test_expected_archs_mismatch_fails_with_both_lists(fake, capsys):
    msg = failed(fake.run(capsys, modules=["sampling"], expected_archs=["10.3a", "12.0f"]))
    assert "['12.0f']" in msg
    assert "['10.3a', '12.0f']" in msg
    assert fake.builds == []


def test_empty_arch_set_fails_with_flashinfers_own_error(fake, capsys, monkeypatch):
    # No FLASHINFER_CUDA_ARCH_LIST and no visible GPU: FlashInfer's set is empty (the seed outage).
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST")
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg == "FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=[]."
    assert fake.builds == []


@pytest.mark.parametrize("listed,error", [
    ("", "ValueError: not enough values to unpack (expected 2, got 1)"),
    ("12.0f  10.3a", "ValueError: not enough values to unpack (expected 2, got 1)"),
    ("sm120", "ValueError: not enough values to unpack (expected 2, got 1)"),
])
def test_list_flashinfer_cannot_read_fails_in_one_line(fake, capsys, monkeypatch, listed, error):
    # FlashInfer 0.7.2 reads the list while flashinfer.jit.env imports and raises there.
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", listed)
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg == "FlashInfer rejects FLASHINFER_CUDA_ARCH_LIST=%r: %s" % (listed, error)
    assert fake.builds == []


def test_unsuffixed_target_is_normalised_by_flashinfer_from_nvcc(fake, capsys, monkeypatch):
    # 0.7.2 spells an unsuffixed 12.0 itself: 12.0f from CUDA 12.9 on, 12.0a with 12.8, and refuses older.
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0")
    assert ok(fake.run(capsys, modules=[]))["archs"] == ["12.0f"]
    fake.set_nvcc("12.8")
    assert ok(fake.run(capsys, modules=[]))["archs"] == ["12.0a"]
    fake.set_nvcc("12.6")
    msg = failed(fake.run(capsys, modules=[]))
    assert msg == "FlashInfer rejects FLASHINFER_CUDA_ARCH_LIST='12.0': RuntimeError: SM 120 requires CUDA >= 12.8"


def test_unknown_module_fails(fake, capsys):
    msg = failed(fake.run(capsys, modules=["sampling", "no_such_kernel"]))
    assert msg == "FlashInfer %s has no JIT module 'no_such_kernel'" % VERSION
    assert fake.builds == []


def test_old_nvcc_for_target_fails(fake, capsys, monkeypatch):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.3a")
    fake.set_nvcc("12.8")
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert "10.3a needs CUDA >= 12.9" in msg
    assert "nvcc 12.8" in msg
    assert str(fake.cuda_home / "bin" / "nvcc") in msg
    assert fake.builds == []


def test_nvcc_new_enough_for_target_builds(fake, capsys, monkeypatch):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.3a")
    fake.set_nvcc("12.9")
    result = ok(fake.run(capsys, modules=["sampling"]))
    assert result["archs"] == ["10.3a"]
    assert result["nvcc"]["version"] == "12.9"
    assert result["cache_dir"] == str(fake.jit_dir("103a"))
    assert result["built"] == ["sampling"]


def test_missing_nvcc_fails(fake, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(fake.tmp_path / "no-cuda"))
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg.startswith("nvcc not found at %s" % (fake.tmp_path / "no-cuda" / "bin" / "nvcc"))
    assert fake.builds == []


def test_probe_needs_no_nvcc_and_builds_nothing(fake, capsys, monkeypatch):
    monkeypatch.delenv("CUDA_HOME")
    result = ok(fake.run(capsys, modules=[], expected_archs=["12.0f"]))
    assert result["changed"] is False
    assert result["built"] == [] and result["skipped_modules"] == []
    assert "nvcc" not in result
    assert result["archs"] == ["12.0f"]
    assert fake.builds == []


@pytest.fixture
def scratch_parent(monkeypatch, tmp_path):
    """The system's temporary directory, for this test only (where scratch_workspace makes its dir)."""
    parent = tmp_path / "tmp"
    parent.mkdir()
    monkeypatch.setenv("TMPDIR", str(parent))
    monkeypatch.setattr("tempfile.tempdir", None)
    return parent


def test_scratch_workspace_probe_runs_in_a_new_dir_and_removes_it(fake, capsys, scratch_parent):
    # The probe's FlashInfer import creates its workspace: with scratch_workspace it is a new
    # blackwell-sglang-probe.* dir in the temporary directory, gone when the module returns.
    result = ok(fake.run(capsys, modules=[], expected_archs=["12.0f"], workspace_base=None, scratch_workspace=True))
    assert result["archs"] == ["12.0f"]
    assert result["cache_dir"].startswith(str(scratch_parent / "blackwell-sglang-probe."))
    assert list(scratch_parent.iterdir()) == []
    assert not (fake.base / ".cache").exists()


def test_scratch_workspace_is_removed_when_the_probe_fails(fake, capsys, scratch_parent):
    msg = failed(fake.run(capsys, modules=[], expected_archs=["9.0a"], workspace_base=None, scratch_workspace=True))
    assert "9.0a" in msg
    assert list(scratch_parent.iterdir()) == []


def test_scratch_workspace_and_workspace_base_exclude_each_other(fake, capsys):
    msg = failed(fake.run(capsys, modules=[], scratch_workspace=True))
    assert msg == "parameters are mutually exclusive: workspace_base|scratch_workspace"


def test_failed_build_returns_flashinfers_output(fake, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_FLASHINFER_FAIL", "1")
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg.startswith("building FlashInfer module sampling failed: Ninja build failed.")
    assert "Unsupported gpu architecture" in msg


def test_no_flashinfer_fails(fake, capsys):
    (fake.site / "flashinfer" / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg.startswith("cannot import flashinfer (No module named torch)")


def test_jobs_below_one_fails(fake, capsys):
    msg = failed(fake.run(capsys, modules=["sampling"], jobs=0))
    assert msg == "jobs must be >= 1, got 0"
    assert fake.builds == []


# ---- environment -----------------------------------------------------------------------------

def test_debug_variables_are_removed_before_the_build(fake, capsys, monkeypatch):
    monkeypatch.setenv("FLASHINFER_JIT_VERBOSE", "1")
    monkeypatch.setenv("FLASHINFER_JIT_DEBUG", "1")
    ok(fake.run(capsys, modules=["sampling"], jobs=3))
    [build] = fake.builds
    assert "FLASHINFER_JIT_VERBOSE" not in build["env"]
    assert "FLASHINFER_JIT_DEBUG" not in build["env"]
    assert build["env"]["MAX_JOBS"] == "3"
    assert build["env"]["FLASHINFER_WORKSPACE_BASE"] == str(fake.base)


def test_env_file_is_applied_before_import(fake, capsys, tmp_path):
    # The process says 12.0f and has a CUDA 12.8 nvcc; the env file says 10.3a, a newer toolkit and
    # another workspace base, and asks for a debug build. The env file must win, the debug must not.
    fake.set_nvcc("12.8")
    cuda = tmp_path / "cuda-13.0"
    nvcc = fake.set_nvcc("13.0", cuda_home=cuda)
    unit_home = tmp_path / "var-lib-sglang"
    env_file = tmp_path / "flashinfer.env"
    env_file.write_text(
        "# managed by the flashinfer role\n"
        "FLASHINFER_CUDA_ARCH_LIST=10.3a\n"
        "CUDA_HOME=%s\n"
        "FLASHINFER_WORKSPACE_BASE=\"%s\"\n"
        "FLASHINFER_JIT_VERBOSE=1\n" % (cuda, unit_home)
    )
    result = ok(fake.run(capsys, modules=["sampling"], env_file=str(env_file), workspace_base=None))
    assert result["archs"] == ["10.3a"]
    assert result["cache_dir"] == str(fake.jit_dir("103a", base=unit_home))
    assert result["nvcc"] == {"path": str(nvcc), "version": "13.0"}
    assert result["built"] == ["sampling"]
    assert fj.so_problem(str(fake.so("103a", base=unit_home))) is None
    assert not fake.workspace("120f").exists()
    [build] = fake.builds
    assert build["env"]["FLASHINFER_CUDA_ARCH_LIST"] == "10.3a"
    assert "FLASHINFER_JIT_VERBOSE" not in build["env"]


def test_workspace_base_overrides_env_file(fake, capsys, tmp_path):
    env_file = tmp_path / "flashinfer.env"
    env_file.write_text("FLASHINFER_WORKSPACE_BASE=%s\n" % (tmp_path / "from-env-file"))
    result = ok(fake.run(capsys, modules=[], env_file=str(env_file)))
    assert result["cache_dir"] == str(fake.jit_dir())


def test_unreadable_env_file_fails(fake, capsys, tmp_path):
    msg = failed(fake.run(capsys, modules=["sampling"], env_file=str(tmp_path / "missing.env")))
    assert msg.startswith("cannot read env_file %s" % (tmp_path / "missing.env"))


def test_bad_env_file_line_fails(fake, capsys, tmp_path):
    env_file = tmp_path / "flashinfer.env"
    env_file.write_text("FLASHINFER_CUDA_ARCH_LIST 12.0f\n")
    msg = failed(fake.run(capsys, modules=["sampling"], env_file=str(env_file)))
    assert "cannot parse line 'FLASHINFER_CUDA_ARCH_LIST 12.0f'" in msg


# ---- diff ------------------------------------------------------------------------------------

def test_diff_lists_modules_before_and_after(fake, capsys):
    cold = ok(fake.run(capsys, modules=["sampling"], diff=True))
    assert cold["diff"] == {
        "before": {"cache_dir": str(fake.jit_dir()), "modules": []},
        "after": {"cache_dir": str(fake.jit_dir()), "modules": ["sampling"]},
    }
    warm = ok(fake.run(capsys, modules=["sampling"], diff=True))
    assert warm["diff"]["before"]["modules"] == warm["diff"]["after"]["modules"] == ["sampling"]
    plain = ok(fake.run(capsys, modules=["sampling"]))
    assert "diff" not in plain


def test_diff_in_check_mode_shows_what_would_be_built(fake, capsys):
    result = ok(fake.run(capsys, modules=["sampling"], check_mode=True, diff=True))
    assert result["diff"]["before"]["modules"] == []
    assert result["diff"]["after"]["modules"] == ["sampling"]
    assert fake.builds == []


# ---- what the result holds, and the paths the tables above do not reach ------------------------

def test_the_result_has_exactly_the_documented_keys(fake, capsys):
    result = ok(fake.run(capsys, modules=["sampling"]))
    # Ansible's own keys (invocation, warnings, deprecations) aside.
    assert sorted(k for k in result if not k.startswith("_") and k not in ("invocation", "warnings", "deprecations")) == [
        "archs", "built", "cache_dir", "changed", "flashinfer_version", "nvcc", "removed", "repaired",
        "seconds", "skipped_modules"]
    assert result["nvcc"] == {"path": str(fake.cuda_home / "bin" / "nvcc"), "version": "13.0"}
    probe = ok(fake.run(capsys, modules=[]))
    assert "nvcc" not in probe  # a probe compiles nothing and needs no nvcc
    assert probe["changed"] is False and probe["archs"] == ["12.0f"]


def test_rebuilt_over_a_truncated_so_reports_the_removal_not_a_repair(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    with open(str(fake.so()), "r+b") as handle:
        handle.truncate(100)
    result = ok(fake.run(capsys, state="rebuilt", modules=["sampling"]))
    assert result["removed"] == [str(fake.workspace("120f"))]
    assert result["repaired"] == []
    assert result["built"] == ["sampling"]


def test_rebuilt_in_check_mode_would_build_even_a_whole_module(fake, capsys):
    ok(fake.run(capsys, modules=["sampling"]))
    result = ok(fake.run(capsys, state="rebuilt", modules=["sampling"], check_mode=True))
    assert result["removed"] == [str(fake.workspace("120f"))]
    assert result["built"] == ["sampling"] and result["skipped_modules"] == []
    assert fj.so_problem(str(fake.so())) is None  # nothing was removed


def test_check_mode_lists_every_module(fake, capsys):
    (fake.site / "flashinfer" / "jit" / "norm.py").write_text(
        "from .core import JitSpec\n\n\ndef gen_norm_module():\n    return JitSpec('norm')\n")
    ok(fake.run(capsys, modules=["sampling"]))
    result = ok(fake.run(capsys, modules=["norm", "sampling"], check_mode=True))
    assert result["built"] == ["norm"] and result["skipped_modules"] == ["sampling"]
    assert ok(fake.run(capsys, modules=["norm", "sampling"]))["built"] == ["norm"]


def test_a_build_that_leaves_a_broken_so_fails(fake, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_FLASHINFER_BROKEN", "1")
    msg = failed(fake.run(capsys, modules=["sampling"]))
    assert msg == "%s is empty (0 bytes) after building sampling" % fake.so()


def test_a_release_without_check_cuda_arch_is_held_to_the_expected_targets(fake, capsys, monkeypatch):
    # FlashInfer before check_cuda_arch() existed: no own check, so an empty target set is only
    # caught by the comparison with the targets the role expects.
    path = fake.site / "flashinfer" / "jit" / "core.py"
    path.write_text(path.read_text().replace("def check_cuda_arch():", "def _check_cuda_arch():"))
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST")
    msg = failed(fake.run(capsys, modules=["sampling"], expected_archs=["12.0f"]))
    assert msg == "FlashInfer %s targets nothing with this environment, expected ['12.0f']" % VERSION
    msg = failed(fake.run(capsys, modules=["sampling"], expected_archs=["10.3a", "12.0f"]))
    assert msg == "FlashInfer %s targets nothing with this environment, expected ['10.3a', '12.0f']" % VERSION


# ---- the host's failures, one line each naming the cause and the fix (never a traceback) -----------

VENV_NINJA_FIX = "re-run site.yml (the sglang_venv role reinstalls what is missing from the venv)"
NVCC_FIX = "reinstall the CUDA toolkit (re-run site.yml) or set CUDA_HOME to a toolkit whose bin/nvcc runs"
PYTHON = sys.executable  # before a test pretends otherwise


def build_runs_ninja(fake):
    """The fake's build starts `ninja` first, as FlashInfer 0.7.2's does: subprocess.run(["ninja", "-v", ...],
    check=True), the bare name looked up on PATH."""
    core = fake.site / "flashinfer" / "jit" / "core.py"
    anchor = '            if os.environ.get("FAKE_FLASHINFER_FAIL"):\n'
    text = core.read_text()
    assert text.count(anchor) == 1
    core.write_text(text.replace(anchor, '            import subprocess\n'
                                         '            subprocess.run(["ninja", "--version"], check=True, capture_output=True)\n'
                                 + anchor))


def prewarm(fake, *args, python=PYTHON, pythonpath=()):
    """The units' ExecStartPre=: the launcher the prewarm module installs, run by a fresh interpreter; (rc, out, err)."""
    lib = fake.tmp_path / "lib"
    for path, text in flashinfer_prewarm_command.wanted_files(str(lib)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.site)] + list(pythonpath)),
                   FLASHINFER_WORKSPACE_BASE=str(fake.base))
    proc = subprocess.run([python, str(lib / "flashinfer_prewarm.py")] + list(args), capture_output=True,
                          text=True, env=environ, check=False, cwd=str(fake.tmp_path))
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def no_ninja(fake, monkeypatch):
    """A build that runs ninja, a PATH without one, and this interpreter as if it were <tmp>/venv/bin/python
    (a venv without ninja); returns that venv's bin."""
    build_runs_ninja(fake)
    empty = fake.tmp_path / "empty-bin"
    empty.mkdir()
    venv_bin = fake.tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(fj.sys, "executable", str(venv_bin / "python"))
    return venv_bin


def test_ninja_missing_fails_the_module_in_one_line(fake, capsys, no_ninja):
    result = fake.run(capsys, modules=["sampling"])
    assert failed(result) == ("building FlashInfer module sampling failed: ninja not found (the venv's ninja, %s/ninja): %s"
                              % (no_ninja, VENV_NINJA_FIX))
    # The venv's ninja back on PATH: the same run builds.
    (no_ninja / "ninja").write_text("#!/bin/sh\nexit 0\n")
    (no_ninja / "ninja").chmod(0o755)
    os.environ["PATH"] = str(no_ninja)
    assert ok(fake.run(capsys, modules=["sampling"]))["built"] == ["sampling"]


def venv_without_ninja(tmp_path):
    """A venv like the SGLang one but with no ninja in its bin (this test's own venv has one): this
    interpreter under <tmp>/venv-no-ninja, with this venv's pyvenv.cfg; its packages come by PYTHONPATH."""
    venv = tmp_path / "venv-no-ninja"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(os.path.realpath(PYTHON))
    (venv / "pyvenv.cfg").write_text(open(os.path.join(sys.prefix, "pyvenv.cfg")).read())
    return str(venv / "bin" / "python")


def test_ninja_missing_fails_the_units_pre_warm_in_one_line(fake, no_ninja):
    # The launcher runs in a fresh interpreter, the venv's: a venv without ninja, a PATH without one.
    python = venv_without_ninja(fake.tmp_path)
    venv_ninja = os.path.join(os.path.dirname(python), "ninja")
    rc, out, err = prewarm(fake, "--modules", "sampling", python=python,
                           pythonpath=[sysconfig.get_paths()["purelib"]])
    assert "Traceback" not in err
    assert (rc, out, err) == (1, "", "flashinfer_jit: error: building FlashInfer module sampling failed: ninja not found "
                                     "(the venv's ninja, %s): %s\n" % (venv_ninja, VENV_NINJA_FIX))
    assert not any(build.get("compiled") for build in fake.builds)


def so_is_a_directory(fake):
    fake.so().mkdir(parents=True)
    return "%s is a directory where a file was expected: remove it" % fake.so()


def cached_ops_is_a_file(fake):
    fake.jit_dir().parent.mkdir(parents=True)
    fake.jit_dir().write_text("")
    return ("building FlashInfer module sampling failed: a part of %s is a file where a directory was expected: "
            "remove that file" % (fake.jit_dir() / "tmp"))


def nvcc_interpreter_gone(fake):
    nvcc = fake.cuda_home / "bin" / "nvcc"
    nvcc.write_text("#!/gone/sh\n")
    return "cannot run %s (No such file or directory): %s" % (nvcc, NVCC_FIX)


def nvcc_not_a_program(fake):
    nvcc = fake.cuda_home / "bin" / "nvcc"
    nvcc.write_bytes(b"\x00\x01 not a program")
    return "cannot run %s (Exec format error): %s" % (nvcc, NVCC_FIX)


def nvcc_gone_while_flashinfer_imports(fake):
    # 0.7.2 asks nvcc for the CUDA version to spell an unsuffixed target, while flashinfer.jit.env imports.
    os.environ["FLASHINFER_CUDA_ARCH_LIST"] = "12.0"
    return nvcc_interpreter_gone(fake)


def env_file_is_a_directory(fake):
    (fake.tmp_path / "flashinfer.env").mkdir()
    return ("cannot read env_file %s (Is a directory): point it at the flashinfer role's environment file "
            "(re-run site.yml to write it) and run as a user that can read it" % (fake.tmp_path / "flashinfer.env"))


def env_file_not_text(fake):
    (fake.tmp_path / "flashinfer.env").write_bytes(b"\xffCUDA_HOME=/x\n")
    return ("cannot read env_file %s (not UTF-8 text: invalid start byte): point it at the flashinfer role's "
            "environment file (re-run site.yml to write it)" % (fake.tmp_path / "flashinfer.env"))


HOST_FAILURES = [so_is_a_directory, cached_ops_is_a_file, nvcc_interpreter_gone, nvcc_not_a_program,
                 nvcc_gone_while_flashinfer_imports, env_file_is_a_directory, env_file_not_text]


def env_file_args(fake, setup):
    return ["--env-file", str(fake.tmp_path / "flashinfer.env")] if setup.__name__.startswith("env_file") else []


@pytest.mark.parametrize("setup", HOST_FAILURES, ids=lambda f: f.__name__)
def test_host_failures_fail_the_module_in_one_line(fake, capsys, monkeypatch, setup):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0f")
    message = setup(fake)
    args = dict(modules=["sampling"])
    if env_file_args(fake, setup):
        args["env_file"] = env_file_args(fake, setup)[1]
    assert failed(fake.run(capsys, **args)) == message
    assert "\n" not in message
    assert not any(build.get("compiled") for build in fake.builds)


@pytest.mark.parametrize("setup", HOST_FAILURES, ids=lambda f: f.__name__)
def test_host_failures_fail_the_units_pre_warm_in_one_line(fake, monkeypatch, setup):
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "12.0f")
    message = setup(fake)
    rc, out, err = prewarm(fake, "--modules", "sampling", *env_file_args(fake, setup))
    assert "Traceback" not in err
    assert (rc, out, err) == (1, "", "flashinfer_jit: error: %s\n" % message)
    assert not any(build.get("compiled") for build in fake.builds)


# ---- the same rule for the collection's other host modules (their own test files hold the rest) -----

def test_prewarm_command_a_file_in_place_of_a_directory_fails_in_one_line(tmp_path, capsys):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ansible_collections").write_text("")
    result = run_module(flashinfer_prewarm_command.main, capsys, {"path": str(lib)})
    assert result["_rc"] == 1 and result["failed"] is True
    assert result["msg"] == "flashinfer_prewarm_command: %s exists but is not a directory" % (lib / "ansible_collections")


def test_prewarm_command_a_file_that_is_not_text_fails_in_one_line(tmp_path, capsys):
    lib = tmp_path / "lib"
    launcher = lib / "flashinfer_prewarm.py"
    lib.mkdir()
    launcher.write_bytes(b"\xff\xfe garbage")
    result = run_module(flashinfer_prewarm_command.main, capsys, {"path": str(lib)})
    assert result["_rc"] == 1
    assert result["msg"] == ("flashinfer_prewarm_command: %s is not UTF-8 text (invalid start byte): remove it, "
                             "this module writes it again" % launcher)


@pytest.mark.parametrize("error, fix", [
    (PermissionError(errno.EACCES, "Permission denied"), "run it as root (become: true) or set path to a directory this user can write"),
    (OSError(errno.ENOSPC, "No space left on device"), "free space on that file system"),
    (OSError(errno.EROFS, "Read-only file system"), "set path to a directory on a writable file system"),
])
def test_prewarm_command_a_path_it_cannot_write_fails_in_one_line(tmp_path, capsys, monkeypatch, error, fix):
    def mkstemp(**_kwargs):
        raise error

    monkeypatch.setattr(flashinfer_prewarm_command.tempfile, "mkstemp", mkstemp)
    lib = tmp_path / "lib"
    result = run_module(flashinfer_prewarm_command.main, capsys, {"path": str(lib)})
    assert result["_rc"] == 1
    assert result["msg"] == "flashinfer_prewarm_command: cannot write %s (%s): %s" % (
        lib / "flashinfer_prewarm.py", error.strerror, fix)


NVIDIA_SMI_FIX = "reinstall the NVIDIA driver (its nvidia-smi is damaged) or set nvidia_smi_path to a working nvidia-smi"


@pytest.mark.parametrize("content, reason", [
    (b"#!/gone/sh\n", "No such file or directory"),
    (b"\x00\x01 not a program", "Exec format error"),
])
def test_nvidia_smi_that_cannot_be_started_fails_in_one_line(tmp_path, capsys, content, reason):
    smi = tmp_path / "nvidia-smi"
    smi.write_bytes(content)
    smi.chmod(0o755)
    result = run_module(nvidia_gpu_info.main, capsys, {"nvidia_smi_path": str(smi)})
    assert result["_rc"] == 1 and result["failed"] is True
    assert result["msg"] == "cannot run %s (%s): %s" % (smi, reason, NVIDIA_SMI_FIX)


def test_nvidia_smi_topo_that_cannot_be_started_leaves_the_interconnect_unknown(tmp_path, capsys, monkeypatch):
    fixtures = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia_smi")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat %s\n" % os.path.join(fixtures, "b300_x8.query.txt"))
    smi.chmod(0o755)
    run = nvidia_gpu_info._run

    def topo_does_not_start(module, path, args):
        if tuple(args) == tuple(nvidia_gpu_info.TOPO_ARGS):
            raise OSError(errno.ENOEXEC, "Exec format error", path)
        return run(module, path, args)

    monkeypatch.setattr(nvidia_gpu_info, "_run", topo_does_not_start)
    result = run_module(nvidia_gpu_info.main, capsys, {"nvidia_smi_path": str(smi)})
    assert result["_rc"] == 0 and result["count"] == 8
    assert result["interconnect"] == "unknown"
    assert ("nvidia-smi topo -m failed, interconnect unknown: cannot run %s (Exec format error): %s" % (smi, NVIDIA_SMI_FIX)
            in json.dumps(result["warnings"]))


def test_cuda_home_layout_os_error_mid_layout_is_one_line_with_what_was_done(tmp_path, capsys, monkeypatch):
    comp = tmp_path / "home" / "venv" / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13"
    (comp / "bin").mkdir(parents=True)
    (comp / "bin" / "nvcc").write_text("#!/bin/sh\n")

    def driver_library(_module):
        raise PermissionError(errno.EACCES, "Permission denied", "/etc/ld.so.cache")

    monkeypatch.setattr(cuda_home_layout, "driver_library", driver_library)
    result = run_module(cuda_home_layout.main, capsys, {"home": str(tmp_path / "home")})
    assert result["_rc"] == 1 and result["failed"] is True
    assert result["msg"] == ("cannot read the CUDA home or the wheels: [Errno 13] Permission denied: '/etc/ld.so.cache'; "
                             "fix the file system problem (permissions: become) and run again")
    assert result["actions"][0] == "mkdir %s" % (tmp_path / "home" / "bin")
    assert "hardlink %s = %s" % (tmp_path / "home" / "bin" / "nvcc", comp / "bin" / "nvcc") in result["actions"]
    assert result["changed"] is True


# ---- the verification stamp (module_utils/verified.py) -----------------------------------------

def stamped(fake, capsys, stamp, **args):
    """A run with `stamp`; the result and whether FlashInfer was imported (the check ran in full)."""
    builds = len(fake.builds)
    result = ok(fake.run(capsys, stamp=str(stamp), **dict({"modules": ["sampling"], "expected_archs": ["12.0f"]}, **args)))
    ran = len(fake.builds) > builds or result["verified"] == "checked"
    assert result["verified"] == ("checked" if ran else "unchanged")
    return result, ran


def test_a_stamp_spares_the_warm_check_while_nothing_changed(fake, capsys, tmp_path):
    stamp = tmp_path / "venv" / ".verified" / "flashinfer-warm.json"
    first, ran = stamped(fake, capsys, stamp)
    assert ran and first["built"] == ["sampling"] and first["changed"] is True
    second, ran = stamped(fake, capsys, stamp)
    assert not ran
    assert second["changed"] is False and second["built"] == [] and second["skipped_modules"] == ["sampling"]
    assert second["seconds"] == {} and second["verified_at"]
    assert second["cache_dir"] == first["cache_dir"] and second["archs"] == ["12.0f"]
    assert second["nvcc"] == first["nvcc"]
    assert len(fake.builds) == 1  # FlashInfer's build was not even asked


@pytest.mark.parametrize("edit", ["flashinfer file", "flashinfer file, mtime put back", "env file", "cuda home",
                                  "workspace", "arguments"])
def test_anything_that_changed_is_checked_again(fake, capsys, tmp_path, edit):
    stamp = tmp_path / "flashinfer-warm.json"
    env_file = tmp_path / "flashinfer.env"
    env_file.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0f\n")
    args = {"env_file": str(env_file)}
    assert stamped(fake, capsys, stamp, **args)[1] is True
    assert stamped(fake, capsys, stamp, **args)[1] is False
    if edit.startswith("flashinfer file"):  # the seed outage: a fix in FlashInfer's files went missing
        target = fake.site / "flashinfer" / "jit" / "env.py"
        before = target.stat()
        target.write_text(target.read_text() + "\n# edited by hand\n")
        if "mtime" in edit:
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif edit == "env file":
        env_file.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0f\nFLASHINFER_EXTRA=1\n")
    elif edit == "cuda home":
        fake.set_nvcc("13.0")  # the same release, rewritten: another toolkit file
    elif edit == "workspace":
        fake.so().write_bytes(fake.so().read_bytes()[:100])  # a truncated .so
    else:
        args["scope"] = "all"  # another argument of the check
    result, ran = stamped(fake, capsys, stamp, **args)
    assert ran, edit
    if edit == "workspace":
        assert result["repaired"] and result["built"] == ["sampling"]
    assert stamped(fake, capsys, stamp, **args)[1] is False  # recorded again once it passed


def test_a_probe_stamp_ignores_the_scratch_workspace(fake, capsys, tmp_path):
    stamp = tmp_path / "flashinfer-probe.json"
    for run, scratch in enumerate(("scratch-1", "scratch-2")):
        base = tmp_path / scratch
        base.mkdir()
        result, ran = stamped(fake, capsys, stamp, modules=[], workspace_base=str(base))
        assert ran is (run == 0)
        assert result["archs"] == ["12.0f"] and result["built"] == [] and result["skipped_modules"] == []
        assert result["cache_dir"] == str(fake.jit_dir("120f", base))  # this run's workspace, not the recorded one


def test_a_failed_check_is_never_recorded_and_check_mode_writes_nothing(fake, capsys, tmp_path):
    stamp = tmp_path / "flashinfer-warm.json"
    msg = failed(fake.run(capsys, modules=["sampling"], expected_archs=["10.3a"], stamp=str(stamp)))
    assert "expected ['10.3a']" in msg and not stamp.exists()
    result = ok(fake.run(capsys, check_mode=True, modules=["sampling"], stamp=str(stamp)))
    assert result["verified"] == "checked" and not stamp.exists()


def test_absent_and_rebuilt_always_run(fake, capsys, tmp_path):
    stamp = tmp_path / "flashinfer-warm.json"
    stamped(fake, capsys, stamp)
    result = ok(fake.run(capsys, state="rebuilt", modules=["sampling"], stamp=str(stamp)))
    assert result["built"] == ["sampling"] and result["removed"] and "verified" not in result
