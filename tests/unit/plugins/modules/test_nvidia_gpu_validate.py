"""nvidia_gpu_validate end to end: main() with a fake nvcc and a fake venv python (CI has no GPU;
the real probes ran on H200 machines, tests/gpu/README.md). What runs for real here: the module's
argument checks, the environment it builds from env files, the process handling (timeouts kill a
hanging all-reduce), the P2P retry and decision, the result and its failure message."""

import json
import os
import stat
import sys

import pytest

import module_runner
from module_runner import warnings_of
from ansible_collections.blackwell.sglang.plugins.modules import nvidia_gpu_validate

HERE = os.path.dirname(__file__)

# Stands in for nvcc: records its arguments, "builds" a program that answers like the real kernel
# probe on the GPU in CUDA_VISIBLE_DEVICES (a failure for GPUs listed in FAKE_KERNEL_FAIL).
FAKE_NVCC = """#!/bin/sh
echo "$*" >> "{log}"
out=""
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
[ -n "$FAKE_NVCC_FAIL" ] && {{ echo "nvcc fatal   : Unsupported gpu architecture 'compute_999'" >&2; exit 1; }}
cat > "$out" <<'PROG'
#!/bin/sh
case ",$FAKE_KERNEL_FAIL," in
  *",$CUDA_VISIBLE_DEVICES,"*)
    echo '{{"ok": false, "step": "kernel launch", "error": "cudaErrorNoKernelImageForDevice: no kernel image is available for execution on the device"}}'
    exit 1 ;;
esac
echo '{{"ok": true, "compute_capability": "9.0", "driver_api": 13000, "runtime_api": 13000}}'
PROG
chmod +x "$out"
"""


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


class Node:
    """A fake node: nvcc, the venv's python, and an env file as the flashinfer role writes it."""

    def __init__(self, tmp_path, monkeypatch, **fake):
        # The services' env settings reach the module through the task's `environment` keyword (its
        # process environment); the fakes read FAKE_* from there.
        monkeypatch.setenv("FAKE_LOG", str(tmp_path / "probes.log"))
        monkeypatch.setenv("HF_TOKEN", "hf_secret")
        for key, value in fake.items():
            monkeypatch.setenv("FAKE_" + key.upper(), value)
        self.nvcc_log, self.probe_log = tmp_path / "nvcc.log", tmp_path / "probes.log"
        cuda = tmp_path / "cuda" / "bin"
        cuda.mkdir(parents=True)
        executable(cuda / "nvcc", FAKE_NVCC.format(log=self.nvcc_log))
        self.python = executable(tmp_path / "python", "#!/bin/sh\nexec %s %s \"$@\"\n"
                                 % (sys.executable, os.path.join(HERE, "fake_gpu_probe.py")))
        self.env_file = tmp_path / "flashinfer.env"
        self.env_file.write_text("CUDA_HOME=%s\nFLASHINFER_CUDA_ARCH_LIST=9.0a\n" % cuda.parent)

    def args(self, **over):
        args = {"gpus": [0, 1], "services": {"eagle3": []}, "targets": ["9.0a"], "flashinfer_modules": ["sampling"],
                "env_file": [str(self.env_file)], "python": self.python, "timeout": 20}
        args.update(over)
        return args

    def probes(self):
        return [json.loads(line) for line in self.probe_log.read_text().splitlines()] if self.probe_log.exists() else []


def run(capsys, args, check_mode=False):
    return module_runner.run_module(nvidia_gpu_validate.main, capsys, args, check_mode)


def test_a_good_node_passes(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    result = run(capsys, node.args())
    assert result["_rc"] == 0 and result["status"] == "passed" and result["changed"] is False
    # nvcc built device code for the target (as FlashInfer builds it) from the env file's CUDA_HOME.
    assert "-gencode=arch=compute_90a,code=sm_90a" in node.nvcc_log.read_text()
    assert result["kernel"]["flags"] == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert [(g["index"], g["ok"], g["runtime_api"]) for g in result["kernel"]["gpus"]] == [(0, True, 13000), (1, True, 13000)]
    assert result["flashinfer"]["loaded"] == ["sampling"]
    assert [(g["index"], g["sampled"]) for g in result["flashinfer"]["gpus"]] == [(0, True), (1, True)]
    [nccl] = result["nccl"]
    assert (nccl["devices"], nccl["services"], nccl["ok"], nccl["p2p"], nccl["busbw_gbps"]) == ([0, 1], ["eagle3"], True, True, 21.5)
    assert result["nccl_p2p_disable_services"] == [] and result["nccl_p2p_tested"] == ["eagle3"]
    assert "all-reduce 0,1 21.5 GB/s" in result["summary"] and "kernel 9.0a ran on 0,1" in result["summary"]
    # One process per rank, on the service's GPUs, NVLink multicast off, P2P allowed.
    ranks = [p for p in node.probes() if p["probe"] == "allreduce"]
    assert sorted(p["rank"] for p in ranks) == ["0", "1"]
    assert {(p["devices"], p["nvls"], p["p2p_disable"]) for p in ranks} == {("0,1", "0", None)}
    assert "hf_secret" not in json.dumps(result)


def test_without_gpus_or_in_check_mode_nothing_runs(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    result = run(capsys, node.args(gpus=[]))
    assert (result["_rc"], result["status"], result["reason"]) == (0, "skipped", "no GPUs (nvidia-smi found none)")
    # The same keys as a validation that ran (the role and the report read them), each empty.
    expected = {
        "changed": False, "status": "skipped", "reason": "no GPUs (nvidia-smi found none)",
        "summary": "skipped: no GPUs (nvidia-smi found none)", "seconds": 0.0, "kernel": None, "flashinfer": None,
        "nccl": [], "nccl_p2p_disable_services": [], "nccl_p2p_tested": [], "backends": {}}
    assert {key: result.get(key, "missing") for key in expected} == expected
    assert set(result) - {"_rc", "invocation", "warnings"} == set(expected)
    result = run(capsys, node.args(), check_mode=True)
    assert (result["status"], result["reason"]) == ("skipped", "check mode: nothing runs on the GPUs")
    assert not node.nvcc_log.exists() and node.probes() == []


def test_auto_retries_a_hanging_all_reduce_without_p2p(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="hang")
    result = run(capsys, node.args(timeout=3))
    assert result["_rc"] == 0 and result["status"] == "passed"
    [nccl] = result["nccl"]
    assert [(a["p2p_disabled"], a["ok"]) for a in nccl["attempts"]] == [(False, False), (True, True)]
    assert "no answer within 3 s (a hang" in nccl["attempts"][0]["error"]
    assert nccl["attempts"][0]["seconds"] < 10  # killed, not waited for
    assert result["nccl_p2p_disable_services"] == ["eagle3"] and nccl["p2p"] is False
    assert "(NCCL_P2P_DISABLE=1)" in result["summary"]
    assert "passed with NCCL_P2P_DISABLE=1, which is now in the service" in json.dumps(result["warnings"])


def test_on_fails_when_p2p_fails(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail")
    result = run(capsys, node.args(nccl_p2p="on"))
    assert result["_rc"] == 1 and result["status"] == "failed"
    assert "NCCL all-reduce on GPUs 0,1: NCCL all-reduce failed with P2P: DistBackendError" in result["msg"]
    assert len(result["nccl"][0]["attempts"]) == 1  # no retry


def test_off_runs_without_p2p_only(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail")
    result = run(capsys, node.args(nccl_p2p="off"))
    assert result["status"] == "passed" and result["nccl_p2p_disable_services"] == ["eagle3"]
    assert {p["p2p_disable"] for p in node.probes() if p["probe"] == "allreduce"} == {"1"}


def test_auto_fails_when_both_fail(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail", no_p2p="fail")
    result = run(capsys, node.args())
    assert result["_rc"] == 1
    assert "failed with P2P (DistBackendError" in result["msg"] and "and with NCCL_P2P_DISABLE=1" in result["msg"]


def test_a_target_the_gpu_cannot_run_fails_naming_the_gpu(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, kernel_fail="1")
    result = run(capsys, node.args(targets=["10.0a"]))
    assert result["_rc"] == 1
    assert ("kernel on GPU 1 (targets 10.0a): cudaErrorNoKernelImageForDevice: no kernel image is available"
            in result["msg"])
    assert [g["ok"] for g in result["kernel"]["gpus"]] == [True, False]


def test_a_module_not_pre_warmed_fails(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, flashinfer="fail")
    result = run(capsys, node.args())
    assert result["_rc"] == 1 and "FlashInfer: RuntimeError: JIT module sampling is not pre-warmed" in result["msg"]


def test_nvcc_failure_is_reported(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, nvcc_fail="1")
    result = run(capsys, node.args())
    assert result["_rc"] == 1 and "nvcc could not build the kernel for 9.0a" in result["msg"]
    assert "Unsupported gpu architecture" in result["msg"]


def test_one_gpu_services_and_sets(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail")
    result = run(capsys, node.args(gpus=[0, 1, 2], services={"eagle3": [0, 1], "dflash": [2]}))
    # {0,1}: P2P failed, retried without; {2}: one GPU, run once as configured, P2P not decided.
    assert [(n["devices"], n["services"], n["ok"], n["tested"]) for n in result["nccl"]] == [
        ([0, 1], ["eagle3"], True, True), ([2], ["dflash"], True, False)]
    assert result["nccl_p2p_disable_services"] == ["eagle3"] and result["nccl_p2p_tested"] == ["eagle3"]
    assert [g["index"] for g in result["kernel"]["gpus"]] == [0, 1, 2]


def test_bad_input(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    assert "timeout must be > 0, got 0" in run(capsys, node.args(timeout=0))["msg"]
    assert "allreduce_mib must be > 0" in run(capsys, node.args(allreduce_mib=-1))["msg"]
    result = run(capsys, node.args(nccl_p2p="maybe"))
    assert result["_rc"] == 1 and "nccl_p2p" in result["msg"]
    result = run(capsys, node.args(env_file=[str(tmp_path / "missing.env")]))
    assert "cannot read env_file %s" % (tmp_path / "missing.env") in result["msg"]
    result = run(capsys, node.args(services={"eagle3": [0, 7]}))
    assert "service eagle3 uses GPU 7, which this host does not have (GPUs 0,1)" in result["msg"]
    result = run(capsys, node.args(targets=["twelve"]))
    assert result["_rc"] == 1 and "targets:" in result["msg"]
    assert node.probes() == []  # nothing ran on the GPUs for any of them


# ---- whole results and messages (the mutation run's survivors) ----

def test_a_good_node_s_result_in_full(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    result = run(capsys, node.args(allreduce_mib=1))  # 1 MiB is a size like any other
    seconds = result["seconds"]
    assert isinstance(seconds, float) and 0 <= seconds < 30 and round(seconds, 1) == seconds
    assert set(result) - {"_rc", "invocation"} == {
        "changed", "status", "reason", "seconds", "kernel", "flashinfer", "nccl", "nccl_p2p_disable_services",
        "nccl_p2p_tested", "summary", "backends"}
    assert (result["status"], result["reason"], warnings_of(result)) == ("passed", None, [])
    assert result["summary"] == ("2 GPU(s); kernel 9.0a ran on 0,1; FlashInfer sampling ran on 0,1; "
                                 "all-reduce 0,1 21.5 GB/s via P2P/CUMEM; %.1f s" % seconds)
    # The kernel is built in a scratch dir of its own, removed afterwards.
    [build] = node.nvcc_log.read_text().splitlines()
    workdir = os.path.dirname(build.split()[build.split().index("-o") + 1])
    assert os.path.basename(workdir).startswith("bsg-validate-") and not os.path.exists(workdir)


def test_summary_without_flashinfer_modules_and_of_a_one_gpu_service(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    result = run(capsys, node.args(gpus=[0], services={}, flashinfer_modules=[]))
    assert result["flashinfer"] is None
    assert result["summary"] == "1 GPU(s); kernel 9.0a ran on 0; NCCL on 0; %.1f s" % result["seconds"]


def test_a_p2p_retry_warns_naming_the_gpus_and_all_services(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail")
    result = run(capsys, node.args(services={}))
    assert warnings_of(result) == [
        "GPUs 0,1 (all): NCCL all-reduce failed with P2P (DistBackendError: NCCL error: unhandled cuda error) and "
        "passed with NCCL_P2P_DISABLE=1, which is now in the service's environment: traffic goes through host "
        "memory, slower. Check the IOMMU (passthrough) and PCIe ACS settings"]
    assert result["summary"] == ("2 GPU(s); kernel 9.0a ran on 0,1; FlashInfer sampling ran on 0,1; "
                                 "all-reduce 0,1 21.5 GB/s via SHM/direct (NCCL_P2P_DISABLE=1); %.1f s" % result["seconds"])
    # Off by the operator's choice: no warning, the figure still says how it ran.
    result = run(capsys, node.args(nccl_p2p="off"))
    assert warnings_of(result) == [] and "all-reduce 0,1 21.5 GB/s via SHM/direct (NCCL_P2P_DISABLE=1); " in result["summary"]


@pytest.mark.parametrize("fake, over, msg, summary", [
    ({"kernel_fail": "1"}, {"targets": ["10.0a"]},
     "GPU validation failed: kernel on GPU 1 (targets 10.0a): cudaErrorNoKernelImageForDevice: no kernel image is "
     "available for execution on the device",
     "2 GPU(s); kernel 10.0a ran on 0; FlashInfer sampling ran on 0,1; all-reduce 0,1 21.5 GB/s via P2P/CUMEM"),
    ({"flashinfer": "fail", "p2p": "fail", "no_p2p": "fail"}, {"targets": ["9.0a", "10.0a"]},
     "GPU validation failed: FlashInfer: RuntimeError: JIT module sampling is not pre-warmed; NCCL all-reduce on GPUs "
     "0,1: NCCL all-reduce failed with P2P (DistBackendError: NCCL error: unhandled cuda error) and with "
     "NCCL_P2P_DISABLE=1 (DistBackendError: NCCL error: unhandled cuda error)",
     "2 GPU(s); kernel 9.0a 10.0a ran on 0,1; FlashInfer modules FAILED on 0,1; all-reduce 0,1 FAILED"),
    ({"nvcc_fail": "1"}, {},
     "GPU validation failed: kernel: nvcc could not build the kernel for 9.0a: exit status 1: nvcc fatal   : "
     "Unsupported gpu architecture 'compute_999'",
     "2 GPU(s); kernel 9.0a ran on none; FlashInfer sampling ran on 0,1; all-reduce 0,1 21.5 GB/s via P2P/CUMEM"),
])
def test_a_failed_validation_in_full(tmp_path, capsys, monkeypatch, fake, over, msg, summary):
    node = Node(tmp_path, monkeypatch, **fake)
    result = run(capsys, node.args(**over))
    assert (result["_rc"], result["status"], result["msg"]) == (1, "failed", msg)
    assert result["summary"] == "%s; %.1f s" % (summary, result["seconds"])


@pytest.mark.parametrize("over, msg", [
    ({"timeout": 0}, "timeout must be > 0, got 0"),
    ({"allreduce_mib": -1}, "allreduce_mib must be > 0, got -1"),
    ({"targets": ["twelve"]}, "targets: "),
    ({"python": "/nonexistent/python"}, "cannot run /nonexistent/python: No such file or directory"),
])
def test_bad_input_messages_in_full(tmp_path, capsys, monkeypatch, over, msg):
    node = Node(tmp_path, monkeypatch)
    result = run(capsys, node.args(**over))
    assert result["_rc"] == 1
    if msg.endswith(": "):
        with pytest.raises(nvidia_gpu_validate.ArchError) as error:
            nvidia_gpu_validate.gencode_args(over["targets"])
        msg += str(error.value)
    assert result["msg"] == msg


def test_the_probes_get_the_env_files_settings_and_the_default_timeout(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    args = node.args()
    del args["timeout"]
    seen = {}
    real = nvidia_gpu_validate.run_probe

    def spy(run, argv, env, timeout, **kwargs):
        seen.setdefault("timeouts", set()).add(timeout)
        seen["cuda_home"] = env.get("CUDA_HOME")
        return real(run, argv, env, timeout, **kwargs)
    monkeypatch.setattr(nvidia_gpu_validate, "run_probe", spy)
    assert run(capsys, args)["status"] == "passed"
    assert seen == {"timeouts": {300}, "cuda_home": str(tmp_path / "cuda")}


def test_the_probes_results_in_full(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # the task's own: each probe names its GPUs instead
    result = run(capsys, node.args(allreduce_mib=2))
    kernel = result["kernel"]
    assert sorted(kernel) == ["build_seconds", "flags", "gpus", "nvcc"]
    assert kernel["nvcc"] == str(tmp_path / "cuda" / "bin" / "nvcc")
    assert kernel["flags"] == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert isinstance(kernel["build_seconds"], float)
    [build] = node.nvcc_log.read_text().splitlines()
    assert build.split()[:2] == ["-O2", "-o"] and build.split()[3].endswith("/validate.cu")
    assert os.path.basename(build.split()[2]) == "validate"
    [nccl] = result["nccl"]
    [attempt] = nccl["attempts"]
    assert attempt == {"p2p_disabled": False, "ok": True, "error": None, "seconds": attempt["seconds"]}
    assert nccl == {"devices": [0, 1], "services": ["eagle3"], "attempts": [attempt], "ok": True, "p2p": True,
                    "busbw_gbps": 21.5, "nccl": "2.28.9", "message": "NCCL all-reduce passed with P2P", "error": None,
                    "p2p_disable": False, "tested": True, "seconds": round(attempt["seconds"], 1),
                    "environment": {}, "transports": ["P2P/CUMEM"]}
    probes = node.probes()
    assert {p["devices"] for p in probes} == {"0,1"}
    assert {p["bytes"] for p in probes if p["probe"] == "allreduce"} == {str(2 * 1024 * 1024)}
    assert [p["args"] for p in probes if p["probe"] == "flashinfer"] == [['["sampling"]']]


def test_one_gpu_runs_once_with_the_service_s_own_p2p_setting(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    node.env_file.write_text(node.env_file.read_text() + "NCCL_P2P_DISABLE=1\n")
    result = run(capsys, node.args(gpus=[0], services={"eagle3": [0]}))
    [nccl] = result["nccl"]
    [attempt] = nccl["attempts"]
    assert attempt["p2p_disabled"] is True
    assert nccl == {"devices": [0], "services": ["eagle3"], "attempts": [attempt], "ok": True, "p2p": None,
                    "busbw_gbps": None, "nccl": "2.28.9", "error": None, "p2p_disable": False, "tested": False,
                    "seconds": round(attempt["seconds"], 1), "environment": {}, "transports": []}


def test_two_gpus_try_p2p_first_even_when_the_env_file_disables_it(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    node.env_file.write_text(node.env_file.read_text() + "NCCL_P2P_DISABLE=1\n")
    result = run(capsys, node.args())
    assert [p["p2p_disable"] for p in node.probes() if p["probe"] == "allreduce"] == [None, None]
    assert result["nccl"][0]["p2p"] is True


def test_a_failed_attempt_and_nvcc_not_found_in_full(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail", no_p2p="fail")
    node.env_file.write_text("FLASHINFER_CUDA_ARCH_LIST=9.0a\n")  # no CUDA_HOME
    result = run(capsys, node.args(nccl_p2p="on"))
    assert result["kernel"] == {"nvcc": os.path.join("bin", "nvcc"), "flags": ["-gencode=arch=compute_90a,code=sm_90a"],
                                "build_seconds": 0.0, "gpus": [],
                                "error": "nvcc not found at bin/nvcc (set CUDA_HOME in the env files, or nvcc)"}
    [nccl] = result["nccl"]
    message = ("NCCL all-reduce failed with P2P: DistBackendError: NCCL error: unhandled cuda error. "
               "sglang_services_nccl_p2p is on; fix the GPUs' P2P path (IOMMU in passthrough, ACS off) or set it to "
               "auto or off")
    assert {key: nccl[key] for key in ("ok", "p2p", "busbw_gbps", "nccl", "message", "error", "p2p_disable")} == {
        "ok": False, "p2p": True, "busbw_gbps": None, "nccl": None, "message": message, "error": message,
        "p2p_disable": False}


@pytest.mark.parametrize("text, why", [
    (None, "(No such file or directory)"),
    ("not a line of KEY=VALUE\n", None),
])
def test_an_env_file_that_cannot_be_read_is_named(tmp_path, capsys, monkeypatch, text, why):
    node = Node(tmp_path, monkeypatch)
    path = tmp_path / "service.env"
    if text is not None:
        path.write_text(text)
    msg = run(capsys, node.args(env_file=[str(path)]))["msg"]
    if why is None:
        with pytest.raises(nvidia_gpu_validate.JitCacheError) as error:
            nvidia_gpu_validate.read_env_file(str(path))
        assert msg == "cannot read env_file %s: %s" % (path, error.value)
    else:
        assert msg == "cannot read env_file %s %s" % (path, why)


def test_a_gpu_a_service_names_that_the_host_lacks_is_named_in_full(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    assert run(capsys, node.args(services={"eagle3": [0, 7, 9]}))["msg"] == (
        "service eagle3 uses GPU 7,9, which this host does not have (GPUs 0,1)")


def test_two_modules_two_targets_and_two_services_are_each_named(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, p2p="fail", kernel_fail="1")
    result = run(capsys, node.args(targets=["9.0a", "10.0a"], flashinfer_modules=["sampling", "topk"],
                                   services={"eagle3": [], "dflash": []}))
    assert result["msg"] == ("GPU validation failed: kernel on GPU 1 (targets 9.0a 10.0a): cudaErrorNoKernelImageForDevice: "
                             "no kernel image is available for execution on the device")
    assert "FlashInfer sampling topk ran on 0,1" in result["summary"]
    assert warnings_of(result)[0].startswith("GPUs 0,1 (dflash, eagle3): NCCL all-reduce failed with P2P")
    [nccl] = result["nccl"]
    assert len(nccl["attempts"]) == 2 and isinstance(nccl["seconds"], float)
    assert nccl["seconds"] == round(sum(attempt["seconds"] for attempt in nccl["attempts"]), 1)


def test_off_marks_its_only_attempt_as_without_p2p(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch)
    [nccl] = run(capsys, node.args(nccl_p2p="off"))["nccl"]
    assert [attempt["p2p_disabled"] for attempt in nccl["attempts"]] == [True]


def test_a_flashinfer_probe_that_dies_without_an_answer_is_named(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, flashinfer="crash")
    result = run(capsys, node.args())
    assert result["msg"] == "GPU validation failed: FlashInfer: exit status 139: Segmentation fault"
    assert "FlashInfer modules FAILED on 0,1" in result["summary"]


RESOLVED = {  # what sglang_server_args returns for each service, for the stand-in GPUs' 9.0 (what the all-reduce reads)
    "eagle3": {"9.0": {"nccl_environment": {"NCCL_NVLS_ENABLE": "1", "NCCL_CUMEM_ENABLE": "1"}}},
    "autoregressive": {"9.0": {"nccl_environment": {"NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0"}}},
    "dflash": {"9.0": {"nccl_environment": {"NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0"}}},
}


def test_each_gpu_set_runs_with_its_services_nccl_environment_and_names_the_transport(tmp_path, capsys, monkeypatch):
    # eagle3 runs with NVLS on (SGLang's launcher, --enable-symm-mem); autoregressive and dflash with
    # SGLang's defaults: the same GPUs are probed once per environment, each with its services, and the
    # transports come from NCCL's own log. A service SGLang did not resolve keeps the defaults.
    node = Node(tmp_path, monkeypatch)
    # Another service's NCCL setting in the task's environment (it merges the active services' env):
    # not in a resolved service's all-reduce, which runs with its own.
    monkeypatch.setenv("NCCL_P2P_LEVEL", "PXB")
    services = {"eagle3": [0, 1], "autoregressive": [0, 1], "dflash": [0, 1], "idle": [0, 1]}
    result = run(capsys, node.args(services=services, resolved=RESOLVED))
    assert result["_rc"] == 0, result
    assert [(e["services"], e["environment"], e["transports"]) for e in result["nccl"]] == [
        (["idle"], {}, ["P2P/CUMEM"]),
        (["autoregressive", "dflash"], {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}, ["P2P/CUMEM"]),
        (["eagle3"], {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}, ["NVLS", "P2P/CUMEM"])]
    ranks = [probe for probe in node.probes() if probe["probe"] == "allreduce"]
    assert sorted(probe["nvls"] for probe in ranks) == ["0", "0", "0", "0", "1", "1"]  # the default, twice, then NVLS
    assert sorted(str(probe["p2p_level"]) for probe in ranks) == ["None", "None", "None", "None", "PXB", "PXB"]
    assert result["summary"].count("all-reduce 0,1 21.5 GB/s via ") == 3
    assert "all-reduce 0,1 21.5 GB/s via NVLS+P2P/CUMEM;" in result["summary"]


def test_the_transports_in_ncclss_log():
    from ansible_collections.blackwell.sglang.plugins.module_utils.gpu_validate import nccl_transports
    log = ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
           "h:1:2 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA\n"
           "h:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct\n"
           "h:1:2 [0] NCCL INFO Connected NVLS tree\n"
           "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE\n")
    assert nccl_transports(log) == ["NET/IB", "NVLS", "P2P/CUMEM", "SHM/direct"]
    assert nccl_transports("") == [] and nccl_transports(None) == []


def test_a_module_without_a_call_is_named_as_loaded_only(tmp_path, capsys, monkeypatch):
    node = Node(tmp_path, monkeypatch, loaded_only="cascade")
    result = run(capsys, node.args(flashinfer_modules=["sampling", "cascade"]))
    assert result["_rc"] == 0, result
    assert (result["flashinfer"]["ran"], result["flashinfer"]["loaded_only"]) == (["sampling"], ["cascade"])
    assert "FlashInfer sampling ran on 0,1 (loaded only: cascade)" in result["summary"]


# What the real SGLang 0.5.23 resolved (tests/unit/plugins/fixtures/record_sglang_resolution.py).
with open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sglang-0.5.23-resolved.json"), encoding="utf-8") as _handle:
    RECORDED = json.load(_handle)["resolved"]


def test_the_backends_sglang_resolved_for_the_gpus_compute_capability_are_reported(tmp_path, capsys, monkeypatch):
    # The stand-in GPUs answer compute capability 9.0 (cudaGetDeviceProperties in the kernel probe):
    # each service's entry for 9.0 is reported, the one for 12.0 is not (nothing runs there).
    node = Node(tmp_path, monkeypatch)
    resolved = {"eagle3": {"9.0": RECORDED["qwen3-8b"]["9.0"], "12.0": RECORDED["qwen3-8b"]["12.0"]},
                "dsa": {"9.0": RECORDED["deepseek-v3.2"]["9.0"]}}
    result = run(capsys, node.args(services={"eagle3": [0], "dsa": [1], "idle": []}, resolved=resolved))
    assert result["_rc"] == 0, result
    assert result["backends"]["eagle3"] == {
        "compute_capability": "9.0", "gpus": [0],
        "backends": {"attention_backend": "fa3", "moe_runner_backend": "auto", "sampling_backend": "flashinfer"},
        "chosen_by": {"attention_backend": "SGLang's _attention_backend_default", "moe_runner_backend": "SGLang's default",
                      "sampling_backend": "SGLang's _sampling_backend_default"}}
    assert (result["backends"]["dsa"]["gpus"], result["backends"]["dsa"]["backends"]["dsa_prefill_backend"]) == ([1], "flashmla_sparse")
    assert sorted(result["backends"]) == ["dsa", "eagle3"]  # idle was not resolved
    assert "SGLang backends dsa on 9.0: attention dsa, dsa_prefill flashmla_sparse, dsa_decode fa3, " in result["summary"]
    assert "eagle3 on 9.0: attention fa3, moe_runner auto, sampling flashinfer" in result["summary"]


def test_a_service_resolved_for_other_gpus_than_it_runs_on_fails_naming_both(tmp_path, capsys, monkeypatch):
    # Resolved for a PRO 6000 (12.0) while its GPUs are 9.0: what SGLang picks on them was never checked.
    node = Node(tmp_path, monkeypatch)
    resolved = {"eagle3": {"12.0": RECORDED["example-pro6000-eagle3"]["12.0"]}}
    result = run(capsys, node.args(services={"eagle3": [0, 1]}, resolved=resolved))
    assert result["_rc"] == 1 and result["status"] == "failed", result
    assert result["msg"] == ("GPU validation failed: sglang-eagle3 was resolved for 12.0, but GPU 0,1 are compute capability "
                             "9.0: the backends SGLang picks there were never checked (re-run site.yml: it resolves for the "
                             "GPUs nvidia-smi reports)")
    assert result["backends"] == {}
    # The probes ran all the same, and the all-reduce took the service's NCCL variables.
    assert result["nccl"][0]["ok"] and result["nccl"][0]["environment"]["NCCL_P2P_LEVEL"] == "PXB"
