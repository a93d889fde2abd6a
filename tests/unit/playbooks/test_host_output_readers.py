"""The roles' readers of host commands, run as the roles run them on this machine (a local connection):
nvcc (the cuda_toolkit role's verification, tasks/verify.yml, against a stand-in nvcc script - the
real one needs a CUDA toolkit; the host interpreter's probe: test_gateway_preflight.py). Anything but the expected
output ends the run in one line naming the command, what it printed and the variable to check; a good
answer passes. Before, garbage reached a Jinja filter raw (from_json: "Expecting value")."""

import sys

import pytest

from real_gateway import run_role_entry

NVCC_VERSION = "nvcc: NVIDIA (R) Cuda compiler driver\\nCuda compilation tools, release 13.0, V13.0.88\\n"


def fake_nvcc(tmp_path, version_text, archs_text, rc=0):
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text('#!/bin/sh\nif [ "$1" = --version ]; then printf "%s"; else printf "%s"; fi\nexit %d\n'
                    % (version_text, archs_text, rc))
    nvcc.chmod(0o755)
    return str(home)


def verify(tmp_path, version_text, archs_text, rc=0):
    home = fake_nvcc(tmp_path, version_text, archs_text, rc)
    rc, out = run_role_entry(tmp_path, "cuda_toolkit", "verify",
                             {"node": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
                             {"cuda_toolkit_home": home, "cuda_toolkit_version": "13.0.2", "cuda_toolkit_target_archs": ["12.0"],
                              "cuda_toolkit_install_method": "apt"})
    return home, (rc, " ".join(out.replace('\\"', '"').split()))


def test_a_good_nvcc_passes(tmp_path):
    rc, out = verify(tmp_path, NVCC_VERSION, "compute_100\\ncompute_120\\n")[1]
    assert rc == 0, out[-3000:]
    assert "nvcc 13.0 builds compute_120" in out


@pytest.mark.parametrize("version_text, archs_text, said", [
    ("Welcome to the login banner\\n", "compute_120\\n",
     "{home}/bin/nvcc --version printed 'Welcome to the login banner', where nvcc's version text with its release "
     "(\"Cuda compilation tools, release M.m\") was expected; check cuda_toolkit_version"),
    (NVCC_VERSION, "", "{home}/bin/nvcc --list-gpu-arch printed nothing, where the compute_XX names of the targets nvcc "
                       "builds was expected; check cuda_toolkit_version"),
    ("nvcc: NVIDIA (R) Cu", "compute_12", "{home}/bin/nvcc --version printed 'nvcc: NVIDIA (R) Cu', where nvcc's version text"),
], ids=["garbage", "empty", "truncated"])
def test_anything_else_from_nvcc_ends_in_one_line(tmp_path, version_text, archs_text, said):
    home, (rc, out) = verify(tmp_path, version_text, archs_text)
    assert rc != 0
    assert "cuda_toolkit: " + said.format(home=home) in out, out[-3000:]
    assert "Expecting value" not in out and "Traceback" not in out


def test_a_failing_nvcc_gives_its_status_and_error(tmp_path):
    home, (rc, out) = verify(tmp_path, "", "", rc=127)
    assert rc != 0
    assert ("cuda_toolkit: %s/bin/nvcc --version exited with status 127, printing nothing (standard error: nothing), where "
            "nvcc's version text" % home) in out, out[-3000:]
