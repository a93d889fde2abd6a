"""kernel_cache.relocate_module against real ninja builds laid out as FlashInfer lays them out
(absolute paths everywhere: the venv's sources and headers in the flags and the build statements,
the workspace's outputs; `deps = gcc`, so .ninja_deps names every header): a module built for venv 1
is moved to venv 2 (the same files, installed later) and must be proven with ninja's own view,
then hold up when one of venv 2's headers changes afterwards (ninja rebuilds: the deps were moved).
"""

import os
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import kernel_cache as kc
from run_program import run

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
NINJA = kc.Ninja(shutil.which("ninja", path=os.path.dirname(sys.executable)) or shutil.which("ninja"), run)
JIT_REL = ".cache/flashinfer/0.7.2/120f/cached_ops"
# FlashInfer's build.ninja, reduced: absolute include paths into the venv, absolute outputs.
BUILD_NINJA = """ninja_required_version = 1.3
name = sampling
cflags = -fPIC -O1 -I{site}/flashinfer/data/include -isystem {site}/tvm_ffi/include
rule compile
  command = gcc -MMD -MF $out.d $cflags -c $in -o $out
  depfile = $out.d
  deps = gcc
rule link
  command = gcc -shared $in -o $out
build {module}/csrc_sampling.o: compile {site}/flashinfer/data/csrc/sampling.c
build {module}/csrc_renorm.o: compile {site}/flashinfer/data/csrc/renorm.c
build {module}/sampling.so: link {module}/csrc_sampling.o {module}/csrc_renorm.o
default {module}/sampling.so
"""
FILES = {
    "flashinfer/data/include/sampling.h": "#define TOP_K 8\n",
    "tvm_ffi/include/ffi.h": "#define FFI 1\n",
    "flashinfer/data/csrc/sampling.c": '#include "sampling.h"\n#include <ffi.h>\nint sampling(void) { return TOP_K + FFI; }\n',
    "flashinfer/data/csrc/renorm.c": '#include "sampling.h"\nint renorm(void) { return TOP_K; }\n',
}


def ninja(module, *args):
    return subprocess.run([NINJA.path, "-C", str(module), "-f", "build.ninja"] + list(args), capture_output=True, text=True, check=False)


def venv(root, files=None):
    site = root / "lib" / "python3.11" / "site-packages"
    for rel, text in (files or FILES).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    return site


@pytest.fixture
def fleet(tmp_path):
    """Venv 1 with its module built in workspace 1; venv 2 installed later with the same files."""
    v1, v2 = tmp_path / "venvs" / "aaaa1111", tmp_path / "venvs" / "bbbb2222"
    w1, w2 = tmp_path / "kernel-caches" / "aaaa1111", tmp_path / "kernel-caches" / "bbbb2222"
    site1 = venv(v1)
    module1 = w1 / JIT_REL / "sampling"
    module1.mkdir(parents=True)
    (module1 / "build.ninja").write_text(BUILD_NINJA.format(site=site1, module=module1))
    assert ninja(module1).returncode == 0
    time.sleep(0.01)
    site2 = venv(v2)  # newer than venv 1's objects, as a later install is
    (w2 / JIT_REL).mkdir(parents=True)
    return {"v1": v1, "v2": v2, "w1": w1, "w2": w2, "site1": site1, "site2": site2,
            "module1": module1, "module2": w2 / JIT_REL / "sampling", "moves": [(str(v1), str(v2)), (str(w1), str(w2))]}


def relocate(fleet):
    return kc.relocate_module(str(fleet["module1"]), str(fleet["module2"]), fleet["moves"], NINJA)


def test_ninja_s_log_hash_is_reproduced():
    # ninja 1.13's own .ninja_log hash of "touch a" (a one-rule build run here, `# ninja log v7`)
    assert "%x" % kc.rapidhash(b"touch a") == "d91ff1f2760e13e4"


def test_the_hash_of_every_length_matches_a_log_ninja_wrote(tmp_path):
    # Commands of 0 to 200 bytes cross each branch of the hash (<4, <=16, <=48, the 48-byte blocks).
    lines = ["rule r%d\n  command = %s\n" % (n, "true " + "x" * n) for n in range(0, 200, 7)]
    lines += ["build o%d: r%d\n" % (n, n) for n in range(0, 200, 7)]
    (tmp_path / "build.ninja").write_text("".join(lines))
    assert ninja(tmp_path).returncode == 0
    log = [line.split("\t") for line in (tmp_path / ".ninja_log").read_text().splitlines()[1:]]
    assert len(log) == len(range(0, 200, 7))
    for _start, _end, _mtime, output, recorded in log:
        n = int(output[1:])
        assert "%x" % kc.rapidhash(("true " + "x" * n).encode()) == recorded, n


def test_a_module_of_a_venv_with_the_same_inputs_moves_without_a_build(fleet):
    so = (fleet["module1"] / "sampling.so").read_bytes()
    assert relocate(fleet) is None
    module2 = fleet["module2"]
    assert (module2 / "sampling.so").read_bytes() == so
    text = (module2 / "build.ninja").read_text()
    assert str(fleet["v1"]) not in text and str(fleet["w1"]) not in text and str(fleet["site2"]) in text
    assert "no work to do" in ninja(module2, "-n").stdout
    assert "no work to do" in ninja(module2).stdout  # and a real run builds nothing
    # The source is left as it was, and still up to date.
    assert "no work to do" in ninja(fleet["module1"], "-n").stdout


def test_the_moved_deps_follow_the_new_venv(fleet):
    assert relocate(fleet) is None
    header = fleet["site2"] / "flashinfer" / "data" / "include" / "sampling.h"  # named in .ninja_deps, not build.ninja
    time.sleep(0.01)
    header.write_text("#define TOP_K 9\n")
    explained = ninja(fleet["module2"], "-n", "-d", "explain")
    assert str(header) in explained.stdout + explained.stderr
    # both objects include it: both rebuilt, then the link
    assert [line.split("]")[0] for line in explained.stdout.splitlines() if line.startswith("[")] == ["[1/3", "[2/3", "[3/3"]


@pytest.mark.parametrize("change", ["edit", "add"])
def test_a_changed_system_header_that_no_deps_name_is_refused(fleet, change):
    # gcc -MMD leaves -isystem headers out of .ninja_deps: the include directories are compared whole.
    include = fleet["site2"] / "tvm_ffi" / "include"
    if change == "edit":
        (include / "ffi.h").write_text("#define FFI 2\n")
        expected = "%s differs from %s" % (include / "ffi.h", fleet["site1"] / "tvm_ffi/include/ffi.h")
    else:
        (include / "shadow.h").write_text("")
        expected = "shadow.h is only in %s" % include
    assert relocate(fleet) == "include directory %s: %s" % (include, expected)
    assert not fleet["module2"].exists()


def test_a_changed_header_in_the_new_venv_is_refused(fleet):
    (fleet["site2"] / "flashinfer" / "data" / "include" / "sampling.h").write_text("#define TOP_K 16\n")
    reason = relocate(fleet)
    assert reason == "input %s differs from %s, which the serving venv's build read" % (
        fleet["site2"] / "flashinfer/data/include/sampling.h", fleet["site1"] / "flashinfer/data/include/sampling.h")
    assert not fleet["module2"].exists()


def test_a_missing_input_in_the_new_venv_is_refused(fleet):
    (fleet["site2"] / "flashinfer" / "data" / "csrc" / "renorm.c").unlink()
    assert relocate(fleet).startswith("input %s: " % (fleet["site2"] / "flashinfer/data/csrc/renorm.c"))
    assert not fleet["module2"].exists()


def test_a_source_module_that_is_not_up_to_date_is_refused(fleet):
    time.sleep(0.01)
    (fleet["site1"] / "flashinfer" / "data" / "csrc" / "renorm.c").write_text("int renorm(void) { return 3; }\n")
    assert relocate(fleet).startswith("the serving venv's %s is not up to date" % fleet["module1"])
    assert not fleet["module2"].exists()


def test_a_log_ninja_did_not_write_is_refused(fleet):
    # A hand-edited hash: ninja itself sees the command as changed, so the source is not up to date.
    log = fleet["module1"] / ".ninja_log"
    lines = log.read_text().splitlines()
    start, end, mtime, output, _hash = lines[1].split("\t")
    log.write_text("\n".join([lines[0], "\t".join((start, end, mtime, output, "0123456789abcdef"))] + lines[2:]) + "\n")
    assert relocate(fleet).startswith("the serving venv's %s is not up to date" % fleet["module1"])
    assert not fleet["module2"].exists()


def test_a_ninja_whose_hash_is_not_reproduced_is_refused(fleet, monkeypatch):
    # Another ninja (another hash in its log): the new hashes could not be ninja's, so nothing moves.
    monkeypatch.setattr(kc, "rapidhash", lambda data: 0)
    assert relocate(fleet).startswith("ninja's hash of the command of ")
    assert not fleet["module2"].exists()


def test_an_output_that_would_land_outside_the_new_module_dir_is_refused(fleet):
    # The workspace spelt otherwise than the moves know (a link FlashInfer resolved): no output may stay put.
    moves = [(str(fleet["v1"]), str(fleet["v2"]))]  # the workspace not moved
    assert kc.relocate_module(str(fleet["module1"]), str(fleet["module2"]), moves, NINJA).startswith(
        "after the move %s/csrc_sampling.o is still built outside " % fleet["module1"])
    assert not fleet["module2"].exists()
