"""roles/cuda_toolkit/files/cuda_home_layout.py against a fake wheel tree (no toolkit needed)."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "roles", "cuda_toolkit", "files", "cuda_home_layout.py"
)
CUDA_H = """
typedef int CUresult;
typedef int CUdevice;
#define CUDAAPI
#define cuMemAlloc cuMemAlloc_v2
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuMemAlloc(void **p, unsigned long n);
"""


def make_venv(tmp_path, with_nvcc=True):
    """A venv-like interpreter whose purelib holds nvidia/cu13 with the wheel layout."""
    purelib = tmp_path / "site"
    comp = purelib / "nvidia" / "cu13"
    for sub in ("bin/crt", "include", "lib", "nvvm/bin"):
        (comp / sub).mkdir(parents=True)
    if with_nvcc:
        (comp / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (comp / "bin" / "ptxas").write_text("#!/bin/sh\n")
    (comp / "include" / "cuda.h").write_text(CUDA_H + "".join(
        "CUresult CUDAAPI cuFake%d(int x);\n" % i for i in range(120)))
    (comp / "lib" / "libcudart.so.13").write_text("elf")
    (comp / "lib" / "libcudart_static.a").write_text("ar")
    (comp / "lib" / "__init__.py").write_text("")
    return purelib


def run(purelib, home, *extra):
    code = (
        "import sys, sysconfig; sysconfig.get_paths = lambda: {'purelib': %r}; "
        "sys.argv = [%r] + sys.argv[1:]; exec(open(%r).read())" % (str(purelib), SCRIPT, SCRIPT)
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--home", str(home), *extra],
        capture_output=True, text=True, check=False,
    )
    return proc


def test_lays_out_a_cuda_home_then_is_idempotent(tmp_path):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    first = run(purelib, home)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["changed"] is True
    assert report["components"] == ["cu13"]
    comp = purelib / "nvidia" / "cu13"
    assert os.path.samefile(home / "bin" / "nvcc", comp / "bin" / "nvcc")
    assert not os.path.islink(home / "bin" / "nvcc")  # hard link: nvcc's TOP must be CUDA_HOME
    assert os.path.islink(home / "bin" / "crt")
    assert os.readlink(home / "lib64" / "libcudart.so") == "libcudart.so.13"
    assert os.path.exists(home / "lib64" / "libcudart.so")
    assert not os.path.exists(home / "lib64" / "__init__.py")
    assert os.readlink(home / "nvvm") == str(comp / "nvvm")

    second = run(purelib, home)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == dict(report, changed=False, actions=[])


def test_check_mode_reports_and_changes_nothing(tmp_path):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    proc = run(purelib, home, "--check")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["changed"] is True
    assert any(a.startswith("hardlink %s" % (home / "bin" / "nvcc")) for a in report["actions"])
    assert not home.exists()


def test_dangling_links_from_a_previous_layout_are_removed(tmp_path):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    assert run(purelib, home).returncode == 0
    os.symlink(str(tmp_path / "gone.so.1"), home / "lib64" / "libgone.so.1")
    report = json.loads(run(purelib, home).stdout)
    assert report["actions"] == ["remove dangling %s" % (home / "lib64" / "libgone.so.1")]
    assert not os.path.lexists(home / "lib64" / "libgone.so.1")


def test_wheels_without_nvcc_fail_with_advice(tmp_path):
    purelib = make_venv(tmp_path, with_nvcc=False)
    proc = run(purelib, tmp_path / "home")
    assert proc.returncode != 0
    assert "no bin/nvcc" in proc.stderr and "cuda_toolkit_install_method=apt" in proc.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.skipif(not os.path.exists("/usr/bin/gcc") or os.path.exists("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
                    reason="needs gcc and a host without the NVIDIA driver")
def test_driver_less_host_gets_a_stub_with_the_driver_soname(tmp_path):
    purelib = make_venv(tmp_path)
    home = tmp_path / "home"
    report = json.loads(run(purelib, home).stdout)
    assert report["stub"] == "link-time stub"
    stub = home / "lib64" / "stubs" / "libcuda.so"
    dyn = subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libcuda.so.1]" in dyn
    syms = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True, check=True).stdout
    assert " T cuMemAlloc_v2" in syms and " T cuInit" in syms and " T cuMemAlloc\n" not in syms
