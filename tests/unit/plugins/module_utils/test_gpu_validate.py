"""The probes' plumbing in module_utils/gpu_validate.py: nvcc flags, reading a probe's answer, and
killing a probe that hangs (real processes; what runs on a GPU is tested on one, tests/gpu/)."""

import os
import sys
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_validate
from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError
from run_program import run


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
    answer = gpu_validate.run_probe(run, [sys.executable, "-c", "print('log'); print('{\"ok\": true, \"x\": 1}')"], {}, 10)
    assert answer["ok"] is True and answer["x"] == 1 and answer["seconds"] >= 0


def test_a_probe_that_exits_non_zero_without_json_reports_its_last_lines():
    answer = gpu_validate.run_probe(run, [sys.executable, "-c", "import sys; sys.stderr.write('a\\nb\\nboom\\n'); sys.exit(3)"], {}, 10)
    assert answer["ok"] is False and answer["error"] == "exit status 3: a | b | boom"


def test_a_hanging_probe_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "open(%r, 'w').write(str(p.pid)); sys.stderr.write('waiting for peer\\n'); sys.stderr.flush(); time.sleep(60)" % str(marker))
    start = time.monotonic()
    answer = gpu_validate.run_probe(run, [sys.executable, "-c", code], {}, 2)
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


def test_a_probe_whose_children_ignore_term_is_still_killed_and_named_a_hang(tmp_path):
    # A rank stuck in the driver ignores TERM: the timeout's SIGKILL reaches every process of the
    # probe's group, and a probe ended by it (the caller sees -9) is a hang like one timeout outlived.
    marker = tmp_path / "child.pid"
    script = tmp_path / "stuck.sh"
    script.write_text("#!/bin/sh\ntrap '' TERM\nsh -c \"trap '' TERM; echo \\$\\$ > %s; exec sleep 60\" &\n"
                      "echo 'stuck in the driver' >&2\ntrap '' TERM; while :; do sleep 1; done\n" % marker)
    script.chmod(0o755)
    start = time.monotonic()
    answer = gpu_validate.run_probe(run, [str(script)], {"PATH": os.environ["PATH"]}, 1)
    assert time.monotonic() - start < 5
    assert answer["error"] == "no answer within 1 s (a hang); killed. Last output: stuck in the driver", answer
    time.sleep(0.2)
    assert child_state(int(marker.read_text())) in (None, "Z")


def test_a_probe_that_cannot_start(tmp_path):
    with pytest.raises(gpu_validate.ProbeError) as failed:
        gpu_validate.run_probe(run, ["/nonexistent/nvcc"], {}, 5)
    assert str(failed.value) == "cannot run /nonexistent/nvcc: No such file or directory"
    (tmp_path / "nvcc").write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(gpu_validate.ProbeError) as failed:
        gpu_validate.run_probe(run, [str(tmp_path / "nvcc")], {}, 5)
    assert str(failed.value) == "cannot run %s: Permission denied" % (tmp_path / "nvcc")
    with pytest.raises(gpu_validate.ProbeError) as failed:
        gpu_validate.run_probe(run, ["no-such-probe"], {"PATH": str(tmp_path)}, 5)
    assert str(failed.value) == "cannot run no-such-probe: No such file or directory"


# ---- the all-reduce launcher with a stand-in worker (no torch, no GPU here) ----

# Stands in for the venv's python running ALLREDUCE_WORKER: answers with the environment it was given
# (rank 0's answer is the result), fails as the rank in FAKE_FAIL_RANK, hangs as FAKE_HANG_RANK.
# The stand-in's answer: the environment the launcher gave it (only the names it sets).
ANSWER = ("import json, os; print('starting'); print(json.dumps(dict(ok=True, env={k: v for k, v in os.environ.items() "
          "if k.startswith(('BSG_', 'MASTER_', 'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'CUDA_VISIBLE'))})))")
WORKER = """#!/bin/sh
[ "$1" = "-c" ] || exit 9
case "$2" in *"all-reduce launcher"*) exec {python} "$@" ;; esac  # the module's launcher: real Python
[ "$RANK" = "$FAKE_QUIET_HANG_RANK" ] && exec sleep 60
[ "$RANK" = "$FAKE_STDERR_RANK" ] && {{ echo "Traceback: NCCL error" >&2; exit 2; }}
[ "$RANK" = "$FAKE_HANG_RANK" ] && {{ echo "rank $RANK waiting for peers" >&2; exec sleep 60; }}
[ "$RANK" = "$FAKE_FAIL_RANK" ] && {{ echo "log line"; echo '{{"ok": false, "error": "rank '$RANK' failed"}}'; exit 1; }}
[ "$RANK" = "$FAKE_SILENT_RANK" ] && exit 3
exec {python} -c "{answer}"
"""


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "python"
    path.write_text(WORKER.format(python=sys.executable, answer=ANSWER))
    path.chmod(0o755)
    return str(path)


def test_each_rank_gets_the_rendezvous_and_the_sizes(worker):
    result = gpu_validate.run_allreduce(run, worker, [2, 5], {"FAKE": "1"}, 10, 1 << 20)
    env = result["env"]
    port = int(env.pop("MASTER_PORT"))
    assert 1024 <= port <= 65535
    assert env == {"CUDA_VISIBLE_DEVICES": "2,5", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "RANK": "0",
                   "LOCAL_RANK": "0", "BSG_ALLREDUCE_BYTES": "1048576", "BSG_ALLREDUCE_ITERS": "20",
                   "BSG_ALLREDUCE_TIMEOUT": "10"}
    assert result["ok"] is True and round(result["seconds"], 1) == result["seconds"] < 10
    assert sorted(result) == ["env", "ok", "seconds", "transports"] and isinstance(result["seconds"], float)
    assert result["transports"] == []  # no NCCL log from this worker
    assert gpu_validate.run_allreduce(run, worker, [0], {}, 0.5, 1)["env"]["BSG_ALLREDUCE_TIMEOUT"] == "1"


def test_the_first_failing_rank_is_the_result(worker, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_RANK", "1")
    result = gpu_validate.run_allreduce(run, worker, [0, 1], dict(os.environ), 10, 1)
    assert (result["ok"], result["error"]) == (False, "rank 1 failed")
    monkeypatch.setenv("FAKE_FAIL_RANK", "")
    monkeypatch.setenv("FAKE_SILENT_RANK", "0")
    result = gpu_validate.run_allreduce(run, worker, [0, 1], dict(os.environ), 10, 1)
    assert (result["ok"], result["error"]) == (False, "exit status 3: no output")
    monkeypatch.setenv("FAKE_SILENT_RANK", "")
    monkeypatch.setenv("FAKE_STDERR_RANK", "1")
    result = gpu_validate.run_allreduce(run, worker, [0, 1], dict(os.environ), 10, 1)
    assert (result["ok"], result["error"]) == (False, "exit status 2: Traceback: NCCL error")


def test_a_hanging_rank_is_named_with_its_last_output(worker, monkeypatch):
    monkeypatch.setenv("FAKE_HANG_RANK", "0")
    start = time.monotonic()
    result = gpu_validate.run_allreduce(run, worker, [0, 1], dict(os.environ), 1, 1)
    assert time.monotonic() - start < 10
    assert (result["ok"], result["error"]) == (
        False, "no answer within 1 s (a hang: NCCL waits for a peer it cannot reach); killed. Last output: rank 0 "
               "waiting for peers")
    assert round(result["seconds"], 1) == result["seconds"] and 1 <= result["seconds"] < 10
    assert isinstance(result["seconds"], float)
    monkeypatch.setenv("FAKE_HANG_RANK", "")
    monkeypatch.setenv("FAKE_QUIET_HANG_RANK", "1")
    assert gpu_validate.run_allreduce(run, worker, [0, 1], dict(os.environ), 1, 1)["error"] == (
        "no answer within 1 s (a hang: NCCL waits for a peer it cannot reach); killed. Last output: none")


def test_an_interpreter_that_cannot_start_is_named(tmp_path):
    with pytest.raises(gpu_validate.ProbeError) as failed:
        gpu_validate.run_allreduce(run, str(tmp_path / "missing"), [0, 1], {}, 5, 1)
    assert str(failed.value) == "cannot run %s: No such file or directory" % (tmp_path / "missing")


def test_gencode_without_a_target_is_named():
    with pytest.raises(ArchError) as failed:
        gpu_validate.gencode_args([])
    assert str(failed.value) == "no target to build the validation kernel for"


def test_last_json_skips_a_broken_line_and_reads_on():
    assert gpu_validate.last_json('{"a": 1}\n{"b": \n') == {"a": 1}


def test_an_answer_is_read_from_its_exit_status_first_and_timed_to_a_tenth():
    assert gpu_validate._answer(1, '{"ok": true}\n', "", 1.26) == {
        "ok": False, "error": "exit status 1: {\"ok\": true}", "seconds": 1.3}
    assert gpu_validate._answer(2, "", "", 0.04) == {"ok": False, "error": "exit status 2: no output", "seconds": 0.0}
    assert gpu_validate._answer(0, '{"ok": true, "x": 1}', "", 0.96) == {"ok": True, "x": 1, "seconds": 1.0}


def test_tail_keeps_the_last_three_lines():
    assert gpu_validate.tail("1\n 2\n3\n4 \n5\n") == "3 | 4 | 5"
    assert gpu_validate.tail(None) == "" and gpu_validate.tail("") == ""
