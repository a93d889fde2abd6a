"""The example inventory's GPU groups pass the backend check, and only with backends their GPUs have.

What SGLang 0.5.23 resolves for the example inventory's active service of each group was recorded
with the real SGLang (tests/unit/plugins/fixtures/record_sglang_resolution.py, the models' public
configs of molecule/default/files/models); the Molecule `default` scenario resolves the same
arguments with the node's SGLang and compares. Here: the recorded arguments are still what the role
renders from inventories/example, and the collection's backend check (module_utils/gpu_compat.py,
the same function the sglang_server_args module runs) passes each group on its own GPUs.
"""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_compat
from ansible_collections.blackwell.sglang.plugins.modules import sglang_server_args

from example_inventory import example_services

FIXTURE = os.path.join(os.path.dirname(__file__), "plugins", "fixtures", "sglang-0.5.23-resolved.json")
with open(FIXTURE, encoding="utf-8") as _handle:
    RECORDED = json.load(_handle)
RERECORD = "inventories/example changed: re-record with tests/unit/plugins/fixtures/record_sglang_resolution.py"


@pytest.mark.parametrize("group", ["pro6000", "b300"])
def test_the_recorded_arguments_are_what_the_role_renders_from_the_example(group):
    name, argv, env, ccs = example_services()[group]
    key = "example-%s-%s" % (group, name)
    assert RECORDED["argv"].get(key) == argv, RERECORD
    assert RECORDED["environments"][key] == env, RERECORD
    assert sorted(RECORDED["resolved"][key]) == sorted(ccs), RERECORD


def resolution(group):
    name, _argv, env, [cc] = example_services()[group]
    return cc, env, RECORDED["resolved"]["example-%s-%s" % (group, name)][cc]


def test_the_pro6000_group_passes_with_backends_that_have_sm120_kernels():
    cc, env, entry = resolution("pro6000")
    backends, chosen_by = entry["backends"], entry["chosen_by"]
    assert cc == "12.0"
    assert gpu_compat.resolved_backend_problems("sglang_services_eagle3", "0.5.23", cc, backends, chosen_by) == []
    # What it runs: the FlashInfer attention the group asks for, SGLang's FlashInfer sampling, and the
    # INT4 MoE left to the model's loader; every one the table knows has an sm120 (12.x) row.
    picked = {field: (backends[field], chosen_by[field]) for field in gpu_compat.SUMMARY_FIELDS if field in backends}
    assert picked == {"attention_backend": ("flashinfer", "the service's arguments"),
                      "moe_runner_backend": ("auto", "SGLang's default"),
                      "sampling_backend": ("flashinfer", "SGLang's _sampling_backend_default")}
    for field, (table, _portable) in gpu_compat.RESOLVED_FIELDS.items():
        row = table.get(backends.get(field))
        assert row is None or 12 in row[0], (field, backends.get(field))
    # The NCCL variables its env file sets are the ones SGLang's launcher keeps (PCIe: no NVLS).
    assert sglang_server_args.nccl_problems("s", "0.5.23", env, entry["nccl_environment"], frozenset()) == []
    assert entry["nccl_environment"]["NCCL_NVLS_ENABLE"] == "0"
    assert entry["nccl_environment"]["NCCL_P2P_LEVEL"] == "PXB"


def test_the_b300_group_passes_on_b300_and_its_backends_are_refused_on_a_pro6000():
    cc, env, entry = resolution("b300")
    backends, chosen_by = entry["backends"], entry["chosen_by"]
    assert cc == "10.3"
    assert gpu_compat.resolved_backend_problems("sglang_services_eagle3", "0.5.23", cc, backends, chosen_by) == []
    assert (backends["attention_backend"], backends["moe_runner_backend"]) == ("trtllm_mla", "flashinfer_trtllm")
    assert sglang_server_args.nccl_problems("s", "0.5.23", env, entry["nccl_environment"], frozenset()) == []
    assert entry["nccl_environment"]["NCCL_NVLS_ENABLE"] == "1"  # set by the env file; SGLang keeps it
    # The FP8 checkpoint's MoE runner SGLang picks for the SM100 family (its
    # _deepseek_moe_quant_resolution) has no sm120 kernels: had a PRO 6000 host been put in this
    # group, the check names it and the flag.
    moved = gpu_compat.resolved_backend_problems("sglang_services_eagle3", "0.5.23", "12.0", backends, chosen_by)
    assert [problem.split(", which runs only")[0] for problem in moved] == [
        "sglang_services_eagle3: SGLang 0.5.23 resolves moe_runner_backend flashinfer_trtllm on compute capability 12.0 "
        "(chosen by SGLang's _deepseek_moe_quant_resolution)",
        "sglang_services_eagle3: SGLang 0.5.23 resolves speculative_moe_runner_backend flashinfer_trtllm on compute "
        "capability 12.0 (chosen by SGLang's _speculative_moe_runner_default)"]
    assert moved[0].endswith("Set extra_args moe-runner-backend to one of: triton")
