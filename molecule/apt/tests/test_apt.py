"""The apt node after site.yml: cuda-toolkit-13-0 13.0.2-1 from the (local, fake) NVIDIA repository.

prepare.yml serves a stand-in repository holding 13.0.2-1 and a newer 13.0.3-1; the role must
install exactly 13.0.2-1 and keep it there with its apt pin and a dpkg hold, and bring a host
that drifted past the hold back to it.
"""

import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PACKAGE = "cuda-toolkit-13-0"
WANTED = "13.0.2-1"
NEWER = "13.0.3-1"
CUDA_HOME = "/usr/local/cuda-13.0"


def test_the_requested_version_is_installed(host):
    pkg = host.package(PACKAGE)
    assert pkg.is_installed
    assert pkg.version == WANTED


def test_the_newer_version_is_available_but_not_the_candidate(host):
    policy = host.check_output("apt-cache policy " + PACKAGE)
    assert NEWER in policy, policy
    assert re.search(r"^\s*Installed: " + re.escape(WANTED) + "$", policy, re.M), policy
    assert re.search(r"^\s*Candidate: " + re.escape(WANTED) + "$", policy, re.M), policy


def test_an_upgrade_leaves_the_toolkit_alone(host):
    simulated = host.check_output("apt-get -s upgrade")
    assert "Inst " + PACKAGE not in simulated, simulated


def test_the_toolkit_is_held(host):
    selection = host.check_output("dpkg --get-selections " + PACKAGE).split()
    assert selection == [PACKAGE, "hold"]


def test_the_pin_names_the_exact_version(host):
    pin = host.file("/etc/apt/preferences.d/cuda-toolkit-pin")
    assert pin.is_file
    assert pin.contains("^Package: " + PACKAGE + "$")
    assert pin.contains("^Pin: version " + WANTED + "$")
    assert pin.contains("^Pin-Priority: 1001$")


def test_the_keyring_is_installed(host):
    assert host.package("cuda-keyring").is_installed
    assert host.file("/usr/share/keyrings/cuda-archive-keyring.gpg").is_file
    assert host.file("/etc/apt/sources.list.d/cuda-debian12-x86_64.list").contains("127.0.0.1:8088")


def test_nvcc_is_the_installed_version(host):
    out = host.check_output(CUDA_HOME + "/bin/nvcc --version")
    assert "release 13.0, V13.0.88" in out  # the 13.0.2-1 test double, not 13.0.3-1's


def test_environment_file(host):
    env = dict(
        line.split("=", 1)
        for line in host.file("/etc/default/cuda-toolkit").content_string.splitlines()
        if line and not line.startswith("#")
    )
    assert env["CUDA_HOME"] == CUDA_HOME
    assert env["PATH"].startswith(CUDA_HOME + "/bin:")


def test_profile_script_exports_cuda_home(host):
    assert host.file("/etc/profile.d/cuda.sh").contains("^export CUDA_HOME=" + CUDA_HOME + "$")
    out = host.check_output("sh -c '. /etc/profile.d/cuda.sh; echo \"$CUDA_HOME\"; command -v nvcc'")
    assert out.splitlines() == [CUDA_HOME, CUDA_HOME + "/bin/nvcc"]


def run_site(*args):
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".cache", "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    return subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, "site.yml"), *args],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )


# Last: it changes the host (and leaves it as it found it when it passes).
def test_a_drifted_toolkit_is_brought_back_to_the_pin(host):
    host.check_output(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages %s=%s", PACKAGE, NEWER
    )
    assert host.package(PACKAGE).version == NEWER
    result = run_site("--tags", "cuda_toolkit_install")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert host.package(PACKAGE).version == WANTED
    assert host.check_output("dpkg --get-selections " + PACKAGE).split() == [PACKAGE, "hold"]
    assert "release 13.0, V13.0.88" in host.check_output(CUDA_HOME + "/bin/nvcc --version")


# After the drift test (the host is at the pin again). Each changes nvcc, and puts it back.
# An nvcc that is not what the pinned package installed (a hand edit, a broken file): the package
# is at the pinned version, so nothing reinstalls it, and the verify must fail saying what it found.
@pytest.mark.parametrize("release,archs,found", [
    ("12.8", "compute_90 compute_120", "is release 12.8 (wanted 13.0 for 13.0.2); targets missing from --list-gpu-arch: none"),
    ("13.0", "compute_80 compute_90", "is release 13.0 (wanted 13.0 for 13.0.2); targets missing from --list-gpu-arch: compute_120"),
], ids=["wrong release", "target missing"])
def test_a_toolkit_that_does_not_verify_fails_the_play_with_what_it_found(host, release, archs, found):
    nvcc = CUDA_HOME + "/bin/nvcc"
    host.check_output("cp -p %s /tmp/nvcc.good" % nvcc)
    host.check_output(
        "printf '#!/bin/sh\\ncase \"$1\" in --version) echo \"Cuda compilation tools, release %s, V%s.1\";; "
        "--list-gpu-arch) echo %s;; esac\\n' > %s" % (release, release, archs, nvcc))
    try:
        result = run_site("--tags", "cuda_toolkit_configure")
    finally:
        host.check_output("cp -p /tmp/nvcc.good %s" % nvcc)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert "%s/bin/nvcc %s" % (CUDA_HOME, found) in output, output
