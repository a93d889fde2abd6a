"""The fix against real FlashInfer releases (issue 4, cases A, B, E, F and the patch fallback).

cases/prepare.yml lays real FlashInfer releases from PyPI (0.6.7, 0.4.0, 0.3.0) into scratch venvs
on this node that borrow torch 2.14.1+cu130 from the SGLang venv, and a CUDA 12.8 home whose nvcc
answers `--version` as 12.8.93 does (the 12.8.1 wheels ship no nvcc binary; nothing here compiles).
Each case first shows what FlashInfer does alone, then runs the flashinfer role (cases/case.yml)
against that venv and reads what the role proved. The node has no GPU, so FlashInfer's "visible
GPUs" path sees none: its target set is empty, as it is on an sm120 host where the GPU query fails.

Cases C (0.7.2, CUDA 13.0 -> 12.0f, cache 120f, second run unchanged) and D (B300 -> 10.3a) are
the scenarios' own converge + idempotence (test_flashinfer.py here, test_b300.py in molecule/b300).

Stand-in: the borrowed torch is built for CUDA 13.0; beside the CUDA 12.8 home it stands in for the
cu128 torch such a venv would have, so cases A and F turn the role's torch/toolkit check off
(flashinfer_check_torch_cuda: false). Case T is A with the check on: the role refuses the pair.
"""

import json
import os
import re

import pytest
from conftest import _run_playbook, assert_unchanged, fingerprint

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

CASES = os.path.join("molecule", "default", "cases")
BASE = "/opt/fi-cases"
CUDA_128 = BASE + "/cuda-12.8"
CUDA_130 = "/opt/cuda/13.0.2"
SM75 = "FlashInfer requires GPUs with sm75 or higher"


def venv(version):
    return "%s/venv-%s" % (BASE, version)


def playbook(name, *extra_vars):
    """Run cases/<name> (conftest's runner); return (rc, output with whitespace folded)."""
    rc, out = _run_playbook(os.path.join(CASES, name), *extra_vars, limit="molecule-pro6000:case-*")
    return rc, " ".join(out.split())


@pytest.fixture(scope="module")
def releases():
    rc, out = playbook("prepare.yml")
    assert rc == 0, out


def settings(case, version, cuda_home, archs, **extra):
    value = {
        "flashinfer_venv": venv(version),
        "flashinfer_cuda_home": cuda_home,
        "flashinfer_cuda_archs": archs,
        "flashinfer_env_file": "%s/env/%s.env" % (BASE, case),
        # The kernel_cache role after it, as site.yml runs them: the workspace <dir>/<venv id>.
        "kernel_cache_dir": "%s/ws-%s" % (BASE, case),
        "kernel_cache_venv_id": "venv-%s" % version,
    }
    value.update(extra)
    return value


def run_cases(host, **cases):
    """Run the flashinfer role for each case (in parallel); return (output, {case: proven or None})."""
    for value in cases.values():
        host.run("rm -f %s.result.json" % value["flashinfer_env_file"])
    _rc, out = playbook("case.yml", {"cases": cases})
    proven = {}
    for name, value in cases.items():
        result = host.file(value["flashinfer_env_file"] + ".result.json")
        proven[name] = json.loads(result.content_string) if result.exists else None
    return out, proven


def recap(out, case):
    """The PLAY RECAP counters of one case host, e.g. {'ok': 20, 'changed': 0, 'failed': 0}."""
    match = re.search(r"case-%s\s*:\s*((?:\w+=\d+\s*)+)" % case, out)
    assert match, out
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))}


# What the two cases that must fail own on the node (tests/fingerprint.sh of these paths).
FAILING = {
    "F": [BASE + "/env/F.env", BASE + "/ws-F"],
    "T": [BASE + "/env/T.env", BASE + "/ws-T"],
    "P": [venv("0.3.0"), BASE + "/env/P.env", BASE + "/ws-P"],
}


@pytest.fixture(scope="module")
def first_round(host, releases):
    """A (and B), E, F and the 0.3.0 venv with the patch turned off, side by side; also the
    fingerprints of F's and P's paths before and after ({case: (before, after)})."""
    before = {case: fingerprint(host, *paths) for case, paths in FAILING.items()}
    out, proven = run_cases(
        host,
        A=settings("A", "0.6.7", CUDA_128, ["12.0"], flashinfer_check_torch_cuda=False),
        E=settings("E", "0.4.0", CUDA_130, ["12.0"]),
        F=settings("F", "0.6.7", CUDA_128, ["10.3"], flashinfer_check_torch_cuda=False),
        T=settings("T", "0.6.7", CUDA_128, ["12.0"]),
        P=settings("P", "0.3.0", CUDA_130, ["12.0"], flashinfer_patch=False),
    )
    return out, proven, {case: (before[case], fingerprint(host, *paths)) for case, paths in FAILING.items()}


def patch_round(host):
    return run_cases(host, P=settings("P", "0.3.0", CUDA_130, ["12.0"]))


def flashinfer_alone(host, version, code, env=""):
    """Run `code` with FlashInfer `version` as sglang with only `env` set (no env file)."""
    cmd = "cd /tmp && runuser -u sglang -- env -i HOME=/tmp/fi-alone PATH=/usr/bin:/bin %s %s/bin/python -c %s" % (
        env, venv(version), _quote(code))
    return host.run(cmd)


def _quote(code):
    return "'" + code.replace("'", "'\"'\"'") + "'"


CHECK = "import flashinfer.jit.core as c; c.check_cuda_arch(); print('accepted')"


# A. FlashInfer 0.6.7, nvcc 12.8, GPU 12.0, list unset.
def test_a_flashinfer_067_alone_raises_sm75_and_the_fix_targets_120a(host, first_round):
    alone = flashinfer_alone(host, "0.6.7", CHECK, "CUDA_HOME=%s" % CUDA_128)
    assert alone.rc != 0
    assert SM75 in alone.stderr

    out, proven, _fingerprints = first_round
    assert recap(out, "A")["failed"] == 0, out
    assert proven["A"] == {
        "fix": "env",
        "archs": ["12.0a"],
        "cache_dir": BASE + "/ws-A/venv-0.6.7/.cache/flashinfer/0.6.7/120a/cached_ops",
    }
    assert "FLASHINFER_CUDA_ARCH_LIST=12.0a\n" in host.file(BASE + "/env/A.env").content_string


# B. The same with a cu130 torch but CUDA 12.8 as the toolkit: the CUDA_HOME the role set decides
#    (12.0a), not torch's CUDA (13.0 would allow 12.0f). Case A's run is exactly that setup.
def test_b_the_cuda_home_decides_not_torch(host, first_round):
    torch_cuda = flashinfer_alone(host, "0.6.7", "import torch; print(torch.version.cuda)")
    assert torch_cuda.stdout.strip() == "13.0"
    # Unsuffixed 12.0 with nvcc 12.8 is refused by FlashInfer itself: the role must spell the suffix.
    plain = flashinfer_alone(host, "0.6.7", CHECK, "CUDA_HOME=%s FLASHINFER_CUDA_ARCH_LIST=12.0" % CUDA_128)
    assert plain.rc != 0
    assert "SM 12.x requires CUDA >= 12.9" in plain.stderr

    proven = first_round[1]
    assert proven["A"]["archs"] == ["12.0a"]
    env = host.file(BASE + "/env/A.env").content_string
    assert "CUDA_HOME=%s\n" % CUDA_128 in env
    # PATH is the venv's own file's (CUDA's bin, then the venv's).
    assert "PATH=%s/bin:%s/bin:" % (CUDA_128, venv("0.6.7")) in host.file(venv("0.6.7") + "/venv.env").content_string


# E. FlashInfer 0.4.0 with an operator-given 12.0: FlashInfer alone builds a plain compute_120
#    (no arch-specific features); the role renders 12.0a.
def test_e_flashinfer_040_plain_120_is_rendered_120a(host, first_round):
    flags = flashinfer_alone(
        host, "0.4.0",
        "from flashinfer.compilation_context import CompilationContext as C; print(C().get_nvcc_flags_list())",
        "FLASHINFER_CUDA_ARCH_LIST=12.0")
    assert flags.rc == 0, flags.stderr
    assert "-gencode=arch=compute_120,code=sm_120" in flags.stdout

    out, proven, _fingerprints = first_round
    assert recap(out, "E")["failed"] == 0, out
    assert proven["E"]["fix"] == "env"
    assert proven["E"]["archs"] == ["12.0a"]
    assert "FLASHINFER_CUDA_ARCH_LIST=12.0a\n" in host.file(BASE + "/env/E.env").content_string


# F. 10.3a with CUDA 12.8: an error naming 12.9 before anything is written or compiled.
def test_f_103_with_cuda_128_fails_before_anything_is_written(host, first_round):
    out, proven, fingerprints = first_round
    assert recap(out, "F")["failed"] == 1, out
    assert recap(out, "F")["changed"] == 0, out
    assert "10.3a needs CUDA >= 12.9; nvcc is 12.8" in out, out
    assert proven["F"] is None
    assert not host.file(BASE + "/env/F.env").exists
    assert not host.file(BASE + "/ws-F").exists
    assert_unchanged(*fingerprints["F"], what="case F's paths")


# T. A's venv and toolkit with the torch check on: torch is built for CUDA 13.0, nvcc is 12.8, so
#    FlashInfer's kernels would load into another CUDA runtime; refused before anything is written.
def test_t_a_torch_of_another_cuda_major_is_refused_before_anything_is_written(host, first_round):
    out, proven, fingerprints = first_round
    assert recap(out, "T")["failed"] == 1, out
    assert recap(out, "T")["changed"] == 0, out
    assert "torch in the SGLang venv is built for CUDA 13.0 but the toolkit is 12.8" in out, out
    assert proven["T"] is None and not host.file(BASE + "/env/T.env").exists
    assert_unchanged(*fingerprints["T"], what="case T's paths")


# Patch fallback: FlashInfer 0.3.0 asks torch for its targets and ignores FLASHINFER_CUDA_ARCH_LIST.
INIT = venv("0.3.0") + "/lib/python3.11/site-packages/flashinfer/__init__.py"
ORIGINAL = BASE + "/src/flashinfer_python-0.3.0/flashinfer/__init__.py"
BACKUP = BASE + "/venv-0.3.0/.blackwell-sglang/flashinfer-0.3.0-orig/__init__.py"
MARKER = "blackwell.sglang arch patch"


def test_patch_1_flashinfer_030_ignores_the_env_file(host, releases):
    alone = flashinfer_alone(host, "0.3.0", CHECK, "CUDA_HOME=%s FLASHINFER_CUDA_ARCH_LIST=12.0a" % CUDA_130)
    assert alone.rc != 0
    assert "IndexError" in alone.stderr  # torch's arch list, empty without a GPU
    assert MARKER not in host.file(INIT).content_string


def test_patch_2_off_fails_with_flashinfer_error_and_changes_nothing(host, first_round):
    out, proven, fingerprints = first_round
    assert recap(out, "P")["failed"] == 1, out
    assert recap(out, "P")["changed"] == 0, out
    assert "FlashInfer 0.3.0 rejects the targets 12.0a" in out, out
    assert "torch's arch flags: IndexError" in out, out
    assert "Nothing was changed." in out, out
    assert proven["P"] is None
    assert host.file(INIT).sha256sum == host.file(ORIGINAL).sha256sum
    assert not host.file(BACKUP).exists
    # The role proves before it writes: no env file, no workspace, no probe workspace left.
    assert not host.file(BASE + "/env/P.env").exists
    assert not host.file(BASE + "/ws-P").exists
    assert host.run("ls -d /tmp/blackwell-sglang-probe.*").rc != 0
    assert_unchanged(*fingerprints["P"], what="case P's venv, env file and workspace")


def test_patch_3_applied_original_kept_probe_passes(host, first_round):
    out, proven = patch_round(host)
    assert recap(out, "P")["failed"] == 0, out
    assert proven["P"]["fix"] == "patch"
    assert proven["P"]["archs"] == ["12.0a"]
    assert host.file(BACKUP).sha256sum == host.file(ORIGINAL).sha256sum
    assert MARKER in host.file(INIT).content_string
    env = "CUDA_HOME=%s FLASHINFER_CUDA_ARCH_LIST=12.0a" % CUDA_130
    patched = flashinfer_alone(host, "0.3.0", CHECK, env)
    assert patched.rc == 0, patched.stderr
    assert "accepted" in patched.stdout
    flags = flashinfer_alone(host, "0.3.0", "import flashinfer.jit.cpp_ext as x; print(x._get_cuda_arch_flags())", env)
    assert "-gencode=arch=compute_120a,code=sm_120a" in flags.stdout, flags.stderr


def test_patch_4_second_run_changes_nothing(host, first_round):
    out, proven = patch_round(host)
    assert recap(out, "P") == dict(recap(out, "P"), failed=0, changed=0), out
    assert proven["P"]["fix"] == "patch"


def test_patch_5_reapplied_after_a_reinstall(host, first_round):
    host.check_output("cp %s %s && chown sglang: %s" % (ORIGINAL, INIT, INIT))  # what pip's reinstall writes
    out, proven = patch_round(host)
    assert recap(out, "P")["failed"] == 0, out
    assert recap(out, "P")["changed"] > 0, out
    assert MARKER in host.file(INIT).content_string
    assert proven["P"] == {"fix": "patch", "archs": ["12.0a"],
                           "cache_dir": BASE + "/ws-P/venv-0.3.0/.cache/flashinfer/120/cached_ops"}
    assert host.file(BACKUP).sha256sum == host.file(ORIGINAL).sha256sum
