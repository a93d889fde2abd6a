"""module_utils/verified.py: fingerprints that change with what a check reads, and stamps."""

import json
import os
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import verified


def install(site, files, dist="pkg-1.0"):
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    record = site / ("%s.dist-info" % dist) / "RECORD"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("".join("%s,sha256=x,1\n" % rel for rel in files) + "%s.dist-info/RECORD,,\n" % dist)
    return record


def test_venv_signature_follows_listed_files_and_records(tmp_path):
    site = tmp_path / "site-packages"
    record = install(site, {"pkg/__init__.py": "a = 1\n", "pkg/data.txt": "x"})
    (site / ".." / "bin").mkdir()
    first = verified.venv_signature([str(site)])
    assert verified.venv_signature([str(site)]) == first
    (site / "pkg" / "unlisted.py").write_text("")  # not installed by any wheel: not an input
    assert verified.venv_signature([str(site)]) == first
    target = site / "pkg" / "__init__.py"
    before = target.stat()
    target.write_text("a = 2\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    second = verified.venv_signature([str(site)])
    assert second != first  # ctime moved
    record.write_text(record.read_text() + "pkg/new.py,,\n")
    assert verified.venv_signature([str(site)]) != second
    (site / "pkg" / "data.txt").unlink()
    assert verified.venv_signature([str(site)]) not in (first, second)


def test_tree_signature(tmp_path):
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("nvcc")
    (root / "lib64").symlink_to(root / "bin")  # a link to a directory is followed
    (root / "loop").symlink_to(root)  # a link back up is walked once
    first = verified.tree_signature(str(root))
    assert verified.tree_signature(str(root)) == first
    (root / "bin" / "ptxas").write_text("")
    assert verified.tree_signature(str(root)) != first
    assert verified.tree_signature(str(tmp_path / "none")) != verified.tree_signature("")
    assert verified.tree_signature(str(tmp_path / "none")) == verified.tree_signature(str(tmp_path / "none"))


def test_environment_leaves_out_what_changes_on_every_connection():
    env = {"PATH": "/bin", "SUDO_COMMAND": "sh -c echo BECOME-SUCCESS-x", "SSH_CLIENT": "1 2 3", "PWD": "/tmp",
           "CUDA_HOME": "/opt/cuda", "MAX_JOBS": "4"}
    assert verified.environment(env) == ["CUDA_HOME=/opt/cuda", "MAX_JOBS=4", "PATH=/bin"]
    assert verified.environment(env, drop=("MAX_JOBS",)) == ["CUDA_HOME=/opt/cuda", "PATH=/bin"]


def test_code_signature_changes_with_the_source(tmp_path, monkeypatch):
    (tmp_path / "checkmod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # Not the checkmod of an earlier run of this test in this process (mutmut runs the tests twice in one).
    monkeypatch.delitem(sys.modules, "checkmod", raising=False)
    import checkmod
    first = verified.code_signature(checkmod)
    assert first == verified.code_signature(checkmod)
    (tmp_path / "checkmod.py").write_text("X = 2\n")
    assert verified.code_signature(checkmod) != first


@pytest.mark.parametrize("content", ["", "not json", "[]", json.dumps({"format": 0, "fingerprint": "f", "result": {}}),
                                     json.dumps({"format": 1, "fingerprint": "f", "result": "x"})])
def test_a_stamp_of_another_format_is_a_miss(tmp_path, content):
    path = tmp_path / "s.json"
    path.write_text(content)
    assert verified.Stamp(str(path)).result_if("f") is None


def test_run_records_and_answers(tmp_path):
    path = tmp_path / "stamps" / "s.json"
    inputs = {"value": 1}
    calls = []

    def check():
        calls.append(1)
        return {"changed": True, "answer": 42}

    def run():
        return verified.run(str(path), lambda: dict(inputs), check)

    assert run() == {"changed": True, "answer": 42, "verified": "checked"}
    got = run()
    assert (got["answer"], got["changed"], got["verified"], len(calls)) == (42, False, "unchanged", 1)
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    inputs["value"] = 2
    assert run()["verified"] == "checked" and len(calls) == 2
    assert verified.run(None, lambda: inputs, check) == {"changed": True, "answer": 42}  # no stamp: just the check


def test_a_failing_check_records_nothing(tmp_path):
    path = tmp_path / "s.json"

    def check():
        raise ValueError("bad")

    with pytest.raises(ValueError):
        verified.run(str(path), lambda: {}, check)
    assert not path.exists()


def test_what_the_check_sets_in_the_environment_is_not_recorded(tmp_path, monkeypatch):
    # SGLang sets its caches' variables (TRITON_CACHE_DIR, CUDA_CACHE_PATH, ...) when it is imported.
    monkeypatch.delenv("SET_BY_IMPORT", raising=False)
    path = tmp_path / "s.json"

    def check():
        os.environ["SET_BY_IMPORT"] = "1"
        return {"changed": False}

    def inputs():
        return {"environment": verified.environment()}

    assert verified.run(str(path), inputs, check)["verified"] == "checked"
    assert "SET_BY_IMPORT" not in os.environ
    assert verified.run(str(path), inputs, check)["verified"] == "unchanged"


def test_record_paths_read_quoted_names_as_csv(tmp_path):
    record = tmp_path / "site" / "pkg-1.0.dist-info" / "RECORD"
    data = b'pkg/a.py,sha256=x,1\n"pkg/a,b.py",sha256=y,2\n../bin/tool,,\n\n'
    assert list(verified._record_paths(str(record), data)) == [
        str(tmp_path / "site" / "pkg" / "a.py"), str(tmp_path / "site" / "pkg" / "a,b.py"), str(tmp_path / "bin" / "tool")]


def test_a_stamp_removed_is_gone_and_removing_it_again_is_no_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("{}")
    stamp = verified.Stamp(str(path))
    stamp.remove()
    assert not path.exists()
    stamp.remove()
    assert not path.exists()
