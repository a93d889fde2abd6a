"""The one checked read of a host command's output (module_utils/host_output.py), per reader the roles
have, each with good, garbage, empty and truncated output and a failed command: the value, or one
sentence naming the command, what it printed, what was expected and the variable to check."""

import json

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.host_output import read, shown
from ansible_collections.blackwell.sglang.plugins.filter.host_output import host_output

from ansible.errors import AnsibleFilterError

NVCC_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
# The readers of the roles: (command, kind, variable, keys, good output, its value).
PROBE = {"executable": "/usr/bin/python3", "version": "3.11.2", "abi": "cp311", "libc": "glibc 2.36",
         "platforms": ["manylinux_2_36_x86_64"]}
VENV = {"sglang": "0.5.23", "flashinfer": "0.7.2", "torch": "2.11.0", "torch_cuda": "13.0", "damaged": {}}
INSPECT = {"version": "0.7.2", "package_dir": "/opt/sglang/venvs/x/lib/python3.11/site-packages/flashinfer",
           "venv": "/opt/sglang/venvs/x", "torch_cuda": "13.0", "torch": True, "patched": False}
READERS = {
    "common python": ("/usr/bin/python3 host_python.py", "json", "sglang_venv_python", ["version", "abi", "platforms"],
                      json.dumps(PROBE), PROBE, "a JSON object with version, abi, platforms"),
    "venv facts": ("/opt/sglang/venvs/x/bin/python venv_facts.py", "json", "sglang_venv_python",
                   ["sglang", "flashinfer", "torch", "torch_cuda", "damaged"], json.dumps(VENV), VENV,
                   "a JSON object with sglang, flashinfer, torch, torch_cuda, damaged"),
    "flashinfer inspect": ("/opt/sglang/current/bin/python (the FlashInfer inspection)", "json", "flashinfer_venv",
                           ["version", "package_dir", "venv", "torch_cuda", "torch", "patched"], json.dumps(INSPECT), INSPECT,
                           "a JSON object with version, package_dir, venv, torch_cuda, torch, patched"),
    "nvcc version": ("/opt/cuda/13.0.2/bin/nvcc --version", "nvcc_release", "cuda_toolkit_version", [], NVCC_VERSION, "13.0",
                     "nvcc's version text with its release (\"Cuda compilation tools, release M.m\")"),
    "nvcc archs": ("/opt/cuda/13.0.2/bin/nvcc --list-gpu-arch", "gpu_archs", "cuda_toolkit_version", [],
                   "compute_90\ncompute_100\ncompute_103\ncompute_120\n", ["compute_90", "compute_100", "compute_103", "compute_120"],
                   "the compute_XX names of the targets nvcc builds"),
}
GARBAGE = "Welcome to the login banner\n"


def result(stdout, rc=0, stderr=""):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "changed": False}


@pytest.mark.parametrize("reader", READERS)
def test_good_output_reads(reader):
    command, kind, variable, keys, good, value, _expected = READERS[reader]
    assert read(result(good), command, kind, variable, keys) == {"value": value, "problem": None}


@pytest.mark.parametrize("bad, printed", [(GARBAGE, "'Welcome to the login banner'"), ("", "nothing"), ("  \n", "nothing")],
                         ids=["garbage", "empty", "blank"])
@pytest.mark.parametrize("reader", READERS)
def test_garbage_and_empty_output_is_one_sentence(reader, bad, printed):
    command, kind, variable, keys, _good, _value, expected = READERS[reader]
    assert read(result(bad), command, kind, variable, keys) == {"value": None, "problem": (
        "%s printed %s, where %s was expected; check %s" % (command, printed, expected, variable))}


@pytest.mark.parametrize("reader", READERS)
def test_truncated_output_is_one_sentence(reader):
    command, kind, variable, keys, good, _value, expected = READERS[reader]
    cut = good[:12]  # half a JSON object, the banner of nvcc --version, a partial name
    got = read(result(cut), command, kind, variable, keys)
    assert got == {"value": None, "problem": "%s printed %r, where %s was expected; check %s" % (
        command, cut.strip(), expected, variable)}


@pytest.mark.parametrize("reader", READERS)
def test_a_failed_command_gives_its_status_and_the_last_line_of_its_errors(reader):
    command, kind, variable, keys, good, _value, expected = READERS[reader]
    stderr = "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'x'\n"
    got = read(result(good, rc=1, stderr=stderr), command, kind, variable, keys)
    assert got["value"] is None
    assert got["problem"] == "%s exited with status 1, printing %s (standard error: %s), where %s was expected; check %s" % (
        command, shown(good), "\"ModuleNotFoundError: No module named 'x'\"", expected, variable)


def test_json_needs_an_object_with_every_key():
    assert read(result('["version"]'), "c", "json", "v", ["version"])["problem"] == (
        "c printed '[\"version\"]', where a JSON object with version was expected; check v")
    assert read(result('{"version": "3"}'), "c", "json", "v", ["version", "abi"])["value"] is None
    assert read(result('{"a": 1}'), "c", "json", "v")["value"] == {"a": 1}


def test_long_output_is_cut_and_a_command_that_did_not_run_is_named():
    long = "x" * 500
    assert read(result(long), "c", "json", "v")["problem"] == (
        "c printed %r, where a JSON object was expected; check v" % ("x" * 160 + "..."))
    assert read({"msg": "[Errno 2] No such file or directory: b'/opt/cuda/bin/nvcc'"}, "c", "nvcc_release", "v")["problem"] == (
        "c did not run ([Errno 2] No such file or directory: b'/opt/cuda/bin/nvcc'), printing nothing (standard error: nothing), "
        "where nvcc's version text with its release (\"Cuda compilation tools, release M.m\") was expected; check v")
    assert read(None, "c", "gpu_archs", "v")["problem"].startswith("c did not run (no exit status)")


def test_an_arch_list_with_anything_but_compute_names_does_not_read():
    assert read(result("compute_120\nsm_120\n"), "c", "gpu_archs", "v")["value"] is None
    assert read(result("compute_100a compute_120f"), "c", "gpu_archs", "v")["value"] == ["compute_100a", "compute_120f"]


def test_the_filter_is_the_function_and_names_a_wrong_kind():
    assert host_output(result(NVCC_VERSION), "nvcc", "nvcc_release", "v") == {"value": "13.0", "problem": None}
    with pytest.raises(AnsibleFilterError, match="kind 'yaml' is not one of json, nvcc_release, gpu_archs"):
        host_output(result(""), "c", "yaml", "v")


def test_a_program_that_could_not_start_is_named_with_the_reason():
    got = read({"rc": 2, "stdout": "", "stderr": "", "msg": "[Errno 2] No such file or directory: b'/opt/cuda/bin/nvcc'"},
               "/opt/cuda/bin/nvcc --version", "nvcc_release", "cuda_toolkit_version")
    assert got["problem"] == (
        "/opt/cuda/bin/nvcc --version exited with status 2, printing nothing (standard error: \"[Errno 2] No such file or "
        "directory: b'/opt/cuda/bin/nvcc'\"), where nvcc's version text with its release (\"Cuda compilation tools, release "
        "M.m\") was expected; check cuda_toolkit_version")
