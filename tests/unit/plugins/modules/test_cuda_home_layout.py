"""The cuda_home_layout module against a fake wheel tree in a fake toolkit venv (no toolkit needed)."""

import os
import shutil
import subprocess

import pytest

import module_runner
from ansible_collections.blackwell.sglang.plugins.modules import cuda_home_layout

CUDA_H = """
typedef int CUresult;
typedef int CUdevice;
#define CUDAAPI
#define cuMemAlloc cuMemAlloc_v2
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuMemAlloc(void **p, unsigned long n);
"""
DRIVER_CACHE = """3 libs found in cache `/etc/ld.so.cache'
\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda-13.0/lib/libcudart.so.13
\tlibcuda.so.1 (libc6,x86-64) => {driver}
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""
NO_DRIVER_CACHE = """1 libs found in cache `/etc/ld.so.cache'
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def make_venv(tmp_path, with_nvcc=True, entry_points=120):
    """A toolkit venv (<home>/venv, where the role installs the wheels) whose site-packages holds
    nvidia/cu13 with the wheel layout; returns that site-packages."""
    purelib = tmp_path / "home" / "venv" / "lib" / "python3.11" / "site-packages"
    comp = purelib / "nvidia" / "cu13"
    for sub in ("bin/crt", "include", "lib", "nvvm/bin"):
        (comp / sub).mkdir(parents=True)
    if with_nvcc:
        (comp / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (comp / "bin" / "ptxas").write_text("#!/bin/sh\n")
    (comp / "include" / "cuda.h").write_text(CUDA_H + "".join(
        "CUresult CUDAAPI cuFake%d(int x);\n" % i for i in range(entry_points)))
    (comp / "lib" / "libcudart.so.13").write_text("elf")
    (comp / "lib" / "libcudart_static.a").write_text("ar")
    (comp / "lib" / "__init__.py").write_text("")
    return purelib


@pytest.fixture
def ldconfig(tmp_path, monkeypatch):
    """A fake `ldconfig` in place of the real ones; write its `ldconfig -p` output with .cache(text)."""

    class FakeLdconfig:
        path = tmp_path / "fake-sbin" / "ldconfig"
        output = tmp_path / "fake-sbin" / "ld.so.cache.txt"

        def cache(self, text):
            self.output.write_text(text)

    fake = FakeLdconfig()
    fake.path.parent.mkdir()
    fake.path.write_text('#!/bin/sh\n[ "$1" = "-p" ] || exit 2\ncat "%s"\n' % fake.output)
    fake.path.chmod(0o755)
    fake.cache(NO_DRIVER_CACHE)
    monkeypatch.setattr(cuda_home_layout, "LDCONFIG", (str(fake.path),))
    return fake


def compiler(path, script):
    """An executable shell script standing in for the C compiler (most wrap the real gcc)."""
    path.write_text(script)
    path.chmod(0o755)
    return path


def run(purelib, home, capsys, check=False, diff=False, **args):
    """main() with these arguments; returns the module's result with its exit code as `_rc`."""
    args = dict({"home": str(home)}, **{k: str(v) for k, v in args.items()})
    return module_runner.run_module(cuda_home_layout.main, capsys, args, check, diff)


def tree(path):
    """Every path under path with what it is (link target, inode of a file), to prove nothing changed."""
    found = {}
    for root, dirs, files in os.walk(str(path)):
        for name in dirs + files:
            full = os.path.join(root, name)
            found[full] = os.readlink(full) if os.path.islink(full) else os.lstat(full).st_ino
    return found


@needs_gcc
def test_lays_out_a_cuda_home_then_is_idempotent(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    report = run(purelib, home, capsys)
    assert report["_rc"] == 0, report
    assert report["changed"] is True
    assert report["site_packages"] == str(purelib)
    assert report["components"] == ["cu13"]
    comp = purelib / "nvidia" / "cu13"
    assert os.path.samefile(home / "bin" / "nvcc", comp / "bin" / "nvcc")
    assert not os.path.islink(home / "bin" / "nvcc")  # hard link: nvcc's TOP must be CUDA_HOME
    assert os.path.islink(home / "bin" / "crt")
    assert os.readlink(home / "lib64" / "libcudart.so") == "libcudart.so.13"
    assert os.path.exists(home / "lib64" / "libcudart.so")
    assert not os.path.exists(home / "lib64" / "__init__.py")
    assert os.readlink(home / "nvvm") == str(comp / "nvvm")
    assert report["actions"] == [
        "mkdir %s" % (home / "bin"),
        "mkdir %s" % (home / "include"),
        "mkdir %s" % (home / "lib64"),
        "mkdir %s" % (home / "lib64" / "stubs"),
        "link %s -> %s" % (home / "bin" / "crt", comp / "bin" / "crt"),
        "hardlink %s = %s" % (home / "bin" / "nvcc", comp / "bin" / "nvcc"),
        "hardlink %s = %s" % (home / "bin" / "ptxas", comp / "bin" / "ptxas"),
        "link %s -> %s" % (home / "include" / "cuda.h", comp / "include" / "cuda.h"),
        "link %s -> %s" % (home / "lib64" / "libcudart.so.13", comp / "lib" / "libcudart.so.13"),
        "link %s -> libcudart.so.13" % (home / "lib64" / "libcudart.so"),
        "link %s -> %s" % (home / "lib64" / "libcudart_static.a", comp / "lib" / "libcudart_static.a"),
        "link %s -> %s" % (home / "nvvm", comp / "nvvm"),
        "build stub %s" % (home / "lib64" / "stubs" / "libcuda.so"),
    ]
    assert "diff" not in report  # only with --diff

    second = run(purelib, home, capsys)
    assert second["_rc"] == 0, second
    assert second == dict(report, changed=False, actions=[])


def test_check_mode_reports_and_changes_nothing(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    before = tree(home)
    # No compiler at all: check mode does not build the stub, so it does not need one.
    report = run(purelib, home, capsys, check=True, cc=tmp_path / "no-such-cc")
    assert report["_rc"] == 0, report
    assert report["changed"] is True
    assert report["stub"] == "link-time stub"
    assert any(a.startswith("hardlink %s" % (home / "bin" / "nvcc")) for a in report["actions"])
    assert report["actions"][-1] == "build stub %s" % (home / "lib64" / "stubs" / "libcuda.so")
    assert not (home / "bin").exists()
    assert tree(home) == before


@needs_gcc
def test_check_mode_on_a_laid_out_home_reports_what_a_real_run_would_do(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    assert run(purelib, home, capsys)["_rc"] == 0
    os.unlink(home / "lib64" / "libcudart.so")
    os.unlink(home / "include" / "cuda.h")
    os.symlink("elsewhere", home / "include" / "cuda.h")
    before = tree(home)
    checked = run(purelib, home, capsys, check=True)
    assert tree(home) == before
    assert checked["changed"] is True
    assert sorted(checked["actions"]) == sorted([
        "link %s -> %s" % (home / "include" / "cuda.h", purelib / "nvidia" / "cu13" / "include" / "cuda.h"),
        "link %s -> libcudart.so.13" % (home / "lib64" / "libcudart.so"),
    ])
    real = run(purelib, home, capsys)
    assert real["actions"] == checked["actions"]
    assert run(purelib, home, capsys, check=True)["changed"] is False


def test_diff_gives_each_touched_path_before_and_after(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    comp = purelib / "nvidia" / "cu13"
    report = run(purelib, home, capsys, check=True, diff=True)
    diff = report["diff"]
    assert sorted(diff["before"]) == sorted(diff["after"])
    assert len(diff["before"]) == len(report["actions"])  # one path per action in this tree
    assert diff["before"][str(home / "bin")] == "absent"
    assert diff["after"][str(home / "bin")] == "directory"
    assert diff["before"][str(home / "bin" / "nvcc")] == "absent"
    assert diff["after"][str(home / "bin" / "nvcc")] == "hard link to %s" % (comp / "bin" / "nvcc")
    assert diff["after"][str(home / "lib64" / "libcudart.so")] == "symlink -> libcudart.so.13"
    assert diff["after"][str(home / "lib64" / "stubs" / "libcuda.so")] == "link-time stub, soname libcuda.so.1"
    assert not (home / "bin").exists()


@needs_gcc
def test_diff_of_a_real_run_shows_replaced_and_removed_links(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    assert run(purelib, home, capsys)["_rc"] == 0
    gone = home / "lib64" / "libgone.so.1"
    os.symlink(str(tmp_path / "gone.so.1"), gone)
    os.unlink(home / "lib64" / "libcudart.so")
    os.symlink("libcudart.so.12", home / "lib64" / "libcudart.so")
    (home / "bin" / "ptxas").unlink()
    (home / "bin" / "ptxas").write_text("an old copy, not the wheel's file")
    report = run(purelib, home, capsys, diff=True)
    assert report["diff"] == {
        "before": {
            str(home / "bin" / "ptxas"): "file",
            str(home / "lib64" / "libcudart.so"): "symlink -> libcudart.so.12 [dangling]",
            str(gone): "symlink -> %s [dangling]" % (tmp_path / "gone.so.1"),
        },
        "after": {
            str(home / "bin" / "ptxas"): "hard link to %s" % (purelib / "nvidia" / "cu13" / "bin" / "ptxas"),
            str(home / "lib64" / "libcudart.so"): "symlink -> libcudart.so.13",
            str(gone): "absent",
        },
    }
    assert os.path.samefile(home / "bin" / "ptxas", purelib / "nvidia" / "cu13" / "bin" / "ptxas")


@needs_gcc
def test_no_diff_when_nothing_changes(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    run(purelib, home, capsys)
    report = run(purelib, home, capsys, diff=True)
    assert report["_rc"] == 0 and report["changed"] is False
    assert "diff" not in report


@needs_gcc
def test_dangling_links_from_a_previous_layout_are_removed(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    assert run(purelib, home, capsys)["_rc"] == 0
    os.symlink(str(tmp_path / "gone.so.1"), home / "lib64" / "libgone.so.1")
    report = run(purelib, home, capsys)
    assert report["actions"] == ["remove dangling %s" % (home / "lib64" / "libgone.so.1")]
    assert not os.path.lexists(home / "lib64" / "libgone.so.1")


def test_wheels_without_nvcc_fail_with_advice(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path, with_nvcc=False)
    result = run(purelib, tmp_path / "home", capsys)
    assert result["_rc"] != 0 and result["failed"] is True
    assert "no bin/nvcc" in result["msg"] and "cuda_toolkit_install_method=apt" in result["msg"]
    assert not (tmp_path / "home" / "bin").exists()


def test_a_venv_that_is_not_there_fails_clearly(tmp_path, capsys):
    result = run(None, tmp_path / "home", capsys)
    assert result["_rc"] == 1
    assert result["msg"] == (
        "venv %s is not a directory: install the cuda-toolkit wheels into it first (the cuda_toolkit role's "
        "pip method does) or set venv to the venv that has them" % (tmp_path / "home" / "venv"))
    assert not (tmp_path / "home").exists()


def test_a_venv_without_site_packages_fails_clearly(tmp_path, capsys):
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.11").mkdir(parents=True)
    result = run(None, tmp_path / "home", capsys, venv=venv)
    assert result["_rc"] == 1
    assert result["msg"] == ("no lib/python3*/site-packages in venv %s: not a Python virtual environment; "
                             "set venv to the one the cuda-toolkit wheels are installed in" % venv)
    assert not (tmp_path / "home").exists()


def test_a_venv_with_two_site_packages_fails_clearly(tmp_path, capsys):
    venv = tmp_path / "venv"
    for name in ("python3.12", "python3.11"):
        (venv / "lib" / name / "site-packages").mkdir(parents=True)
    result = run(None, tmp_path / "home", capsys, venv=venv)
    assert result["_rc"] == 1
    assert result["msg"] == (
        "several site-packages in venv %s (%s, %s): the venv has served more than one Python; remove it and "
        "install the cuda-toolkit wheels again"
        % (venv, venv / "lib" / "python3.11" / "site-packages", venv / "lib" / "python3.12" / "site-packages"))
    assert not (tmp_path / "home").exists()


def test_the_venv_option_reads_wheels_from_elsewhere(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    venv = tmp_path / "other-venv"
    os.rename(tmp_path / "home" / "venv", venv)
    home = tmp_path / "cuda"
    report = run(None, home, capsys, check=True, venv=venv)
    assert report["_rc"] == 0, report
    assert report["site_packages"] == str(venv / purelib.relative_to(tmp_path / "home" / "venv"))
    assert "hardlink %s = %s" % (home / "bin" / "nvcc", venv / "lib" / "python3.11" / "site-packages" / "nvidia"
                                 / "cu13" / "bin" / "nvcc") in report["actions"]


def test_a_host_with_the_driver_links_its_libcuda(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    driver = tmp_path / "driver" / "libcuda.so.1"
    driver.parent.mkdir()
    driver.write_text("the driver")
    ldconfig.cache(DRIVER_CACHE.format(driver=driver))
    # No compiler: with the driver there is no stub to build.
    report = run(purelib, home, capsys, cc=tmp_path / "no-such-cc")
    assert report["_rc"] == 0, report
    assert report["stub"] == "driver %s" % driver
    stub = home / "lib64" / "stubs" / "libcuda.so"
    assert os.readlink(stub) == str(driver)
    assert report["actions"][-1] == "link %s -> %s" % (stub, driver)
    again = run(purelib, home, capsys, cc=tmp_path / "no-such-cc")
    assert again["changed"] is False and again["stub"] == "driver %s" % driver


@needs_gcc
def test_the_driver_gone_its_link_is_replaced_by_a_stub(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    driver = tmp_path / "libcuda.so.1"
    driver.write_text("the driver")
    ldconfig.cache(DRIVER_CACHE.format(driver=driver))
    assert run(purelib, home, capsys)["_rc"] == 0
    ldconfig.cache(NO_DRIVER_CACHE)
    stub = home / "lib64" / "stubs" / "libcuda.so"
    report = run(purelib, home, capsys, diff=True)
    assert report["actions"] == ["build stub %s" % stub]
    assert report["diff"] == {"before": {str(stub): "symlink -> %s" % driver},
                              "after": {str(stub): "link-time stub, soname libcuda.so.1"}}
    assert not os.path.islink(stub) and os.path.isfile(stub)
    assert driver.read_text() == "the driver"  # the link was replaced, not written through
    assert run(purelib, home, capsys)["changed"] is False  # a stub that is a file is kept


@pytest.mark.parametrize("first", ["missing", "failing"])
def test_the_next_ldconfig_is_tried_when_one_is_missing_or_fails(tmp_path, capsys, ldconfig, monkeypatch, first):
    purelib = make_venv(tmp_path)
    driver = tmp_path / "libcuda.so.1"
    ldconfig.cache(DRIVER_CACHE.format(driver=driver))
    other = tmp_path / first / "ldconfig"
    if first == "failing":
        other.parent.mkdir()
        other.write_text("#!/bin/sh\necho 'ldconfig: cannot read the cache' >&2\nexit 1\n")
        other.chmod(0o755)
    monkeypatch.setattr(cuda_home_layout, "LDCONFIG", (str(other), str(ldconfig.path)))
    report = run(purelib, tmp_path / "home", capsys, check=True)
    assert report["stub"] == "driver %s" % driver


@needs_gcc
def test_driver_less_host_gets_a_stub_with_the_driver_soname(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    report = run(purelib, home, capsys)
    assert report["stub"] == "link-time stub"
    stub = home / "lib64" / "stubs" / "libcuda.so"
    dyn = subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libcuda.so.1]" in dyn
    syms = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True, check=True).stdout
    assert " T cuMemAlloc_v2" in syms and " T cuInit" in syms and " T cuMemAlloc\n" not in syms


@needs_gcc
def test_the_stub_is_built_with_cc_from_the_environment(tmp_path, capsys, ldconfig, monkeypatch):
    purelib = make_venv(tmp_path)
    log = tmp_path / "cc.log"
    wrapper = compiler(tmp_path / "my-cc", '#!/bin/sh\necho "$*" >> "%s"\nexec gcc "$@"\n' % log)
    monkeypatch.setenv("CC", str(wrapper))
    report = run(purelib, tmp_path / "home", capsys)
    assert report["_rc"] == 0, report
    calls = log.read_text().splitlines()
    assert len(calls) == 3  # cuda.h read twice (with and without per-thread streams), one link
    assert "-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1" in calls[1]
    assert "-Wl,-soname,libcuda.so.1" in calls[2]


def test_a_missing_compiler_fails_with_advice_and_reports_what_was_done(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    cc = tmp_path / "no-such-cc"
    result = run(purelib, home, capsys, cc=cc)
    assert result["_rc"] == 1
    assert result["msg"].startswith("cannot run the C compiler %s (" % cc)
    assert result["msg"].endswith("install it (gcc; the cuda_toolkit role's host packages include it) or set cc")
    assert result["changed"] is True
    assert "build stub %s" % (home / "lib64" / "stubs" / "libcuda.so") not in result["actions"]
    assert "mkdir %s" % (home / "bin") in result["actions"]
    assert not os.path.lexists(home / "lib64" / "stubs" / "libcuda.so")


@needs_gcc
def test_a_cuda_h_that_is_not_cudas_fails(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path, entry_points=10)
    home = tmp_path / "home"
    result = run(purelib, home, capsys)
    assert result["_rc"] == 1
    assert result["msg"] == (
        "only 12 driver entry points in %s: not CUDA's cuda.h? Reinstall the cuda-toolkit wheels (the cudart "
        "extra carries cuda.h)" % (home / "include" / "cuda.h"))
    assert not os.path.lexists(home / "lib64" / "stubs" / "libcuda.so")


def test_no_cuda_h_for_the_stub_fails_with_advice(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    (purelib / "nvidia" / "cu13" / "include" / "cuda.h").unlink()
    home = tmp_path / "home"
    result = run(purelib, home, capsys)
    assert result["_rc"] == 1
    assert result["msg"] == (
        "no %s to read the driver API from for the link-time stub (the host has no libcuda.so.1): install the "
        "cuda-toolkit wheels with the cudart extra" % (home / "include" / "cuda.h"))


def test_a_file_system_error_names_the_action(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    (home / "lib64").write_text("a file where lib64/ should be")
    result = run(purelib, home, capsys)
    assert result["_rc"] == 1
    assert result["msg"].startswith("mkdir %s failed: [Errno 17] File exists" % (home / "lib64"))
    assert result["msg"].endswith("fix the file system problem (permissions: become; hard links: the venv on the "
                                  "file system of the CUDA home) and run again")
    assert result["changed"] is True
    assert result["actions"] == ["mkdir %s" % (home / "bin"), "mkdir %s" % (home / "include")]


# ---- whole results (the mutation run's survivors) ----

def test_describe_names_each_kind_of_path(tmp_path):
    os.mkfifo(str(tmp_path / "fifo"))
    os.symlink("gone", str(tmp_path / "link"))
    (tmp_path / "file").write_text("")
    assert [cuda_home_layout.describe(str(tmp_path / name)) for name in ("", "file", "fifo", "link", "absent")] == [
        "directory", "file", "other", "symlink -> gone [dangling]", "absent"]


def test_a_compiler_that_fails_is_reported_with_its_command_and_output(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    cc = compiler(tmp_path / "bad-cc",
                  "#!/bin/sh\necho 'some output'\necho 'cc1: fatal error: cuda.h: Permission denied' >&2\nexit 3\n")
    result = run(purelib, home, capsys, cc=cc)
    cuda_h = str(home / "include" / "cuda.h")
    cmd = [str(cc), "-E", "-P", "-I", os.path.dirname(cuda_h), "-x", "c", cuda_h]
    assert {key: result[key] for key in ("_rc", "msg", "cmd", "rc", "stdout", "stderr")} == {
        "_rc": 1, "msg": "%s failed to read the driver API from %s (rc 3): cc1: fatal error: cuda.h: Permission denied"
        % (cc, cuda_h), "cmd": cmd, "rc": 3, "stdout": "some output\n",
        "stderr": "cc1: fatal error: cuda.h: Permission denied\n"}
    compiler(cc, "#!/bin/sh\necho 'only stdout'\nexit 3\n")
    assert run(purelib, home, capsys, cc=cc)["msg"].endswith("(rc 3): only stdout")


def test_a_missing_compiler_is_reported_with_its_command(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    cc = tmp_path / "no-such-cc"
    result = run(purelib, home, capsys, cc=cc)
    cuda_h = str(home / "include" / "cuda.h")
    assert result["msg"] == (
        "cannot run the C compiler %s (No such file or directory) to read the driver API from %s: install it (gcc; "
        "the cuda_toolkit role's host packages include it) or set cc" % (cc, cuda_h))
    assert result["cmd"] == [str(cc), "-E", "-P", "-I", os.path.dirname(cuda_h), "-x", "c", cuda_h]


@needs_gcc
def test_the_directories_made_are_0755_whatever_the_umask(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    old = os.umask(0)
    try:
        assert run(purelib, home, capsys)["_rc"] == 0
    finally:
        os.umask(old)
    assert {sub: oct(os.stat(str(home / sub)).st_mode & 0o777) for sub in ("bin", "include", "lib64")} == {
        "bin": "0o755", "include": "0o755", "lib64": "0o755"}


def test_wheels_without_nvcc_fail_with_the_whole_advice(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path, with_nvcc=False)
    assert run(purelib, tmp_path / "home", capsys)["msg"] == (
        "no bin/nvcc in the cuda-toolkit wheels under %s: this toolkit's wheels carry no compiler; install it with "
        "cuda_toolkit_install_method=apt" % (purelib / "nvidia"))


def test_a_failure_reports_the_wheels_it_read_and_what_it_did(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    result = run(purelib, tmp_path / "home", capsys, cc=tmp_path / "no-such-cc")
    assert (result["components"], result["site_packages"], result["changed"]) == (["cu13"], str(purelib), True)


@needs_gcc
def test_one_hundred_entry_points_make_a_stub_and_it_is_0755(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path, entry_points=98)  # with cuInit and cuMemAlloc: 100
    home = tmp_path / "home"
    assert run(purelib, home, capsys)["_rc"] == 0
    assert oct(os.stat(str(home / "lib64" / "stubs" / "libcuda.so")).st_mode & 0o777) == "0o755"


def test_dangling_links_in_bin_and_include_are_removed_too(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    run(purelib, home, capsys, cc=tmp_path / "no-such-cc")  # lays out the links, then fails at the stub
    for sub in ("bin", "include"):
        os.symlink(str(tmp_path / "gone"), str(home / sub / "old-tool"))
    run(purelib, home, capsys, cc=tmp_path / "no-such-cc")
    assert not os.path.lexists(str(home / "bin" / "old-tool")) and not os.path.lexists(str(home / "include" / "old-tool"))


@needs_gcc
def test_the_compiler_path_is_taken_as_it_is_and_the_stub_built_apart(tmp_path, capsys, ldconfig, monkeypatch):
    purelib = make_venv(tmp_path)
    (purelib / "nvidia" / "cu13" / "lib" / "cmake").mkdir()  # a directory among the libraries: passed over
    shutil.rmtree(str(purelib / "nvidia" / "cu13" / "nvvm"))
    # A literal "$": no variable of the module's environment is expanded in it.
    cc = compiler(tmp_path / "my$cc", '#!/bin/sh\nexec gcc "$@"\n')
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(str(cwd))
    home = tmp_path / "home"
    assert run(purelib, home, capsys, cc=cc)["_rc"] == 0
    assert os.path.islink(str(home / "lib64" / "libcudart.so.13")) and not os.path.lexists(str(home / "nvvm"))
    assert os.listdir(str(cwd)) == []  # nothing built where the module happened to run


@needs_gcc
def test_a_link_that_fails_names_the_stub(tmp_path, capsys, ldconfig):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    cc = compiler(tmp_path / "cc",
                  '#!/bin/sh\ncase "$*" in *-shared*) echo "ld: cannot find crti.o" >&2; exit 1;; esac\nexec gcc "$@"\n')
    assert run(purelib, home, capsys, cc=cc)["msg"] == "%s failed to build the link-time stub %s (rc 1): ld: cannot find crti.o" % (
        cc, home / "lib64" / "stubs" / "libcuda.so")
