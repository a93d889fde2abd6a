"""kernel_cache against real ninja builds: a workspace laid out like FlashInfer's (one module dir per
module with build.ninja, .ninja_log, .ninja_deps, an object and <module>.so, built by gcc with
`deps = gcc`), packed, then seeded into a fresh workspace at the same path after "host 2" installed
the sources later, and proven with the real ninja (the `ninja` wheel FlashInfer runs).
"""

import fcntl
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj
from ansible_collections.blackwell.sglang.plugins.module_utils import kernel_cache as kc
from run_program import run

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
NINJA = kc.Ninja(shutil.which("ninja", path=os.path.dirname(sys.executable)) or shutil.which("ninja"), run)
VERSION = "0.7.2"
JIT_REL = ".cache/flashinfer/%s/120f/cached_ops" % VERSION
GEN_REL = ".cache/flashinfer/%s/120f/generated" % VERSION
MODULES = ("sampling", "topk")
BUILD_NINJA = """ninja_required_version = 1.3
cflags = -fPIC -O1 -I{venv}/include -I{gen}
rule compile
  command = gcc -MMD -MF $out.d $cflags -c $in -o $out
  depfile = $out.d
  deps = gcc
rule link
  command = gcc -shared $in -o $out
build {name}.o: compile {venv}/csrc/{name}.c
build {so}: link {name}.o
default {so}
"""


def sha(path):
    return hashlib.sha256(open(str(path), "rb").read()).hexdigest()


def tree(root):
    """Every path under `root` with its type, size and mtime: what a run that writes nothing keeps."""
    found = {}
    for base, dirs, names in os.walk(str(root)):
        for name in dirs + names:
            path = os.path.join(base, name)
            st = os.lstat(path)
            found[os.path.relpath(path, str(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def dry_run(module_dir):
    done = subprocess.run([NINJA.path, "-n", "-d", "explain", "-C", str(module_dir), "-f", "build.ninja"],
                          capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


class Project:
    """A venv with sources (outside the workspace, like FlashInfer's package and CUDA's headers) and a
    per-venv workspace with FlashInfer's layout, built with the real ninja."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.venv = tmp_path / "venv"
        self.ws = tmp_path / "kernel-caches" / "sglang-1"
        self.jit = self.ws / JIT_REL
        self.gen = self.ws / GEN_REL
        self.store = tmp_path / "store"
        self.store.mkdir()
        self.artifact = self.store / "sglang-1.tar.gz"
        (self.venv / "include").mkdir(parents=True)
        (self.venv / "include" / "common.h").write_text("#define COMMON 1\n")

    def build(self, name):
        (self.venv / "csrc").mkdir(exist_ok=True)
        (self.venv / "csrc" / (name + ".c")).write_text(
            '#include "common.h"\n#include "%s_gen.h"\nint %s(void) { return COMMON + GEN; }\n' % (name, name))
        self.gen.mkdir(parents=True, exist_ok=True)
        (self.gen / (name + "_gen.h")).write_text("#define GEN 2\n")
        module_dir = self.jit / name
        module_dir.mkdir(parents=True, exist_ok=True)
        (module_dir / "build.ninja").write_text(BUILD_NINJA.format(
            venv=self.venv, gen=self.gen, name=name, so=module_dir / (name + ".so")))
        subprocess.run([NINJA.path, "-C", str(module_dir), "-f", "build.ninja"], check=True, capture_output=True)
        return module_dir

    def build_all(self):
        for name in MODULES:
            self.build(name)
        # What a warm workspace holds besides: FlashInfer's locks, another kernel cache, a symlink.
        (self.jit / "tmp").mkdir()
        (self.jit / "tmp" / "sampling.lock").write_text("")
        (self.ws / "triton" / "ab12").mkdir(parents=True)
        (self.ws / "triton" / "ab12" / "kernel.json").write_text('{"name": "k"}\n')
        (self.ws / "stray.lock").write_text("")
        os.symlink(str(self.venv), str(self.ws / "venv-link"))
        return {name: sha(self.so(name)) for name in MODULES}

    def so(self, name, ws=None):
        return (ws or self.ws) / JIT_REL / name / (name + ".so")

    def key(self, **changes):
        key = kc.cache_key(str(self.venv), str(self.ws), VERSION, ["12.0f"], "/opt/cuda/13.0.2", "13.0", "0" * 64)
        key.update(changes)
        return key

    def pack(self, **changes):
        return kc.pack(str(self.ws), self.key(**changes), str(self.artifact), str(self.jit))

    def move_away(self):
        """Host 1's workspace goes; host 2 has the same path, empty."""
        host1 = self.ws.with_name("sglang-1-host1")
        os.rename(str(self.ws), str(host1))
        return host1

    def host2_installs(self):
        """Host 2 installed the venv (sources, headers) after host 1 built: newer than the artifact's objects."""
        now = time.time_ns()
        for path in (self.venv / "include" / "common.h", *sorted((self.venv / "csrc").iterdir())):
            os.utime(str(path), ns=(now, now))
        return now

    def seed(self, src=None, checksum=None, check_mode=False, **changes):
        src = str(src or self.artifact)
        return kc.seed(src, checksum or sha(src), self.key(**changes), str(self.ws), str(self.jit), NINJA,
                       check_mode=check_mode)

    def manifest(self, path=None):
        with tarfile.open(str(path or self.artifact), "r:gz") as tar:
            return json.loads(tar.extractfile(tar.next()).read())


@pytest.fixture
def project(tmp_path):
    assert NINJA, "no ninja: install requirements-dev.txt (the ninja wheel) into the venv"
    return Project(tmp_path)


def rewrite_artifact(project, edit):
    """A copy of the artifact with `edit(name, data) -> (name, data) or None` applied to each member."""
    out = project.store / "edited.tar.gz"
    with tarfile.open(str(project.artifact), "r:gz") as src, tarfile.open(str(out), "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read() if member.isfile() else b""
            edited = edit(member.name, data)
            if edited is None:
                continue
            member.name, data = edited
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


# ---- key ----------------------------------------------------------------------------------------

def test_cache_key_and_key_id():
    key = kc.cache_key("/opt/sglang/venvs/sglang-20260101", "/var/lib/sglang/kernel-caches/x", "0.7.2",
                       ["12.0f", "10.3a"], "/opt/cuda/13.0.2", "13.0", "ab" * 32)
    assert key == {"venv": "/opt/sglang/venvs/sglang-20260101", "workspace": "/var/lib/sglang/kernel-caches/x",
                   "flashinfer_version": "0.7.2", "targets": ["10.3a", "12.0f"], "cuda_home": "/opt/cuda/13.0.2",
                   "cuda_version": "13.0", "packages": "ab" * 32}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    assert kc.key_id(key) == "sglang-20260101-103a_120f-cuda13.0-" + digest[:12]
    other = dict(key, packages="cd" * 32)
    assert kc.key_id(other) != kc.key_id(key)
    odd = dict(key, venv="/opt/sglang/venvs/my venv+1:x")
    assert kc.key_id(odd).startswith("my_venv_1_x-103a_120f-cuda13.0-")
    assert kc.key_id(dict(key, venv="/work/.venv")).startswith("venv-103a_120f-")  # no hidden file name


def test_record_digest(tmp_path):
    site = tmp_path / "site-packages"
    for dist in ("torch-2.9.1.dist-info", "flashinfer_python-0.7.2.dist-info"):
        (site / dist).mkdir(parents=True)
        (site / dist / "RECORD").write_text("%s/METADATA,sha256=abc,10\n" % dist)
    (site / "flashinfer").mkdir()
    (site / "flashinfer" / "__init__.py").write_text("x = 1\n")
    first = kc.record_digest(str(site))
    assert len(first) == 64 and first == kc.record_digest(str(site))
    (site / "flashinfer" / "__init__.py").write_text("x = 2\n")  # not a RECORD: not in the digest
    assert kc.record_digest(str(site)) == first
    (site / "torch-2.9.1.dist-info" / "RECORD").write_text("torch/x.py,sha256=abd,10\n")
    changed = kc.record_digest(str(site))
    assert changed != first
    os.rename(str(site / "torch-2.9.1.dist-info"), str(site / "torch-2.9.2.dist-info"))
    assert kc.record_digest(str(site)) != changed  # the name counts too
    with pytest.raises(kc.KernelCacheError, match="no \\*.dist-info/RECORD under .*/empty"):
        kc.record_digest(str(tmp_path / "empty"))


def test_find_ninja(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(kc.KernelCacheError, match="ninja not found on PATH=%s" % bin_dir):
        kc.find_ninja(run)
    (bin_dir / "ninja").write_text("#!/bin/sh\n")
    (bin_dir / "ninja").chmod(0o755)
    assert kc.find_ninja(run).path == str(bin_dir / "ninja")


# ---- pack ---------------------------------------------------------------------------------------

@needs_gcc
def test_pack_manifest_first_files_and_what_is_left_out(project):
    project.build_all()
    broken = project.jit / "killed"  # a build killed before its link: no whole .so
    broken.mkdir()
    (broken / "killed.so").write_bytes(b"\x7fELF" + bytes(20))
    (broken / "build.ninja").write_text("")
    (project.ws / "triton" / "ab12" / "launcher.so").write_bytes(b"")
    result = project.pack()
    assert result["path"] == str(project.artifact)
    assert result["bytes"] == project.artifact.stat().st_size
    assert result["sha256"] == sha(project.artifact)
    assert result["modules"] == ["sampling", "topk"]
    assert result["changed"] is True
    assert sorted(result["left_out"]) == [JIT_REL + "/killed: truncated ELF header (24 bytes)",
                                          "triton/ab12/launcher.so: empty (0 bytes)"]
    assert os.listdir(str(project.store)) == [project.artifact.name]  # no temp file left
    assert oct(project.artifact.stat().st_mode & 0o777) == "0o644"
    with tarfile.open(str(project.artifact), "r:gz") as tar:
        names = tar.getnames()
    assert names[0] == "manifest.json"
    manifest = project.manifest()
    assert manifest["key"] == project.key() and manifest["key_id"] == kc.key_id(project.key())
    assert manifest["jit_dir"] == JIT_REL and manifest["modules"] == ["sampling", "topk"]
    files = manifest["files"]
    assert result["files"] == len(files)
    assert names[1:] == ["workspace/" + rel for rel in sorted(files)]
    for name in MODULES:
        for part in ("build.ninja", ".ninja_log", ".ninja_deps", name + ".o", name + ".so"):
            rel = "%s/%s/%s" % (JIT_REL, name, part)
            assert files[rel] == {"sha256": sha(project.ws / rel), "size": (project.ws / rel).stat().st_size}
        assert GEN_REL + "/%s_gen.h" % name in files
    assert "triton/ab12/kernel.json" in files
    assert not [rel for rel in files if rel.endswith(".lock") or "/tmp/" in rel or "killed" in rel
                or rel.startswith("venv-link") or rel.endswith("launcher.so")]


@needs_gcc
def test_pack_again_leaves_an_equal_artifact(project):
    project.build_all()
    first = project.pack()
    before = project.artifact.stat().st_mtime_ns
    again = project.pack()
    assert again["changed"] is False
    assert again["sha256"] == first["sha256"] and again["bytes"] == first["bytes"]
    assert project.artifact.stat().st_mtime_ns == before
    (project.ws / "triton" / "ab12" / "kernel.json").write_text('{"name": "k2"}\n')
    assert kc.pack(str(project.ws), project.key(), str(project.artifact), str(project.jit), check_mode=True) == dict(
        first, changed=True, bytes=None, sha256=None)
    assert project.artifact.stat().st_mtime_ns == before  # check mode wrote nothing
    changed = project.pack()
    assert changed["changed"] is True and changed["sha256"] != first["sha256"]


@needs_gcc
def test_pack_refuses_dest_inside_the_workspace_and_a_jit_dir_outside(project):
    project.build_all()
    with pytest.raises(kc.KernelCacheError, match="inside the workspace"):
        kc.pack(str(project.ws), project.key(), str(project.ws / "a.tar.gz"), str(project.jit))
    with pytest.raises(kc.KernelCacheError, match="JIT dir /elsewhere/cached_ops is not inside the workspace"):
        kc.pack(str(project.ws), project.key(), str(project.artifact), "/elsewhere/cached_ops")


@needs_gcc
def test_pack_a_file_that_changes_while_packed_fails(project, monkeypatch):
    project.build_all()
    real = kc.file_sha256

    def grow_after_hashing(path):
        digest = real(path)
        if path.endswith("kernel.json"):
            with open(path, "a") as handle:
                handle.write("more")
        return digest
    monkeypatch.setattr(kc, "file_sha256", grow_after_hashing)
    with pytest.raises(kc.KernelCacheError, match="kernel.json changed while it was packed"):
        project.pack()
    assert os.listdir(str(project.store)) == []


# ---- seed: the main path -------------------------------------------------------------------------

@needs_gcc
def test_seed_same_path_nothing_rebuilds(project):
    fingerprints = project.build_all()
    project.pack()
    host1 = project.move_away()
    installed = project.host2_installs()
    assert all((host1 / JIT_REL / name / (name + ".o")).stat().st_mtime_ns < installed for name in MODULES)
    result = project.seed()
    assert result == {"seeded": ["sampling", "topk"], "rejected": None, "rejected_modules": {},
                      "skipped_modules": [], "removed": []}
    for name in MODULES:
        module_dir = project.jit / name
        assert "ninja: no work to do." in dry_run(module_dir)
        assert sha(project.so(name)) == fingerprints[name]
        mtime = project.so(name).stat().st_mtime_ns
        done = subprocess.run([NINJA.path, "-C", str(module_dir), "-f", "build.ninja"], capture_output=True, text=True,
                              check=True)
        assert "ninja: no work to do." in done.stdout
        assert project.so(name).stat().st_mtime_ns == mtime
    assert (project.gen / "sampling_gen.h").read_text() == "#define GEN 2\n"
    assert (project.ws / "triton" / "ab12" / "kernel.json").exists()
    assert not (project.ws / "stray.lock").exists() and not (project.ws / "venv-link").exists()
    assert sorted(os.listdir(str(project.ws.parent))) == ["sglang-1", "sglang-1-host1"]  # no staging dir left


@needs_gcc
def test_raw_extract_would_rebuild_so_settling_is_needed(project):
    project.build_all()
    project.pack()
    project.move_away()
    project.host2_installs()
    with tarfile.open(str(project.artifact), "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("workspace/")]
        for member in members:
            member.name = member.name[len("workspace/"):]
        tar.extractall(str(project.ws), members=members, filter="data")
    module_dir = str(project.jit / "sampling")
    fresh, explain = kc.ninja_up_to_date(module_dir, NINJA)
    assert fresh is False
    assert explain.startswith("ninja explain: ")
    assert "older than most recent input" in explain or "stored deps info out of date" in explain
    # Each step of the settle is needed: mtimes alone leave the deps log out of date...
    mtime_ns = time.time_ns()
    kc.set_mtimes(module_dir, mtime_ns)
    fresh, explain = kc.ninja_up_to_date(module_dir, NINJA)
    assert not fresh and "stored deps info out of date for '%s/sampling.o'" % module_dir in explain.replace(
        "'sampling.o'", "'%s/sampling.o'" % module_dir)
    # ...the deps log fixed, the build log still records host 1's mtimes...
    assert kc.rewrite_deps_mtime(os.path.join(module_dir, ".ninja_deps"), mtime_ns) == 1
    fresh, explain = kc.ninja_up_to_date(module_dir, NINJA)
    assert not fresh and explain.startswith("ninja explain: recorded mtime of sampling.o older than most recent input")
    # ...and restat fixes that.
    kc.settle_ninja(module_dir, NINJA, mtime_ns)
    assert kc.ninja_up_to_date(module_dir, NINJA) == (True, "")


@needs_gcc
def test_seed_restat_without_deps_rewrite_is_not_enough(project):
    project.build_all()
    module_dir = str(project.jit / "topk")
    mtime_ns = time.time_ns()
    kc.set_mtimes(module_dir, mtime_ns)
    subprocess.run([NINJA.path, "-C", module_dir, "-f", "build.ninja", "-t", "restat"], check=True)
    fresh, explain = kc.ninja_up_to_date(module_dir, NINJA)
    assert not fresh and "stored deps info out of date" in explain
    kc.rewrite_deps_mtime(os.path.join(module_dir, ".ninja_deps"), mtime_ns)
    assert kc.ninja_up_to_date(module_dir, NINJA) == (True, "")


# ---- seed: rejections ------------------------------------------------------------------------------

def assert_nothing_merged(project, before):
    assert tree(project.ws.parent) == before


@needs_gcc
def test_truncated_artifact_is_rejected(project):
    project.build_all()
    project.pack()
    whole = project.artifact.read_bytes()
    checksum = sha(project.artifact)
    project.move_away()
    project.ws.mkdir()
    before = tree(project.ws.parent)
    project.artifact.write_bytes(whole[:len(whole) // 2])
    result = project.seed(checksum=checksum)
    assert result["seeded"] == [] and result["rejected_modules"] == {}
    assert result["rejected"].startswith("sha256 of %s is %s, expected %s (truncated or replaced)"
                                         % (project.artifact, sha(project.artifact), checksum))
    assert_nothing_merged(project, before)
    # With its own (matching) checksum it still cannot be unpacked: nothing merged, no staging dir left.
    result = project.seed()
    assert result["seeded"] == [] and result["rejected"] == (
        "cannot unpack the artifact (Compressed file ended before the end-of-stream marker was reached)")
    assert_nothing_merged(project, before)


@needs_gcc
@pytest.mark.parametrize("field, value", [("cuda_version", "12.9"), ("targets", ["10.3a"]), ("packages", "f" * 64)])
def test_other_key_is_rejected_naming_the_field(project, field, value):
    project.build_all()
    project.pack(**{field: value})
    project.move_away()
    before = tree(project.ws.parent)
    result = project.seed()
    assert result["seeded"] == []
    assert result["rejected"] == "artifact was built for another key; differs in %s (artifact %s, host %s)" % (
        field, json.dumps(value), json.dumps(project.key()[field]))
    assert_nothing_merged(project, before)
    assert project.seed(check_mode=True)["rejected"] == result["rejected"]


@needs_gcc
@pytest.mark.parametrize("edit, reason", [
    (lambda name, data: (name, data.replace(b"GEN 2", b"GEN 3")) if name.endswith("sampling_gen.h") else (name, data),
     "artifact member %s/sampling_gen.h does not match its manifest (size or sha256): the artifact was altered; "
     "pack it again" % GEN_REL),
    (lambda name, data: (name, data[:-8]) if name.endswith("topk.so") else (name, data),
     "artifact member %s/topk/topk.so does not match its manifest (size or sha256): the artifact was altered; "
     "pack it again" % JIT_REL),
    (lambda name, data: None if name.endswith("kernel.json") else (name, data),
     "artifact lacks triton/ab12/kernel.json, which its manifest lists"),
    (lambda name, data: ("workspace/../evil" if name.endswith("kernel.json") else name, data),
     "artifact member 'workspace/../evil' is not a plain file or dir under workspace/"),
    (lambda name, data: ("workspace/extra.txt" if name.endswith("kernel.json") else name, data),
     "artifact member 'workspace/extra.txt' is not in its manifest (or twice)"),
    (lambda name, data: ("other/x" if name.endswith("kernel.json") else name, data),
     "artifact member 'other/x' is not a plain file or dir under workspace/"),
])
def test_tampered_artifact_is_rejected(project, edit, reason):
    project.build_all()
    project.pack()
    edited = rewrite_artifact(project, edit)
    project.move_away()
    before = tree(project.ws.parent)
    result = project.seed(src=edited)
    assert result["seeded"] == []
    assert result["rejected"] == reason
    assert_nothing_merged(project, before)


@needs_gcc
def test_a_link_member_is_rejected(project):
    project.build_all()
    project.pack()
    out = project.store / "link.tar.gz"
    with tarfile.open(str(project.artifact), "r:gz") as src, tarfile.open(str(out), "w:gz") as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        link = tarfile.TarInfo("workspace/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        dst.addfile(link)
    project.move_away()
    result = project.seed(src=out)
    assert result["rejected"] == "artifact member 'workspace/passwd' is not a plain file or dir under workspace/"
    assert not project.ws.exists() or not (project.ws / "passwd").exists()


@needs_gcc
def test_a_broken_so_in_the_artifact_is_rejected(project):
    project.build_all()
    project.pack()
    manifest = project.manifest()
    rel = "%s/topk/topk.so" % JIT_REL
    broken = b"\x7fELF" + bytes(10)
    manifest["files"][rel] = {"sha256": hashlib.sha256(broken).hexdigest(), "size": len(broken)}

    def edit(name, data):
        if name == "manifest.json":
            return name, json.dumps(manifest).encode()
        return name, broken if name == "workspace/" + rel else data
    edited = rewrite_artifact(project, edit)
    project.move_away()
    result = project.seed(src=edited)
    assert result["rejected"] == "artifact's %s is truncated ELF header (14 bytes)" % rel
    assert not project.so("topk").exists() and not project.so("sampling").exists()


def test_not_an_artifact_is_rejected(project):
    project.artifact.write_bytes(b"not a tarball")
    assert project.seed()["rejected"].startswith("%s is not a readable tar.gz" % project.artifact)
    with tarfile.open(str(project.artifact), "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("workspace/a"), io.BytesIO(b""))
    assert project.seed()["rejected"] == "%s has no manifest.json first: it was not packed by this collection" % (
        project.artifact)
    assert not project.ws.exists()


def test_missing_src_is_an_error(project):
    with pytest.raises(kc.KernelCacheError, match="cannot read the artifact: .*/nothing.tar.gz does not exist"):
        kc.seed(str(project.store / "nothing.tar.gz"), "0" * 64, project.key(), str(project.ws), str(project.jit), run=run)


# ---- seed: merging ------------------------------------------------------------------------------

@needs_gcc
def test_a_broken_local_so_is_replaced(project):
    fingerprints = project.build_all()
    project.pack()
    host1 = project.move_away()
    local = project.jit / "sampling"
    local.mkdir(parents=True)
    (local / "sampling.so").write_bytes(project.so("sampling", host1).read_bytes()[:4096])  # a killed link
    assert fj.so_problem(str(local / "sampling.so")).startswith("truncated")
    (local / "junk.o").write_bytes(b"x")
    project.host2_installs()
    result = project.seed()
    assert result["seeded"] == ["sampling", "topk"] and result["removed"] == ["sampling"]
    assert fj.so_problem(str(project.so("sampling"))) is None
    assert sha(project.so("sampling")) == fingerprints["sampling"]
    assert not (local / "junk.o").exists()
    assert "ninja: no work to do." in dry_run(local)


@needs_gcc
def test_a_module_whole_locally_is_skipped_and_other_files_only_added(project):
    project.build_all()
    project.pack()
    project.move_away()
    local = project.build("topk")  # built on host 2 itself
    (project.gen / "topk_gen.h").write_text("#define GEN 2  /* host 2's own */\n")
    stat_before = os.stat(str(project.so("topk")))
    result = project.seed()
    assert result["seeded"] == ["sampling"] and result["skipped_modules"] == ["topk"] and result["removed"] == []
    stat_after = os.stat(str(project.so("topk")))
    assert (stat_after.st_ino, stat_after.st_mtime_ns) == (stat_before.st_ino, stat_before.st_mtime_ns)
    assert (project.gen / "topk_gen.h").read_text() == "#define GEN 2  /* host 2's own */\n"  # present: kept
    assert (project.gen / "sampling_gen.h").exists() and (project.ws / "triton" / "ab12" / "kernel.json").exists()
    assert "ninja: no work to do." in dry_run(project.jit / "sampling")
    assert local.exists()


@needs_gcc
def test_a_module_ninja_would_rebuild_is_removed(project):
    project.build_all()
    project.pack()
    project.move_away()
    later = time.time_ns() + 3600 * 10**9  # a source from a host whose clock was ahead
    os.utime(str(project.venv / "csrc" / "sampling.c"), ns=(later, later))
    result = project.seed()
    assert result["seeded"] == ["topk"]
    assert list(result["rejected_modules"]) == ["sampling"]
    assert result["rejected_modules"]["sampling"].startswith(
        "ninja explain: output sampling.o older than most recent input %s/csrc/sampling.c" % project.venv)
    assert not (project.jit / "sampling").exists()
    assert "ninja: no work to do." in dry_run(project.jit / "topk")


def seed_while_a_build_holds(project, name):
    """Seed while FlashInfer's lock for building `name` (<jit dir>/tmp/<name>.lock) is held."""
    (project.jit / "tmp").mkdir(parents=True, exist_ok=True)
    fd = os.open(str(project.jit / "tmp" / (name + ".lock")), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return project.seed()
    finally:
        os.close(fd)


@needs_gcc
def test_a_module_whose_build_lock_is_held_is_left_to_that_build(project):
    project.build_all()
    project.pack()
    project.move_away()
    result = seed_while_a_build_holds(project, "topk")
    assert result["seeded"] == ["sampling"]
    assert result["rejected_modules"] == {"topk": "a FlashInfer build holds %s/tmp/topk.lock: left to it" % project.jit}
    assert not (project.jit / "topk").exists()


@needs_gcc
def test_check_mode_writes_nothing(project):
    project.build_all()
    project.pack()
    project.move_away()
    project.build("topk")
    before = tree(project.tmp)
    result = project.seed(check_mode=True)
    assert result == {"seeded": ["sampling"], "rejected": None, "rejected_modules": {}, "skipped_modules": ["topk"],
                      "removed": []}
    assert tree(project.tmp) == before


# ---- .ninja_deps --------------------------------------------------------------------------------

def deps_log(version=4, records=b""):
    return b"# ninjadeps\n" + struct.pack("<i", version) + records


def path_record(path, node_id):
    data = path.encode()
    data += b"\0" * (-len(data) % 4)
    return struct.pack("<I", len(data) + 4) + data + struct.pack("<I", ~node_id & 0xFFFFFFFF)


def deps_record(out, mtime_ns, inputs):
    return struct.pack("<IiII", (12 + 4 * len(inputs)) | 0x80000000, out, mtime_ns & 0xFFFFFFFF,
                       mtime_ns >> 32) + struct.pack("<%di" % len(inputs), *inputs)


def test_rewrite_deps_mtime_sets_every_deps_record(tmp_path):
    path = tmp_path / ".ninja_deps"
    records = (path_record("a.o", 0) + path_record("/src/a.c", 1) + path_record("/inc/abc.h", 2)
               + deps_record(0, 5, [1, 2]) + deps_record(0, 7, [1]))
    path.write_bytes(deps_log(records=records))
    mtime_ns = 1796117500123456789
    assert kc.rewrite_deps_mtime(str(path), mtime_ns) == 2
    expected = (path_record("a.o", 0) + path_record("/src/a.c", 1) + path_record("/inc/abc.h", 2)
                + deps_record(0, mtime_ns, [1, 2]) + deps_record(0, mtime_ns, [1]))
    assert path.read_bytes() == deps_log(records=expected)
    assert [p.name for p in tmp_path.iterdir()] == [".ninja_deps"]


@needs_gcc
def test_rewrite_deps_mtime_as_ninja_reads_it(project):
    module_dir = project.build("sampling")
    mtime_ns = time.time_ns() + 5 * 10**9
    assert kc.rewrite_deps_mtime(str(module_dir / ".ninja_deps"), mtime_ns) == 1
    out = subprocess.run([NINJA.path, "-C", str(module_dir), "-t", "deps"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "sampling.o: #deps 3, deps mtime %d (VALID)" % mtime_ns  # "VALID": the .o is older than that
    assert sorted(line.strip() for line in out[1:] if line.strip()) == sorted(
        ["%s/csrc/sampling.c" % project.venv, "%s/sampling_gen.h" % project.gen, "%s/include/common.h" % project.venv])


@pytest.mark.parametrize("data, message", [
    (deps_log(version=3), "is ninja deps log version 3, only version 4 \\(ninja >= 1.10\\) is understood"),
    (b"# ninjalog\n" + bytes(8), "is not a ninja deps log"),
    (deps_log(records=path_record("a.o", 0)[:-2]), "has a malformed record at byte 16"),
    (deps_log(records=struct.pack("<I", 8 | 0x80000000) + bytes(8)), "has a malformed record at byte 16 \\(size 8\\)"),
    (deps_log(records=path_record("a.o", 0) + b"\x01"), "is truncated at byte 28"),
])
def test_rewrite_deps_mtime_refuses(tmp_path, data, message):
    path = tmp_path / ".ninja_deps"
    path.write_bytes(data)
    with pytest.raises(kc.KernelCacheError, match=message):
        kc.rewrite_deps_mtime(str(path), 1)
    assert path.read_bytes() == data


def test_settle_needs_build_ninja(tmp_path):
    with pytest.raises(kc.KernelCacheError, match="has no build.ninja: it will be built locally"):
        kc.settle_ninja(str(tmp_path), NINJA, 1)


def test_a_failed_ninja_is_told_by_its_last_line_of_output_or_its_exit_status():
    done = subprocess.CompletedProcess(["ninja"], 1, stdout="first\nlast of stdout\n\n", stderr="ninja: error: x\n  \n")
    assert kc._last_line(done) == "last of stdout"
    assert kc._last_line(subprocess.CompletedProcess(["ninja"], 1, stdout="", stderr="ninja: error: x\n")) == "ninja: error: x"
    assert kc._last_line(subprocess.CompletedProcess(["ninja"], 2, stdout=" \n", stderr="")) == "exit status 2"


# ---- the manifest's checks, each refusal whole (the mutation run's survivors) ----

@pytest.mark.parametrize("name, rel", [
    ("", None), ("/a", None), ("a\\b", None), ("a\0b", None), ("a//b", None), ("./a", None), ("a/./b", None),
    (".", None), ("..", None), ("../a", None), ("a/../b", None), ("a/b/..", None),
    ("a/", "a"), ("a/b", "a/b"), ("x.so", "x.so"), ("a..b/c", "a..b/c"),
])
def test_a_member_path_is_relative_and_normal_or_refused(name, rel):
    assert kc._safe_rel(name) == rel


SO = {"size": 1, "sha256": "0" * 64}
GOOD_MANIFEST = {"format": 1, "key": {"venv": "/v", "cuda_version": "13.0"}, "files": {"j/m/m.so": SO},
                 "modules": ["m"], "jit_dir": "j"}


@pytest.mark.parametrize("change, reason", [
    (None, "artifact format None, this collection reads format 1: pack it again with this collection"),
    ({"format": 2}, "artifact format 2, this collection reads format 1: pack it again with this collection"),
    ({"key": None}, "artifact manifest has no key"),
    ({"key": {"venv": "/w", "cuda_version": "12.9"}},
     'artifact was built for another key; differs in cuda_version (artifact "12.9", host "13.0"); venv (artifact "/w", '
     'host "/v")'),
    ({"files": []}, "artifact manifest lacks files, modules or jit_dir"),
    ({"modules": {}}, "artifact manifest lacks files, modules or jit_dir"),
    ({"jit_dir": None}, "artifact manifest lacks files, modules or jit_dir"),
    ({"files": {"../x": SO}}, "artifact manifest has a bad entry '../x'"),
    ({"files": {"a": []}}, "artifact manifest has a bad entry 'a'"),
    ({"files": {"a": {"size": "1", "sha256": "0"}}}, "artifact manifest has a bad entry 'a'"),
    ({"files": {"a": {"size": 1, "sha256": 1}}}, "artifact manifest has a bad entry 'a'"),
    ({"modules": [1]}, "artifact manifest lists module 1 without its .so"),
    ({"modules": ["n"]}, "artifact manifest lists module 'n' without its .so"),
    ({"modules": [".."], "files": {"j/../...so": SO}}, "artifact manifest has a bad entry 'j/../...so'"),
    # FlashInfer's lock dir and nested names are never modules, even with a .so where one would be.
    ({"modules": ["tmp"], "files": {"j/tmp/tmp.so": SO}}, "artifact manifest lists module 'tmp' without its .so"),
    ({"modules": ["a/b"], "files": {"j/a/b/a/b.so": SO}}, "artifact manifest lists module 'a/b' without its .so"),
])
def test_a_manifest_is_refused_naming_what_is_wrong(change, reason):
    manifest = None if change is None else dict(GOOD_MANIFEST, **change)
    with pytest.raises(kc.Rejected) as refused:
        kc._check_manifest(manifest, GOOD_MANIFEST["key"])
    assert str(refused.value) == reason
    assert kc._check_manifest(dict(GOOD_MANIFEST), GOOD_MANIFEST["key"]) == GOOD_MANIFEST


@pytest.mark.parametrize("data, message", [
    (deps_log(version=3), "{p} is ninja deps log version 3, only version 4 (ninja >= 1.10) is understood: build the cache "
                          "with the venv's ninja wheel"),
    (deps_log(version=-1), "{p} is ninja deps log version -1, only version 4 (ninja >= 1.10) is understood: build the "
                           "cache with the venv's ninja wheel"),
    (b"# ninjalog\n" + bytes(8), "{p} is not a ninja deps log: remove the module dir to build it locally"),
    (b"# ninjadeps\n" + bytes(3), "{p} is not a ninja deps log: remove the module dir to build it locally"),
    (deps_log(records=struct.pack("<I", 8 | 0x80000000) + bytes(8)),
     "{p} has a malformed record at byte 16 (size 8): remove the module dir to build it locally"),
    (deps_log(records=struct.pack("<I", 0)),
     "{p} has a malformed record at byte 16 (size 0): remove the module dir to build it locally"),
    (deps_log(records=path_record("a.o", 0) + b"\x01\x02\x03"),
     "{p} is truncated at byte 28: remove the module dir to build it locally"),
])
def test_rewrite_deps_mtime_refuses_in_full(tmp_path, data, message):
    path = tmp_path / ".ninja_deps"
    path.write_bytes(data)
    with pytest.raises(kc.KernelCacheError) as refused:
        kc.rewrite_deps_mtime(str(path), 1)
    assert str(refused.value) == message.format(p=path)


def test_rewrite_deps_mtime_takes_a_record_without_inputs_and_replaces_the_file_from_beside_it(tmp_path, monkeypatch):
    path = tmp_path / ".ninja_deps"
    path.write_bytes(deps_log(records=path_record("a.o", 0) + deps_record(0, 5, [])))
    path.chmod(0o600)
    replaced, real = [], os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append(src), real(src, dst)))
    assert kc.rewrite_deps_mtime(str(path), 9) == 1
    assert path.read_bytes() == deps_log(records=path_record("a.o", 0) + deps_record(0, 9, []))
    [tmp] = replaced
    assert os.path.dirname(tmp) == str(tmp_path) and os.path.basename(tmp).startswith(".ninja_deps.")
    assert oct(path.stat().st_mode & 0o777) == "0o600" and [p.name for p in tmp_path.iterdir()] == [".ninja_deps"]


# ---- pack and seed: the paths the mutation run found untested ----

@needs_gcc
@pytest.mark.parametrize("change", ["grow", "shrink"])
def test_a_file_that_grows_or_shrinks_after_it_was_hashed_fails_the_pack(project, monkeypatch, change):
    project.build_all()
    real_add = kc._add_file

    def change_then_add(tar, workspace, rel, entry):
        if rel.endswith("kernel.json"):
            path = os.path.join(workspace, rel)
            if change == "grow":
                with open(path, "a") as handle:
                    handle.write("more")
            else:
                with open(path, "r+") as handle:
                    handle.truncate(3)
        return real_add(tar, workspace, rel, entry)
    monkeypatch.setattr(kc, "_add_file", change_then_add)
    with pytest.raises(kc.KernelCacheError) as failed:
        project.pack()
    assert str(failed.value) == ("%s changed while it was packed (a FlashInfer build running?): pack again when no "
                                 "build runs" % (project.ws / "triton" / "ab12" / "kernel.json"))
    assert os.listdir(str(project.store)) == []


@needs_gcc
def test_pack_keeps_each_file_s_mode_without_write_for_others_and_writes_beside_the_artifact(project, monkeypatch):
    project.build_all()
    (project.ws / "triton" / "ab12" / "kernel.json").chmod(0o640)
    (project.gen / "sampling_gen.h").chmod(0o777)
    replaced, real = [], os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append(src), real(src, dst)))
    project.pack()
    with tarfile.open(str(project.artifact), "r:gz") as tar:
        modes = {member.name: member.mode for member in tar}
    assert modes["workspace/triton/ab12/kernel.json"] == 0o640
    assert modes["workspace/%s/sampling_gen.h" % GEN_REL] == 0o755
    [tmp] = replaced
    assert os.path.dirname(tmp) == str(project.store) and os.path.basename(tmp).startswith(".sglang-1.tar.gz.")
    assert tmp.endswith(".tmp")


def test_pack_refusals_in_full(tmp_path, monkeypatch):
    key = kc.cache_key("/v", str(tmp_path / "ws"), "0.7.2", [], "/c", "13.0", "0")
    with pytest.raises(kc.KernelCacheError) as refused:
        kc.pack(str(tmp_path / "ws"), key, str(tmp_path / "a.tar.gz"), "jit")
    assert str(refused.value) == ("workspace %s is not a directory: warm the cache first (flashinfer_jit_cache) or fix "
                                  "workspace_base" % (tmp_path / "ws"))
    (tmp_path / "ws" / "jit").mkdir(parents=True)
    (tmp_path / "ws" / "a.txt").write_text("x")
    os.symlink(str(tmp_path / "ws"), str(tmp_path / "link"))
    # The workspace named through a link: an artifact inside it is refused by either spelling.
    with pytest.raises(kc.KernelCacheError) as refused:
        kc.pack(str(tmp_path / "link"), key, str(tmp_path / "link" / "a.tar.gz"), "jit")
    assert str(refused.value) == "dest %s is inside the workspace %s: put the artifact outside it" % (
        tmp_path / "link" / "a.tar.gz", tmp_path / "link")

    def unreadable(path):
        raise OSError(13, "Permission denied", path)
    monkeypatch.setattr(kc, "file_sha256", unreadable)
    with pytest.raises(kc.KernelCacheError) as refused:
        kc.pack(str(tmp_path / "ws"), key, str(tmp_path / "a.tar.gz"), "jit")
    assert str(refused.value) == "cannot read the workspace: %s" % kc.os_error_reason(
        OSError(13, "Permission denied", str(tmp_path / "ws" / "a.txt")))


@needs_gcc
def test_seed_refusals_and_errors_in_full(project, monkeypatch):
    project.build_all()
    project.pack()
    project.move_away()
    other_jit = str(project.ws / ".cache" / "flashinfer" / "other")
    result = kc.seed(str(project.artifact), sha(project.artifact), project.key(), str(project.ws), other_jit, NINJA)
    assert result == {"seeded": [], "rejected": "artifact's JIT dir is %s, this host's %s" % (
        JIT_REL, ".cache/flashinfer/other"), "rejected_modules": {}, "skipped_modules": [], "removed": []}

    def no_room(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    with monkeypatch.context() as patch:
        patch.setattr(kc.tempfile, "mkdtemp", no_room)
        with pytest.raises(kc.KernelCacheError) as failed:
            project.seed()
    assert str(failed.value) == "cannot unpack beside the workspace: %s" % kc.os_error_reason(
        OSError(28, "No space left on device"))
    # Staged beside the workspace, and gone afterwards.
    made, real = [], kc.tempfile.mkdtemp
    monkeypatch.setattr(kc.tempfile, "mkdtemp", lambda **kwargs: made.append(real(**kwargs)) or made[-1])
    assert project.seed()["seeded"] == list(MODULES)
    [staging] = made
    assert os.path.dirname(staging) == str(project.ws.parent) and os.path.basename(staging).startswith(".sglang-1.seed-")
    assert not os.path.exists(staging)


@needs_gcc
def test_seed_needs_no_ninja_when_every_module_is_whole_already(project, monkeypatch):
    project.build_all()
    project.pack()
    monkeypatch.setenv("PATH", "/nonexistent")
    result = kc.seed(str(project.artifact), sha(project.artifact), project.key(), str(project.ws), str(project.jit), run=run)
    assert (result["seeded"], result["skipped_modules"], result["rejected"]) == ([], list(MODULES), None)


@needs_gcc
def test_a_member_twice_is_rejected(project):
    project.build_all()
    project.pack()
    out = project.store / "twice.tar.gz"
    with tarfile.open(str(project.artifact), "r:gz") as src, tarfile.open(str(out), "w:gz") as dst:
        members = [(member, src.extractfile(member).read() if member.isfile() else None) for member in src]
        for member, data in members + members[-1:]:
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    project.move_away()
    assert project.seed(src=out)["rejected"] == "artifact member %r is not in its manifest (or twice)" % members[-1][0].name


@needs_gcc
@pytest.mark.parametrize("error, outcome", [
    (OSError(28, "No space left on device"), "error"),
    (OSError(5, "Input/output error"), "rejected"),
])
def test_an_unpack_that_fails_on_the_host_is_an_error_and_one_of_the_artifact_a_rejection(project, monkeypatch, error,
                                                                                          outcome):
    project.build_all()
    project.pack()
    project.move_away()

    def fail(*_args, **_kwargs):
        raise error
    monkeypatch.setattr(tarfile.TarFile, "extractall", fail)
    if outcome == "error":
        with pytest.raises(kc.KernelCacheError) as failed:
            project.seed()
        assert str(failed.value) == "cannot unpack the artifact: %s" % kc.os_error_reason(error)
    else:
        assert project.seed()["rejected"] == "cannot unpack the artifact (%s)" % error


# ---- merging: the paths the mutation run found untested ----

@needs_gcc
def test_a_held_lock_leaves_that_module_and_the_next_is_still_seeded(project):
    project.build_all()
    project.pack()
    project.move_away()
    result = seed_while_a_build_holds(project, "sampling")
    assert result["seeded"] == ["topk"] and list(result["rejected_modules"]) == ["sampling"]


@needs_gcc
def test_a_local_file_where_a_module_dir_belongs_is_replaced(project):
    project.build_all()
    project.pack()
    project.move_away()
    project.jit.mkdir(parents=True)
    (project.jit / "sampling").write_text("not a module dir")
    result = project.seed()
    assert result["seeded"] == ["sampling", "topk"] and result["removed"] == ["sampling"]
    assert fj.so_problem(str(project.so("sampling"))) is None


@needs_gcc
def test_a_module_built_meanwhile_is_skipped(project, monkeypatch):
    project.build_all()
    project.pack()
    project.move_away()
    project.build("sampling")  # whole by the time the merge reaches it; the next module is still seeded
    monkeypatch.setattr(kc, "_plan", lambda manifest, jit_dir: (sorted(manifest["modules"]), []))
    result = project.seed()
    assert (result["seeded"], result["skipped_modules"]) == (["topk"], ["sampling"])


@needs_gcc
def test_a_module_that_cannot_be_settled_or_whose_so_breaks_is_removed(project, monkeypatch):
    project.build_all()
    project.pack()
    project.move_away()
    real = kc.settle_ninja

    def settle(module_dir, ninja, mtime_ns):
        if module_dir.endswith("sampling"):
            raise kc.KernelCacheError("%s has no build.ninja: it will be built locally" % module_dir)
        return real(module_dir, ninja, mtime_ns)

    def up_to_date_but_truncated(module_dir, ninja):
        with open(os.path.join(module_dir, "topk.so"), "r+b") as handle:
            handle.truncate(10)
        return True, ""
    monkeypatch.setattr(kc, "settle_ninja", settle)
    monkeypatch.setattr(kc, "ninja_up_to_date", up_to_date_but_truncated)
    result = project.seed()
    assert result["seeded"] == []
    broken = project.tmp / "broken.so"
    broken.write_bytes(project.so("topk", project.ws.with_name("sglang-1-host1")).read_bytes()[:10])
    assert result["rejected_modules"] == {
        "sampling": "%s has no build.ninja: it will be built locally" % (project.jit / "sampling"),
        "topk": "its .so is %s" % fj.so_problem(str(broken))}
    assert not (project.jit / "sampling").exists() and not (project.jit / "topk").exists()


def test_a_workspace_without_modules_seeds_its_other_files_at_any_depth(tmp_path):
    ws = tmp_path / "caches" / "sglang-1"
    deep = ws / "triton" / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    (deep / "kernel.json").write_text("{}")
    jit = ws / JIT_REL
    jit.mkdir(parents=True)
    (jit / "README").write_text("a plain file beside the module dirs")
    key = kc.cache_key("/v", str(ws), VERSION, ["12.0f"], "/c", "13.0", "0")
    artifact = tmp_path / "a.tar.gz"
    kc.pack(str(ws), key, str(artifact), str(jit))
    shutil.rmtree(str(ws))
    result = kc.seed(str(artifact), sha(artifact), key, str(ws), str(jit), ninja=None, run=run)
    assert result == {"seeded": [], "rejected": None, "rejected_modules": {}, "skipped_modules": [], "removed": []}
    assert (deep / "kernel.json").read_text() == "{}" and (jit / "README").exists()


# ---- the artifact's reading and ninja's running, each failure whole ----

def tar_gz_with_manifest(path, data):
    with tarfile.open(str(path), "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def open_fails(path):
    with pytest.raises((kc.KernelCacheError, kc.Rejected)) as failed:
        kc._open_artifact(str(path), sha(path) if path.exists() else "0" * 64, {})
    return "%s: %s" % (type(failed.value).__name__, failed.value)


def test_an_artifact_that_cannot_be_read_is_named(tmp_path):
    missing = tmp_path / "missing.tar.gz"
    assert open_fails(missing) == "KernelCacheError: cannot read the artifact: %s" % kc.os_error_reason(
        FileNotFoundError(2, "No such file or directory", str(missing)))
    bad = tmp_path / "bad.tar.gz"
    tar_gz_with_manifest(bad, b"{not json")
    assert open_fails(bad) == ("Rejected: manifest.json of %s is not JSON (Expecting property name enclosed in double "
                               "quotes: line 1 column 2 (char 1))" % bad)
    cut = tmp_path / "cut.tar.gz"
    tar_gz_with_manifest(cut, os.urandom(100000).hex().encode())
    cut.write_bytes(cut.read_bytes()[:30000])
    assert open_fails(cut) == ("Rejected: cannot read %s (Compressed file ended before the end-of-stream marker was "
                               "reached)" % cut)
    assert kc.read_manifest_of(str(bad)) is None and kc.read_manifest_of(str(cut)) is None
    assert kc.read_manifest_of(str(missing)) is None


def test_a_manifest_that_is_not_first_or_not_a_file_is_no_manifest(tmp_path):
    path = tmp_path / "a.tar.gz"
    with tarfile.open(str(path), "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    assert kc.read_manifest_of(str(path)) is None
    with tarfile.open(str(path), "w:gz") as tar:
        for name in ("workspace/x", "manifest.json"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    assert kc.read_manifest_of(str(path)) is None
    tar_gz_with_manifest(path, b'{"format": 1}')
    assert kc.read_manifest_of(str(path)) == {"format": 1}


def test_ninja_is_run_in_the_module_dir_with_its_output_read_and_a_failure_named(tmp_path):
    module_dir = tmp_path / "m"
    module_dir.mkdir()
    (module_dir / "build.ninja").write_text("rule x\n  command = false\nbuild out: x\n")
    done = kc._ninja(NINJA, str(module_dir), "-t", "targets")
    assert (done.returncode, done.stdout, done.stderr) == (0, "out: x\n", "")
    with pytest.raises(kc.KernelCacheError) as failed:
        kc._ninja(kc.Ninja(str(tmp_path / "no-ninja"), run), str(module_dir))
    assert str(failed.value) == ("cannot run %s (No such file or directory): if it is the venv's ninja, remove it and re-run "
                                 "site.yml (the sglang_venv role reinstalls what is missing from the venv); otherwise put "
                                 "the venv's bin first on PATH" % (tmp_path / "no-ninja"))
    with pytest.raises(kc.KernelCacheError) as failed:
        kc.settle_ninja(str(module_dir), kc.Ninja("/bin/false", run), 1)
    assert str(failed.value) == "ninja -t restat failed in %s: exit status 1" % module_dir


def test_find_ninja_and_the_jit_dir_refusals_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(kc.KernelCacheError) as failed:
        kc.find_ninja(run)
    assert str(failed.value) == ("ninja not found on PATH=%s: put the SGLang venv's bin (which has the ninja wheel's "
                                 "ninja) first on PATH, as the flashinfer role's environment file does" % tmp_path)
    for jit_dir in ("/ws", "/", "/other/jit", "../jit"):
        with pytest.raises(kc.KernelCacheError) as failed:
            kc.jit_relpath("/ws", jit_dir)
        assert str(failed.value) == ("FlashInfer's JIT dir %s is not inside the workspace /ws: set "
                                     "FLASHINFER_WORKSPACE_BASE to the workspace (the flashinfer role's environment "
                                     "file does)" % jit_dir)
    assert (kc.jit_relpath("/ws", "a/b/"), kc.jit_relpath("/ws", "/ws/a/./b")) == ("a/b", "a/b")


def test_set_mtimes_sets_a_file_or_every_file_of_a_tree_but_not_through_a_link(tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("x")
    (tmp_path / "g").write_text("y")
    os.symlink(str(tmp_path / "g"), str(tmp_path / "d" / "link"))
    before = os.lstat(str(tmp_path / "g")).st_mtime_ns
    kc.set_mtimes(str(tmp_path / "d"), 10**18)
    assert os.stat(str(tmp_path / "d" / "e" / "f")).st_mtime_ns == 10**18
    assert os.lstat(str(tmp_path / "g")).st_mtime_ns == before
    kc.set_mtimes(str(tmp_path / "g"), 2 * 10**18)
    assert os.stat(str(tmp_path / "g")).st_mtime_ns == 2 * 10**18


# ---- the rest of the survivors: write failures, the manifest's bytes, the workspace walk ----

def small_workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "triton" / "k").mkdir(parents=True)
    (ws / "triton" / "k" / "a.lock").write_text("")
    (ws / "triton" / "k" / "a.so").write_bytes(b"")   # broken: left out
    (ws / "triton" / "k" / "b.json").write_text("{}")
    (ws / "jit" / "tmp").mkdir(parents=True)
    (ws / "jit" / "tmp" / "x.txt").write_text("FlashInfer's lock dir")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.txt").write_text("outside")
    os.symlink(str(tmp_path / "elsewhere"), str(ws / "linked"))
    return ws, kc.cache_key("/v", str(ws), VERSION, [], "/c", "13.0", "0")


def test_the_workspace_walk_passes_over_locks_broken_objects_the_lock_dir_and_links(tmp_path):
    ws, _key = small_workspace(tmp_path)
    files, modules, left_out = kc.workspace_files(str(ws), "jit")
    assert (files, modules, left_out) == (["triton/k/b.json"], [], ["triton/k/a.so: empty (0 bytes)"])


def test_the_manifest_is_sorted_json_of_mode_0644(tmp_path):
    ws, key = small_workspace(tmp_path)
    kc.pack(str(ws), key, str(tmp_path / "a.tar.gz"), "jit")
    with tarfile.open(str(tmp_path / "a.tar.gz"), "r:gz") as tar:
        member = tar.next()
        text = tar.extractfile(member).read()
    assert member.mode == 0o644
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1).encode("utf-8")


@pytest.mark.parametrize("broken", ["mkstemp", "replace"])
def test_an_artifact_that_cannot_be_written_is_named_and_leaves_nothing(tmp_path, monkeypatch, broken):
    ws, key = small_workspace(tmp_path)
    store = tmp_path / "store"
    store.mkdir()

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(kc.tempfile if broken == "mkstemp" else os, broken, full)
    with pytest.raises(kc.KernelCacheError) as failed:
        kc.pack(str(ws), key, str(store / "a.tar.gz"), "jit")
    assert str(failed.value) == "cannot write the artifact: %s" % kc.os_error_reason(OSError(28, "No space left on device"))
    assert os.listdir(str(store)) == []


def test_a_seed_that_fails_on_the_host_names_the_workspace(tmp_path, monkeypatch):
    ws, key = small_workspace(tmp_path)
    artifact = tmp_path / "a.tar.gz"
    kc.pack(str(ws), key, str(artifact), "jit")
    shutil.rmtree(str(ws))

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(kc.shutil, "move", full)
    with pytest.raises(kc.KernelCacheError) as failed:
        kc.seed(str(artifact), sha(artifact), key, str(ws), "jit", run=run)
    assert str(failed.value) == "cannot seed %s: %s" % (ws, kc.os_error_reason(OSError(28, "No space left on device")))


def test_a_workspace_without_a_jit_dir_packs_and_seeds_its_other_files(tmp_path):
    ws = tmp_path / "ws"
    (ws / "triton").mkdir(parents=True)
    (ws / "triton" / "k.json").write_text("{}")
    key = kc.cache_key("/v", str(ws), VERSION, [], "/c", "13.0", "0")
    artifact = tmp_path / "a.tar.gz"
    kc.pack(str(ws), key, str(artifact), "jit")
    shutil.rmtree(str(ws))
    assert kc.seed(str(artifact), sha(artifact), key, str(ws), "jit", run=run)["rejected"] is None
    assert (ws / "triton" / "k.json").read_text() == "{}"


def test_small_helpers_whole(tmp_path, monkeypatch):
    assert kc.key_differences({"a": 1, "b": 2}, {"a": 1}) == ["b (artifact null, host 2)"]
    assert kc._safe_rel("workspace/aX") == "workspace/aX"
    with pytest.raises(kc.KernelCacheError) as failed:
        kc.settle_ninja(str(tmp_path), NINJA, 1)
    assert str(failed.value) == "%s has no build.ninja: it will be built locally" % tmp_path
    (tmp_path / "build.ninja").write_text("")
    assert kc.ninja_up_to_date(str(tmp_path), kc.Ninja("/bin/false", run)) == (False, "exit status 1")
    # A deps log named without a directory is rewritten in the working directory; a failed replace leaves nothing.
    monkeypatch.chdir(str(tmp_path))
    with open(".ninja_deps", "wb") as handle:
        handle.write(deps_log(records=path_record("a.o", 0) + deps_record(0, 5, [])))
    assert kc.rewrite_deps_mtime(".ninja_deps", 7) == 1

    def refuse(_src, _dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        kc.rewrite_deps_mtime(".ninja_deps", 8)
    assert sorted(os.listdir(".")) == [".ninja_deps", "build.ninja"]
