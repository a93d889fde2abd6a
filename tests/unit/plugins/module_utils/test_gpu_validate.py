"""The probes' plumbing in module_utils/gpu_validate.py: nvcc flags, reading a probe's answer, and
killing a probe that hangs (real processes; what runs on a GPU is tested on one, tests/gpu/)."""

import sys
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_validate
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError


@pytest.mark.parametrize("targets,flags", [
    (["12.0f"], ["-gencode=arch=compute_120f,code=sm_120f"]),
    (["10.3a"], ["-gencode=arch=compute_103a,code=sm_103a"]),
    (["9.0a", "12.0"], ["-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_120,code=sm_120"]),
])
def test_gencode_is_device_code_only(targets, flags):
    assert gpu_validate.gencode_args(targets) == flags


@pytest.mark.parametrize("targets", [[], ["twelve"], ["99.0"]])
def test_gencode_rejects(targets):
    with pytest.raises(ArchError):
        gpu_validate.gencode_args(targets)


def test_last_json_line_wins_over_logs():
    text = 'NCCL INFO ring 0\n{"ok": false}\nwarning: {not json\n{"ok": true, "busbw_gbps": 302.1}\ntrailing log\n'
    assert gpu_validate.last_json(text) == {"ok": True, "busbw_gbps": 302.1}
    assert gpu_validate.last_json("no json here") is None


def test_a_probe_that_answers(tmp_path):
    answer = gpu_validate.run_probe([sys.executable, "-c", "print('log'); print('{\"ok\": true, \"x\": 1}')"], {}, 10)
    assert answer["ok"] is True and answer["x"] == 1 and answer["seconds"] >= 0


def test_a_probe_that_exits_non_zero_without_json_reports_its_last_lines():
    answer = gpu_validate.run_probe([sys.executable, "-c", "import sys; sys.stderr.write('a\\nb\\nboom\\n'); sys.exit(3)"], {}, 10)
    assert answer["ok"] is False and answer["error"] == "exit status 3: a | b | boom"


def test_a_hanging_probe_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "open(%r, 'w').write(str(p.pid)); sys.stderr.write('waiting for peer\\n'); sys.stderr.flush(); time.sleep(60)" % str(marker))
    start = time.monotonic()
    answer = gpu_validate.run_probe([sys.executable, "-c", code], {}, 2)
    assert time.monotonic() - start < 10
    assert answer["ok"] is False and "no answer within 2 s (a hang); killed. Last output: waiting for peer" in answer["error"]
    child = int(marker.read_text())
    time.sleep(0.2)
    assert child_state(child) in (None, "Z")  # the child was killed too (gone, or dead and not reaped yet)


def child_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_probe_that_cannot_start():
    with pytest.raises(gpu_validate.ProbeError, match="cannot run /nonexistent/nvcc"):
        gpu_validate.run_probe(["/nonexistent/nvcc"], {}, 5)
