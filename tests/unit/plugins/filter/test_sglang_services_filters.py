"""The sglang_services role's pure logic: arguments, input problems, GPU sharing, ExecStart quoting."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import sglang_services as f

BASE = {"model_path": "/m/target", "host": "127.0.0.1", "port": 30000, "tp_size": 8, "pp_size": 1,
        "mem_fraction_static": None, "attention_backend": "", "enable_dp_attention": False,
        "extra_args": {}, "env": {}, "cuda_visible_devices": [], "memory_max": "", "health_host": ""}


def settings(**over):
    good = {
        "eagle3": dict(BASE, draft_model_path="/m/eagle3", speculative_num_steps=3, speculative_eagle_topk=1,
                       speculative_num_draft_tokens=4),
        "autoregressive": dict(BASE),
        "dflash": dict(BASE, draft_model_path="/m/dflash", dflash_block_size=16),
    }
    for name, values in over.items():
        good[name] = dict(good[name], **values)
    return good


def test_argv_per_service():
    s = settings(autoregressive={"attention_backend": "flashinfer", "mem_fraction_static": 0.85,
                                 "extra_args": {"trust_remote_code": True, "log-level": "info", "off": False,
                                                "cuda-graph-bs": [1, 2, 4], "json-model-override-args": {"a": 1}}})
    argv = f.sglang_services_argvs(s)
    assert argv["autoregressive"] == [
        "--model-path", "/m/target", "--host", "127.0.0.1", "--port", "30000", "--tp-size", "8",
        "--mem-fraction-static", "0.85", "--attention-backend", "flashinfer",
        "--cuda-graph-bs", "1", "2", "4", "--json-model-override-args", '{"a":1}', "--log-level", "info",
        "--trust-remote-code",
    ]
    assert argv["eagle3"][8:] == [
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/eagle3",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
    ]
    assert argv["dflash"][8:] == [
        "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/m/dflash",
        "--speculative-dflash-block-size", "16",
    ]


def test_good_input_has_no_problems():
    assert f.sglang_services_problems(settings(), "eagle3") == []
    assert f.sglang_services_problems(settings(), "") == []
    assert f.sglang_services_problems(settings(), None) == []


@pytest.mark.parametrize("over,active,message", [
    ({}, "medusa", "sglang_services_active: unknown service 'medusa'; choose from eagle3, autoregressive, dflash (or none)"),
    ({"eagle3": {"speculative_eagle_topk": None}}, "eagle3",
     "EAGLE-3 takes all three of speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens or none; "
     "speculative_num_steps, speculative_num_draft_tokens set, speculative_eagle_topk missing"),
    ({"dflash": {"draft_model_path": ""}}, "", "sglang_services_dflash: DFlash needs draft_model_path"),
    ({"eagle3": {"draft_model_path": None}}, "", "sglang_services_eagle3: EAGLE-3 needs draft_model_path"),
    ({"dflash": {"enable_dp_attention": True}}, "", "DFlash does not work with DP attention"),
    ({"dflash": {"pp_size": 2}}, "", "DFlash does not work with pipeline parallelism; pp_size is 2, must be 1"),
    ({"autoregressive": {"port": 0}}, "", "sglang_services_autoregressive: port 0 is out of range (1-65535)"),
    ({"autoregressive": {"port": 65536}}, "", "port 65536 is out of range"),
    ({"autoregressive": {"port": "http"}}, "", "port 'http' is out of range"),
    ({"autoregressive": {"model_path": ""}}, "", "sglang_services_autoregressive: model_path is empty"),
    ({"autoregressive": {"mem_fraction_static": 1.5}}, "", "mem_fraction_static must be between 0 and 1"),
    ({"autoregressive": {"extra_args": {"port": 1}}}, "", "extra_args port is managed by the role; set port instead"),
    ({"autoregressive": {"cuda_visible_devices": "0,x"}}, "", "cuda_visible_devices: 'x' is not a GPU index"),
    ({"autoregressive": {"cuda_visible_devices": [0, 1, 2, 3]}}, ["eagle3", "autoregressive"],
     "runs eagle3 and autoregressive together, but they share GPUs (one of them uses all GPUs)"),
    ({"autoregressive": {"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
      "eagle3": {"cuda_visible_devices": "3,4,5"}}, ["eagle3", "autoregressive"],
     "runs eagle3 and autoregressive together, but they share GPUs (3)"),
    ({"autoregressive": {"cuda_visible_devices": [0, 1]}, "eagle3": {"cuda_visible_devices": [2, 3]}},
     "eagle3,autoregressive", "runs eagle3 and autoregressive together on the same port 30000"),
])
def test_bad_input(over, active, message):
    problems = f.sglang_services_problems(settings(**over), active)
    assert any(message in p for p in problems), problems


def test_disjoint_gpus_coexist_without_conflicts():
    s = settings(autoregressive={"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
                 eagle3={"cuda_visible_devices": "4,5,6,7"})
    assert f.sglang_services_problems(s, ["eagle3", "autoregressive"]) == []
    conflicts = f.sglang_services_conflicts(s)
    # dflash uses all GPUs: it conflicts with both; the split pair do not conflict with each other.
    assert conflicts == {
        "eagle3": ["sglang-dflash.service"],
        "autoregressive": ["sglang-dflash.service"],
        "dflash": ["sglang-eagle3.service", "sglang-autoregressive.service"],
    }


def test_default_all_share_all_gpus():
    conflicts = f.sglang_services_conflicts(settings())
    assert conflicts["eagle3"] == ["sglang-autoregressive.service", "sglang-dflash.service"]


@pytest.mark.parametrize("active,names", [("eagle3", ["eagle3"]), ("none", []), ("", []), ([], []), (None, []),
                                          (["dflash"], ["dflash"]), ("eagle3, dflash", ["eagle3", "dflash"])])
def test_active_list(active, names):
    assert f.sglang_services_active_list(active) == names


def test_systemd_exec_quotes_and_escapes():
    text = f.systemd_exec(["/v/bin/python", "-m", "sglang.launch_server", "--model-path", "/m/a b",
                           "--chat-template", "$HOME/t%d", "--x", "", "--json", '{"a": "b"}'])
    assert text.split(" \\\n    ") == [
        "/v/bin/python -m sglang.launch_server", '--model-path "/m/a b"', "--chat-template $$HOME/t%%d",
        '--x ""', '--json "{\\"a\\": \\"b\\"}"',
    ]
