"""Every decision of module_utils/gpu_compat.py, with the H200 outputs of fixtures/gpu/ where they apply:
driver <-> toolkit on both sides of each minimum, torch's CUDA major, open vs proprietary kernel
modules, GPU counts, the attention backend table and the NCCL P2P outcome."""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_compat
from ansible_collections.blackwell.sglang.plugins.module_utils.nvidia_smi import parse_nvrm_version

GPU = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "gpu")
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec  8 11:22:45 UTC 2025\n"


def fixture(*parts):
    with open(os.path.join(GPU, *parts)) as handle:
        return handle.read()


# ---- driver <-> toolkit ----

@pytest.mark.parametrize("driver,toolkit,problem,warning", [
    # CUDA 13.0.2 shipped with 580.95.05; CUDA 13.x runs on >= 580 (minor version compatibility).
    ("580.95.05", "13.0.2", False, False),
    ("580.95.04", "13.0.2", False, True),
    ("580.65.06", "13.0.2", False, True),
    ("580.0", "13.0.2", False, True),
    ("575.57.08", "13.0.2", True, False),    # an R575 driver: CUDA 12.9's, not 13's
    ("570.172.08", "13.0.0", True, False),   # R570 (a CUDA 12.8 driver) with a CUDA 13 toolkit: the case
    ("590.44.01", "13.1.0", False, False),
    ("580.159.04", "13.1.0", False, True),   # the H200 machines' driver under 13.1: minor version compatibility
    ("570.124.06", "12.8.1", False, False),
    ("570.26", "12.8.1", False, True),
    ("525.60.13", "12.8.1", False, True),
    ("525.60.12", "12.8.1", True, False),
    ("520.61.05", "12.0.0", True, False),
])
def test_driver_against_toolkit(driver, toolkit, problem, warning):
    problems, warnings = gpu_compat.driver_problems(driver, toolkit)
    assert bool(problems) is problem and bool(warnings) is warning
    for text in problems:  # names both versions, the minimum and what to change
        assert driver in text and toolkit in text and "Upgrade the driver" in text and "cuda_toolkit_version" in text
    for text in warnings:
        assert driver in text and gpu_compat.corresponding_driver(toolkit) in text and "minor version compatibility" in text


def test_the_h200_fixture_driver_runs_cuda_13_0():
    # query.txt: index, name, uuid, compute_cap, memory.total, driver_version, pci.bus_id (with units)
    driver = fixture("h200-x1", "query.txt").split(", ")[5]
    assert driver == parse_nvrm_version(fixture("h200-x1", "driver_version.txt"))["driver_version"] == "580.159.04"
    assert gpu_compat.driver_problems(driver, "13.0.2") == ([], [])


def test_driver_edge_cases():
    assert "could not be read" in gpu_compat.driver_problems(None, "13.0.2")[0][0]
    assert "no driver minimum known for CUDA 11.x" in gpu_compat.driver_problems("580.95.05", "11.8.0")[0][0]
    assert gpu_compat.driver_problems("580.95.05", "not-a-version") == ([], [])  # the toolkit preflight reports it
    assert gpu_compat.corresponding_driver("13.0.2") == "580.95.05"
    assert gpu_compat.corresponding_driver("13.9.0") is None  # newer than the table: the major's floor applies
    assert gpu_compat.driver_problems("580.95.05", "13.9.0") == ([], [])


# ---- kernel modules ----

@pytest.mark.parametrize("machine", ["h200-x1", "h200-x2"])
def test_open_kernel_module_of_the_h200_machines(machine):
    assert parse_nvrm_version(fixture(machine, "driver_version.txt")) == {
        "kernel_module": "open", "driver_version": "580.159.04"}


def test_proprietary_kernel_module_and_garbage():
    assert parse_nvrm_version(PROPRIETARY) == {"kernel_module": "proprietary", "driver_version": "590.48.01"}
    assert parse_nvrm_version("") == {"kernel_module": None, "driver_version": None}


@pytest.mark.parametrize("module,ccs,bad", [
    ("proprietary", ["12.0"], True),
    ("proprietary", ["10.3"], True),
    ("proprietary", ["9.0"], False),     # Hopper PCIe runs either flavour
    ("open", ["12.0", "10.3"], False),
    (None, ["12.0"], False),             # not readable (a container without /proc/driver/nvidia): nothing to say
])
def test_blackwell_needs_the_open_modules(module, ccs, bad):
    problems = gpu_compat.kernel_module_problems(module, ccs)
    assert bool(problems) is bad
    if bad:
        assert "open kernel modules" in problems[0] and ccs[0] in problems[0]


# ---- torch ----

@pytest.mark.parametrize("torch_cuda,toolkit,bad", [
    ("13.0", "13.0.2", False), ("13.0", "13.0", False), ("12.8", "13.0.2", True), ("13.0", "12.9.1", True), (None, "13.0", True),
])
def test_torch_cuda_major_equals_the_toolkits(torch_cuda, toolkit, bad):
    problems = gpu_compat.torch_cuda_problems(torch_cuda, toolkit)
    assert bool(problems) is bad
    if bad and torch_cuda:
        assert torch_cuda in problems[0] and toolkit in problems[0]


# ---- GPU counts ----

def settings(**over):
    base = {"tp_size": 1, "pp_size": 1, "cuda_visible_devices": [], "extra_args": {}, "env": {}}
    base.update(over)
    return base


@pytest.mark.parametrize("service,count,needle", [
    (settings(tp_size=8), 8, None),
    (settings(tp_size=8), 4, "needs 8 GPUs (tp_size 8 x pp_size 1) but has 4 (all of this host's GPUs)"),
    (settings(tp_size=2, pp_size=2, cuda_visible_devices=[0, 1]), 8, "needs 4 GPUs"),
    (settings(tp_size=2, cuda_visible_devices="4,5"), 4, "names GPU 4, 5, but this host has 4 GPU(s)"),
    (settings(tp_size=2, extra_args={"dp-size": 2}), 2, "x dp-size 2"),
    (settings(tp_size=2, enable_dp_attention=True, extra_args={"dp_size": 2}), 2, None),  # DP attention: dp within tp
])
def test_gpu_counts(service, count, needle):
    problems = gpu_compat.gpu_count_problems({"eagle3": service}, ["eagle3"], count)
    if needle is None:
        assert problems == []
    else:
        assert len(problems) == 1 and needle in problems[0] and problems[0].startswith("sglang_services_eagle3:")


def test_only_active_services_are_counted():
    assert gpu_compat.gpu_count_problems({"dflash": settings(tp_size=16)}, ["eagle3"], 8) == []


# ---- attention backends ----

def backends(name="autoregressive", ccs=("12.0",), **over):
    return gpu_compat.backend_problems({name: settings(**over)}, [name], list(ccs))


@pytest.mark.parametrize("backend,cc,ok", [
    ("fa3", "12.0", False), ("fa3", "10.3", False), ("fa3", "9.0", True),
    ("cutlass_mla", "12.0", False), ("cutlass_mla", "10.3", True),
    ("flashmla", "12.0", False), ("flashmla", "9.0", True),
    ("cutedsl_mla", "12.0", False), ("cutedsl_mla", "10.3", True),
    ("trtllm_mla", "12.0", True), ("trtllm_mla", "10.3", True), ("trtllm_mla", "9.0", False),   # SGLang 0.5.23: SM100/SM12x
    ("trtllm_mha", "12.0", True), ("trtllm_mha", "9.0", True), ("trtllm_mha", "8.9", False),
    ("aiter", "12.0", False), ("flashinfer", "12.0", True), ("triton", "10.3", True), ("some_new_backend", "12.0", True),
])
def test_backend_table(backend, cc, ok):
    problems = backends(ccs=[cc], attention_backend=backend)
    assert (problems == []) is ok
    if not ok:
        assert "attention_backend %s cannot run on compute capability %s" % (backend, cc) in problems[0]
        assert "Use one of: " in problems[0] and "flashinfer" in problems[0].split("Use one of: ")[1]
        assert gpu_compat.ATTENTION_BACKENDS[backend][2] in problems[0]  # the row's source


def test_alternatives_are_those_that_run_on_every_gpu():
    [problem] = backends(ccs=["12.0"], attention_backend="fa3")
    offered = problem.split("Use one of: ")[1].split(", or override")[0].split(", ")
    assert offered == ["flashinfer", "triton", "trtllm_mha", "trtllm_mla"]


def test_prefill_and_decode_backends_are_checked_too():
    [problem] = backends(ccs=["12.0"], extra_args={"decode-attention-backend": "cutlass_mla"})
    assert "extra_args decode-attention-backend cutlass_mla cannot run" in problem


def test_eagle3_draft_inherits_an_mla_only_backend():
    [problem] = backends("eagle3", ccs=["10.3"], attention_backend="trtllm_mla")
    assert "EAGLE-3 draft" in problem and "speculative-draft-attention-backend" in problem
    assert "trtllm_mla" not in problem.split("one of: ")[1]  # only backends a Llama-style draft can use
    assert backends("eagle3", ccs=["10.3"], attention_backend="trtllm_mla",
                    extra_args={"speculative-draft-attention-backend": "trtllm_mha"}) == []
    [problem] = backends("eagle3", ccs=["10.3"], attention_backend="trtllm_mla",
                         extra_args={"speculative_draft_attention_backend": "fa3"})
    assert "extra_args speculative-draft-attention-backend fa3 cannot run on compute capability 10.3" in problem
    assert backends("autoregressive", ccs=["10.3"], attention_backend="trtllm_mla") == []  # no draft


def test_override_per_service():
    assert backends(ccs=["12.0"], attention_backend="fa3", attention_backend_support={"fa3": ["12.0"]}) == []
    [problem] = backends(ccs=["12.0"], attention_backend="trtllm_mla", attention_backend_support={"trtllm_mla": ["10.0", "10.3"]})
    assert "cannot run on compute capability 12.0" in problem
    [problem] = backends(attention_backend_support={"fa9": ["12.0"]})
    assert "unknown backend 'fa9'" in problem
    [problem] = backends(attention_backend_support={"fa3": "twelve"})
    assert "must list compute capabilities" in problem
    [problem] = backends(attention_backend_support=["fa3"])
    assert "must be a dict" in problem


def test_no_gpus_and_no_archs_checks_nothing():
    assert backends(ccs=[], attention_backend="fa3") == []


# ---- NCCL P2P ----

OK, FAIL, HANG = {"ok": True}, {"ok": False, "error": "unhandled cuda error"}, {"ok": False, "error": "no answer within 300 s (a hang)"}


@pytest.mark.parametrize("mode,with_p2p,without_p2p,disable,failed", [
    ("auto", OK, None, False, False),
    ("auto", HANG, OK, True, False),
    ("auto", FAIL, OK, True, False),
    ("auto", FAIL, FAIL, False, True),
    ("on", OK, None, False, False),
    ("on", HANG, None, False, True),
    ("off", None, OK, True, False),
    ("off", None, FAIL, True, True),
])
def test_nccl_p2p_outcome(mode, with_p2p, without_p2p, disable, failed):
    got_disable, got_failed, message = gpu_compat.nccl_p2p_outcome(mode, with_p2p, without_p2p)
    assert (got_disable, got_failed) == (disable, failed)
    if failed:
        assert "failed" in message and (with_p2p or without_p2p)["error"] in message
    if mode == "auto" and disable:
        assert "NCCL_P2P_DISABLE=1" in message and "IOMMU" in message


@pytest.mark.parametrize("mode,bad", [("auto", False), ("on", False), ("off", False), ("yes", True), (True, True)])
def test_nccl_p2p_mode(mode, bad):
    assert (gpu_compat.nccl_p2p_problem(mode) is not None) is bad


def test_torch_messages_name_the_build_and_what_to_install():
    cpu = ["torch in the SGLang venv has no CUDA (torch.version.cuda is None: a CPU build); install a "
           "CUDA 13 build (sglang_venv_packages, sglang_venv_index_url)"]
    # The probe prints torch.version.cuda: None, or the string "None" once it went through a template.
    assert gpu_compat.torch_cuda_problems(None, "13.0.2") == gpu_compat.torch_cuda_problems("None", "13.0.2") == cpu
    assert gpu_compat.torch_cuda_problems("", "13.0.2") == cpu
    assert gpu_compat.torch_cuda_problems("12.8", "13.0.2") == [
        "torch in the SGLang venv is built for CUDA 12.8 but the toolkit is 13.0.2: FlashInfer's kernels, built "
        "with the toolkit, load into torch's CUDA 12 runtime. Install torch for CUDA 13 (e.g. "
        "sglang_venv_index_url https://download.pytorch.org/whl/cu130) or set cuda_toolkit_version to a 12.x release"]


def test_driver_warnings_are_the_warnings_of_driver_problems():
    for driver, toolkit in (("580.65.06", "13.0.2"), ("580.95.05", "13.0.2"), ("525.60.12", "12.8.1")):
        assert gpu_compat.driver_warnings(driver, toolkit) == gpu_compat.driver_problems(driver, toolkit)[1]
    assert gpu_compat.driver_warnings("580.65.06", "13.0.2")  # older than the release's own driver: a warning


def test_a_backend_support_list_may_hold_blanks_but_not_a_bare_string():
    assert backends(attention_backend="fa3", attention_backend_support={"fa3": ["12.0", " "]}) == []
    # A bare string is refused by name, and read as that one capability (no second problem for fa3 itself).
    assert backends(attention_backend="fa3", attention_backend_support={"fa3": "12.0"}) == [
        "sglang_services_autoregressive: attention_backend_support fa3 must list compute capabilities like "
        "\"12.0\", got '12.0'"]


def test_driver_messages_in_full():
    floor = gpu_compat.MINOR_COMPAT_DRIVER[13]
    assert gpu_compat.driver_problems(None, "13.0.2") == ([
        "the NVIDIA driver version None could not be read (nvidia-smi); the toolkit 13.0.2 needs a driver >= %s" % floor], [])
    assert gpu_compat.driver_problems("n/a", "9.2")[0] == [
        "the NVIDIA driver version 'n/a' could not be read (nvidia-smi); the toolkit 9.2 needs a driver >= ?"]
    assert gpu_compat.driver_problems("580.95.05", "11.8.0")[0] == [
        "CUDA toolkit 11.8.0: no driver minimum known for CUDA 11.x (%s); use a 12.x or 13.x toolkit" % gpu_compat.DRIVER_TABLE_SOURCE]
    assert gpu_compat.driver_problems("580.65.06", "13.0.2")[1] == [
        "NVIDIA driver 580.65.06 is older than 580.95.05, the driver of CUDA toolkit 13.0.2: it runs through CUDA minor "
        "version compatibility (cubins for the exact targets load; PTX JIT and features of the newer driver do not; %s)"
        % gpu_compat.MINOR_COMPAT_SOURCE]


def test_the_proprietary_module_message_in_full():
    assert gpu_compat.kernel_module_problems("proprietary", ["12.0", "10.3"]) == [
        "the proprietary NVIDIA kernel module is loaded, but Blackwell GPUs (compute capability 10.3, 12.0) need the "
        "open kernel modules (%s). Install the driver's open flavour (e.g. nvidia-open, or the .run "
        "installer with -m=kernel-open) and reboot" % gpu_compat.OPEN_MODULES_SOURCE]


@pytest.mark.parametrize("service,count,message", [
    (settings(tp_size=8), 4, "needs 8 GPUs (tp_size 8 x pp_size 1) but has 4 (all of this host's GPUs)"),
    ({"tp_size": 4}, 2, "needs 4 GPUs (tp_size 4 x pp_size 1) but has 2 (all of this host's GPUs)"),
    ({"pp_size": 4}, 2, "needs 4 GPUs (tp_size 1 x pp_size 4) but has 2 (all of this host's GPUs)"),
    (settings(tp_size=2, cuda_visible_devices=[0]), 8, "needs 2 GPUs (tp_size 2 x pp_size 1) but has 1 (cuda_visible_devices [0])"),
    (settings(tp_size=2, extra_args={"data-parallel-size": 2}), 2,
     "needs 4 GPUs (tp_size 2 x pp_size 1 x dp-size 2) but has 2 (all of this host's GPUs)"),
    (settings(cuda_visible_devices=[2, 3]), 3, "cuda_visible_devices names GPU 3, but this host has 3 GPU(s) (indices 0-2)"),
])
def test_gpu_count_messages_in_full(service, count, message):
    assert gpu_compat.gpu_count_problems({"eagle3": service}, ["eagle3"], count) == ["sglang_services_eagle3: " + message]


@pytest.mark.parametrize("on", [True, "true", "yes", "on", "1", "YES"])
def test_dp_attention_keeps_dp_within_tp_however_it_is_spelled(on):
    assert gpu_compat.gpu_count_problems({"eagle3": settings(tp_size=2, enable_dp_attention=on, extra_args={"dp-size": 2})},
                                         ["eagle3"], 2) == []


def test_a_service_with_bad_devices_does_not_hide_the_next_one():
    assert gpu_compat.gpu_count_problems({"eagle3": settings(cuda_visible_devices="x"), "dflash": settings(tp_size=4)},
                                         ["eagle3", "dflash"], 2) == [
        "sglang_services_dflash: needs 4 GPUs (tp_size 4 x pp_size 1) but has 2 (all of this host's GPUs)"]


@pytest.mark.parametrize("key, value, found", [
    ("dp-size", 2, "2"), ("--dp-size", 2, "2"), ("dp_size", "2", "2"), ("dp-size-", 2, None), ("Xdp-size", 2, None),
    ("dp-size", "", None), ("dp-size", None, None), ("dp-size", True, None), ("dp-size", False, None),
])
def test_a_flag_is_found_in_extra_args_in_any_spelling_with_a_value(key, value, found):
    assert gpu_compat._flag_value({"extra_args": {key: value}}, "dp-size") == found


# ---- the backend messages as an operator reads them, whole ----

FA3_ROW = ("SGLang 0.5.23 sglang/srt/layers/attention/attention_registry.py create_flashattention_v3_backend: "
           "'requires SM>=80 and SM<=90'")
ALL_BACKENDS = ("aiter, ascend, cutedsl_mla, cutlass_mla, fa3, flashinfer, flashmla, intel_amx, intel_xpu, triton, "
                "trtllm_mha, trtllm_mla, wave")
NOTHING_PORTABLE = {"flashinfer": ["8.0"], "triton": ["8.0"]}


@pytest.mark.parametrize("name, ccs, over, message", [
    ("autoregressive", ["10.3", "12.0"], {"attention_backend": "fa3"},
     "sglang_services_autoregressive: attention_backend fa3 cannot run on compute capability 10.3, 12.0 (the host's "
     "GPUs; %s). Use one of: flashinfer, triton, trtllm_mha, trtllm_mla, or override the table with "
     "attention_backend_support" % FA3_ROW),
    ("autoregressive", ["12.0"], {"extra_args": {"prefill-attention-backend": "fa3"}},
     "sglang_services_autoregressive: extra_args prefill-attention-backend fa3 cannot run on compute capability 12.0 "
     "(the host's GPUs; %s). Use one of: flashinfer, triton, trtllm_mha, trtllm_mla, or override the table with "
     "attention_backend_support" % FA3_ROW),
    # A portable backend the service's own table takes away: the source is the override.
    ("autoregressive", ["12.0"], {"attention_backend": "flashinfer", "attention_backend_support": {"flashinfer": ["9.0"]}},
     "sglang_services_autoregressive: attention_backend flashinfer cannot run on compute capability 12.0 (the host's "
     "GPUs; override). Use one of: triton, trtllm_mha, trtllm_mla, or override the table with attention_backend_support"),
    ("autoregressive", ["7.5"], {"attention_backend": "flashinfer", "attention_backend_support": NOTHING_PORTABLE},
     "sglang_services_autoregressive: attention_backend flashinfer cannot run on compute capability 7.5 (the host's "
     "GPUs; override). Use one of: none known, or override the table with attention_backend_support"),
    # A compute capability that is not a version runs only the portable backends.
    ("autoregressive", ["unknown"], {"attention_backend": "fa3"},
     "sglang_services_autoregressive: attention_backend fa3 cannot run on compute capability unknown (the host's GPUs; "
     "%s). Use one of: flashinfer, triton, or override the table with attention_backend_support" % FA3_ROW),
    ("eagle3", ["10.3"], {"attention_backend": "trtllm_mla"},
     "sglang_services_eagle3: attention_backend trtllm_mla is for MLA models only, and the EAGLE-3 draft (a "
     "Llama-style model) inherits it; set extra_args speculative-draft-attention-backend to one of: flashinfer, "
     "triton, trtllm_mha"),
    ("eagle3", ["7.5"], {"attention_backend": "trtllm_mla",
                         "attention_backend_support": dict(NOTHING_PORTABLE, trtllm_mla=["7.5"])},
     "sglang_services_eagle3: attention_backend trtllm_mla is for MLA models only, and the EAGLE-3 draft (a "
     "Llama-style model) inherits it; set extra_args speculative-draft-attention-backend to one of: none known"),
])
def test_backend_messages_whole(name, ccs, over, message):
    assert gpu_compat.backend_problems({name: over}, [name], ccs) == [message]


def test_backend_support_messages_whole_and_every_service_is_checked():
    assert backends(attention_backend_support={"fa9": ["twelve"]}) == [
        "sglang_services_autoregressive: attention_backend_support names an unknown backend 'fa9'; the table knows "
        + ALL_BACKENDS,
        "sglang_services_autoregressive: attention_backend_support fa9 must list compute capabilities like \"12.0\", "
        "got ['twelve']"]
    # A support that is not a dict is reported and the backend is still checked against the table.
    assert backends(attention_backend="fa3", attention_backend_support=["fa3"]) == [
        "sglang_services_autoregressive: attention_backend_support must be a dict of backend: [compute capabilities], "
        "got ['fa3']",
        "sglang_services_autoregressive: attention_backend fa3 cannot run on compute capability 12.0 (the host's GPUs; "
        "%s). Use one of: flashinfer, triton, trtllm_mha, trtllm_mla, or override the table with "
        "attention_backend_support" % FA3_ROW]
    # The problems of the first service are kept when the second's table is bad.
    assert gpu_compat.backend_problems(
        {"a": {"attention_backend": "fa3"}, "b": {"attention_backend_support": {"fa9": ["12.0"]}}}, ["a", "b"],
        ["12.0"]) == [
        "sglang_services_a: attention_backend fa3 cannot run on compute capability 12.0 (the host's GPUs; %s). Use one "
        "of: flashinfer, triton, trtllm_mha, trtllm_mla, or override the table with attention_backend_support" % FA3_ROW,
        "sglang_services_b: attention_backend_support names an unknown backend 'fa9'; the table knows " + ALL_BACKENDS]


OK, BAD, SILENT = {"ok": True}, {"ok": False, "error": "NCCL error 5"}, {"ok": False}


@pytest.mark.parametrize("mode, with_p2p, without_p2p, outcome", [
    ("off", None, OK, (True, False, "NCCL all-reduce passed with NCCL_P2P_DISABLE=1 (sglang_services_nccl_p2p: off)")),
    ("off", None, BAD, (True, True, "NCCL all-reduce failed with NCCL_P2P_DISABLE=1: NCCL error 5")),
    ("off", None, None, (True, True, "NCCL all-reduce failed with NCCL_P2P_DISABLE=1: not run")),
    ("auto", OK, None, (False, False, "NCCL all-reduce passed with P2P")),
    ("on", SILENT, None, (False, True, "NCCL all-reduce failed with P2P: failed. sglang_services_nccl_p2p is on; fix "
                                       "the GPUs' P2P path (IOMMU in passthrough, ACS off) or set it to auto or off")),
    ("auto", BAD, OK, (True, False, "NCCL all-reduce failed with P2P (NCCL error 5) and passed with NCCL_P2P_DISABLE=1, "
                                    "which is now in the service's environment: traffic goes through host memory, "
                                    "slower. Check the IOMMU (passthrough) and PCIe ACS settings")),
    ("auto", BAD, SILENT, (False, True, "NCCL all-reduce failed with P2P (NCCL error 5) and with NCCL_P2P_DISABLE=1 "
                                        "(failed)")),
])
def test_nccl_p2p_outcome_messages_whole(mode, with_p2p, without_p2p, outcome):
    assert gpu_compat.nccl_p2p_outcome(mode, with_p2p, without_p2p) == outcome


# ---- the backends SGLang resolves itself (sglang_server_args: resolve) --------------------------
# What the real SGLang 0.5.23 resolved for two public model configs on each GPU kind (recorded with
# the module's resolve_all on a CPU host; the file says how).
RESOLVED = json.load(open(os.path.join(os.path.dirname(GPU), "sglang-0.5.23-resolved.json"), encoding="utf-8"))


def resolved(model, cc):
    entry = RESOLVED["resolved"][model][cc]
    return entry["backends"], entry["chosen_by"]


def test_deepseek_v32_on_rtx_pro_6000_gets_sm100_only_dsa_kernels_from_sglang():
    backends, chosen_by = resolved("deepseek-v3.2", "12.0")
    problems = gpu_compat.resolved_backend_problems("sglang_services_eagle3", "0.5.23", "12.0", backends, chosen_by)
    cause = ("which runs only on compute capability 10.x (%s; on RTX PRO 6000 the server starts and dies at the first "
             "request (sglang#37105))" % gpu_compat.TRTLLM_GEN_SOURCE)
    assert problems == [
        "sglang_services_eagle3: SGLang 0.5.23 resolves dsa_decode_backend trtllm on compute capability 12.0 (chosen by "
        "SGLang's _dsa_split_backend_resolution), %s. Set extra_args dsa-decode-backend to one of: tilelang" % cause,
        "sglang_services_eagle3: SGLang 0.5.23 resolves dsa_prefill_backend trtllm on compute capability 12.0 (chosen by "
        "SGLang's _dsa_split_backend_resolution), %s. Set extra_args dsa-prefill-backend to one of: tilelang" % cause]


@pytest.mark.parametrize("model, cc", [("deepseek-v3.2", "10.3"), ("deepseek-v3.2", "9.0"), ("qwen3-8b", "12.0"),
                                       ("qwen3-8b", "10.3"), ("qwen3-8b", "9.0")])
def test_what_sglang_resolves_elsewhere_runs_there(model, cc):
    # B300: trtllm DSA kernels and the flashinfer_trtllm MoE runner are the SM100 family's; H200:
    # FlashMLA sparse prefill and FA3 decode; Qwen3: flashinfer on sm120, trtllm_mha on B300, fa3 on H200.
    backends, chosen_by = resolved(model, cc)
    assert gpu_compat.resolved_backend_problems("s", "0.5.23", cc, backends, chosen_by) == []
    assert backends["attention_backend"] == {("deepseek-v3.2", "10.3"): "dsa", ("deepseek-v3.2", "9.0"): "dsa",
                                             ("qwen3-8b", "12.0"): "flashinfer", ("qwen3-8b", "10.3"): "trtllm_mha",
                                             ("qwen3-8b", "9.0"): "fa3"}[(model, cc)]


def test_a_b300_resolution_moved_to_rtx_pro_6000_names_each_backend_and_its_fix():
    backends, chosen_by = resolved("deepseek-v3.2", "10.3")
    assert backends["moe_runner_backend"] == "flashinfer_trtllm"
    problems = gpu_compat.resolved_backend_problems("w", "0.5.23", "12.0", backends, chosen_by)
    assert [p.split(" (chosen by ")[0] for p in problems] == [
        "w: SGLang 0.5.23 resolves dsa_decode_backend trtllm on compute capability 12.0",
        "w: SGLang 0.5.23 resolves dsa_prefill_backend trtllm on compute capability 12.0",
        "w: SGLang 0.5.23 resolves moe_runner_backend flashinfer_trtllm on compute capability 12.0",
        "w: SGLang 0.5.23 resolves speculative_moe_runner_backend flashinfer_trtllm on compute capability 12.0"]
    # SGLang copies the target's MoE runner into the speculative field of every service: it counts only
    # for a service with speculative decoding.
    assert backends["speculative_moe_runner_backend"] == "flashinfer_trtllm"
    without = gpu_compat.resolved_backend_problems("w", "0.5.23", "12.0", backends, chosen_by, speculative=False)
    assert without == problems[:3]
    assert problems[2].endswith("Set extra_args moe-runner-backend to one of: triton")
    assert "(chosen by SGLang's " in problems[2]


def test_operator_set_backends_auto_values_and_the_services_override():
    chosen = {"attention_backend": "the service's arguments"}
    [problem] = gpu_compat.resolved_backend_problems("s", "0.5.23", "12.0", {"attention_backend": "fa3"}, chosen)
    assert "(chosen by the service's arguments), which runs only on compute capability 8.x, 9.x" in problem
    assert problem.endswith("Set attention_backend to one of: flashinfer, triton, trtllm_mha, trtllm_mla")
    # auto is decided when the model loads: nothing to check here; unknown backends run anywhere.
    unchecked = {"moe_runner_backend": "auto", "dsa_prefill_backend": "tilelang"}
    assert gpu_compat.resolved_backend_problems("s", "0.5.23", "12.0", unchecked, {}) == []
    # The service's attention_backend_support replaces the row, both ways.
    assert gpu_compat.resolved_backend_problems("s", "0.5.23", "12.0", {"attention_backend": "fa3"}, chosen,
                                                {"fa3": ["12.0"]}) == []
    [problem] = gpu_compat.resolved_backend_problems("s", "0.5.23", "12.0", {"decode_attention_backend": "flashinfer"},
                                                     {}, {"flashinfer": ["9.0"]})
    assert "which runs only on compute capability 9.0 (the service's attention_backend_support)" in problem
    assert "(chosen by SGLang)" in problem and "Set extra_args decode-attention-backend to one of: triton" in problem


def test_the_report_line_of_a_resolution():
    result = {"resolved": {"eagle3": {"12.0": RESOLVED["resolved"]["qwen3-8b"]["12.0"]},
                           "dsa": {"10.3": RESOLVED["resolved"]["deepseek-v3.2"]["10.3"]}},
              "unresolved": {"dflash": "the model config /m/config.json is not on this host"}}
    assert gpu_compat.backends_summary(result) == (
        "dsa on 10.3: attention dsa, dsa_prefill trtllm, dsa_decode trtllm, moe_runner flashinfer_trtllm, "
        "sampling flashinfer; eagle3 on 12.0: attention flashinfer, moe_runner auto, sampling flashinfer; "
        "dflash: not resolved (the model config /m/config.json is not on this host)")
    assert gpu_compat.backends_summary({"resolved": {}, "unresolved": {}}) == "not resolved"
    assert gpu_compat.backends_summary(None) == "not resolved"


def test_a_hosts_compute_capabilities_are_its_gpus_else_its_groups_archs():
    gpus = {"present": True, "compute_capabilities": ["12.0", "12.0"]}
    assert gpu_compat.host_compute_capabilities(gpus, ["10.3a"]) == (["12.0"], "this host's GPUs")
    assert gpu_compat.host_compute_capabilities({"present": False}, ["12.0f", "10.3a", "9.0"]) == (
        ["10.3", "12.0", "9.0"], "sglang_node_gpu_archs")
    assert gpu_compat.host_compute_capabilities(None, None) == ([], "sglang_node_gpu_archs")


# ---- SGLang's custom all-reduce, decided from the topology -------------------------------------

def topology(name):
    from ansible_collections.blackwell.sglang.plugins.module_utils.nvidia_smi import parse_topology
    with open(os.path.join(GPU, name, "topo.txt"), encoding="utf-8") as handle:
        return {str(gpu): {str(peer): link for peer, link in peers.items()} for gpu, peers in parse_topology(handle.read()).items()}


def test_two_rtx_pro_6000_on_the_host_bridge_get_no_custom_all_reduce():
    # The public PHB pair (rtx6kpro#15/#21): disabled, naming the link and the report.
    disable, why = gpu_compat.custom_all_reduce([0, 1], topology("rtx-pro-6000-x2-phb"), p2p_disabled=False)
    assert disable is True
    assert why == ("GPUs 0,1 reach each other through the host bridge (PHB): a custom PCIe all-reduce there never "
                   "completes while NCCL works (local-inference-lab/rtx6kpro#21, 2x RTX PRO 6000 on PHB)")


def test_nvlink_keeps_sglangs_custom_all_reduce():
    assert gpu_compat.custom_all_reduce([0, 1], topology("h200-x2"), p2p_disabled=False) == (
        False, "NVLink joins its GPUs: SGLang's custom all-reduce runs over NVLink")


@pytest.mark.parametrize("devices, links, p2p_disabled, mode, disable, needle", [
    ([0, 1], {"0": {"1": "PIX"}}, False, "auto", False, "share a PCIe switch (PIX): SGLang's custom all-reduce"),
    ([0, 1], {"0": {"1": "PXB"}}, True, "auto", True, "run NCCL with NCCL_P2P_DISABLE=1"),
    ([0, 1], {"0": {"1": "SYS"}}, False, "auto", True, "through the host bridge (SYS)"),
    ([0, 1], {"0": {"1": "NODE"}}, False, "auto", True, "through the host bridge (NODE)"),
    ([0, 1, 2, 3], {"0": {"1": "PIX", "2": "PHB", "3": "PHB"}, "1": {"2": "PHB", "3": "PHB"}, "2": {"3": "PIX"}}, True,
     "auto", False, "more than two GPUs over PCIe: SGLang turns its custom all-reduce off itself"),
    ([0, 1], {}, False, "auto", False, "topology is not known"),
    ([0], {}, False, "off", False, "one GPU per tensor-parallel group"),
    ([0, 1], {"0": {"1": "NV18"}}, False, "off", True, "sglang_services_custom_all_reduce is off"),
    ([0, 1], {"0": {"1": "PHB"}}, True, "on", False, "sglang_services_custom_all_reduce is on: SGLang decides"),
])
def test_the_custom_all_reduce_rule(devices, links, p2p_disabled, mode, disable, needle):
    result = gpu_compat.custom_all_reduce(devices, links, p2p_disabled, mode)
    assert result[0] is disable and needle in result[1], result


def test_the_custom_all_reduce_runs_within_each_tensor_parallel_group():
    # Four PCIe GPUs, tp_size 2 (pp 2 or two replicas): two groups of two, not "more than two PCIe GPUs".
    links = {"0": {"1": "PIX", "2": "SYS", "3": "SYS"}, "1": {"2": "SYS", "3": "SYS"}, "2": {"3": "PHB"}}
    disable, why = gpu_compat.custom_all_reduce([0, 1, 2, 3], links, False, tp_size=2)
    assert disable is True and why.startswith("GPUs 2,3 reach each other through the host bridge (PHB)")
    assert gpu_compat.custom_all_reduce([0, 1], links, False, tp_size=2)[0] is False  # behind one switch
    assert gpu_compat.custom_all_reduce([0, 1, 2, 3], links, False, tp_size=1) == (
        False, "one GPU per tensor-parallel group: no all-reduce")
    assert "more than two GPUs over PCIe" in gpu_compat.custom_all_reduce([0, 1, 2, 3], links, False, tp_size=4)[1]
    assert gpu_compat.tp_size({"tp_size": "2"}) == 2 and gpu_compat.tp_size({}) == 1 and gpu_compat.tp_size(None) == 1
