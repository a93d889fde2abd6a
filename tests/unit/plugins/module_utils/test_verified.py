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


def test_fingerprint_does_not_depend_on_the_order_the_inputs_were_gathered():
    assert verified.fingerprint({"a": 1, "b": {"x": 1, "y": 2}}) == verified.fingerprint({"b": {"y": 2, "x": 1}, "a": 1})
    assert verified.fingerprint({"a": 1}) != verified.fingerprint({"a": 2})


def test_tree_signature_of_a_root_that_is_a_file_or_unset(tmp_path):
    root = tmp_path / "cuda"
    root.write_text("not a directory")
    first = verified.tree_signature(str(root))
    root.write_text("still not a directory, longer")  # a file in its place: its own stat, which changed
    assert verified.tree_signature(str(root)) != first
    assert verified.tree_signature("") == verified.tree_signature("") != verified.tree_signature(str(tmp_path / "none"))


def test_tree_signature_walks_on_past_a_directory_it_cannot_read(tmp_path, monkeypatch):
    root = tmp_path / "tree"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / "f").write_text(name)
    real_scandir = os.scandir

    def scandir(path):
        if os.path.basename(path) == "b":
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)
    monkeypatch.setattr(verified.os, "scandir", scandir)
    first = verified.tree_signature(str(root))
    assert verified.tree_signature(str(root)) == first
    (root / "a" / "f").write_text("changed after the unreadable one")  # walked after b (pending is a stack)
    assert verified.tree_signature(str(root)) != first
    monkeypatch.setattr(verified.os, "scandir", real_scandir)
    assert verified.tree_signature(str(root)) != first  # b readable again: another signature


def test_venv_signature_follows_the_record_itself_and_the_interpreter(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "a.py").write_text("")
    record = site / "pkg-1.0.dist-info" / "RECORD"
    record.parent.mkdir()
    record.write_bytes(b"pkg/a.py,sha256=one,0\n")  # a RECORD that does not list itself
    first = verified.venv_signature([str(site)])
    record.write_bytes(b"pkg/a.py,sha256=two,0\n")  # the same files, another hash
    assert verified.venv_signature([str(site)]) != first
    second = verified.venv_signature([str(site)])
    monkeypatch.setattr(verified.sys, "version", "3.99.0 (another build)")
    assert verified.venv_signature([str(site)]) != second


def test_venv_signature_names_the_package_directories(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert verified.venv_signature([str(tmp_path / "one")]) != verified.venv_signature([str(tmp_path / "two")])


def test_record_paths_keep_names_that_are_not_utf8(tmp_path):
    record = tmp_path / "site" / "pkg-1.0.dist-info" / "RECORD"
    assert list(verified._record_paths(str(record), b"pkg/caf\xe9.py,,\n")) == [
        str(tmp_path / "site" / "pkg") + "/caf\udce9.py"]


def test_package_dirs_are_site_packages_and_path_entries_with_distributions(tmp_path, monkeypatch):
    import sysconfig
    purelib = tmp_path / "purelib"
    purelib.mkdir()
    with_dist = tmp_path / "extra"
    (with_dist / "x-1.0.dist-info").mkdir(parents=True)
    without = tmp_path / "plain"
    without.mkdir()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(purelib), "platlib": str(purelib)})
    monkeypatch.setattr(verified.sys, "path", ["", str(tmp_path / "missing"), str(without), str(with_dist), str(with_dist)])
    assert verified.package_dirs() == [str(purelib), str(with_dist)]


def test_code_signature_reads_the_file_when_the_loader_cannot_tell(tmp_path, monkeypatch):
    import types
    path = tmp_path / "plain.py"
    path.write_text("X = 1\n")

    class Blind:
        def get_source(self, name):
            raise ImportError(name)
    module = types.ModuleType("plain")
    module.__file__ = str(path)
    module.__loader__ = Blind()
    module.__spec__ = None
    first = verified.code_signature(module)
    path.write_text("X = 2\n")
    assert verified.code_signature(module) != first
    # A module by its loader, without a spec (run as __main__ by some runners): the loader's source.
    module.__loader__ = types.SimpleNamespace(get_source=lambda name: "Y = %r\n" % name)
    by_name = verified.code_signature(module)
    module.__name__ = "renamed"
    assert verified.code_signature(module) != by_name


def test_jit_inputs_without_a_workspace_read_none():
    assert verified.jit_inputs({"modules": []}, None, ())["workspace"] is None


def test_a_stamp_is_made_beside_what_it_vouches_for_whatever_the_umask(tmp_path):
    path = tmp_path / "stamps" / "s.json"
    old = os.umask(0)
    try:
        assert verified.Stamp(str(path)).write("f", {"answer": 1}) is None
    finally:
        os.umask(old)
    assert oct(path.parent.stat().st_mode & 0o777) == "0o755"
    result = verified.Stamp(str(path)).result_if("f")
    assert result["answer"] == 1 and result["verified"] == "unchanged"
    import re
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", result["verified_at"]), result
    assert os.listdir(path.parent) == ["s.json"]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs a second file system")
def test_a_stamp_on_another_file_system_than_tmp_is_written_in_place(tmp_path):
    # The new file is made in the stamp's own directory: renamed over the old one there, never across file systems.
    import tempfile
    directory = tempfile.mkdtemp(dir="/dev/shm")
    try:
        path = os.path.join(directory, "s.json")
        assert verified.Stamp(path).write("f", {"answer": 1}) is None
        assert verified.Stamp(path).result_if("f")["answer"] == 1
    finally:
        import shutil
        shutil.rmtree(directory)


def test_a_file_name_that_is_not_utf8_is_signed_not_refused(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / os.fsdecode(b"caf\xe9")).write_text("x")  # a name from a non-UTF-8 locale: a lone surrogate in Python
    first = verified.tree_signature(str(root))
    assert first == verified.tree_signature(str(root))
    (root / os.fsdecode(b"caf\xe9")).write_text("changed, longer")
    assert verified.tree_signature(str(root)) != first


def test_an_unchanged_answer_carries_no_diff_of_the_run_that_checked(tmp_path):
    path = tmp_path / "s.json"

    def check():
        return {"changed": True, "diff": {"before": "a", "after": "b"}, "answer": 1}

    assert verified.run(str(path), lambda: {}, check)["diff"] == {"before": "a", "after": "b"}
    again = verified.run(str(path), lambda: {}, check)
    assert again["verified"] == "unchanged" and "diff" not in again and again["answer"] == 1
