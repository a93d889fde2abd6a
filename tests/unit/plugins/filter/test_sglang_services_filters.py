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


A = "sglang_services_autoregressive: "
E = "sglang_services_eagle3: "
D = "sglang_services_dflash: "
DEVICES_HINT = ' (use e.g. [0, 1, 2, 3] or "0,1,2,3")'


@pytest.mark.parametrize("over,active,problems", [
    ({}, "medusa", ["sglang_services_active: unknown service 'medusa'; choose from eagle3, autoregressive, dflash (or none)"]),
    ({}, ["eagle3", "eagle3"], [
        "sglang_services_active names a service twice: ['eagle3', 'eagle3']",
        "sglang_services_active runs eagle3 and eagle3 together, but they share GPUs (one of them uses all GPUs); "
        "give each disjoint cuda_visible_devices or run one",
        "sglang_services_active runs eagle3 and eagle3 together on the same port 30000"]),
    ({"eagle3": {"speculative_eagle_topk": None}}, "eagle3", [
        E + "EAGLE-3 takes all three of speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens or none; "
        "speculative_num_steps, speculative_num_draft_tokens set, speculative_eagle_topk missing"]),
    ({"eagle3": {"speculative_num_steps": 0}}, "", [E + "speculative_num_steps must be an integer >= 1, got 0"]),
    ({"eagle3": {"speculative_eagle_topk": "x"}}, "", [E + "speculative_eagle_topk must be an integer >= 1, got 'x'"]),
    ({"dflash": {"draft_model_path": ""}}, "", [D + "DFlash needs draft_model_path (the draft model)"]),
    ({"eagle3": {"draft_model_path": None}}, "", [E + "EAGLE-3 needs draft_model_path (the draft model)"]),
    ({"dflash": {"enable_dp_attention": True}}, "", [
        D + "DFlash with DP attention needs extra_args enable-dp-lm-head: true (SGLang: 'DFLASH with dp attention requires "
        "--enable-dp-lm-head'), or enable_dp_attention: false"]),
    ({"dflash": {"enable_dp_attention": True, "extra_args": {"enable_dp_lm_head": True}}}, "", []),
    ({"dflash": {"pp_size": 2}}, "", [
        D + "DFlash does not work with pipeline parallelism; pp_size is 2, must be 1 (SGLang: 'Currently DFLASH "
        "speculative decoding only supports pp_size == 1')"]),
    ({"dflash": {"extra_args": {"disaggregation-mode": "prefill"}}}, "", [
        D + "DFlash speculative decoding with prefill/decode disaggregation (extra_args disaggregation-mode prefill): "
        "SGLang accepts the flags, but the DFlash draft's state is not carried from the prefill to the decode server "
        "(sglang#36140); run DFlash without disaggregation"]),
    ({"dflash": {"extra_args": {"--disaggregation_mode": "decode"}}}, "", [
        D + "DFlash speculative decoding with prefill/decode disaggregation (extra_args disaggregation-mode decode): "
        "SGLang accepts the flags, but the DFlash draft's state is not carried from the prefill to the decode server "
        "(sglang#36140); run DFlash without disaggregation"]),
    ({"dflash": {"extra_args": {"disaggregation-mode": "null"}}}, "", []),
    ({"eagle3": {"extra_args": {"disaggregation-mode": "prefill"}}}, "", []),
    ({"dflash": {"dflash_block_size": 0}}, "", [D + "dflash_block_size must be an integer >= 1, got 0"]),
    ({"autoregressive": {"port": 0}}, "", [A + "port 0 is out of range (1-65535)"]),
    ({"autoregressive": {"port": 65536}}, "", [A + "port 65536 is out of range (1-65535)"]),
    ({"autoregressive": {"port": "http"}}, "", [A + "port 'http' is out of range (1-65535)"]),
    ({"autoregressive": {"port": True}}, "", [A + "port True is out of range (1-65535)"]),
    ({"autoregressive": {"model_path": ""}}, "", [A + "model_path is empty (set it here or in sglang_services_common)"]),
    ({"autoregressive": {"tp_size": 0}}, "", [A + "tp_size must be an integer >= 1, got 0"]),
    ({"autoregressive": {"pp_size": "two"}}, "", [A + "pp_size must be an integer >= 1, got 'two'"]),
    ({"autoregressive": {"mem_fraction_static": 1.5}}, "", [A + "mem_fraction_static must be between 0 and 1, got 1.5"]),
    ({"autoregressive": {"mem_fraction_static": 0}}, "", [A + "mem_fraction_static must be between 0 and 1, got 0"]),
    ({"autoregressive": {"mem_fraction_static": 1}}, "", [A + "mem_fraction_static must be between 0 and 1, got 1"]),
    ({}, "medusa, lookahead", ["sglang_services_active: unknown service 'medusa', 'lookahead'; "
                               "choose from eagle3, autoregressive, dflash (or none)"]),
    ({"eagle3": {"speculative_eagle_topk": None, "speculative_num_draft_tokens": None}}, "eagle3", [
        E + "EAGLE-3 takes all three of speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens or none; "
        "speculative_num_steps set, speculative_eagle_topk, speculative_num_draft_tokens missing"]),
    ({"autoregressive": {"mem_fraction_static": "most"}}, "", [A + "mem_fraction_static must be between 0 and 1, got 'most'"]),
    ({"autoregressive": {"extra_args": {"port": 1, "--tensor_parallel_size": 2}}}, "", [
        A + "extra_args --tensor_parallel_size is managed by the role; set tp_size instead",
        A + "extra_args port is managed by the role; set port instead"]),
    ({"autoregressive": {"extra_args": ["--x"]}}, "", [A + "extra_args must be a dict of flag: value, got ['--x']"]),
    ({"autoregressive": {"env": {"HF TOKEN": "x"}}}, "", [A + "env must be a dict of VARIABLE: value"]),
    ({"autoregressive": {"env": ["A=1"]}}, "", [A + "env must be a dict of VARIABLE: value"]),
    ({"autoregressive": {"env": {"A\n": "1"}}}, "", [A + "env must be a dict of VARIABLE: value"]),
    # Role-managed variables: the service's env file is read last and would silently win.
    ({"autoregressive": {"env": {"PATH": "/usr/bin", "CUDA_HOME": "/usr/local/cuda", "HF_TOKEN": "x"}}}, "", [
        A + "env CUDA_HOME is managed by the roles; set cuda_toolkit_version / cuda_toolkit_pip_prefix "
        "(flashinfer_cuda_home) instead",
        A + "env PATH is managed by the roles; remove it: the flashinfer role writes PATH with CUDA_HOME/bin first "
        "(flashinfer_cuda_home)"]),
    ({"eagle3": {"env": {"FLASHINFER_CUDA_ARCH_LIST": "12.0a"}}}, "", [
        E + "env FLASHINFER_CUDA_ARCH_LIST is managed by the roles; set sglang_node_gpu_archs (or flashinfer_cuda_archs) instead"]),
    ({"autoregressive": {"enable_dp_attention": "maybe"}}, "", [
        A + "enable_dp_attention: 'maybe' is not a boolean (use true or false)"]),
    ({"dflash": {"enable_dp_attention": "true"}}, "", [
        "sglang_services_dflash: DFlash with DP attention needs extra_args enable-dp-lm-head: true (SGLang: 'DFLASH with "
        "dp attention requires --enable-dp-lm-head'), or enable_dp_attention: false"]),
    ({"autoregressive": {"cuda_visible_devices": "0,x"}}, "", [A + "cuda_visible_devices: 'x' is not a GPU index" + DEVICES_HINT]),
    ({"autoregressive": {"cuda_visible_devices": [1, 1]}}, "", [A + "cuda_visible_devices: [1, 1] names a GPU twice" + DEVICES_HINT]),
    ({"autoregressive": {"cuda_visible_devices": [True]}}, "", [A + "cuda_visible_devices: True is not a GPU index" + DEVICES_HINT]),
    ({"autoregressive": {"cuda_visible_devices": [0, 1, 2, 3]}}, ["eagle3", "autoregressive"], [
        "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (one of them uses all GPUs); "
        "give each disjoint cuda_visible_devices or run one",
        "sglang_services_active runs eagle3 and autoregressive together on the same port 30000"]),
    ({"autoregressive": {"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
      "eagle3": {"cuda_visible_devices": "3,4,5"}}, ["eagle3", "autoregressive"], [
        "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (3); "
        "give each disjoint cuda_visible_devices or run one"]),
    ({"autoregressive": {"cuda_visible_devices": [0, 1]}, "eagle3": {"cuda_visible_devices": [2, 3]}},
     "eagle3,autoregressive", ["sglang_services_active runs eagle3 and autoregressive together on the same port 30000"]),
])
def test_bad_input(over, active, problems):
    assert f.sglang_services_problems(settings(**over), active) == problems


@pytest.mark.parametrize("over", [
    {"autoregressive": {"port": 1}}, {"autoregressive": {"port": 65535}}, {"autoregressive": {"port": "30001"}},
    {"autoregressive": {"tp_size": "8", "pp_size": 2}}, {"autoregressive": {"mem_fraction_static": 0.99}},
    {"autoregressive": {"mem_fraction_static": "0.5"}}, {"autoregressive": {"cuda_visible_devices": " 0 , 1 "}},
    {"autoregressive": {"extra_args": {"log-level": "info"}, "env": {"HF_TOKEN": "x", "_A1": "y", "hf_home": "/h"}}},
    {"autoregressive": {"enable_dp_attention": None}}, {"autoregressive": {"enable_dp_attention": "yes"}},
    {"eagle3": {"speculative_num_steps": None, "speculative_eagle_topk": None, "speculative_num_draft_tokens": None}},
    {"dflash": {"pp_size": 1, "dflash_block_size": None}}, {"dflash": {"dflash_block_size": 1}},
])
def test_good_values_at_the_edges_have_no_problems(over):
    assert f.sglang_services_problems(settings(**over), "eagle3") == []


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


@pytest.mark.parametrize("value,flag", [(True, True), ("true", True), ("yes", True), (False, False), ("false", False),
                                        ("no", False), ("0", False), (None, False),
                                        ("maybe", False)])  # not a boolean: problems report it; it renders as off
def test_enable_dp_attention_as_operators_pass_it(value, flag):
    argv = f.sglang_service_argv({"model_path": "/m", "host": "h", "port": 1, "enable_dp_attention": value}, "autoregressive")
    assert ("--enable-dp-attention" in argv) is flag


def test_argv_renders_only_what_is_set():
    minimal = {"model_path": "/m", "host": "0.0.0.0", "port": 8000}
    assert f.sglang_service_argv(minimal, "autoregressive") == [
        "--model-path", "/m", "--host", "0.0.0.0", "--port", "8000", "--tp-size", "1"]
    assert f.sglang_service_argv({}, "autoregressive")[:2] == ["--model-path", ""]
    full = dict(minimal, tp_size=4, pp_size=2, mem_fraction_static=0, attention_backend="triton", enable_dp_attention=True)
    assert f.sglang_service_argv(full, "autoregressive") == [
        "--model-path", "/m", "--host", "0.0.0.0", "--port", "8000", "--tp-size", "4", "--pp-size", "2",
        "--mem-fraction-static", "0", "--attention-backend", "triton", "--enable-dp-attention"]
    assert "--pp-size" not in f.sglang_service_argv(dict(minimal, pp_size=None), "autoregressive")
    assert "--pp-size" not in f.sglang_service_argv(dict(minimal, pp_size="1"), "autoregressive")


def test_argv_speculative_settings_by_service():
    eagle3 = f.sglang_service_argv({"model_path": "/m", "speculative_num_steps": 2, "speculative_eagle_topk": None,
                                    "speculative_num_draft_tokens": 0}, "eagle3")
    assert eagle3[8:] == ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "",
                          "--speculative-num-steps", "2", "--speculative-num-draft-tokens", "0"]
    dflash = f.sglang_service_argv({"model_path": "/m", "draft_model_path": "/d", "speculative_num_steps": 2}, "dflash")
    assert dflash[8:] == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d"]
    auto = f.sglang_service_argv({"model_path": "/m", "draft_model_path": "/d", "dflash_block_size": 8}, "autoregressive")
    assert auto[8:] == []


def test_argv_extra_args_values():
    argv = f.sglang_service_argv({"model_path": "/m", "extra_args": {
        "a_flag": True, "--b": False, "c": None, "d": [True, {"k": [1, 2]}], "e": 0, "f": False, "g": "",
        "h": {"y": 1, "x": "s"}}}, "autoregressive")
    assert argv[8:] == ["--a-flag", "--d", "true", '{"k":[1,2]}', "--e", "0", "--g", "", "--h", '{"x":"s","y":1}']


@pytest.mark.parametrize("value,devices", [
    (None, []), ("", []), ([], []), ("3", [3]), (" 0 , 1 ", [0, 1]), ("2,1", [2, 1]), ([1, "2", " 3 "], [1, 2, 3]), (0, [0]),
])
def test_gpu_set(value, devices):
    assert f.gpu_set(value) == devices


@pytest.mark.parametrize("value,message", [
    ("0,x", "'x' is not a GPU index"), ([0, -1], "-1 is not a GPU index"), ([False], "False is not a GPU index"),
    ("1, 1", "'1, 1' names a GPU twice"), ("0,,1", "'' is not a GPU index"), ([1.5], "1.5 is not a GPU index"),
])
def test_gpu_set_rejects(value, message):
    with pytest.raises(ValueError) as info:
        f.gpu_set(value)
    assert str(info.value) == message


def test_conflicts_of_a_service_with_bad_devices_is_all_gpus():
    # Bad devices are reported by sglang_services_problems; for Conflicts= such a service shares all GPUs.
    s = settings(autoregressive={"cuda_visible_devices": "x"}, eagle3={"cuda_visible_devices": [0]},
                 dflash={"cuda_visible_devices": [1]})
    assert f.sglang_services_conflicts(s) == {
        "eagle3": ["sglang-autoregressive.service"],
        "autoregressive": ["sglang-eagle3.service", "sglang-dflash.service"],
        "dflash": ["sglang-autoregressive.service"],
    }
    assert f.sglang_services_conflicts({}) == {
        "eagle3": ["sglang-autoregressive.service", "sglang-dflash.service"],
        "autoregressive": ["sglang-eagle3.service", "sglang-dflash.service"],
        "dflash": ["sglang-eagle3.service", "sglang-autoregressive.service"],
    }


def test_argvs_has_every_service_even_without_settings():
    argvs = f.sglang_services_argvs({"eagle3": {"model_path": "/m"}})
    assert sorted(argvs) == ["autoregressive", "dflash", "eagle3"]
    assert argvs["dflash"][:2] == ["--model-path", ""]
    assert argvs["eagle3"][:2] == ["--model-path", "/m"]


@pytest.mark.parametrize("active,names", [(("eagle3", "dflash"), ["eagle3", "dflash"]), (" eagle3 ,dflash ", ["eagle3", "dflash"])])
def test_active_list_more_shapes(active, names):
    assert f.sglang_services_active_list(active) == names


def test_systemd_exec_one_flag_per_line_and_plain_words_unquoted():
    assert f.systemd_exec(["/p", "--a", "1", "2", "--b", "--c", "x;y", "tab\there", "back\\slash", "q'"]) == (
        '/p \\\n    --a 1 2 \\\n    --b \\\n    --c "x;y" "tab\there" "back\\\\slash" "q\'"')
    assert f.systemd_exec(["--first"]) == "--first"
    assert f.systemd_exec([]) == ""


def test_the_filters_the_role_calls_are_these_functions():
    assert f.FilterModule().filters() == {
        "sglang_service_argv": f.sglang_service_argv, "sglang_services_argvs": f.sglang_services_argvs,
        "sglang_services_problems": f.sglang_services_problems, "sglang_services_conflicts": f.sglang_services_conflicts,
        "sglang_services_active_list": f.sglang_services_active_list, "sglang_gpu_set": f.gpu_set,
        "systemd_exec": f.systemd_exec, "sglang_services_endpoints": f.sglang_services_endpoints,
        "sglang_services_gpu_sets": f.sglang_services_gpu_sets, "sglang_extra_argv": f.extra_argv,
        "sglang_services_port_problems": f.sglang_services_port_problems,
        "sglang_services_input_problems": f.sglang_services_input_problems,
        "sglang_services_gpu_problems": f.sglang_services_gpu_problems,
        "sglang_services_custom_all_reduce": f.sglang_services_custom_all_reduce,
    }


def test_gpu_sets_of_the_active_services():
    settings = {"eagle3": {"cuda_visible_devices": "0,1"}, "dflash": {"cuda_visible_devices": [2]},
                "autoregressive": {"cuda_visible_devices": "x"}}
    assert f.sglang_services_gpu_sets(settings, "eagle3,dflash") == {"eagle3": [0, 1], "dflash": [2]}
    assert f.sglang_services_gpu_sets(settings, "autoregressive") == {"autoregressive": []}  # bad: reported elsewhere
    assert f.sglang_services_gpu_sets(settings, "") == {}


def test_sizes_left_out_mean_one():
    # A service whose settings leave tp_size and pp_size out (an operator's own vars, without the
    # role's built-ins) runs with SGLang's defaults, 1 and 1: no problem, and DFlash's pp check passes.
    s = settings()
    for values in s.values():
        del values["tp_size"], values["pp_size"]
    assert f.sglang_services_problems(s, "dflash") == []


def test_a_service_without_settings_is_reported_not_a_crash():
    s = settings()
    del s["dflash"]
    assert f.sglang_services_problems(s, "eagle3") == [
        D + "model_path is empty (set it here or in sglang_services_common)",
        D + "port None is out of range (1-65535)",
        D + "DFlash needs draft_model_path (the draft model)"]


def test_argv_extra_args_false_in_a_list_and_a_dashed_underscored_flag():
    argv = f.sglang_service_argv({"model_path": "/m", "extra_args": {"--k_l": True, "x": [False, 1.5]}},
                                 "autoregressive")
    assert argv[8:] == ["--k-l", "--x", "false", "1.5"]


def test_active_services_one_without_settings_and_two_shared_gpus():
    s = settings()
    del s["dflash"]
    shared = "give each disjoint cuda_visible_devices or run one"
    assert f.sglang_services_problems(s, "eagle3, dflash, autoregressive") == [
        D + "model_path is empty (set it here or in sglang_services_common)",
        D + "port None is out of range (1-65535)",
        D + "DFlash needs draft_model_path (the draft model)",
        "sglang_services_active runs eagle3 and dflash together, but they share GPUs (one of them uses all GPUs); " + shared,
        "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (one of them uses all GPUs); "
        + shared,
        "sglang_services_active runs eagle3 and autoregressive together on the same port 30000",
        "sglang_services_active runs dflash and autoregressive together, but they share GPUs (one of them uses all GPUs); "
        + shared]
    s = settings(autoregressive={"cuda_visible_devices": [0, 1, 2, 3], "port": 30001},
                 eagle3={"cuda_visible_devices": "2,3,4"})
    assert f.sglang_services_problems(s, ["eagle3", "autoregressive"]) == [
        "sglang_services_active runs eagle3 and autoregressive together, but they share GPUs (2,3); "
        "give each disjoint cuda_visible_devices or run one"]


@pytest.mark.parametrize("over, active, expected", [
    ({}, "eagle3", {"eagle3": {"url": "http://127.0.0.1:30000", "port": 30000}}),
    ({"host": "0.0.0.0"}, "eagle3", {"eagle3": {"url": "http://127.0.0.1:30000", "port": 30000}}),
    ({"host": "::"}, "eagle3", {"eagle3": {"url": "http://127.0.0.1:30000", "port": 30000}}),
    ({"host": "10.0.0.5", "port": "30001"}, "eagle3", {"eagle3": {"url": "http://10.0.0.5:30001", "port": 30001}}),
    ({"host": "0.0.0.0", "health_host": "fd00::5"}, "eagle3", {"eagle3": {"url": "http://[fd00::5]:30000", "port": 30000}}),
    ({}, "none", {}),
    ({}, "", {}),
])
def test_endpoints_are_where_the_host_reaches_each_active_service(over, active, expected):
    assert f.sglang_services_endpoints(settings(eagle3=over), active) == expected


def test_endpoints_of_several_active_services():
    s = settings(autoregressive={"port": 30001, "cuda_visible_devices": [1]}, eagle3={"cuda_visible_devices": [0]})
    assert f.sglang_services_endpoints(s, ["eagle3", "autoregressive"]) == {
        "eagle3": {"url": "http://127.0.0.1:30000", "port": 30000},
        "autoregressive": {"url": "http://127.0.0.1:30001", "port": 30001}}


# Lines as the kernel writes them (the header, a listener of uid 0 on 0.0.0.0:30000 = 0x7530, one of
# uid 999 on 127.0.0.1:30001, an established connection to 30002 that is not a listener; tcp6: a
# listener of uid 0 on [::]:30000 again).
PROC_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1135 1 0000 100 0 0 10 0
   1: 0100007F:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 1136 1 0000 100 0 0 10 0
   2: 0100007F:7532 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 1137 1 0000 20 4 30 10 -1
   3: truncated
"""
PROC_TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:7530 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1
"""


def endpoints(**ports):
    return {name: {"url": "http://127.0.0.1:%d" % port, "port": port} for name, port in ports.items()}


def test_tcp_listeners_reads_listening_sockets_of_both_files_once_per_port_and_owner():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import tcp_listeners
    assert tcp_listeners([PROC_TCP, PROC_TCP6]) == [{"port": 30000, "uid": 0}, {"port": 30001, "uid": 999}]
    assert tcp_listeners([]) == tcp_listeners(None) == tcp_listeners(["", "garbage"]) == []


def test_a_port_another_service_listens_on_is_refused_and_the_service_users_own_is_not():
    texts = [PROC_TCP, PROC_TCP6]
    # uid 0 (not sglang, uid 999) holds 30000: refused, with the variable to change and how to find it.
    [problem] = f.sglang_services_port_problems(endpoints(eagle3=30000), texts, "sglang", "999")
    assert problem.startswith("port 30000 of the eagle3 service is already in use on this host: a socket of uid 0")
    assert "not sglang's" in problem and "ss -ltnp 'sport = :30000'" in problem
    assert "sglang_services_common.port or sglang_services_eagle3.port" in problem
    # 30001 is the service user's own (the running server a rollout restarts), 30002 only a connection.
    assert f.sglang_services_port_problems(endpoints(eagle3=30001, dflash=30002), texts, "sglang", 999) == []
    # Before the user exists any listener is another service's.
    [problem] = f.sglang_services_port_problems(endpoints(dflash=30001), texts, "sglang", "")
    assert "uid 999 listens on it, not sglang's (that user does not exist yet)" in problem
    assert f.sglang_services_port_problems({}, texts, "sglang", None) == []


def test_a_service_without_a_host_or_with_an_empty_one_is_reached_on_the_loopback():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import sglang_services_endpoints
    assert sglang_services_endpoints({"eagle3": {"port": 30000}, "dflash": {"host": "", "port": 30001},
                                      "autoregressive": {"host": None, "port": 30002}},
                                     ["eagle3", "dflash", "autoregressive"]) == endpoints(
        eagle3=30000, dflash=30001, autoregressive=30002)


def test_tcp_listeners_takes_the_shortest_socket_line_and_reads_on_after_a_bad_one():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import tcp_listeners
    text = ("   0: 00000000:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
            "   1: 00000000:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999\n")
    assert tcp_listeners([text]) == [{"port": 30000, "uid": 999}]


def test_a_port_held_by_other_owners_names_them_all_in_one_sentence():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import port_taken_problems
    listeners = [{"port": 30000, "uid": 0}, {"port": 30000, "uid": 1000}, {"port": 30000, "uid": 999}]
    assert port_taken_problems(endpoints(eagle3=30000), listeners, "sglang", 999) == [
        "port 30000 of the eagle3 service is already in use on this host: a socket of uid 0, 1000 listens on it, not "
        "sglang's (another service; `ss -ltnp 'sport = :30000'` names it); stop that service or give eagle3 "
        "another port (sglang_services_common.port or sglang_services_eagle3.port)"]


def test_an_extra_arg_keeps_its_case_and_loses_only_its_leading_dashes():
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import extra_argv
    assert extra_argv({"--X-debug_level": 2, "XLA": True}) == ["--X-debug-level", "2", "--XLA"]
