"""The PRO 6000 lab node after site.yml: a verified CUDA 13.0.2 home from NVIDIA's wheels."""

import pytest

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

CUDA_HOME = "/opt/cuda/13.0.2"
NVCC = CUDA_HOME + "/bin/nvcc"
SOURCE = r"""
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void fill(int *out) { out[threadIdx.x] = threadIdx.x; }
int main() {
  int driver = 0, *d = nullptr;
  std::printf("driver API: %d\n", (int)cuDriverGetVersion(&driver));  // resolved from lib64/stubs at link time
  cudaError_t err = cudaMalloc(&d, 64 * sizeof(int));
  std::printf("%s\n", cudaGetErrorString(err));
  fill<<<1, 64>>>(d);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""


def test_nvcc_is_the_requested_release(host):
    out = host.check_output(NVCC + " --version")
    assert "release 13.0," in out


def test_nvcc_lists_the_blackwell_targets(host):
    archs = host.check_output(NVCC + " --list-gpu-arch").split()
    assert "compute_120" in archs
    assert "compute_103" in archs


@pytest.mark.parametrize(
    "gencode,sm",
    [("arch=compute_120,code=sm_120", "sm_120"), ("arch=compute_103a,code=sm_103a", "sm_103a")],
)
def test_cuda_cpp_compiles_and_links_against_cudart(host, gencode, sm):
    host.run("mkdir -p /tmp/cudatest")
    host.check_output("cat > /tmp/cudatest/probe.cu <<'EOF'\n%s\nEOF" % SOURCE)
    exe = "/tmp/cudatest/probe_" + sm
    cmd = host.run(
        "%s -gencode %s -cudart shared -lcuda -o %s /tmp/cudatest/probe.cu" % (NVCC, gencode, exe)
    )
    assert cmd.rc == 0, cmd.stderr
    needed = host.check_output("readelf -d %s" % exe)
    assert "[libcudart.so.13]" in needed
    assert "[libcuda.so.1]" in needed
    # The embedded device image was assembled by ptxas for exactly this target.
    assert "-arch %s -m 64" % sm in host.check_output("strings " + exe)


def test_cuda_home_layout(host):
    for path in ("bin", "include", "nvvm/bin/cicc", "nvvm/libdevice", "include/cuda_runtime.h",
                 "include/curand.h", "lib64/libcudart.so", "lib64/libcudart.so.13"):
        assert host.file(CUDA_HOME + "/" + path).exists, path
    assert host.file(CUDA_HOME + "/lib64/libcudart.so").linked_to.endswith("libcudart.so.13")


def test_driver_stub_has_the_driver_soname(host):
    stub = CUDA_HOME + "/lib64/stubs/libcuda.so"
    assert host.file(stub).is_file
    dyn = host.check_output("readelf -d " + stub)
    assert "Library soname: [libcuda.so.1]" in dyn
    symbols = host.check_output("nm -D --defined-only " + stub)
    for name in ("cuInit", "cuLaunchKernel", "cuMemAlloc_v2", "cuGetErrorString"):
        assert " T %s\n" % name in symbols + "\n", name


def test_env_file_for_units(host):
    env = host.file("/etc/default/cuda-toolkit")
    assert env.mode == 0o644
    lines = dict(
        line.split("=", 1) for line in env.content_string.splitlines() if line and not line.startswith("#")
    )
    assert lines["CUDA_HOME"] == CUDA_HOME
    assert lines["PATH"].split(":")[0] == CUDA_HOME + "/bin"


def test_env_file_wins_over_distro_nvcc(host):
    # prepare.yml put a fake release-11.8 nvcc in /usr/bin.
    assert "release 11.8" in host.check_output("/usr/bin/nvcc --version")
    out = host.check_output(
        "env -i $(grep -v '^#' /etc/default/cuda-toolkit | xargs) sh -c 'command -v nvcc; nvcc --version'"
    )
    assert out.splitlines()[0] == NVCC
    assert "release 13.0," in out


def test_login_shell_profile(host):
    assert host.file("/etc/profile.d/cuda.sh").mode == 0o644
    out = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc; nvcc --version'")
    lines = out.splitlines()
    assert lines[0] == CUDA_HOME
    assert lines[1] == NVCC
    assert "release 13.0," in out
