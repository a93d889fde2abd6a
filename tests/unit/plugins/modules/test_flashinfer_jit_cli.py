"""The units' ExecStartPre= pre-warm command: the launcher the flashinfer_prewarm_command module
installs, which runs plugins/module_utils/flashinfer_jit.py's command(). One test runs it as the units
do: installed with the files the module writes (as in /usr/local/lib/blackwell-sglang), a fresh
interpreter, the environment systemd loaded, no Ansible. The others call command() in this process
with the same arguments and environment (so a mutation tool sees what they cover). Same fake
FlashInfer as the module's tests (test_flashinfer_jit_cache.py), so both callers of ensure() are held
to one behaviour.
"""

import os
import subprocess
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj
from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_prewarm_command
from run_program import run
from fake_flashinfer import VERSION, drop_flashinfer_modules


def prewarm(fake, *args, **env):
    """Run flashinfer_prewarm.py in a fresh interpreter, installed as the module does; return (rc, stdout, stderr)."""
    lib = fake.tmp_path / "lib"
    if not lib.exists():
        for path, text in flashinfer_prewarm_command.wanted_files(str(lib)):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(text)
    environ = dict(os.environ)
    environ["PYTHONPATH"] = str(fake.site)
    environ.setdefault("FLASHINFER_WORKSPACE_BASE", str(fake.base))
    environ.update(env)
    proc = subprocess.run([sys.executable, str(lib / "flashinfer_prewarm.py")] + list(args), capture_output=True, text=True,
                          env=environ, check=False, cwd=str(fake.tmp_path))
    return proc.returncode, proc.stdout, proc.stderr


def cli(fake, *args, **env):
    """The same command in this process (fj.command, as flashinfer_prewarm.py calls it, with its own
    environment, FlashInfer imported afresh): (rc, stdout, stderr) as the wrapper prints them. The
    tests that use prewarm() check that the wrapper and a fresh interpreter behave the same."""
    saved = dict(os.environ)
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", str(fake.base))
    os.environ.update(env)
    drop_flashinfer_modules()
    try:
        status, line = fj.command(list(args), run)
    except SystemExit as exc:  # argparse: usage errors exit 2 with the message on stderr
        return exc.code, "", ""
    finally:
        drop_flashinfer_modules()
        os.environ.clear()
        os.environ.update(saved)
    return status, (line + "\n" if status == 0 else ""), (line + "\n" if status else "")


def test_the_command_in_a_fresh_interpreter_builds_then_fails_in_one_line(fake):
    rc, out, err = prewarm(fake, "--modules", "sampling")
    assert (rc, err) == (0, "")
    assert out.startswith("flashinfer_jit: FlashInfer %s targets 12.0f, cache " % VERSION)
    assert "; built: sampling; up to date: none (sampling=" in out
    rc, out, err = prewarm(fake, "--modules", "sampling", "--expected-archs", "10.3a")
    assert (rc, out) == (1, "")
    assert err == ("flashinfer_jit: error: FlashInfer %s targets ['12.0f'] with this environment, "
                   "expected ['10.3a']\n" % VERSION)
    rc, out, err = prewarm(fake, "--jobs", "0")
    assert rc == 2 and "--jobs must be >= 1, got 0" in err


def test_cold_cache_is_built_then_warm_check_compiles_nothing(fake):
    rc, out, err = cli(fake, "--modules", "sampling")
    assert rc == 0, err
    assert "targets 12.0f" in out and "built: sampling" in out
    assert fj.so_problem(str(fake.so())) is None
    fingerprint = fj.library_fingerprint(str(fake.so()))

    rc, out, err = cli(fake, "--modules", "sampling")
    assert rc == 0, err
    assert "built: none; up to date: sampling" in out
    assert fj.library_fingerprint(str(fake.so())) == fingerprint
    assert [b["compiled"] for b in fake.builds] == [True, False]


def test_the_command_leaves_the_toolkit_check_to_flashinfer(fake, monkeypatch):
    # The module checks nvcc against the CUDA table (cuda_arch.toolkit_gap); the units' command
    # does not: FlashInfer's own check and its build judge the toolkit it finds there.
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.3a")
    fake.set_nvcc("12.8")
    rc, out, err = cli(fake, "--modules", "sampling")
    assert rc == 0, err
    assert "targets 10.3a" in out and "built: sampling" in out


def test_expected_archs_default_to_the_environments_list(fake):
    # FLASHINFER_CUDA_ARCH_LIST=12.0f (the fixture); FlashInfer agrees, so the check passes.
    assert cli(fake, "--modules", "sampling")[0] == 0
    rc, _out, err = cli(fake, "--modules", "sampling", "--expected-archs", "10.3a")
    assert rc == 1
    assert err.strip() == ("flashinfer_jit: error: FlashInfer %s targets ['12.0f'] with this environment, "
                           "expected ['10.3a']" % VERSION)


def test_empty_target_set_fails_with_flashinfers_own_error(fake, monkeypatch):
    # No FLASHINFER_CUDA_ARCH_LIST and no visible GPU: FlashInfer's set is empty (the seed outage).
    monkeypatch.delenv("FLASHINFER_CUDA_ARCH_LIST")
    rc, out, err = cli(fake, "--modules", "sampling")
    assert rc == 1 and out == ""
    assert err == "flashinfer_jit: error: FlashInfer requires GPUs with sm75 or higher. Detected TARGET_CUDA_ARCHS=[].\n"
    assert fake.builds == []


def test_expected_archs_default_catches_a_list_flashinfer_spells_otherwise(fake):
    # The unit was given FLASHINFER_CUDA_ARCH_LIST=12.0; FlashInfer 0.7.2 builds 12.0f from it with
    # nvcc 13.0. The pre-warm holds FlashInfer to the list the unit was given, so it refuses.
    rc, out, err = cli(fake, "--modules", "sampling", FLASHINFER_CUDA_ARCH_LIST="12.0")
    assert rc == 1 and out == ""
    assert err == ("flashinfer_jit: error: FlashInfer %s targets ['12.0f'] with this environment, "
                   "expected ['12.0']\n" % VERSION)
    assert fake.builds == []


def test_a_list_flashinfer_cannot_read_fails_in_one_line_not_a_traceback(fake):
    rc, out, err = cli(fake, "--modules", "sampling", FLASHINFER_CUDA_ARCH_LIST="")
    assert rc == 1 and out == ""
    assert err == ("flashinfer_jit: error: FlashInfer rejects FLASHINFER_CUDA_ARCH_LIST='': "
                   "ValueError: not enough values to unpack (expected 2, got 1)\n")


def test_truncated_so_is_repaired_and_relinked(fake):
    assert cli(fake, "--modules", "sampling")[0] == 0
    with open(str(fake.so()), "r+b") as handle:
        handle.truncate(100)
    rc, out, err = cli(fake, "--modules", "sampling")
    assert rc == 0, err
    assert "; repaired: " in out and "sampling.so: truncated" in out
    assert fj.so_problem(str(fake.so())) is None


def test_env_file_and_debug_variables(fake, tmp_path):
    env_file = tmp_path / "flashinfer.env"
    env_file.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0f\nFLASHINFER_JIT_DEBUG=1\n")
    rc, _out, err = cli(fake, "--env-file", str(env_file), "--modules", "sampling", "--jobs", "2",
                        FLASHINFER_CUDA_ARCH_LIST="10.3a")
    assert rc == 0, err
    [build] = fake.builds
    assert build["env"]["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert build["env"]["MAX_JOBS"] == "2"
    assert "FLASHINFER_JIT_DEBUG" not in build["env"]


def test_failed_build_exits_1_with_ninjas_output(fake):
    rc, _out, err = cli(fake, "--modules", "sampling", FAKE_FLASHINFER_FAIL="1")
    assert rc == 1
    assert "building FlashInfer module sampling failed: Ninja build failed." in err


def test_unknown_module_and_bad_jobs(fake):
    rc, _out, err = cli(fake, "--modules", "sampling,no_such_kernel")
    assert rc == 1 and "has no JIT module 'no_such_kernel'" in err
    rc, _out, _err = cli(fake, "--jobs", "0")
    assert rc == 2  # argparse's usage error (its text: test_the_command_in_a_fresh_interpreter_...)
    assert fake.builds == []


def test_check_builds_nothing(fake):
    rc, out, err = cli(fake, "--modules", "sampling", "--check")
    assert rc == 0, err
    assert "would build: sampling" in out
    assert fake.builds == []
    assert not fake.so().exists()


@pytest.mark.parametrize("text,items", [("12.0f 10.3a", ["12.0f", "10.3a"]), ("sampling,topk", ["sampling", "topk"]),
                                        ("", []), (" 12.0f; ", ["12.0f"])])
def test_split_list(text, items):
    assert fj.split_list(text) == items


def seconds(value):
    """fj.timed that reports `value` seconds (the build still runs)."""
    def timed(func, *args):
        func(*args)
        return value
    return timed


def test_the_summary_line_says_what_happened(fake, monkeypatch):
    monkeypatch.setattr(fj, "timed", seconds(1.2))
    cache = str(fake.jit_dir())
    rc, out, _err = cli(fake, "--modules", "sampling")
    assert (rc, out) == (0, "flashinfer_jit: FlashInfer %s targets 12.0f, cache %s; built: sampling; up to date: none "
                            "(sampling=1.2 s)\n" % (VERSION, cache))
    with open(str(fake.so()), "r+b") as handle:
        handle.truncate(100)
    rc, out, _err = cli(fake, "--modules", "sampling", "--check")
    assert (rc, out) == (0, "flashinfer_jit: FlashInfer %s targets 12.0f, cache %s; would build: sampling; up to date: none; "
                            "repaired: sampling.lock: lock file left by a killed build; "
                            "sampling.so: truncated: section headers end at byte 768, file has 100\n"
                            % (VERSION, cache))


def test_the_summary_line_of_a_warm_cache_and_of_two_targets(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(fj, "timed", seconds(0.0))
    assert cli(fake, "--modules", "sampling")[0] == 0
    rc, out, _err = cli(fake, "--modules", "sampling")
    assert out == "flashinfer_jit: FlashInfer %s targets 12.0f, cache %s; built: none; up to date: sampling (sampling=0.0 s)\n" % (
        VERSION, fake.jit_dir())
    base = tmp_path / "other-base"
    base.mkdir()
    rc, out, _err = cli(fake, "--modules", "", "--workspace-base", str(base), "--expected-archs", "",
                        FLASHINFER_CUDA_ARCH_LIST="10.3a 12.0f")
    assert (rc, out) == (0, "flashinfer_jit: FlashInfer %s targets 10.3a 12.0f, cache %s; built: none; up to date: none\n"
                         % (VERSION, fake.jit_dir("103a_120f", base=base)))


def test_env_files_apply_in_order_and_the_later_wins(fake, tmp_path):
    first, second = tmp_path / "first.env", tmp_path / "second.env"
    first.write_text("FLASHINFER_CUDA_ARCH_LIST=10.3a\nMAX_JOBS=3\n")
    second.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0f\n")
    rc, _out, err = cli(fake, "--env-file", str(first), "--env-file", str(second), "--modules", "sampling")
    assert rc == 0, err
    [build] = fake.builds
    assert (build["env"]["FLASHINFER_CUDA_ARCH_LIST"], build["env"]["MAX_JOBS"]) == ("12.0f", "3")
