"""nvidia_gpu_info end to end: main() against a fake nvidia-smi that replays recorded output."""

import json
import os
import stat

import pytest

import module_runner
from module_runner import warnings_of
from ansible_collections.blackwell.sglang.plugins.modules import nvidia_gpu_info

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia_smi")

FAKE = """#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  topo) cat "{topo}"; exit {topo_rc} ;;
  --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version)
    [ "$2" = "--format=csv,noheader,nounits" ] || {{ echo "unexpected format $2" >&2; exit 2; }}
    cat "{query}"; exit {query_rc} ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


class FakeNvidiaSmi:
    """A shell script standing in for nvidia-smi; `calls` lists the argument lines it got."""

    def __init__(self, tmp_path, query, query_rc=0, topo="/dev/null", topo_rc=0):
        self.log = tmp_path / "calls.log"
        self.path = tmp_path / "bin" / "nvidia-smi"
        self.path.parent.mkdir()
        self.path.write_text(
            FAKE.format(
                log=self.log,
                query=os.path.join(FIXTURES, query),
                query_rc=query_rc,
                topo=topo if topo.startswith("/") else os.path.join(FIXTURES, topo),
                topo_rc=topo_rc,
            )
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)

    @property
    def calls(self):
        return self.log.read_text().splitlines() if self.log.exists() else []


def run_module(capsys, args, check_mode=False):
    return module_runner.run_module(nvidia_gpu_info.main, capsys, args, check_mode)


def test_rtx_pro_6000_host(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "rtx_pro_6000_x8.query.txt", topo="rtx_pro_6000_x8.topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["_rc"] == 0
    assert result["changed"] is False
    assert "failed" not in result
    assert result["present"] is True
    assert result["count"] == 8
    assert result["compute_capabilities"] == ["12.0"]
    assert result["driver_version"] == "580.95.05"
    assert result["interconnect"] == "pcie"
    # Each pair's link, for the custom all-reduce rule: a PCIe switch per pair, the host bridge across.
    assert result["topology"]["0"] == {"1": "PIX", "2": "NODE", "3": "NODE", "4": "SYS", "5": "SYS", "6": "SYS", "7": "SYS"}
    assert sorted(result["topology"]) == [str(i) for i in range(8)] and result["topology"]["7"]["6"] == "PIX"
    assert result["error"] is None
    assert result["gpus"][0] == {
        "index": 0,
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "uuid": "GPU-5e6f33d1-99b1-4244-a573-942498a4a201",
        "compute_capability": "12.0",
        "memory_mib": 97887,
        "driver_version": "580.95.05",
    }
    assert [gpu["index"] for gpu in result["gpus"]] == list(range(8))
    assert smi.calls == [
        "--query-gpu=index,name,uuid,compute_cap,memory.total,driver_version --format=csv,noheader,nounits",
        "topo -m",
    ]


def test_b300_host_is_nvlink(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt", topo="b300_x8.topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["present"] is True
    assert result["count"] == 8
    assert result["compute_capabilities"] == ["10.3"]
    assert result["interconnect"] == "nvlink"
    assert {gpu["name"] for gpu in result["gpus"]} == {"NVIDIA B300 SXM6 AC"}
    assert {gpu["memory_mib"] for gpu in result["gpus"]} == {275040}


@pytest.mark.parametrize(
    "name,cc,memory,driver",
    [("h200_x1", "9.0", 143771, "570.172.08"), ("gb10_x1", "12.1", None, "580.95.05")],
)
def test_single_gpu_skips_topology(tmp_path, capsys, name, cc, memory, driver):
    smi = FakeNvidiaSmi(tmp_path, name + ".query.txt", topo=name + ".topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["present"] is True
    assert result["count"] == 1
    assert result["compute_capabilities"] == [cc]
    assert result["gpus"][0]["memory_mib"] == memory
    assert result["driver_version"] == driver
    assert (result["interconnect"], result["topology"]) == ("none", {})
    assert len(smi.calls) == 1 and not smi.calls[0].startswith("topo")


def test_check_mode_reports_the_same(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt", topo="b300_x8.topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)}, check_mode=True)
    assert result["present"] is True
    assert result["interconnect"] == "nvlink"
    assert result["changed"] is False


def test_found_on_path(tmp_path, capsys, monkeypatch):
    smi = FakeNvidiaSmi(tmp_path, "h200_x1.query.txt")
    monkeypatch.setenv("PATH", os.pathsep.join([str(smi.path.parent), os.environ["PATH"]]))
    result = run_module(capsys, {})
    assert result["present"] is True
    assert result["gpus"][0]["name"] == "NVIDIA H200"
    assert len(smi.calls) == 1


def test_no_nvidia_smi_is_not_a_failure(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    # get_bin_path also looks in the sbin directories, whatever PATH says.
    if any(os.path.exists(os.path.join(d, "nvidia-smi")) for d in ("/sbin", "/usr/sbin", "/usr/local/sbin")):
        pytest.skip("this machine has nvidia-smi in an sbin directory")
    result = run_module(capsys, {})
    assert result["_rc"] == 0
    assert "failed" not in result
    assert result["present"] is False
    assert result["gpus"] == []
    assert result["count"] == 0
    assert result["compute_capabilities"] == []
    assert result["driver_version"] is None
    assert result["interconnect"] == "none"
    assert result["error"] == "nvidia-smi not found on PATH; the NVIDIA driver is not installed on this host"


def test_nvidia_smi_path_that_is_not_there(tmp_path, capsys):
    result = run_module(capsys, {"nvidia_smi_path": str(tmp_path / "nope" / "nvidia-smi")})
    assert "failed" not in result
    assert result["present"] is False
    assert result["error"] == "nvidia_smi_path %s is not an executable file" % (tmp_path / "nope" / "nvidia-smi")


@pytest.mark.parametrize(
    "fixture,rc,error",
    [
        (
            "driver_not_loaded.txt",
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.",
        ),
        ("no_devices.txt", 6, "No devices were found"),
        ("no_devices.txt", 0, "No devices were found"),  # whatever the exit status
        (
            "driver_library_mismatch.txt",
            18,
            "Failed to initialize NVML: Driver/library version mismatch NVML library version: 580.95",
        ),
        ("h200_x1.query.txt", 15, None),  # unrecognised non-zero exit: see the next test
    ],
)
def test_driver_errors_are_reported_not_failed(tmp_path, capsys, fixture, rc, error):
    smi = FakeNvidiaSmi(tmp_path, fixture, query_rc=rc)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["_rc"] == 0
    assert "failed" not in result
    assert result["present"] is False
    assert result["gpus"] == [] and result["count"] == 0
    if error is None:
        assert result["error"].startswith("nvidia-smi exited with rc 15: 0, NVIDIA H200, GPU-")
    else:
        assert result["error"] == error
    assert len(smi.calls) == 1  # no topo without GPUs


def test_non_zero_exit_without_output(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "/dev/null", query_rc=4)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["present"] is False
    assert result["error"] == "nvidia-smi exited with rc 4: no output"


def test_topology_failure_leaves_interconnect_unknown(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt", topo="driver_not_loaded.txt", topo_rc=9)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["present"] is True
    assert result["count"] == 8
    assert result["interconnect"] == "unknown"
    # ansible-core 2.19 sends warnings as structured events; older releases as plain strings.
    assert "nvidia-smi topo -m failed, interconnect unknown: NVIDIA-SMI has failed" in json.dumps(result["warnings"])


def test_unparseable_gpu_list_fails(tmp_path, capsys):
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("index, name\n0, something\n")
    smi = FakeNvidiaSmi(tmp_path, str(garbage))
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["_rc"] == 1
    assert result["failed"] is True
    assert "could not parse the output of" in result["msg"]
    assert "expected 6 comma-separated fields" in result["msg"]


GPU_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "gpu")


@pytest.mark.parametrize("text,flavour", [
    (open(os.path.join(GPU_FIXTURES, "h200-x1", "driver_version.txt")).read(), "open"),  # an H200 machine's file
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec  8 11:22:45 UTC 2025\n", "proprietary"),
    (None, None),  # no /proc/driver/nvidia/version (a container that does not mount it)
])
def test_kernel_module_flavour(tmp_path, capsys, monkeypatch, text, flavour):
    version_file = tmp_path / "version"
    if text is not None:
        version_file.write_text(text)
    monkeypatch.setattr(nvidia_gpu_info, "NVRM_VERSION_FILE", str(version_file))
    smi = FakeNvidiaSmi(tmp_path, "rtx_pro_6000_x8.query.txt", topo="rtx_pro_6000_x8.topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["kernel_module"] == flavour


def test_no_gpus_no_kernel_module(tmp_path, capsys):
    result = run_module(capsys, {"nvidia_smi_path": str(tmp_path / "missing")})
    assert result["present"] is False and result["kernel_module"] is None


# ---- each reading and message whole (the mutation run's survivors) ----

def query_file(tmp_path, text):
    path = tmp_path / "query.txt"
    path.write_text(text)
    return str(path)


def test_a_directory_as_nvidia_smi_path_is_not_executable(tmp_path, capsys):
    (tmp_path / "bin").mkdir()
    result = run_module(capsys, {"nvidia_smi_path": str(tmp_path / "bin")})
    assert result["error"] == "nvidia_smi_path %s is not an executable file" % (tmp_path / "bin")


def test_nvidia_smi_path_is_a_path_with_the_home_expanded(tmp_path, capsys, monkeypatch):
    smi = FakeNvidiaSmi(tmp_path, "h200_x1.query.txt")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run_module(capsys, {"nvidia_smi_path": "~/bin/nvidia-smi"})
    assert (result["present"], result["count"]) == (True, 1)


def test_an_unknown_exit_names_what_both_streams_said(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "/dev/null", query_rc=4)
    smi.path.write_text("#!/bin/sh\necho ' out '\necho 'err' >&2\nexit 4\n")
    assert run_module(capsys, {"nvidia_smi_path": str(smi.path)})["error"] == "nvidia-smi exited with rc 4: out\nerr"
    smi.path.write_text("#!/bin/sh\necho '  '\necho 'err' >&2\nexit 4\n")
    assert run_module(capsys, {"nvidia_smi_path": str(smi.path)})["error"] == "nvidia-smi exited with rc 4: err"


def test_nvidia_smi_runs_in_the_c_locale(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "/dev/null")
    smi.path.write_text("#!/bin/sh\necho \"$LC_ALL/$LANG\" >&2\nexit 4\n")
    assert run_module(capsys, {"nvidia_smi_path": str(smi.path)})["error"] == "nvidia-smi exited with rc 4: C/C"


def test_a_driver_error_on_stderr_explains_unreadable_output(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "/dev/null")
    smi.path.write_text("#!/bin/sh\necho 'garbage'\necho 'No devices were found' >&2\n")
    assert run_module(capsys, {"nvidia_smi_path": str(smi.path)})["error"] == "No devices were found"


def test_an_unparseable_list_fails_with_the_command_and_its_output(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, query_file(tmp_path, "index, name\n"))
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert (result["msg"], result["rc"], result["stdout"], result["stderr"]) == (
        "could not parse the output of %s --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version "
        "--format=csv,noheader,nounits: expected 6 comma-separated fields (index, name, uuid, compute_cap, memory.total, "
        "driver_version), got 'index, name'" % smi.path,
        0, "index, name\n", "")


def test_an_empty_list_is_no_gpu(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "/dev/null")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert (result["present"], result["error"]) == (False, "nvidia-smi listed no GPU")


def test_two_gpus_of_two_generations_read_the_topology_and_sort_by_version(tmp_path, capsys):
    text = open(os.path.join(FIXTURES, "h200_x1.query.txt")).read() + open(os.path.join(FIXTURES, "b300_x8.query.txt")).readlines()[1]
    smi = FakeNvidiaSmi(tmp_path, query_file(tmp_path, text), topo="rtx_pro_6000_x8.topo.txt")
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert result["compute_capabilities"] == ["9.0", "10.3"]
    assert result["interconnect"] == "pcie" and smi.calls[-1] == "topo -m"


@pytest.mark.parametrize("topo, topo_rc, warning", [
    ("/dev/null", 3, "nvidia-smi topo -m failed, interconnect unknown: nvidia-smi exited with rc 3: no output"),
    ("h200_x1.query.txt", 3, "nvidia-smi topo -m failed, interconnect unknown: nvidia-smi exited with rc 3: 0, NVIDIA "
                             "H200, GPU-136776ba-b0aa-4150-9136-8edbb71703a0, 9.0, 143771, 570.172.08"),
    ("driver_not_loaded.txt", 0, "could not read nvidia-smi topo -m, interconnect unknown: no GPU header line (GPU0 GPU1 ...) in "
                                 "nvidia-smi topo -m output"),
])
def test_a_topology_that_cannot_be_read_is_one_warning(tmp_path, capsys, topo, topo_rc, warning):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt", topo=topo, topo_rc=topo_rc)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert (result["interconnect"], result["topology"], warnings_of(result)) == ("unknown", {}, [warning])


def test_a_topology_command_that_cannot_start_is_one_warning(tmp_path, capsys, monkeypatch):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt")
    run = nvidia_gpu_info._run

    def topo_cannot_start(module, nvidia_smi, args):
        if tuple(args) == ("topo", "-m"):
            raise OSError(8, "Exec format error")
        return run(module, nvidia_smi, args)
    monkeypatch.setattr(nvidia_gpu_info, "_run", topo_cannot_start)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert warnings_of(result) == [
        "nvidia-smi topo -m failed, interconnect unknown: cannot run %s (Exec format error): reinstall the NVIDIA "
        "driver (its nvidia-smi is damaged) or set nvidia_smi_path to a working nvidia-smi" % smi.path]


def test_a_topology_failure_names_what_nvidia_smi_printed_on_stderr(tmp_path, capsys):
    smi = FakeNvidiaSmi(tmp_path, "b300_x8.query.txt")
    query = os.path.join(FIXTURES, "b300_x8.query.txt")
    smi.path.write_text('#!/bin/sh\n[ "$1" = topo ] && { echo "topology unavailable" >&2; exit 3; }\ncat "%s"\n' % query)
    result = run_module(capsys, {"nvidia_smi_path": str(smi.path)})
    assert warnings_of(result) == [
        "nvidia-smi topo -m failed, interconnect unknown: nvidia-smi exited with rc 3: topology unavailable"]
