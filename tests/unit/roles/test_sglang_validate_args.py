"""roles/sglang_services/files/validate_args.py against a small fake `sglang` whose parser is built the
way SGLang's is (ServerArgs.add_cli_args on an argparse parser; SpeculativeAlgorithm.from_string as
sglang 0.5.23 has it, sglang/srt/speculative/spec_info.py lines 49-65). The fake stands in for
SGLang because SGLang and torch are not installed here; the real SGLang 0.5.23 runs the same script
in Molecule (test_sglang_services.py), where the algorithm error is SGLang's own."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "sglang_services", "files", "validate_args.py")

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


@pytest.fixture
def site(tmp_path):
    for rel, text in FAKE.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def validate(site, services):
    env = dict(os.environ, PYTHONPATH=str(site))
    proc = subprocess.run([sys.executable, SCRIPT, json.dumps(services)], capture_output=True, text=True,
                          env=env, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_good_arguments_pass(site):
    rc, out, err = validate(site, {"eagle3": ["--model-path", "/m", "--speculative-algorithm", "EAGLE3"],
                                   "autoregressive": ["--model-path", "/m", "--trust-remote-code"]})
    assert rc == 0, err
    assert json.loads(out) == {"sglang": "0.5.23", "services": {"autoregressive": 3, "eagle3": 4}}


def test_unknown_flag_and_bad_choice_fail_with_sglangs_words(site):
    rc, out, err = validate(site, {"autoregressive": ["--model-path", "/m", "--no-such-flag", "1"],
                                   "dflash": ["--attention-backend", "fa9"],
                                   "eagle3": ["--port", "http"]})
    assert rc == 1 and out == ""
    assert err.startswith("SGLang 0.5.23 rejects the arguments: ")
    assert "sglang-autoregressive: unrecognized arguments: --no-such-flag 1" in err
    assert "sglang-dflash: argument --attention-backend: invalid choice: 'fa9'" in err
    assert "sglang-eagle3: argument --port: invalid int value: 'http'" in err


def test_unknown_speculative_algorithm_fails(site):
    rc, _out, err = validate(site, {"dflash": ["--speculative-algorithm", "DFLASHX"]})
    assert rc == 1
    assert "sglang-dflash: --speculative-algorithm DFLASHX: Unknown speculative algorithm name: DFLASHX" in err


def test_no_sglang_fails_clearly(tmp_path):
    rc, _out, err = validate(tmp_path, {"eagle3": []})
    assert rc == 1
    assert "cannot import SGLang's server arguments" in err
