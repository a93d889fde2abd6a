"""The gateway_manifest module: the files it writes, each state, bad input, check mode, concurrent
drains. The format is smg's (the test against the real gateway, tests/unit/playbooks/
test_drain_real_gateway.py, has smg read what this module writes)."""

import json
import os
import subprocess
import sys

import pytest

import module_runner
from ansible_collections.blackwell.sglang.plugins.modules import gateway_manifest

A, B, C = "http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"


def run(capsys, tmp_path, check_mode=False, **args):
    args.setdefault("path", str(tmp_path / "workers.json"))
    return module_runner.run_module(gateway_manifest.main, capsys, args, check_mode=check_mode, diff=True)


def manifest(tmp_path):
    return json.loads((tmp_path / "workers.json").read_text())


def drained(tmp_path):
    return json.loads((tmp_path / "drained.json").read_text())


def test_present_writes_smg_s_format_once(capsys, tmp_path):
    result = run(capsys, tmp_path, workers=[A, B], mode="0640")
    assert result["changed"] and result["added"] == [A, B]
    assert manifest(tmp_path) == {"version": 1, "workers": [{"url": A}, {"url": B}]}
    assert oct(os.stat(tmp_path / "workers.json").st_mode & 0o777) == "0o640"
    again = run(capsys, tmp_path, workers=[A, B], mode="0640")
    assert not again["changed"] and again["_rc"] == 0


def test_no_worker_still_makes_the_file_the_gateway_reads(capsys, tmp_path):
    assert run(capsys, tmp_path, workers=[])["changed"]
    assert manifest(tmp_path) == {"version": 1, "workers": []}
    assert not run(capsys, tmp_path, workers=[])["changed"]


def test_drain_takes_every_spelling_out_and_present_does_not_put_it_back(capsys, tmp_path):
    (tmp_path / "workers.json").write_text(json.dumps(
        {"version": 1, "workers": [{"url": "HTTP://10.0.0.1:30000/", "id": "kept-id"}, {"url": B}]}))
    result = run(capsys, tmp_path, workers=[A], state="drained")
    assert result["changed"] and result["removed"] == ["HTTP://10.0.0.1:30000/"]
    assert manifest(tmp_path)["workers"] == [{"url": B}] and drained(tmp_path) == [A]
    assert result["diff"]["before"]["workers"] == ["HTTP://10.0.0.1:30000/", B]
    # The gateway role runs meanwhile: the drained worker stays out, a new worker comes in.
    result = run(capsys, tmp_path, workers=[A, B, C])
    assert result["added"] == [C] and manifest(tmp_path)["workers"] == [{"url": B}, {"url": C}]
    # Undrained: back once, and a second undrain adds no second copy.
    result = run(capsys, tmp_path, workers=["http://10.0.0.1:30000/"], state="undrained")
    assert result["added"] == ["http://10.0.0.1:30000/"] and drained(tmp_path) == []
    assert not run(capsys, tmp_path, workers=[A], state="undrained")["changed"]
    assert [entry["url"] for entry in manifest(tmp_path)["workers"]] == [B, C, "http://10.0.0.1:30000/"]


def test_present_keeps_an_entry_s_fields_and_one_entry_per_worker(capsys, tmp_path):
    (tmp_path / "workers.json").write_text(json.dumps(
        {"version": 1, "workers": [{"url": A, "id": "a"}, {"url": "http://10.0.0.1:30000/"}, {"url": C}]}))
    result = run(capsys, tmp_path, workers=[A, B])
    assert manifest(tmp_path)["workers"] == [{"url": A, "id": "a"}, {"url": B}]
    assert result["removed"] == ["http://10.0.0.1:30000/", C]


def test_a_drained_record_of_a_worker_no_longer_in_the_inventory_is_dropped(capsys, tmp_path):
    run(capsys, tmp_path, workers=[A, B])
    run(capsys, tmp_path, workers=[B], state="drained")
    run(capsys, tmp_path, workers=[A])
    assert drained(tmp_path) == [] and manifest(tmp_path)["workers"] == [{"url": A}]


def test_check_mode_reports_and_writes_nothing(capsys, tmp_path):
    result = run(capsys, tmp_path, check_mode=True, workers=[A])
    assert result["changed"] and result["workers"] == [{"url": A}]
    assert not (tmp_path / "workers.json").exists() and not (tmp_path / "workers.json.lock").exists()


def test_bad_input_fails_and_changes_nothing(capsys, tmp_path):
    for url in ("10.0.0.1:30000", "ftp://10.0.0.1:30000", "http://10.0.0.1:30000/v1", "http://:30000"):
        result = run(capsys, tmp_path, workers=[url])
        assert result["_rc"] == 1 and "nothing was changed" in result["msg"] and repr(url) in result["msg"], result
    assert not (tmp_path / "workers.json").exists()
    for text in ('{"version": 1, "workers": [{"url": "%s", "labels": {}}]}' % A, "{not json", '{"workers": [], "drained": []}'):
        (tmp_path / "workers.json").write_text(text)
        result = run(capsys, tmp_path, workers=[A])
        assert result["_rc"] == 1 and "nothing was changed" in result["msg"], result
        assert (tmp_path / "workers.json").read_text() == text
    result = run(capsys, tmp_path / "missing", workers=[A], path=str(tmp_path / "missing" / "workers.json"))
    assert result["_rc"] == 1 and "does not exist" in result["msg"]


DRAIN = """
import sys

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.blackwell.sglang.plugins.modules import gateway_manifest
with patch_module_args({"path": sys.argv[1], "workers": [sys.argv[2]], "state": "drained"}):
    gateway_manifest.main()
"""


def test_the_hosts_of_one_batch_drain_at_the_same_time(capsys, tmp_path):
    # Eight module runs at once (a batch of eight hosts delegating to the gateway host): the lock
    # makes each read-change-write whole, so no drain is lost.
    urls = ["http://10.0.1.%d:30000" % n for n in range(1, 9)]
    run(capsys, tmp_path, workers=urls)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    drains = [subprocess.Popen([sys.executable, "-c", DRAIN, str(tmp_path / "workers.json"), url], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for url in urls]
    outputs = [drain.communicate() for drain in drains]
    assert [drain.returncode for drain in drains] == [0] * 8, outputs
    assert manifest(tmp_path)["workers"] == [] and sorted(drained(tmp_path)) == sorted(urls)


# ---- whole results and messages (the mutation run's survivors) ----

def test_a_drain_s_result_file_and_diff_in_full(capsys, tmp_path):
    run(capsys, tmp_path, workers=[A, B], mode="0640")
    result = run(capsys, tmp_path, workers=[A, B], state="drained", mode="0640")
    path = str(tmp_path / "workers.json")
    # (exit_json adds the file's attributes too: owner, group, mode, ...)
    assert {key: result.get(key) for key in ("changed", "path", "workers", "drained", "added", "removed", "diff")} == {
        "changed": True, "path": path, "workers": [], "drained": [A, B], "added": [], "removed": [A, B],
        "diff": {"before": {"workers": [A, B], "drained": []}, "after": {"workers": [], "drained": [A, B]}}}
    assert (tmp_path / "workers.json").read_text() == '{\n  "version": 1,\n  "workers": []\n}\n'
    assert (tmp_path / "drained.json").read_text() == '[\n  "%s",\n  "%s"\n]\n' % (A, B)
    # The file arguments are the drained list's too; the lock is the manifest's path + .lock.
    assert oct(os.stat(tmp_path / "drained.json").st_mode & 0o777) == "0o640"
    assert (tmp_path / "workers.json.lock").exists()


def test_the_files_are_replaced_from_a_temporary_file_beside_them(capsys, tmp_path, monkeypatch):
    moved = []
    real = gateway_manifest.AnsibleModule.atomic_move
    monkeypatch.setattr(gateway_manifest.AnsibleModule, "atomic_move",
                        lambda self, src, dest, *a, **k: (moved.append((src, dest)), real(self, src, dest, *a, **k)))
    run(capsys, tmp_path, workers=[A])
    run(capsys, tmp_path, workers=[A], state="drained")
    assert [dest for _src, dest in moved] == [str(tmp_path / name) for name in ("workers.json", "workers.json", "drained.json")]
    for src, dest in moved:
        assert os.path.dirname(src) == str(tmp_path) and os.path.basename(src).startswith(".%s." % os.path.basename(dest))


@pytest.mark.parametrize("manifest_text, drained_text, why", [
    ("{not json", None, "the gateway manifest {path} is not JSON (Expecting property name enclosed in double quotes: "
                        "line 1 column 2 (char 1))"),
    ('{"version": 1, "workers": []}', '{"a": 1}', "the drained list {drained} must be a JSON list of URLs, got {{'a': 1}}"),
    ('{"version": 1, "workers": []}', '["%s", 7]' % A,
     "the drained list {drained} must be a JSON list of URLs, got ['%s', 7]" % A),
    ('{"version": 1, "workers": []}', "{broken",
     "the drained list {drained} is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
])
def test_unreadable_files_are_named_in_full(capsys, tmp_path, manifest_text, drained_text, why):
    (tmp_path / "workers.json").write_text(manifest_text)
    if drained_text is not None:
        (tmp_path / "drained.json").write_text(drained_text)
    result = run(capsys, tmp_path, workers=[A])
    assert result["msg"] == "gateway_manifest: %s; nothing was changed" % why.format(
        path=tmp_path / "workers.json", drained=tmp_path / "drained.json")


def test_a_manifest_path_that_cannot_be_read_or_written_is_named(capsys, tmp_path, monkeypatch):
    (tmp_path / "workers.json").mkdir()
    assert run(capsys, tmp_path, workers=[A])["msg"] == (
        "gateway_manifest: cannot read the gateway manifest %s: [Errno 21] Is a directory: '%s'; nothing was changed"
        % (tmp_path / "workers.json", tmp_path / "workers.json"))
    path = tmp_path / "missing" / "workers.json"
    assert run(capsys, tmp_path, workers=[A], path=str(path))["msg"] == (
        "gateway_manifest: the directory of %s does not exist (the sglang_gateway role makes it)" % path)

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(gateway_manifest.tempfile, "mkstemp", full)
    other = tmp_path / "other"
    other.mkdir()
    assert run(capsys, tmp_path, workers=[A], path=str(other / "workers.json"))["msg"] == (
        "gateway_manifest: cannot write %s: [Errno 28] No space left on device" % other)
