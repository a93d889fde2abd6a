"""scripts/loadgen.py's own logic: its bounds, what counts as a whole answer, the percentiles. What
it does against the real gateway is tests/unit/playbooks/test_rollout_under_load.py."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "loadgen.py")
SPEC = importlib.util.spec_from_file_location("loadgen", SCRIPT)
loadgen = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(loadgen)


def test_good_settings_have_no_problems():
    assert loadgen.problems(1, 1) == [] and loadgen.problems(256, 600, 0, 600) == [] and loadgen.problems(8, 0.5 + 59.5, 1) == []


@pytest.mark.parametrize("settings, said", [
    ((0, 60), "concurrency must be a whole number between 1 and 256, got 0"),
    ((257, 60), "concurrency must be a whole number between 1 and 256, got 257"),
    ((2.5, 60), "concurrency must be a whole number between 1 and 256, got 2.5"),
    ((True, 60), "concurrency must be a whole number between 1 and 256, got True"),
    ((8, 601), "duration must be a number between 1 and 600, got 601"),
    ((8, 0), "duration must be a number between 1 and 600, got 0"),
    ((8, 60, 1.5), "stream share must be a number between 0 and 1, got 1.5"),
    ((8, 60, 0.5, 0), "timeout must be a number between 1 and 600, got 0"),
])
def test_each_setting_out_of_bounds_is_named(settings, said):
    assert said in loadgen.problems(*settings)
    with pytest.raises(ValueError, match="loadgen: .*" + said.split(",")[0]):
        loadgen.Load("http://127.0.0.1:1", **dict(zip(("concurrency", "duration", "stream_share", "timeout"), settings)))


def test_the_command_refuses_bad_settings_before_any_request():
    for args in (["--concurrency", "0"], ["--duration", "900"], []):
        url = "https://gateway:30080" if not args else "http://127.0.0.1:1"
        proc = subprocess.run([sys.executable, SCRIPT, url] + args, capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith("loadgen: ") and proc.stdout == "", proc


def event(text, finish=None):
    return b"data: " + json.dumps({"text": text, "meta_info": {"finish_reason": finish}}).encode()


@pytest.mark.parametrize("lines, why", [
    ([event(" Pa"), b"", event(" Paris", {"type": "stop"}), b"", b"data: [DONE]", b""], ""),
    # A worker stopped mid-stream: the gateway may close the stream cleanly, with or without [DONE].
    ([event(" Pa"), b""], "the stream ended without its final chunk (1 events)"),
    ([event(" Pa"), b"data: [DONE]"], "the stream's last event has no finish reason"),
    # SGLang ends a request cut by an abort or a shutdown this way; the gateway passes it through.
    ([event(" Pa"), event(" Pa", {"type": "abort", "message": "server shutdown"}), b"data: [DONE]"],
     "the stream's last event has finish reason 'abort'"),
    ([event(" Pa"), b'data: {"error": {"message": "upstream closed"}}', b"data: [DONE]"], "the stream carries an error event"),
    ([b"data: [DONE]"], "no event before [DONE]"),
    ([], "the stream ended without its final chunk (0 events)"),
    ([b"data: {not json", b"data: [DONE]"], "an event of the stream is not JSON"),
])
def test_a_stream_is_whole_only_with_its_final_chunk(lines, why):
    assert loadgen.whole_stream(lines) == why


@pytest.mark.parametrize("answer, why", [
    ({"text": " Paris", "meta_info": {"finish_reason": {"type": "stop"}}}, ""),
    ({"text": " Paris", "meta_info": {"finish_reason": {"type": "length", "length": 8}}}, ""),
    ({"text": " Pa", "meta_info": {"finish_reason": {"type": "abort"}}}, "finish reason 'abort'"),
    ({"text": " Pa", "meta_info": {}}, "no finish reason"),
])
def test_a_plain_answer_is_whole_only_with_a_finish_reason_that_is_not_abort(answer, why):
    assert loadgen.finish_problem(answer) == why


def test_percentiles_are_nearest_rank():
    values = [float(n) for n in range(1, 101)]
    assert loadgen.percentile(values, 0.5) == 50.0 and loadgen.percentile(values, 0.99) == 99.0
    assert loadgen.percentile([3.0], 0.99) == 3.0 and loadgen.percentile([], 0.5) is None


def test_a_gateway_that_refuses_counts_as_connection_failures_and_the_command_exits_1():
    proc = subprocess.run([sys.executable, SCRIPT, "http://127.0.0.1:1", "--concurrency", "2", "--duration", "1"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1, proc
    assert "failed (connection " in proc.stdout and "first connection failure: ConnectionRefusedError" in proc.stdout
