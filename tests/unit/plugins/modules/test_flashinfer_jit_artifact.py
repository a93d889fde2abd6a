"""flashinfer_jit_artifact end to end: main() against the fake `flashinfer` package of fake_flashinfer.py
(the `fake` fixture, conftest.py; it stands in for FlashInfer, which needs CUDA), with module dirs
built by the real ninja (the wheel FlashInfer runs). kernel_cache's own tests build with gcc.
"""

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import sysconfig

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import kernel_cache as kc
from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_jit_artifact
from fake_flashinfer import VERSION, drop_flashinfer_modules, elf64
from module_runner import run_module

NINJA = shutil.which("ninja", path=os.path.dirname(sys.executable)) or shutil.which("ninja")
BUILD_NINJA = "rule cp\n  command = cp $in $out\nbuild {name}.so: cp payload.elf\n"


def ok(result):
    assert result["_rc"] == 0, result
    assert "failed" not in result, result
    return result


def failed(result):
    assert result["_rc"] == 1, result
    assert result["failed"] is True
    return result["msg"]


def sha(path):
    return hashlib.sha256(open(str(path), "rb").read()).hexdigest()


def tree(root):
    found = {}
    for base, dirs, names in os.walk(str(root)):
        for name in dirs + names:
            st = os.lstat(os.path.join(base, name))
            found[os.path.relpath(os.path.join(base, name), str(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


@pytest.fixture
def env_file(tmp_path):
    """The flashinfer role's environment file: the venv's bin (its ninja) first on PATH."""
    assert NINJA, "no ninja: install requirements-dev.txt (the ninja wheel) into the venv"
    path = tmp_path / "flashinfer.env"
    path.write_text("PATH=%s:/usr/bin:/bin\n" % os.path.dirname(NINJA))
    return str(path)


def warm(fake, name):
    """A module dir as a ninja build leaves it: build.ninja, .ninja_log, <name>.so (a whole ELF)."""
    module_dir = fake.jit_dir() / name
    module_dir.mkdir(parents=True)
    (module_dir / "payload.elf").write_bytes(elf64(payload=256))
    (module_dir / "build.ninja").write_text(BUILD_NINJA.format(name=name))
    subprocess.run([NINJA, "-C", str(module_dir)], check=True, capture_output=True)
    return module_dir


def run(fake, capsys, check_mode=False, diff=False, **args):
    """One module run, like Ansible's: FlashInfer imported anew."""
    args.setdefault("workspace_base", str(fake.base))
    drop_flashinfer_modules()
    try:
        return run_module(flashinfer_jit_artifact.main, capsys, args, check_mode, diff)
    finally:
        drop_flashinfer_modules()


def packed_host(fake, capsys, env_file, tmp_path):
    """Host 1 warms sampling and a module FlashInfer cannot name, packs, and its workspace goes."""
    warm(fake, "sampling")
    warm(fake, "custom_0a1b")
    dest = tmp_path / "store" / "a.tar.gz"
    result = ok(run(fake, capsys, env_file=env_file, dest=str(dest)))
    os.rename(str(fake.base), str(tmp_path / "host1"))
    fake.base.mkdir()
    return result, dest


def test_pack(fake, capsys, env_file, tmp_path):
    warm(fake, "sampling")
    warm(fake, "custom_0a1b")
    dest = tmp_path / "store" / "a.tar.gz"
    result = ok(run(fake, capsys, env_file=env_file, dest=str(dest)))
    assert result["changed"] is True
    key = result["key"]
    assert key == {
        "venv": os.path.realpath(sys.prefix), "workspace": str(fake.base), "flashinfer_version": VERSION,
        "targets": ["12.0f"], "cuda_home": str(fake.cuda_home), "cuda_version": "13.0",
        "packages": kc.record_digest(sysconfig.get_paths()["purelib"]),
    }
    assert result["key_id"] == kc.key_id(key)
    assert result["key_id"].startswith(os.path.basename(os.path.realpath(sys.prefix)).lstrip(".") + "-120f-cuda13.0-")
    assert result["cache_dir"] == str(fake.jit_dir())
    assert result["modules"] == ["custom_0a1b", "sampling"]
    assert result["warmable"] == ["sampling"]
    packed = result["packed"]
    assert packed["path"] == str(dest) and packed["modules"] == ["custom_0a1b", "sampling"]
    assert packed["bytes"] == dest.stat().st_size and packed["sha256"] == sha(dest)
    assert packed["left_out"] == [] and packed["files"] == 8  # per module: build.ninja, payload, .so, .ninja_log
    assert "seeded" not in result and "rejected" not in result
    again = ok(run(fake, capsys, env_file=env_file, dest=str(dest)))
    assert again["changed"] is False and again["packed"]["sha256"] == packed["sha256"]


def test_seed_a_fresh_workspace(fake, capsys, env_file, tmp_path):
    packed, dest = packed_host(fake, capsys, env_file, tmp_path)
    result = ok(run(fake, capsys, diff=True, env_file=env_file, src=str(dest), checksum=packed["packed"]["sha256"]))
    assert result["changed"] is True
    assert result["key"] == packed["key"]
    assert result["seeded"] == ["custom_0a1b", "sampling"]
    assert result["rejected"] is None and result["rejected_modules"] == {} and result["skipped_modules"] == []
    assert result["modules"] == ["custom_0a1b", "sampling"] and result["warmable"] == ["sampling"]
    assert result["diff"] == {
        "before": {"cache_dir": str(fake.jit_dir()), "modules": []},
        "after": {"cache_dir": str(fake.jit_dir()), "modules": ["custom_0a1b", "sampling"]},
    }
    assert sha(fake.so()) == sha(tmp_path / "host1" / os.path.relpath(str(fake.so()), str(fake.base)))
    done = subprocess.run([NINJA, "-n", "-C", str(fake.jit_dir() / "sampling")], capture_output=True, text=True,
                          check=True)
    assert "ninja: no work to do." in done.stdout
    again = ok(run(fake, capsys, env_file=env_file, src=str(dest), checksum=packed["packed"]["sha256"]))
    assert again["changed"] is False and again["seeded"] == []
    assert again["skipped_modules"] == ["custom_0a1b", "sampling"]


def test_check_mode_writes_nothing(fake, capsys, env_file, tmp_path):
    packed, dest = packed_host(fake, capsys, env_file, tmp_path)
    before = tree(tmp_path)
    result = ok(run(fake, capsys, check_mode=True, diff=True, env_file=env_file, src=str(dest),
                    checksum=packed["packed"]["sha256"], dest=str(tmp_path / "store" / "b.tar.gz")))
    assert result["changed"] is True
    assert result["seeded"] == ["custom_0a1b", "sampling"] and result["rejected"] is None
    assert result["modules"] == ["custom_0a1b", "sampling"]
    assert result["diff"]["before"]["modules"] == [] and result["diff"]["after"]["modules"] == result["modules"]
    assert result["packed"]["bytes"] is None and result["packed"]["sha256"] is None
    # Importing FlashInfer creates its (empty) workspace dirs, as the real one does; no file is written.
    after = tree(tmp_path)
    assert all(os.path.isdir(str(tmp_path / rel)) for rel in set(after) - set(before))
    assert {rel: entry for rel, entry in after.items() if not stat.S_ISDIR(entry[0])} == {
        rel: entry for rel, entry in before.items() if not stat.S_ISDIR(entry[0])}


def test_other_targets_are_rejected(fake, capsys, env_file, tmp_path, monkeypatch):
    packed, dest = packed_host(fake, capsys, env_file, tmp_path)
    monkeypatch.setenv("FLASHINFER_CUDA_ARCH_LIST", "10.3a")
    result = ok(run(fake, capsys, env_file=env_file, src=str(dest), checksum=packed["packed"]["sha256"]))
    assert result["changed"] is False and result["seeded"] == []
    assert result["rejected"] == ('artifact was built for another key; differs in targets (artifact ["12.0f"], '
                                  'host ["10.3a"])')
    assert result["modules"] == [] and not os.path.exists(str(fake.jit_dir()))


def test_a_replaced_artifact_is_rejected(fake, capsys, env_file, tmp_path):
    packed, dest = packed_host(fake, capsys, env_file, tmp_path)
    dest.write_bytes(dest.read_bytes()[:-100])
    result = ok(run(fake, capsys, env_file=env_file, src=str(dest), checksum="sha256:" + packed["packed"]["sha256"]))
    assert result["changed"] is False and result["seeded"] == []
    assert result["rejected"].startswith(
        "sha256 of %s is %s, expected %s" % (dest, sha(dest), packed["packed"]["sha256"]))


def test_failures(fake, capsys, env_file, tmp_path):
    msg = failed(run(fake, capsys, env_file=env_file, src=str(tmp_path / "a.tar.gz")))
    assert msg == "parameters are required together: src, checksum"
    msg = failed(run(fake, capsys, env_file=env_file, src=str(tmp_path / "a.tar.gz"), checksum="0" * 64))
    assert msg == "src %s is not a file: copy the artifact to the host first" % (tmp_path / "a.tar.gz")
    msg = failed(run(fake, capsys, env_file=env_file, dest=str(fake.base / "a.tar.gz")))
    assert msg == "dest %s is inside the workspace %s: put the artifact outside it" % (
        fake.base / "a.tar.gz", fake.base)
    fake.set_nvcc("13.0").unlink()
    msg = failed(run(fake, capsys, env_file=env_file, dest=str(tmp_path / "b.tar.gz")))
    assert msg.startswith("nvcc not found at %s/bin/nvcc" % fake.cuda_home)


def test_ninja_missing_fails_only_when_a_module_is_to_be_moved_in(fake, capsys, env_file, tmp_path):
    packed, dest = packed_host(fake, capsys, env_file, tmp_path)
    no_ninja = tmp_path / "no-ninja.env"
    no_ninja.write_text("PATH=%s\n" % tmp_path)
    checksum = packed["packed"]["sha256"]
    assert ok(run(fake, capsys, check_mode=True, env_file=str(no_ninja), src=str(dest), checksum=checksum))["seeded"]
    assert ok(run(fake, capsys, env_file=str(no_ninja), src=str(dest), checksum="0" * 64))["rejected"]
    msg = failed(run(fake, capsys, env_file=str(no_ninja), src=str(dest), checksum=checksum))
    assert msg.startswith("ninja not found on PATH=%s: put the SGLang venv's bin" % tmp_path)
    assert not os.path.exists(str(fake.jit_dir() / "sampling"))


# ---- the verification stamp of an inspection (module_utils/verified.py) ---------------------------

def test_an_inspection_stamp_answers_until_the_workspace_changes(fake, capsys, env_file, tmp_path):
    stamp = tmp_path / "venv" / ".verified" / "kernel-cache-key.json"
    warm(fake, "sampling")
    first = ok(run(fake, capsys, env_file=env_file, stamp=str(stamp)))
    assert first["verified"] == "checked" and first["modules"] == ["sampling"]
    second = ok(run(fake, capsys, env_file=env_file, stamp=str(stamp)))
    assert second["verified"] == "unchanged"
    assert {k: second[k] for k in ("key", "key_id", "cache_dir", "modules", "warmable")} == {
        k: first[k] for k in ("key", "key_id", "cache_dir", "modules", "warmable")}
    warm(fake, "custom_0a1b")  # a module built since: the workspace changed
    third = ok(run(fake, capsys, env_file=env_file, stamp=str(stamp)))
    assert third["verified"] == "checked" and third["modules"] == ["custom_0a1b", "sampling"]


def test_a_pack_records_the_workspace_for_the_next_inspection(fake, capsys, env_file, tmp_path):
    stamp = tmp_path / "kernel-cache-key.json"
    warm(fake, "sampling")
    packed = ok(run(fake, capsys, env_file=env_file, dest=str(tmp_path / "a.tar.gz"), stamp=str(stamp)))
    assert "verified" not in packed and packed["packed"]["modules"] == ["sampling"]
    inspected = ok(run(fake, capsys, env_file=env_file, stamp=str(stamp)))
    assert inspected["verified"] == "unchanged" and inspected["key_id"] == packed["key_id"]
    assert inspected["modules"] == ["sampling"]
    ok(run(fake, capsys, check_mode=True, env_file=env_file, dest=str(tmp_path / "b.tar.gz"),
           stamp=str(tmp_path / "never.json")))
    assert not (tmp_path / "never.json").exists()  # check mode records nothing


def test_a_pack_records_the_environment_it_was_given(fake, capsys, env_file, tmp_path, monkeypatch):
    # Importing the real stack sets variables (SGLang sets its caches' on import): the pack's
    # record must be of the environment before that, which is what the next run (a new process)
    # computes its fingerprint from; otherwise the first no-op after a build re-inspects in full.
    from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj

    real = fj.FlashInferCache

    def importing_sets_a_variable(*args, **kwargs):
        os.environ["SET_BY_AN_IMPORT"] = "1"
        return real(*args, **kwargs)

    monkeypatch.setattr(fj, "FlashInferCache", importing_sets_a_variable)
    monkeypatch.delenv("SET_BY_AN_IMPORT", raising=False)
    stamp = tmp_path / "kernel-cache-key.json"
    warm(fake, "sampling")
    ok(run(fake, capsys, env_file=env_file, dest=str(tmp_path / "a.tar.gz"), stamp=str(stamp)))
    monkeypatch.delenv("SET_BY_AN_IMPORT", raising=False)  # the next module run is a new process
    assert ok(run(fake, capsys, env_file=env_file, stamp=str(stamp)))["verified"] == "unchanged"


def test_warmable_names_are_those_flashinfer_has_a_generator_for_in_its_module_or_its_jit_package(fake):
    # FlashInfer keeps most generators in flashinfer.jit.<name>, some only in flashinfer.jit itself.
    with open(str(fake.site / "flashinfer" / "jit" / "__init__.py"), "a") as handle:
        handle.write("\ndef gen_topk_module():\n    return None\n")
    drop_flashinfer_modules()
    try:
        names = flashinfer_jit_artifact.warmable(["not-a-name", "custom_0a1b", "topk", "sampling", "gone"])
    finally:
        drop_flashinfer_modules()
    assert names == ["topk", "sampling"]


# ---- relocation from the serving venv's workspace ------------------------------------------------

def serving_workspace(fake, tmp_path, payload, name="sampling"):
    """The serving venv's workspace: the same JIT dir (FlashInfer version and targets), a module
    built by ninja from the build.ninja the fake FlashInfer writes for that workspace (absolute
    paths, a source FlashInfer generated into the workspace)."""
    old_ws = tmp_path / "kernel-caches" / "aaaa1111"
    module_dir = old_ws / os.path.relpath(str(fake.jit_dir()), str(fake.base)) / name
    module_dir.mkdir(parents=True)
    (old_ws / "generated").mkdir()
    (old_ws / "generated" / "payload.elf").write_bytes(payload)
    (module_dir / "build.ninja").write_text("rule cp\n  command = cp $in $out\nbuild %s/%s.so: cp %s/generated/payload.elf\n"
                                            % (module_dir, name, old_ws))
    subprocess.run([NINJA, "-C", str(module_dir)], check=True, capture_output=True)
    return old_ws


def relocating(fake, env_file, tmp_path, old_ws):
    return dict(env_file=[env_file], relocate_from=str(old_ws), relocate_venv=str(tmp_path / "venvs" / "aaaa1111"))


def this_venv_generated(fake, payload):
    """This venv's generated source, as FlashInfer would generate it here."""
    (fake.base / "generated").mkdir(parents=True, exist_ok=True)
    (fake.base / "generated" / "payload.elf").write_bytes(payload)


def test_a_module_of_the_serving_venv_is_relocated_and_proven(fake, capsys, env_file, tmp_path):
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload)
    this_venv_generated(fake, payload)
    args = relocating(fake, env_file, tmp_path, old_ws)
    ok(run(fake, capsys, env_file=[env_file]))  # FlashInfer makes its cache dirs when imported
    before = tree(fake.base)
    would = ok(run(fake, capsys, check_mode=True, **args))
    assert (would["relocated"], would["changed"]) == (["sampling"], True) and tree(fake.base) == before
    done = ok(run(fake, capsys, **args))
    assert (done["relocated"], done["relocate_rejected"], done["changed"], done["modules"]) == (["sampling"], {}, True, ["sampling"])
    module_dir = fake.jit_dir() / "sampling"
    assert (module_dir / "sampling.so").read_bytes() == payload
    assert str(old_ws) not in (module_dir / "build.ninja").read_text()
    assert "no work to do" in subprocess.run([NINJA, "-C", str(module_dir), "-n"], capture_output=True, text=True, check=False).stdout
    assert not [name for name in os.listdir(str(fake.jit_dir())) if name.startswith(kc.RELOCATE_STAGING)]
    again = ok(run(fake, capsys, **args))
    assert (again["relocated"], again["changed"]) == ([], False)


def test_a_module_whose_inputs_differ_is_not_relocated(fake, capsys, env_file, tmp_path):
    old_ws = serving_workspace(fake, tmp_path, elf64(payload=256))
    this_venv_generated(fake, elf64(payload=512))
    done = ok(run(fake, capsys, **relocating(fake, env_file, tmp_path, old_ws)))
    assert done["relocated"] == [] and done["changed"] is False
    assert done["relocate_rejected"]["sampling"].startswith("input %s/generated/payload.elf differs from " % fake.base)
    assert not (fake.jit_dir() / "sampling").exists()


def test_a_module_flashinfer_would_generate_otherwise_for_this_venv_is_not_kept(fake, capsys, env_file, tmp_path, monkeypatch):
    # Another CUDA, compiler or flag for this venv: FlashInfer's own build.ninja differs, so the
    # relocated one (proven against the old flags) is not kept, and the warm-up builds it.
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload)
    this_venv_generated(fake, payload)
    monkeypatch.setenv("FAKE_FLASHINFER_FLAGS", " --preserve=mode")
    done = ok(run(fake, capsys, **relocating(fake, env_file, tmp_path, old_ws)))
    assert done["relocated"] == [] and done["relocate_rejected"] == {
        "sampling": "FlashInfer %s writes another build.ninja for this venv (its flags, CUDA or paths differ)" % VERSION}
    assert not (fake.jit_dir() / "sampling").exists()


def test_a_module_flashinfer_cannot_generate_is_left_to_where_it_is_needed(fake, capsys, env_file, tmp_path):
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload, name="attention_variant_7")
    this_venv_generated(fake, payload)
    done = ok(run(fake, capsys, **relocating(fake, env_file, tmp_path, old_ws)))
    assert done["relocated"] == [] and "has no generator for attention_variant_7" in done["relocate_rejected"]["attention_variant_7"]


def test_a_serving_module_being_built_is_left_alone(fake, capsys, env_file, tmp_path):
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload)
    this_venv_generated(fake, payload)
    old_jit = old_ws / os.path.relpath(str(fake.jit_dir()), str(fake.base))
    with kc.build_lock(str(old_jit), "sampling") as taken:
        assert taken
        done = ok(run(fake, capsys, **relocating(fake, env_file, tmp_path, old_ws)))
    assert done["relocate_rejected"] == {"sampling": "a FlashInfer build holds its lock: left to it"}


def test_a_malformed_serving_module_is_rejected_not_a_failure(fake, capsys, env_file, tmp_path):
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload)
    this_venv_generated(fake, payload)
    module_dir = old_ws / os.path.relpath(str(fake.jit_dir()), str(fake.base)) / "sampling"
    (module_dir / ".ninja_log").write_text("# ninja log v5\n")
    done = ok(run(fake, capsys, **relocating(fake, env_file, tmp_path, old_ws)))
    assert done["relocated"] == [] and done["relocate_rejected"]["sampling"]
    assert not (fake.jit_dir() / "sampling").exists()


def test_a_workspace_reached_through_a_link_is_moved_as_resolved(fake, capsys, env_file, tmp_path):
    # The serving workspace named through a symbolic link, its build.ninja written with the resolved
    # path (FlashInfer resolves): every output still lands in this workspace, none in the serving one.
    payload = elf64(payload=256)
    old_ws = serving_workspace(fake, tmp_path, payload)
    link = tmp_path / "caches-link"
    os.symlink(str(old_ws.parent), str(link))
    this_venv_generated(fake, payload)
    done = ok(run(fake, capsys, env_file=[env_file], relocate_from=str(link / old_ws.name),
                  relocate_venv=str(tmp_path / "venvs" / "aaaa1111")))
    assert done["relocated"] == ["sampling"], done
    assert str(old_ws) not in (fake.jit_dir() / "sampling" / "build.ninja").read_text()


def test_relocation_needs_both_the_workspace_and_its_venv(fake, capsys, env_file, tmp_path):
    assert "relocate_venv" in failed(run(fake, capsys, env_file=[env_file], relocate_from=str(tmp_path)))
