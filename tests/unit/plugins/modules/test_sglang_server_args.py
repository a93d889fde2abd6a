"""The sglang_server_args module against a small fake `sglang` whose parser is built the way SGLang's
is (ServerArgs.add_cli_args on an argparse parser; SpeculativeAlgorithm.from_string as sglang 0.5.23
has it, sglang/srt/speculative/spec_info.py lines 49-65). The fake stands in for SGLang because SGLang
and torch are not installed here; the real SGLang 0.5.23 runs the module in Molecule
(test_sglang_services.py), where the algorithm error is SGLang's own. The fake is installed the way a
wheel is (a *.dist-info/RECORD that lists its files), so the verification stamp sees it as it sees
the real venv's packages."""

import json
import os
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_server_args
from module_runner import run_module

FAKE = {
    "sglang/__init__.py": '__version__ = "0.5.23"\n',
    "sglang/srt/__init__.py": "",
    "sglang/srt/server_args.py": '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--attention-backend", choices=["flashinfer", "triton", "trtllm_mha"])
        parser.add_argument("--speculative-algorithm", type=str)
        parser.add_argument("--trust-remote-code", action="store_true")
''',
    "sglang/srt/speculative/__init__.py": "",
    "sglang/srt/speculative/spec_info.py": '''
from enum import Enum, auto


_RESERVED_ALIASES = frozenset({"NEXTN"})  # sglang/srt/speculative/spec_registry.py line 183


def _get_registered_spec(name):
    return None  # no plugin registered an algorithm


class SpeculativeAlgorithm(Enum):
    DFLASH = auto()
    EAGLE = auto()
    EAGLE3 = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, name):
        if name is None:
            return cls.NONE
        upper = name.upper()
        try:
            return cls[upper]
        except KeyError:
            pass
        if upper in _RESERVED_ALIASES:
            return cls.EAGLE
        spec = _get_registered_spec(upper)
        if spec is not None:
            return spec
        raise ValueError(f"Unknown speculative algorithm name: {name}")
''',
}


SGLANG_SERVER_ARGS = '''
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        %s
'''


def drop_sglang():
    for name in [name for name in sys.modules if name == "sglang" or name.startswith("sglang.")]:
        del sys.modules[name]


def install(site, files):
    """The files under `site`, and a RECORD that lists them, as a wheel install leaves them."""
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    record = site / "sglang-0.5.23.dist-info" / "RECORD"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("".join("%s,,\n" % rel for rel in sorted(files)) + "sglang-0.5.23.dist-info/RECORD,,\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    install(site, FAKE)
    monkeypatch.syspath_prepend(str(site))
    drop_sglang()
    yield site
    drop_sglang()


def validate(capsys, services, **args):
    drop_sglang()  # each run is a fresh interpreter on the host
    return run_module(sglang_server_args.main, capsys, dict(args, services=services))


def test_good_arguments_pass(site, capsys):
    result = validate(capsys, {"eagle3": ["--model-path", "/m", "--speculative-algorithm", "EAGLE3"],
                               "autoregressive": ["--model-path", "/m", "--trust-remote-code"]})
    assert result["_rc"] == 0, result
    assert result["changed"] is False
    assert (result["sglang"], result["services"]) == ("0.5.23", {"autoregressive": 3, "eagle3": 4})
    assert "verified" not in result  # no stamp asked for


def test_unknown_flag_and_bad_choice_fail_with_sglangs_words(site, capsys):
    result = validate(capsys, {"autoregressive": ["--model-path", "/m", "--no-such-flag", "1"],
                               "dflash": ["--attention-backend", "fa9"],
                               "eagle3": ["--port", "http"]})
    assert result["_rc"] == 1 and result["failed"] is True
    msg = result["msg"]
    assert msg.startswith("SGLang 0.5.23 rejects the arguments: ")
    assert "sglang-autoregressive: unrecognized arguments: --no-such-flag 1" in msg
    assert "sglang-dflash: argument --attention-backend: invalid choice: 'fa9'" in msg
    assert "sglang-eagle3: argument --port: invalid int value: 'http'" in msg


def test_unknown_speculative_algorithm_fails(site, capsys):
    result = validate(capsys, {"dflash": ["--speculative-algorithm", "DFLASHX"]})
    assert result["_rc"] == 1
    assert result["msg"] == ("SGLang 0.5.23 rejects the arguments: sglang-dflash: --speculative-algorithm DFLASHX: "
                             "Unknown speculative algorithm name: DFLASHX")


def test_arguments_that_are_not_a_list_of_strings_fail(site, capsys):
    result = validate(capsys, {"eagle3": "--port 1", "dflash": ["--port", 1], "autoregressive": []})
    assert result["_rc"] == 1
    assert result["msg"] == ("services: the arguments of dflash, eagle3 are not a list of strings (the "
                             "sglang_services role renders them from the service settings)")


def test_no_sglang_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site" not in os.path.basename(p) or "packages" in p])
    drop_sglang()
    result = validate(capsys, {"eagle3": []})
    assert result["_rc"] == 1
    assert result["msg"].startswith("cannot import SGLang's server arguments (No module named 'sglang")
    assert result["msg"].endswith("run with the SGLang venv's python")


@pytest.mark.parametrize("server_args, msg", [
    ("raise OSError('libcudart.so.13: cannot open shared object file')",
     "cannot import SGLang's server arguments (OSError: libcudart.so.13: cannot open shared object file): reinstall the "
     "venv (re-run site.yml)"),
    ("raise RuntimeError('CUDA\\ninitialization failed')",
     "cannot import SGLang's server arguments (RuntimeError: CUDA initialization failed): reinstall the venv "
     "(re-run site.yml)"),
    (SGLANG_SERVER_ARGS % "raise KeyError('port')", "sglang_server_args: unexpected KeyError: 'port'"),
])
def test_what_sglang_raises_is_one_line(tmp_path, monkeypatch, capsys, server_args, msg):
    site = tmp_path / "broken"
    install(site, {"sglang/__init__.py": '__version__ = "0.5.23"\n', "sglang/srt/__init__.py": "",
                   "sglang/srt/server_args.py": server_args})
    monkeypatch.syspath_prepend(str(site))
    result = validate(capsys, {"eagle3": []})
    drop_sglang()
    assert (result["_rc"], result["msg"]) == (1, msg)


# ---- the verification stamp (module_utils/verified.py) -------------------------------------------

ARGS = {"eagle3": ["--model-path", "/m", "--speculative-algorithm", "EAGLE3"]}


def imports_sglang(capsys, stamp, services=None, **args):
    """Run with a stamp; True when the module imported SGLang (parsed), False when the stamp answered."""
    result = validate(capsys, services or ARGS, stamp=str(stamp), **args)
    assert result["_rc"] == 0, result
    assert result["sglang"] == "0.5.23"
    parsed = "sglang" in sys.modules
    assert result["verified"] == ("checked" if parsed else "unchanged")
    return parsed


def test_a_stamp_spares_the_parse_while_nothing_changed(site, tmp_path, capsys):
    stamp = tmp_path / "venv" / ".verified" / "sglang-server-args.json"
    assert imports_sglang(capsys, stamp) is True
    recorded = json.loads(stamp.read_text())
    assert recorded["result"]["services"] == {"eagle3": 4} and len(recorded["fingerprint"]) == 64
    assert imports_sglang(capsys, stamp) is False
    assert imports_sglang(capsys, stamp) is False


def test_an_edited_sglang_file_is_parsed_again(site, tmp_path, capsys):
    stamp = tmp_path / "sglang-server-args.json"
    assert imports_sglang(capsys, stamp) is True
    target = site / "sglang" / "srt" / "server_args.py"
    stat = target.stat()
    target.write_text(target.read_text().replace("trtllm_mha", "trtllm_mhb"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with its mtime put back
    assert imports_sglang(capsys, stamp) is True
    assert imports_sglang(capsys, stamp) is False


def test_other_arguments_or_environment_are_parsed_again(site, tmp_path, capsys, monkeypatch):
    stamp = tmp_path / "sglang-server-args.json"
    assert imports_sglang(capsys, stamp) is True
    assert imports_sglang(capsys, stamp, services={"eagle3": ARGS["eagle3"] + ["--port", "30001"]}) is True
    monkeypatch.setenv("SGLANG_SOMETHING", "1")
    assert imports_sglang(capsys, stamp, services={"eagle3": ARGS["eagle3"] + ["--port", "30001"]}) is True
    monkeypatch.setenv("SUDO_COMMAND", "/bin/sh -c echo BECOME-SUCCESS-abc")  # differs on every connection
    assert imports_sglang(capsys, stamp, services={"eagle3": ARGS["eagle3"] + ["--port", "30001"]}) is False


def test_rejected_arguments_are_never_recorded(site, tmp_path, capsys):
    stamp = tmp_path / "sglang-server-args.json"
    bad = {"dflash": ["--speculative-algorithm", "DFLASHX"]}
    for attempt in (1, 2):
        result = validate(capsys, bad, stamp=str(stamp))
        assert attempt and result["_rc"] == 1
        assert result["_rc"] == 1 and "Unknown speculative algorithm name" in result["msg"]
    assert not stamp.exists()


def test_check_mode_never_writes_the_stamp(site, tmp_path, capsys):
    stamp = tmp_path / "sglang-server-args.json"
    result = run_module(sglang_server_args.main, capsys, {"services": ARGS, "stamp": str(stamp)}, check_mode=True)
    assert result["_rc"] == 0 and result["verified"] == "checked"
    assert not stamp.exists()


def test_a_stamp_that_cannot_be_written_warns_and_parses_next_time(site, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = validate(capsys, ARGS, stamp=str(blocker / "stamp.json"))
    assert result["_rc"] == 0
    # ansible-core 2.19 sends warnings as structured events; older releases as plain strings.
    assert ("cannot write the verification stamp %s/stamp.json (File exists): the next run checks in full again"
            % blocker) in json.dumps(result["warnings"])


def test_sglang_is_imported_with_the_builtin_intern(tmp_path, monkeypatch, capsys):
    # ansible-core 2.19 replaces sys.intern in a module's process (SysInternPatch, keeping the builtin
    # as unpatched_implementation); torch._dynamo, imported by SGLang, refuses anything but the
    # builtin: "substitute_in_graph expects a function". The stand-in refuses it the same way.
    site = tmp_path / "dynamo"
    install(site, dict(FAKE, **{"sglang/__init__.py": (
        "import sys, types\n"
        "if not isinstance(sys.intern, types.BuiltinFunctionType):\n"
        "    raise TypeError('substitute_in_graph expects a function but got %r' % (sys.intern,))\n"
        "__version__ = '0.5.23'\n")}))
    monkeypatch.syspath_prepend(str(site))
    builtin = getattr(sys.intern, "unpatched_implementation", sys.intern)  # Ansible may have patched it here already

    class Patched:
        unpatched_implementation = builtin

        def __call__(self, value):
            return builtin(str(value))

    monkeypatch.setattr(sys, "intern", Patched())
    result = validate(capsys, ARGS)
    drop_sglang()
    assert result["_rc"] == 0, result
    assert isinstance(sys.intern, Patched)  # Ansible's patch is back for the rest of the module


# ---- resolution (compute_capabilities, resolve) -------------------------------------------------
# A fake of the parts of SGLang 0.5.23 (and torch) the resolution touches, each shaped as SGLang's:
# the platform probes are lru_cache(partial(_check_cuda_device_version, ...)) over is_cuda() and
# get_device_sm() (sglang/srt/utils/common.py lines 273-320), read through runtime_context's
# _PLATFORM_PROBES and override_platform (runtime_context.py lines 1824-1952); ServerArgs.resolve_once
# declares each choice as (step, {field: value}) in _resolved_overrides and the DSA step reads
# torch.cuda.get_device_capability() directly (arg_groups/overrides.py line 631). Like a CPU host,
# the fake torch has no GPU. The real SGLang resolves in Molecule (test_sglang_services.py).
RESOLVING = dict(FAKE, **{
    "torch/__init__.py": "from . import cuda\n",
    "torch/cuda.py": (
        "def get_device_capability(device=None):\n"
        "    raise RuntimeError('Found no NVIDIA driver on your system')\n"),
    "sglang/srt/utils/__init__.py": "",
    "sglang/srt/utils/common.py": '''
import os
from functools import lru_cache, partial


@lru_cache(maxsize=1)
def is_cuda():
    return os.environ.get("FAKE_HOST_CUDA") == "1"  # a CPU host, unless the test says otherwise


def get_device_sm():
    return 0


def _check_cuda_device_version(device_capability_majors, cuda_version):
    if not is_cuda():
        return False
    return get_device_sm() // 10 in device_capability_majors


is_sm100_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8)))
is_sm120_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[12], cuda_version=(12, 8)))


def get_device_capability(device_id=0):
    return None, None
''',
    # engine.py's launcher step, with the NVLS rule of lines 1909-1915 and its process-wide side effects.
    "sglang/srt/entrypoints/__init__.py": "",
    "sglang/srt/entrypoints/engine.py": '''
import os
import signal


def set_ulimit():
    raise AssertionError("the open-files limit of the module's process was changed")


def set_prometheus_multiproc_dir():
    raise AssertionError("a Prometheus directory was made")


def _set_envs_and_config(server_args):
    if "NCCL_NVLS_ENABLE" not in os.environ or server_args.enable_nccl_nvls:
        os.environ["NCCL_NVLS_ENABLE"] = str(int(server_args.enable_nccl_nvls))
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    set_ulimit()
    set_prometheus_multiproc_dir()
    signal.signal(signal.SIGQUIT, lambda signum, frame: None)
''',
    "sglang/srt/runtime_context.py": '''
import contextlib

_PLATFORM_PROBES = {"is_cuda": "is_cuda", "is_sm100": "is_sm100_supported", "is_sm120": "is_sm120_supported"}
_PLATFORM_VALUES = {"device_sm": "get_device_sm", "device_capability": "get_device_capability"}
_OVERRIDES = {}


class _Platform:
    def __getattr__(self, name):
        from sglang.srt.utils import common
        if name in _OVERRIDES:
            return _OVERRIDES[name]
        return getattr(common, {**_PLATFORM_PROBES, **_PLATFORM_VALUES}[name])()


def get_platform():
    return _Platform()


@contextlib.contextmanager
def override_platform(**facts):
    unknown = set(facts) - set(_PLATFORM_PROBES) - set(_PLATFORM_VALUES)
    if unknown:
        raise ValueError("unknown platform fact(s): %s" % sorted(unknown))
    _OVERRIDES.update(facts)
    try:
        yield
    finally:
        _OVERRIDES.clear()
''',
    "sglang/srt/server_args.py": '''
import os

import torch
from sglang.srt.runtime_context import get_platform


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--device", type=str)
        parser.add_argument("--attention-backend", type=str)
        parser.add_argument("--dsa-decode-backend", type=str)
        parser.add_argument("--moe-runner-backend", type=str, default="auto")
        parser.add_argument("--speculative-algorithm", type=str)
        parser.add_argument("--disaggregation-mode", type=str, default="null")
        parser.add_argument("--enable-nccl-nvls", action="store_true")

    @classmethod
    def from_cli_args(cls, namespace):
        record = cls()
        record.__dict__.update(vars(namespace))
        return record

    def resolve_once(self):
        self._resolved_overrides = []
        if self.device != "cuda":
            raise RuntimeError("No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.")
        os.environ["SGLANG_SET_BY_RESOLUTION"] = "1"  # SGLang's handle_environment_variables sets some
        from sglang.srt.utils import common
        # A step that calls a probe itself, not through get_platform() (as moe_hook.py line 335 does).
        self.direct_probe_backend = str(common.is_sm100_supported())
        if self.speculative_algorithm and self.disaggregation_mode != "null":
            raise ValueError("speculative decoding with disaggregation is not supported")
        if self.model_path.endswith("typo"):
            raise TypeError("__init__() got an unexpected keyword argument 'x'")  # a bug, not a refusal
        if self.model_path.endswith("no-tokenizer"):
            raise FileNotFoundError("tokenizer.json not found in " + self.model_path)
        if self.attention_backend is None:
            backend = "trtllm_mha" if get_platform().is_sm100 else "flashinfer" if get_platform().is_sm120 else "triton"
            self._resolved_overrides.append(("_attention_backend_default", {"attention_backend": backend}))
            self.attention_backend = backend
        if "dsa" in self.model_path and self.dsa_decode_backend is None:
            major, _minor = torch.cuda.get_device_capability()
            backend = "trtllm" if major >= 10 else "fa3"
            self._resolved_overrides.append(("_dsa_split_backend_resolution", {"dsa_decode_backend": backend}))
            self.dsa_decode_backend = backend
        self.seen = {"offline": os.environ.get("HF_HUB_OFFLINE"), "note": os.environ.get("SERVICE_NOTE")}

    def resolved_dict(self):
        values = dict(vars(self))
        values.pop("_resolved_overrides")
        values["tokenizer_backend"] = "huggingface %s %s" % (values["seen"]["offline"], values["seen"]["note"])
        return values
''',
})


@pytest.fixture
def resolving(tmp_path, monkeypatch):
    site = tmp_path / "resolving"
    install(site, RESOLVING)
    monkeypatch.syspath_prepend(str(site))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # the module sets them for its process: undone after
        monkeypatch.setenv(name, "0")
    for name in [name for name in sys.modules if name == "torch" or name.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    drop_sglang()
    models = tmp_path / "models"
    for model in ("qwen", "dsa", "typo", "no-tokenizer"):
        (models / model).mkdir(parents=True)
        (models / model / "config.json").write_text("{}")
    yield models
    drop_sglang()
    for name in [name for name in sys.modules if name == "torch" or name.startswith("torch.")]:
        del sys.modules[name]


def resolve(capsys, services, ccs, **args):
    return validate(capsys, services, resolve=args.pop("resolve", list(services)), compute_capabilities=ccs, **args)


def test_each_service_is_resolved_for_each_gpu_kind_by_sglangs_own_rules(resolving, capsys):
    services = {"eagle3": ["--model-path", str(resolving / "qwen")],
                "dsa": ["--model-path", str(resolving / "dsa"), "--dsa-decode-backend", "tilelang"],
                "idle": ["--model-path", "/nowhere"]}
    result = resolve(capsys, services, ["12.0", "10.3"], resolve=["eagle3", "dsa"],
                     environments={"eagle3": {"SERVICE_NOTE": "eagle3's own"}})
    assert result["_rc"] == 0, result
    eagle3, dsa = result["resolved"]["eagle3"], result["resolved"]["dsa"]
    # SGLang's probes answered for each GPU (is_sm120 on 12.0, is_sm100 on 10.3), each choice named.
    assert {cc: (e["backends"]["attention_backend"], e["chosen_by"]["attention_backend"]) for cc, e in eagle3.items()} == {
        "12.0": ("flashinfer", "SGLang's _attention_backend_default"),
        "10.3": ("trtllm_mha", "SGLang's _attention_backend_default")}
    # Set by the service / SGLang's argparse default / the service's env and offline while resolving.
    assert (dsa["12.0"]["backends"]["dsa_decode_backend"], dsa["12.0"]["chosen_by"]["dsa_decode_backend"]) == (
        "tilelang", "the service's arguments")
    assert (eagle3["12.0"]["backends"]["moe_runner_backend"], eagle3["12.0"]["chosen_by"]["moe_runner_backend"]) == (
        "auto", "SGLang's default")
    assert eagle3["12.0"]["backends"]["tokenizer_backend"] == "huggingface 1 eagle3's own"
    assert dsa["10.3"]["backends"]["tokenizer_backend"] == "huggingface 1 None"
    assert result["unresolved"] == {} and "idle" not in result["resolved"]
    # Nothing of the resolution is left in the process: the environment, SGLang's probes and torch.
    # (The module's process stays offline: huggingface_hub reads HF_HUB_OFFLINE when SGLang imports it.)
    assert "SGLANG_SET_BY_RESOLUTION" not in os.environ and os.environ["HF_HUB_OFFLINE"] == "1"
    from sglang.srt.utils import common
    import torch
    assert common.is_cuda() is False and common.is_sm120_supported() is False
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver"):
        torch.cuda.get_device_capability()


def test_a_backend_that_cannot_run_on_the_gpus_fails_naming_the_step_and_the_fix(resolving, capsys):
    services = {"dsa": ["--model-path", str(resolving / "dsa")]}
    result = resolve(capsys, services, ["10.3", "12.0"])
    assert result["_rc"] == 1
    assert result["msg"].startswith(
        "sglang_services_dsa: SGLang 0.5.23 resolves dsa_decode_backend trtllm on compute capability 12.0 (chosen by "
        "SGLang's _dsa_split_backend_resolution), which runs only on compute capability 10.x (FlashInfer 0.7.2 ")
    assert result["msg"].endswith("Set extra_args dsa-decode-backend to one of: tilelang")
    assert "10.3" not in result["msg"]  # its trtllm runs there
    # What was resolved comes with the failure.
    assert result["resolved"]["dsa"]["10.3"]["backends"]["dsa_decode_backend"] == "trtllm"
    assert sorted(result["resolved"]["dsa"]) == ["10.3", "12.0"] and result["unresolved"] == {}


def test_sglangs_own_refusal_a_missing_model_and_bad_input(resolving, capsys):
    services = {"pd": ["--model-path", str(resolving / "qwen"), "--speculative-algorithm", "EAGLE3",
                       "--disaggregation-mode", "prefill"],
                "later": ["--model-path", str(resolving / "not-yet")]}
    result = resolve(capsys, services, ["12.0"])
    assert (result["_rc"], result["msg"]) == (1, "SGLang 0.5.23 refuses sglang-pd on compute capability 12.0: "
                                                 "speculative decoding with disaggregation is not supported")
    result = resolve(capsys, {"later": services["later"]}, ["12.0"])
    assert result["_rc"] == 0 and result["resolved"] == {}
    assert result["unresolved"] == {"later": "the model config %s/not-yet/config.json is not on this host" % resolving}
    assert resolve(capsys, services, ["sm120"])["msg"] == \
        "compute_capabilities: 'sm120' is not a compute capability like 12.0"
    assert resolve(capsys, services, ["12.0"], resolve=["nope"])["msg"] == \
        "resolve: nope is not one of the services (later, pd)"


def test_a_model_replaced_at_its_path_is_resolved_again(resolving, tmp_path, capsys):
    stamp = tmp_path / "stamp.json"
    services = {"eagle3": ["--model-path", str(resolving / "qwen")]}
    for expected in ("checked", "unchanged"):
        result = resolve(capsys, services, ["12.0"], stamp=str(stamp))
        assert (result["_rc"], result["verified"]) == (0, expected), result
    (resolving / "qwen" / "config.json").write_text('{"architectures": ["Other"]}')
    assert resolve(capsys, services, ["12.0"], stamp=str(stamp))["verified"] == "checked"
    assert resolve(capsys, services, ["12.0", "10.3"], stamp=str(stamp))["verified"] == "checked"


def test_the_nccl_environment_is_sglangs_and_an_env_it_overrides_is_refused(resolving, capsys):
    # SGLang's launcher sets NCCL_NVLS_ENABLE from --enable-nccl-nvls over the environment: the NCCL
    # variables each service runs with are returned; an env that says otherwise names both. The
    # launcher's process-wide side effects are held back (the fake raises if they run).
    import signal
    handler = signal.getsignal(signal.SIGQUIT)
    qwen = ["--model-path", str(resolving / "qwen")]
    services = {"plain": qwen, "nvls": qwen + ["--enable-nccl-nvls"], "pinned": qwen}
    result = resolve(capsys, services, ["12.0"], environments={"pinned": {"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN"}})
    assert result["_rc"] == 0, result
    assert {name: by_cc["12.0"]["nccl_environment"] for name, by_cc in result["resolved"].items()} == {
        "plain": {"NCCL_NVLS_ENABLE": "0"}, "nvls": {"NCCL_NVLS_ENABLE": "1"},
        "pinned": {"NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "0"}}
    assert signal.getsignal(signal.SIGQUIT) == handler and "CUDA_DEVICE_MAX_CONNECTIONS" not in os.environ
    result = resolve(capsys, {"nvls": services["nvls"]}, ["12.0", "10.3"], environments={"nvls": {"NCCL_NVLS_ENABLE": 0}})
    assert (result["_rc"], result["msg"]) == (1, (
        "sglang_services_nvls: env NCCL_NVLS_ENABLE=0, but SGLang 0.5.23 sets NCCL_NVLS_ENABLE=1 when it starts with "
        "the service's arguments (--enable-nccl-nvls; sglang/srt/entrypoints/engine.py _set_envs_and_config): the "
        "server would not run with what its env says. Remove the env setting or the flag"))


def test_steps_that_call_a_probe_directly_see_the_gpu_where_the_host_has_cuda(resolving, capsys, monkeypatch):
    services = {"eagle3": ["--model-path", str(resolving / "qwen")]}
    monkeypatch.setenv("FAKE_HOST_CUDA", "1")  # a host with GPUs: its probes' caches are cleared and asked again
    result = resolve(capsys, services, ["10.3", "12.0"])
    assert {cc: e["backends"]["direct_probe_backend"] for cc, e in result["resolved"]["eagle3"].items()} == {
        "10.3": "True", "12.0": "False"}
    monkeypatch.delenv("FAKE_HOST_CUDA")  # without GPUs such a step sees none (the module's notes say so)
    result = resolve(capsys, services, ["10.3"])
    assert result["resolved"]["eagle3"]["10.3"]["backends"]["direct_probe_backend"] == "False"


def test_a_refusal_leaves_the_process_as_it_was(resolving, capsys):
    services = {"pd": ["--model-path", str(resolving / "qwen"), "--speculative-algorithm", "EAGLE3",
                       "--disaggregation-mode", "prefill"]}
    result = resolve(capsys, services, ["10.3"])
    assert result["msg"] == ("SGLang 0.5.23 refuses sglang-pd on compute capability 10.3: speculative decoding with "
                             "disaggregation is not supported")
    from sglang.srt.utils import common
    import torch
    assert "SGLANG_SET_BY_RESOLUTION" not in os.environ
    assert (common.get_device_sm(), common.is_sm100_supported()) == (0, False)
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver"):
        torch.cuda.get_device_capability()


def test_a_bug_is_not_a_refusal_and_an_unreadable_file_is_tried_again(resolving, tmp_path, capsys):
    result = resolve(capsys, {"x": ["--model-path", str(resolving / "typo")]}, ["12.0"])
    assert (result["_rc"], result["msg"]) == (
        1, "sglang_server_args: unexpected TypeError: __init__() got an unexpected keyword argument 'x'")
    stamp = tmp_path / "stamp.json"
    services = {"x": ["--model-path", str(resolving / "no-tokenizer")], "y": ["--model-path", str(resolving / "qwen")]}
    result = resolve(capsys, services, ["12.0", "10.3"], stamp=str(stamp))
    assert result["_rc"] == 0 and sorted(result["resolved"]) == ["y"] and "retry" not in result
    assert result["unresolved"] == {"x": "SGLang could not read what it needs (FileNotFoundError: tokenizer.json not "
                                         "found in %s/no-tokenizer)" % resolving}
    assert not stamp.exists()  # the next run resolves again
    assert resolve(capsys, {"y": services["y"]}, ["12.0"], stamp=str(stamp))["verified"] == "checked" and stamp.exists()


def test_a_repository_id_is_looked_up_in_the_services_hugging_face_cache(resolving, capsys):
    services = {"hub": ["--model-path", "Qwen/Qwen3-8B"], "home": ["--model-path", "Qwen/Qwen3-8B"]}
    result = resolve(capsys, services, ["12.0"], environments={"hub": {"HF_HUB_CACHE": "/cache/hub"},
                                                               "home": {"HF_HOME": "/srv/hf"}})
    assert result["unresolved"] == {
        "home": "the config.json of Qwen/Qwen3-8B is not in the service user's Hugging Face cache (/srv/hf/hub)",
        "hub": "the config.json of Qwen/Qwen3-8B is not in the service user's Hugging Face cache (/cache/hub)"}


def test_a_launcher_that_cannot_be_imported_fails_before_any_resolution(resolving, tmp_path, capsys, monkeypatch):
    # A venv whose SGLang launcher lacks a dependency (as a missing zmq would): one line, not a silent
    # skip of the NCCL check.
    broken = tmp_path / "broken-launcher"
    install(broken, dict(RESOLVING, **{"sglang/srt/entrypoints/engine.py": "import bsg_no_such_dependency\n"}))
    monkeypatch.syspath_prepend(str(broken))
    result = resolve(capsys, {"eagle3": ["--model-path", str(resolving / "qwen")]}, ["12.0"])
    assert (result["_rc"], result["msg"]) == (1, (
        "cannot import SGLang's launcher (sglang.srt.entrypoints.engine: No module named 'bsg_no_such_dependency'): "
        "reinstall the venv (re-run site.yml)"))
    # Nothing to resolve (no model config on the host): the launcher is not imported at all.
    result = resolve(capsys, {"later": ["--model-path", str(resolving / "not-yet")]}, ["12.0"])
    assert (result["_rc"], sorted(result["unresolved"])) == (0, ["later"])
    assert "sglang.srt.entrypoints.engine" not in sys.modules
