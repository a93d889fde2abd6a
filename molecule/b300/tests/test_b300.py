"""The B300 lab node: CUDA 13.0 builds compute_103, FlashInfer targets 10.3a and its cache is warm."""

import glob
import json
import os

import pytest
from conftest import B300, UNIT_ENV, jit_dir

testinfra_hosts = ["podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order

ENV = "/etc/sglang/flashinfer.env"
PY = "/opt/sglang/current/bin/python"


def test_toolkit_builds_sm103a(host):
    assert "compute_103" in host.check_output("/opt/cuda/13.0.2/bin/nvcc --list-gpu-arch").split()


def test_env_file_targets_10_3a(host):
    assert "FLASHINFER_CUDA_ARCH_LIST=10.3a\n" in host.file(ENV).content_string


def test_flashinfer_itself_targets_10_3a(host):
    out = host.check_output(
        "runuser -u sglang -- env -i %s %s -c 'from flashinfer.jit import core, env; "
        "core.check_cuda_arch(); print(sorted(core.current_compilation_context.TARGET_CUDA_ARCHS), env.FLASHINFER_JIT_DIR)'"
        % (UNIT_ENV, PY)
    )
    assert out.split() == ["[(10,", "'3a')]", jit_dir(host, "103a")]


def test_sampling_is_warm_for_103a(host):
    so = host.file(jit_dir(host, "103a") + "/sampling/sampling.so")
    assert so.is_file and so.user == "sglang" and so.size > 100000
    # FlashInfer's own build file for it compiled for exactly this target.
    ninja = host.file(jit_dir(host, "103a") + "/sampling/build.ninja").content_string
    assert "-gencode=arch=compute_103a,code=sm_103a" in ninja
    assert "compute_120" not in ninja


def test_the_b300_node_exports_its_own_key_only(host):
    # The converge exported the node's kernel caches into the scenario's store (its host_vars): the
    # key of its targets, and its workspace holds 10.3a objects only. (A node of another key never
    # getting a key's artifact from one store: the last test of molecule/fleet/tests/test_fleet.py.)
    store = os.path.join(os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "..", "kernels")
    records = [json.load(open(path)) for path in glob.glob(os.path.join(store, "*.json"))]
    assert records and all(record["host"] == B300 and record["key"]["targets"] == ["10.3a"] for record in records), records
    assert host.check_output("ls /var/lib/sglang/kernel-caches/*/.cache/flashinfer/0.7.2") == "103a"


def test_the_node_is_debian_13_and_sglang_runs_on_the_sites_python_3_12(host):
    """README "Install": this scenario's node is the Debian 13 one (systemd 257; Python 3.13 runs
    Ansible's modules), and SGLang's venv is built from the CPython 3.12 in /usr/local that
    sglang_venv_python names (molecule/default/host_vars/molecule-b300/python.yml)."""
    assert host.file("/etc/debian_version").content_string.startswith("13.")
    assert host.check_output("systemctl --version").split()[1] == "257"
    assert host.check_output("python3 -c 'import sys; print(*sys.version_info[:2])'") == "3 13"
    assert "home = /usr/local/bin" in host.file("/opt/sglang/current/pyvenv.cfg").content_string
    assert host.check_output(
        "runuser -u sglang -- /opt/sglang/current/bin/python -c "
        "'import sys, sglang; print(*sys.version_info[:2], sglang.__version__)'") == "3 12 0.5.23"
