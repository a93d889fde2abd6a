"""Parsers for recorded nvidia-smi output (fixtures/nvidia_smi/)."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import nvidia_smi

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia_smi")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


# ---- --query-gpu ----

@pytest.mark.parametrize(
    "name,count,gpu_name,cc,memory,driver",
    [
        ("rtx_pro_6000_x8", 8, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887, "580.95.05"),
        ("b300_x8", 8, "NVIDIA B300 SXM6 AC", "10.3", 275040, "580.95.05"),
        ("h200_x1", 1, "NVIDIA H200", "9.0", 143771, "570.172.08"),
        ("gb10_x1", 1, "NVIDIA GB10", "12.1", None, "580.95.05"),  # unified memory: [N/A]
    ],
)
def test_parse_query_gpu(name, count, gpu_name, cc, memory, driver):
    gpus = nvidia_smi.parse_query_gpu(fixture(name + ".query.txt"))
    assert [gpu["index"] for gpu in gpus] == list(range(count))
    for gpu in gpus:
        assert gpu["name"] == gpu_name
        assert gpu["compute_capability"] == cc
        assert gpu["memory_mib"] == memory
        assert gpu["driver_version"] == driver
        assert gpu["uuid"].startswith("GPU-") and len(gpu["uuid"]) == 40
    assert len(set(gpu["uuid"] for gpu in gpus)) == count


def test_parse_query_gpu_types_and_order():
    text = (
        "1, NVIDIA H200, GPU-bbbbbbbb-0000-0000-0000-000000000001, 9.0, 143771, 570.172.08\n"
        "\n"
        "0, NVIDIA H200, GPU-aaaaaaaa-0000-0000-0000-000000000000, 9.0, 143771, 570.172.08\n"
    )
    assert nvidia_smi.parse_query_gpu(text) == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
            "compute_capability": "9.0",
            "memory_mib": 143771,
            "driver_version": "570.172.08",
        },
        {
            "index": 1,
            "name": "NVIDIA H200",
            "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000001",
            "compute_capability": "9.0",
            "memory_mib": 143771,
            "driver_version": "570.172.08",
        },
    ]


def test_a_comma_in_the_name_does_not_shift_the_fields():
    gpus = nvidia_smi.parse_query_gpu("0, Odd, Name, GPU-x, 12.0, 97887, 580.95.05\n")
    assert gpus[0]["name"] == "Odd, Name"
    assert gpus[0]["compute_capability"] == "12.0"
    assert gpus[0]["memory_mib"] == 97887


def test_empty_output_is_no_gpu():
    assert nvidia_smi.parse_query_gpu("") == []
    assert nvidia_smi.parse_query_gpu("\n\n") == []


FIELDS = "expected 6 comma-separated fields (index, name, uuid, compute_cap, memory.total, driver_version), got "


@pytest.mark.parametrize(
    "text,message",
    [
        ("0, NVIDIA H200, GPU-x, 9.0\n", FIELDS + "'0, NVIDIA H200, GPU-x, 9.0'"),
        ("0, NVIDIA H200, GPU-x, 9.0, 143771 MiB, 570.172.08\n",
         "memory.total '143771 MiB' is not a whole number in line '0, NVIDIA H200, GPU-x, 9.0, 143771 MiB, 570.172.08'"),
        ("one, NVIDIA H200, GPU-x, 9.0, 143771, 570.172.08\n",
         "index 'one' is not a whole number in line 'one, NVIDIA H200, GPU-x, 9.0, 143771, 570.172.08'"),
        ("0, NVIDIA H200, GPU-x, sm90, 143771, 570.172.08\n",
         "compute_cap 'sm90' is not of the form M.m in line '0, NVIDIA H200, GPU-x, sm90, 143771, 570.172.08'"),
        ("[N/A], NVIDIA H200, GPU-x, 9.0, 143771, 570.172.08\n",
         "GPU index missing in line '[N/A], NVIDIA H200, GPU-x, 9.0, 143771, 570.172.08'"),
        (fixture("no_devices.txt"), FIELDS + "'No devices were found'"),
    ],
)
def test_parse_query_gpu_rejects_what_it_does_not_understand(text, message):
    with pytest.raises(nvidia_smi.NvidiaSmiParseError) as info:
        nvidia_smi.parse_query_gpu(text)
    assert str(info.value) == message


def test_parse_query_gpu_of_nothing_is_no_gpu():
    assert nvidia_smi.parse_query_gpu(None) == [] and nvidia_smi.parse_query_gpu("\n  \n") == []


# ---- topo -m ----

def test_topology_rtx_pro_6000_is_pcie():
    matrix = nvidia_smi.parse_topology(fixture("rtx_pro_6000_x8.topo.txt"))
    assert sorted(matrix) == list(range(8))
    assert all(sorted(peers) == [p for p in range(8) if p != gpu] for gpu, peers in matrix.items())
    assert matrix[0][1] == "PIX"
    assert matrix[0][2] == "NODE"
    assert matrix[0][7] == "SYS"
    assert matrix[7][6] == "PIX"
    assert nvidia_smi.interconnect(matrix) == "pcie"


def test_topology_b300_is_nvlink():
    matrix = nvidia_smi.parse_topology(fixture("b300_x8.topo.txt"))
    assert sorted(matrix) == list(range(8))
    assert set(link for peers in matrix.values() for link in peers.values()) == {"NV18"}
    # NIC columns (PIX to the GPU's own ConnectX) are not GPU links.
    assert all(len(peers) == 7 for peers in matrix.values())
    assert nvidia_smi.interconnect(matrix) == "nvlink"


@pytest.mark.parametrize("name", ["h200_x1", "gb10_x1"])
def test_topology_single_gpu_is_none(name):
    matrix = nvidia_smi.parse_topology(fixture(name + ".topo.txt"))
    assert matrix == {0: {}}
    assert nvidia_smi.interconnect(matrix) == "none"


def test_topology_with_spaces_and_colour_codes():
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
        "GPU0     X      \x1b[32mNV12\x1b[0m    0-31    0               N/A\n"
        "GPU1    \x1b[32mNV12\x1b[0m     X      0-31    0               N/A\n"
    )
    matrix = nvidia_smi.parse_topology(text)
    assert matrix == {0: {1: "NV12"}, 1: {0: "NV12"}}
    assert nvidia_smi.interconnect(matrix) == "nvlink"


def test_partial_nvlink_counts_as_pcie():
    # NVLink bridges joining pairs only: tensor parallel over 4 GPUs still crosses PCIe.
    text = (
        "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV4\tSYS\tSYS\t0-31\t0\t\tN/A\n"
        "GPU1\tNV4\t X \tSYS\tSYS\t0-31\t0\t\tN/A\n"
        "GPU2\tSYS\tSYS\t X \tNV4\t32-63\t1\t\tN/A\n"
        "GPU3\tSYS\tSYS\tNV4\t X \t32-63\t1\t\tN/A\n"
    )
    assert nvidia_smi.interconnect(nvidia_smi.parse_topology(text)) == "pcie"


def test_interconnect_rejects_unknown_links():
    with pytest.raises(nvidia_smi.NvidiaSmiParseError) as info:
        nvidia_smi.interconnect({0: {1: "CXL", 2: "PIX"}, 1: {0: "CXL", 2: "UPI"}, 2: {0: "PIX", 1: "UPI"}})
    assert str(info.value) == "unknown GPU link type(s) in nvidia-smi topo -m: CXL, UPI"


NO_HEADER = "no GPU header line (GPU0 GPU1 ...) in nvidia-smi topo -m output"


@pytest.mark.parametrize(
    "text,message",
    [
        ("", NO_HEADER),
        (None, NO_HEADER),
        (fixture("driver_not_loaded.txt"), NO_HEADER),
        ("GPU0\t X \tNV18\nGPU1\tNV18\t X \n", "nvidia-smi topo -m output has a GPU row before its header line"),
        ("GPU0\t X \n", "nvidia-smi topo -m output has a GPU row before its header line"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \n", "topology row 'GPU0\\t X' has fewer cells than GPU columns"),
    ],
)
def test_parse_topology_rejects_what_it_does_not_understand(text, message):
    with pytest.raises(nvidia_smi.NvidiaSmiParseError) as info:
        nvidia_smi.parse_topology(text)
    assert str(info.value) == message


def test_parse_topology_skips_lines_that_are_not_gpu_rows_wherever_they_are():
    text = (
        "\n"
        "Legend:\n"
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\n"
        "NIC0\tPIX\tSYS\t X \n"
        "GPU0\t X \tNV18\tPIX\t0-31\n"
        "\n"
        "GPU1\tNV18\t X \tSYS\t0-31\n"
        "X\n"
    )
    assert nvidia_smi.parse_topology(text) == {0: {1: "NV18"}, 1: {0: "NV18"}}


def test_a_header_with_a_single_gpu_column():
    assert nvidia_smi.parse_topology("GPU0\nGPU0\t X \t0-31\n") == {0: {}}


# ---- driver errors ----

@pytest.mark.parametrize(
    "name,expected",
    [
        (
            "driver_not_loaded.txt",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.",
        ),
        ("no_devices.txt", "No devices were found"),
        (
            "driver_library_mismatch.txt",
            "Failed to initialize NVML: Driver/library version mismatch NVML library version: 580.95",
        ),
    ],
)
def test_driver_error(name, expected):
    assert nvidia_smi.driver_error(fixture(name)) == expected


@pytest.mark.parametrize("name", ["rtx_pro_6000_x8.query.txt", "b300_x8.topo.txt", "gb10_x1.query.txt"])
def test_good_output_is_no_driver_error(name):
    assert nvidia_smi.driver_error(fixture(name)) is None


def test_driver_errors_keep_the_order_of_the_output():
    text = "No devices were found\nFailed to initialize NVML: Unknown Error\n"
    assert nvidia_smi.driver_error(text) == "No devices were found Failed to initialize NVML: Unknown Error"
    # ...not the order of the patterns the module looks for (NVML's comes after "No devices" there).
    text = "Failed to initialize NVML: Driver/library version mismatch\nNo devices were found\n"
    assert nvidia_smi.driver_error(text) == "Failed to initialize NVML: Driver/library version mismatch No devices were found"
    assert nvidia_smi.driver_error(None) is None


def test_driver_error_finds_a_lost_gpu_among_good_lines():
    text = (
        "0, NVIDIA B300 SXM6 AC, GPU-x, 10.3, 275040, 580.95.05\n"
        "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error\n"
    )
    assert nvidia_smi.driver_error(text) == "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
