# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compile once per fleet: pack a venv's kernel-cache workspace into an artifact, and seed another
host's workspace from it so that ninja, not a guess, proves the kernels need no rebuild.

FlashInfer JIT-compiles each module with ninja in ``<jit dir>/<module>/`` (``build.ninja``,
``.ninja_log``, ``.ninja_deps``, ``*.o``, ``<module>.so``). Ninja reuses a copied dir only when
(1) ``build.ninja`` names the same absolute paths (the workspace, the FlashInfer package, the CUDA
home: the artifact's key holds them, and a seeded host must have the same key), (2) no output is
older than an input (the venv's and CUDA's headers were installed later on the seeded host), and
(3) ``.ninja_log`` and ``.ninja_deps`` record mtimes no older than the inputs and no older than the
outputs. After unpacking, each module dir is settled: every file's mtime set to one time T (now),
``ninja -t restat`` (the log), every deps record's mtime set to T (the deps log); then
``ninja -n`` must answer ``ninja: no work to do.``, or the module dir is removed and built locally.

Pure standard library (runs on the hosts, in the SGLang venv's Python) besides this collection's
``flashinfer_jit.so_problem``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import filecmp
import glob
import hashlib
import io
import json
import os
import posixpath
import re
import shutil
import stat
import struct
import tarfile
import tempfile
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.flashinfer_jit import os_error_reason, so_problem

FORMAT = 1  # the artifact layout: manifest.json first, then workspace/<relative path> per file
MANIFEST = "manifest.json"
PREFIX = "workspace/"
KEY_FIELDS = ("venv", "workspace", "flashinfer_version", "targets", "cuda_home", "cuda_version", "packages")
CHUNK = 1 << 20

# .ninja_deps as ninja >= 1.10 writes it (src/deps_log.cc): the signature, int32 version 4, then
# records that start with a uint32 size (high bit set: a deps record). Path record: the path padded
# with NULs to a multiple of 4, then uint32 ~node id. Deps record: int32 output id, uint32 mtime low,
# uint32 mtime high (nanoseconds), int32 input ids. Little endian.
DEPS_SIGNATURE = b"# ninjadeps\n"
DEPS_VERSION = 4
DEPS_RECORD = 0x80000000
NO_WORK = "ninja: no work to do."
SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


class KernelCacheError(Exception):
    """A condition the operator must fix (the message says what is wrong and what to do)."""


# ---- the key: what must be equal for a cache to be reusable -----------------------------------

def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_digest(site_packages):
    """sha256 hex over the sorted ``*.dist-info/RECORD`` files (name and bytes) of `site_packages`:
    equal digests mean the same wheels installed the same files (RECORD holds each file's hash)."""
    records = sorted(glob.glob(os.path.join(glob.escape(site_packages), "*.dist-info", "RECORD")))
    if not records:
        raise KernelCacheError("no *.dist-info/RECORD under %s: point it at the venv's site-packages "
                               "(sysconfig purelib of the SGLang venv's interpreter)" % site_packages)
    digest = hashlib.sha256()
    for path in records:
        name = os.path.relpath(path, site_packages).encode("utf-8", "surrogateescape")
        with open(path, "rb") as handle:
            data = handle.read()
        digest.update(b"%d:%s\0%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()


def cache_key(venv, workspace, flashinfer_version, targets, cuda_home, cuda_version, packages):
    """The key of a workspace's kernels: an artifact seeds only a host whose key is equal."""
    return {
        "venv": venv,
        "workspace": workspace,
        "flashinfer_version": flashinfer_version,
        "targets": sorted(targets),
        "cuda_home": cuda_home,
        "cuda_version": cuda_version,
        "packages": packages,
    }


def key_id(key):
    """A file-name-safe id: '<venv basename>-<targets>-cuda<version>-<12 hex of the key's sha256>'."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    targets = "_".join(target.replace(".", "") for target in key["targets"]) or "none"
    text = "%s-%s-cuda%s-%s" % (os.path.basename(key["venv"].rstrip("/")).lstrip(".") or "venv", targets, key["cuda_version"], digest)
    return SAFE_ID.sub("_", text)


def key_differences(expected, found):
    """'field (artifact X, host Y)' for each field that differs."""
    names = sorted(set(expected) | set(found))
    return ["%s (artifact %s, host %s)" % (name, json.dumps(found.get(name)), json.dumps(expected.get(name)))
            for name in names if expected.get(name) != found.get(name)]


# ---- the workspace -----------------------------------------------------------------------------

def jit_relpath(workspace, jit_dir):
    """`jit_dir` (absolute, or relative to `workspace`) as a normalised relative path inside it."""
    rel = os.path.relpath(os.path.join(workspace, jit_dir), workspace)
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise KernelCacheError("FlashInfer's JIT dir %s is not inside the workspace %s: set FLASHINFER_WORKSPACE_BASE "
                               "to the workspace (the flashinfer role's environment file does)" % (jit_dir, workspace))
    return rel.replace(os.sep, "/")


def module_problem(jit_dir, name):
    """None when `<jit_dir>/<name>/<name>.so` is a whole ELF, else why not."""
    return so_problem(os.path.join(jit_dir, name, name + ".so"))


def whole_modules(jit_dir):
    """Names of module dirs in `jit_dir` whose shared object is whole (FlashInfer's lock dir aside)."""
    if not os.path.isdir(jit_dir):
        return []
    return [name for name in sorted(os.listdir(jit_dir))
            if name != "tmp" and os.path.isdir(os.path.join(jit_dir, name))
            and not os.path.islink(os.path.join(jit_dir, name)) and module_problem(jit_dir, name) is None]


def workspace_files(workspace, jit_rel):
    """(relative paths of the regular files to pack, whole module names, what was left out and why).

    Left out: FlashInfer's lock dir (<jit dir>/tmp) and ``*.lock`` files, symlinks and anything not a
    regular file, a module dir whose .so is not whole (a killed build), any other broken .so."""
    jit_dir = os.path.join(workspace, jit_rel)
    modules = whole_modules(jit_dir)
    skip_dirs = {jit_rel + "/tmp"}
    left_out = []
    if os.path.isdir(jit_dir):
        for name in sorted(os.listdir(jit_dir)):
            path = os.path.join(jit_dir, name)
            if name != "tmp" and name not in modules and os.path.isdir(path) and not os.path.islink(path):
                skip_dirs.add(jit_rel + "/" + name)
                left_out.append("%s/%s: %s" % (jit_rel, name, module_problem(jit_dir, name)))
    files = []
    for root, dirs, names in os.walk(workspace):
        rel_root = os.path.relpath(root, workspace).replace(os.sep, "/")
        rel_root = "" if rel_root == "." else rel_root + "/"
        dirs[:] = sorted(d for d in dirs if rel_root + d not in skip_dirs and not os.path.islink(os.path.join(root, d)))
        for name in sorted(names):
            path = os.path.join(root, name)
            if name.endswith(".lock") or not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            if name.endswith(".so") and so_problem(path):
                left_out.append("%s%s: %s" % (rel_root, name, so_problem(path)))
                continue
            files.append(rel_root + name)
    return files, modules, left_out


def read_manifest_of(path):
    """The manifest of an artifact (its first member), or None when it has none that can be read."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = tar.next()
            if member is None or member.name != MANIFEST or not member.isfile():
                return None
            return json.loads(tar.extractfile(member).read().decode("utf-8"))
    except (OSError, tarfile.TarError, ValueError, EOFError):
        return None


class HashingReader:
    """A file read through for tarfile.addfile that hashes what tarfile takes from it."""

    def __init__(self, handle):
        self.handle = handle
        self.digest = hashlib.sha256()

    def read(self, size=-1):
        data = self.handle.read(size)
        self.digest.update(data)
        return data


def pack(workspace, key, dest, jit_dir, check_mode=False):
    """Write the workspace's kernels to the tar.gz `dest` (atomically): ``manifest.json`` first (format,
    key, key_id, jit_dir, modules, files {relative path: {sha256, size}}), then each file as
    ``workspace/<relative path>``. A `dest` whose manifest already says the same is left as it is.

    Returns {path, bytes, sha256, modules, files (count), left_out, changed}; with `check_mode`
    nothing is written (bytes and sha256 are None when `dest` would change)."""
    workspace = os.path.abspath(workspace)
    dest = os.path.abspath(dest)
    if not os.path.isdir(workspace):
        raise KernelCacheError("workspace %s is not a directory: warm the cache first (flashinfer_jit_cache) "
                               "or fix workspace_base" % workspace)
    if (dest + os.sep).startswith(os.path.realpath(workspace) + os.sep) or (dest + os.sep).startswith(workspace + os.sep):
        raise KernelCacheError("dest %s is inside the workspace %s: put the artifact outside it" % (dest, workspace))
    jit_rel = jit_relpath(workspace, jit_dir)
    try:
        rels, modules, left_out = workspace_files(workspace, jit_rel)
        entries = {}
        for rel in rels:
            path = os.path.join(workspace, rel)
            entries[rel] = {"sha256": file_sha256(path), "size": os.path.getsize(path)}
    except OSError as exc:
        raise KernelCacheError("cannot read the workspace: %s" % os_error_reason(exc)) from exc
    manifest = {"format": FORMAT, "key": key, "key_id": key_id(key), "jit_dir": jit_rel, "modules": modules,
                "files": entries}
    result = {"path": dest, "modules": modules, "files": len(entries), "left_out": left_out}
    if read_manifest_of(dest) == manifest:
        result.update(bytes=os.path.getsize(dest), sha256=file_sha256(dest), changed=False)
        return result
    result.update(bytes=None, sha256=None, changed=True)
    if check_mode:
        return result
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(dest) + ".", suffix=".tmp", dir=os.path.dirname(dest))
    except OSError as exc:
        raise KernelCacheError("cannot write the artifact: %s" % os_error_reason(exc)) from exc
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                data = json.dumps(manifest, sort_keys=True, indent=1).encode("utf-8")
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
                tar.addfile(info, io.BytesIO(data))
                for rel, entry in entries.items():
                    _add_file(tar, workspace, rel, entry)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as exc:
        raise KernelCacheError("cannot write the artifact: %s" % os_error_reason(exc)) from exc
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    result.update(bytes=os.path.getsize(dest), sha256=file_sha256(dest))
    return result


def _add_file(tar, workspace, rel, entry):
    """Add one file as hashed in the manifest; a file that changed since is an error (a build ran)."""
    path = os.path.join(workspace, rel)
    info = tarfile.TarInfo(PREFIX + rel)
    st = os.stat(path)
    info.size, info.mode, info.mtime = entry["size"], stat.S_IMODE(st.st_mode) & 0o755, int(st.st_mtime)
    with open(path, "rb") as handle:
        reader = HashingReader(handle)
        try:
            tar.addfile(info, reader)
        except OSError as exc:  # tarfile: "unexpected end of data" for a file that shrank
            if exc.errno is not None:
                raise
            reader.digest = None
        extra = handle.read(1)
    if reader.digest is None or extra or reader.digest.hexdigest() != entry["sha256"]:
        raise KernelCacheError("%s changed while it was packed (a FlashInfer build running?): pack again when no "
                               "build runs" % path)


# ---- ninja ---------------------------------------------------------------------------------------

class Ninja:
    """The ninja FlashInfer runs (`path`), run with `run` (module_utils/run.py: in a module, its run_command)."""

    def __init__(self, path, run):
        self.path, self.run = path, run

    def __repr__(self):
        return "Ninja(%r)" % self.path


def find_ninja(run):
    """The ninja FlashInfer runs: the bare name `ninja` on this process's PATH, run with `run`."""
    ninja = shutil.which("ninja")
    if not ninja:
        raise KernelCacheError("ninja not found on PATH=%s: put the SGLang venv's bin (which has the ninja wheel's "
                               "ninja) first on PATH, as the flashinfer role's environment file does"
                               % os.environ.get("PATH", os.defpath))
    return Ninja(ninja, run)


def _ninja(ninja, module_dir, *args):
    try:
        return ninja.run([ninja.path, "-C", module_dir, "-f", "build.ninja"] + list(args))
    except OSError as exc:
        raise KernelCacheError("cannot run %s (%s): if it is the venv's ninja, remove it and re-run site.yml (the sglang_venv "
                               "role reinstalls what is missing from the venv); otherwise put the venv's bin first on PATH"
                               % (ninja.path, exc.strerror or exc)) from exc


def _deps_records(path):
    """(header bytes, [(is_deps, payload)]) of the ninja deps log `path`; refuses a log that is not
    version 4 or is malformed, saying what to do."""
    with open(path, "rb") as handle:
        data = handle.read()
    head = len(DEPS_SIGNATURE)
    if data[:head] != DEPS_SIGNATURE or len(data) < head + 4:
        raise KernelCacheError("%s is not a ninja deps log: remove the module dir to build it locally" % path)
    version = struct.unpack_from("<i", data, head)[0]
    if version != DEPS_VERSION:
        raise KernelCacheError("%s is ninja deps log version %d, only version %d (ninja >= 1.10) is understood: build "
                               "the cache with the venv's ninja wheel" % (path, version, DEPS_VERSION))
    records, offset = [], head + 4
    while offset < len(data):
        if offset + 4 > len(data):
            raise KernelCacheError("%s is truncated at byte %d: remove the module dir to build it locally" % (path, offset))
        size = struct.unpack_from("<I", data, offset)[0]
        is_deps, size = bool(size & DEPS_RECORD), size & ~DEPS_RECORD
        end = offset + 4 + size
        if size % 4 or end > len(data) or size < (12 if is_deps else 8):
            raise KernelCacheError("%s has a malformed record at byte %d (size %d): remove the module dir to build it "
                                   "locally" % (path, offset, size))
        records.append((is_deps, data[offset + 4:end]))
        offset = end
    return data[:head + 4], records


def _write_deps(path, head, records):
    """The deps log `path` written again (atomically) from its header and records."""
    _write_atomic(path, head + b"".join(struct.pack("<I", len(payload) | (DEPS_RECORD if is_deps else 0)) + payload
                                        for is_deps, payload in records))


def _write_atomic(path, data):
    """Replace the file `path` with `data` (bytes), keeping its mode."""
    name = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix=("" if name.startswith(".") else ".") + name + ".", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def rewrite_deps_mtime(path, mtime_ns):
    """Set the mtime of every deps record of the ninja deps log `path` to `mtime_ns` (atomically).
    Returns the number of deps records. Refuses a log that is not version 4 or is malformed."""
    head, records = _deps_records(path)
    stamp = struct.pack("<II", mtime_ns & 0xFFFFFFFF, (mtime_ns >> 32) & 0xFFFFFFFF)
    records = [(is_deps, payload[:4] + stamp + payload[12:] if is_deps else payload) for is_deps, payload in records]
    _write_deps(path, head, records)
    return sum(1 for is_deps, _payload in records if is_deps)


def remove_path(path):
    """Remove a module dir (a link or a file in its place: only that)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def set_mtimes(root, mtime_ns):
    """Every regular file under `root` (or `root` itself when it is a file) gets mtime and atime `mtime_ns`."""
    paths = [root] if not os.path.isdir(root) else [
        os.path.join(base, name) for base, _dirs, names in os.walk(root) for name in names]
    for path in paths:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def settle_ninja(module_dir, ninja, mtime_ns):
    """Make ninja's view of a copied module dir current: files' mtimes to `mtime_ns`, ``ninja -t restat``
    (the build log), every deps record's mtime to `mtime_ns` (the deps log)."""
    if not os.path.isfile(os.path.join(module_dir, "build.ninja")):
        raise KernelCacheError("%s has no build.ninja: it will be built locally" % module_dir)
    set_mtimes(module_dir, mtime_ns)
    done = _ninja(ninja, module_dir, "-t", "restat")
    if done.returncode != 0:
        raise KernelCacheError("ninja -t restat failed in %s: %s" % (module_dir, _last_line(done)))
    deps = os.path.join(module_dir, ".ninja_deps")
    if os.path.exists(deps):
        rewrite_deps_mtime(deps, mtime_ns)


def _last_line(done):
    lines = [line for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else "exit status %d" % done.returncode


def ninja_up_to_date(module_dir, ninja):
    """(True, '') when ``ninja -n`` has no work in `module_dir`, else (False, ninja's first explanation)."""
    done = _ninja(ninja, module_dir, "-n", "-d", "explain")
    if done.returncode == 0 and NO_WORK in done.stdout.splitlines():
        return True, ""
    explain = [line for line in done.stderr.splitlines() if line.startswith("ninja explain:")]
    return False, explain[0] if explain else _last_line(done)


@contextlib.contextmanager
def build_lock(jit_dir, name):
    """FlashInfer's lock for building `name` (<jit dir>/tmp/<name>.lock, flock): True when taken, False
    when a build holds it."""
    lock_dir = os.path.join(jit_dir, "tmp")
    os.makedirs(lock_dir, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# ---- seeding -----------------------------------------------------------------------------------

class Rejected(Exception):
    """The artifact as a whole cannot be used (the reason)."""


def _safe_rel(name):
    """A member or manifest path as a normalised relative posix path, or None when it is not one."""
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return None
    norm = posixpath.normpath(name)
    if norm != name.rstrip("/") or norm in (".", "..") or norm.startswith("../") or "/../" in norm:
        return None
    return norm


def _check_manifest(manifest, key):
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Rejected("artifact format %r, this collection reads format %d: pack it again with this collection"
                       % (manifest.get("format") if isinstance(manifest, dict) else None, FORMAT))
    found = manifest.get("key")
    if not isinstance(found, dict):
        raise Rejected("artifact manifest has no key")
    differences = key_differences(key, found)
    if differences:
        raise Rejected("artifact was built for another key; differs in %s" % "; ".join(differences))
    files, modules, jit_rel = manifest.get("files"), manifest.get("modules"), manifest.get("jit_dir")
    if not isinstance(files, dict) or not isinstance(modules, list) or not isinstance(jit_rel, str):
        raise Rejected("artifact manifest lacks files, modules or jit_dir")
    for rel, entry in files.items():
        if _safe_rel(rel) != rel or not isinstance(entry, dict) or not isinstance(entry.get("size"), int) \
                or not isinstance(entry.get("sha256"), str):
            raise Rejected("artifact manifest has a bad entry %r" % rel)
    for name in modules:
        if not isinstance(name, str) or _safe_rel(name) != name or "/" in name or name == "tmp" \
                or "%s/%s/%s.so" % (jit_rel, name, name) not in files:
            raise Rejected("artifact manifest lists module %r without its .so" % (name,))
    return manifest


def _open_artifact(src, sha256, key):
    """Verify the checksum, read the manifest and check the key. Returns (tar, manifest); raises Rejected."""
    expected = sha256.lower()
    if expected.startswith("sha256:"):
        expected = expected[len("sha256:"):]
    try:
        actual = file_sha256(src)
    except OSError as exc:
        raise KernelCacheError("cannot read the artifact: %s" % os_error_reason(exc)) from exc
    if actual != expected:
        raise Rejected("sha256 of %s is %s, expected %s (truncated or replaced): fetch it again" % (src, actual, expected))
    try:
        tar = tarfile.open(src, "r:gz")
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise Rejected("%s is not a readable tar.gz (%s)" % (src, exc)) from exc
    try:
        member = tar.next()
        if member is None or member.name != MANIFEST or not member.isfile():
            raise Rejected("%s has no manifest.json first: it was not packed by this collection" % src)
        try:
            manifest = json.loads(tar.extractfile(member).read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise Rejected("manifest.json of %s is not JSON (%s)" % (src, exc)) from exc
        return tar, _check_manifest(manifest, key)
    except (Rejected, OSError, tarfile.TarError, EOFError) as exc:
        tar.close()
        if isinstance(exc, Rejected):
            raise
        raise Rejected("cannot read %s (%s)" % (src, exc)) from exc


def _extract(tar, manifest, staging):
    """Extract the workspace members into `staging` and prove them against the manifest."""
    files = manifest["files"]
    members, seen = [], set()
    try:
        for index, member in enumerate(tar):
            if index == 0:
                continue  # the manifest, read already
            rel = _safe_rel(member.name)
            if rel is None or not rel.startswith(PREFIX) or not (member.isfile() or member.isdir()):
                raise Rejected("artifact member %r is not a plain file or dir under workspace/" % member.name)
            if member.isfile():
                if rel[len(PREFIX):] not in files or rel in seen:
                    raise Rejected("artifact member %r is not in its manifest (or twice)" % member.name)
                seen.add(rel)
            members.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(staging, members=members, filter="data")
        else:  # pragma: no cover - Python < 3.11.4; the members are checked above
            tar.extractall(staging, members=members)
    except (tarfile.TarError, EOFError, ValueError) as exc:  # a truncated gzip stream, a refused member
        raise Rejected("cannot unpack the artifact (%s)" % exc) from exc
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EROFS):
            raise KernelCacheError("cannot unpack the artifact: %s" % os_error_reason(exc)) from exc
        raise Rejected("cannot unpack the artifact (%s)" % exc) from exc
    root = os.path.join(staging, "workspace")
    for rel, entry in sorted(files.items()):
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            raise Rejected("artifact lacks %s, which its manifest lists" % rel)
        if os.path.getsize(path) != entry["size"] or file_sha256(path) != entry["sha256"]:
            raise Rejected("artifact member %s does not match its manifest (size or sha256): the artifact was altered; "
                           "pack it again" % rel)
        if rel.endswith(".so"):
            problem = so_problem(path)
            if problem:
                raise Rejected("artifact's %s is %s" % (rel, problem))
    return root


def _plan(manifest, jit_dir):
    """(modules to move in, modules already whole locally)."""
    incoming, skipped = [], []
    for name in sorted(manifest["modules"]):
        (skipped if module_problem(jit_dir, name) is None else incoming).append(name)
    return incoming, skipped


def seed(src, sha256, key, workspace, jit_dir, ninja=None, check_mode=False, run=None):
    """Seed `workspace` from the artifact `src` (its sha256 must be `sha256`, its key `key`).

    Module dirs the local jit dir lacks or holds broken are moved in, settled and proven with
    ``ninja -n`` (one ninja would rebuild is removed again: `rejected_modules`); other files are added
    only where missing. A rejected artifact merges nothing. With `check_mode` only the checksum,
    manifest and key are verified and nothing is written. `ninja` (a Ninja), or else `run` to find one
    with when a module moves in.

    Returns {seeded, rejected (None or the reason), rejected_modules {name: reason}, skipped_modules,
    removed (local module dirs with a broken .so that were removed)}."""
    if ninja is None and run is None:
        raise ValueError("seed needs the ninja to prove what moves in, or the run to find it with")
    workspace = os.path.abspath(workspace)
    jit_rel = jit_relpath(workspace, jit_dir)
    jit_dir = os.path.join(workspace, jit_rel)
    result = {"seeded": [], "rejected": None, "rejected_modules": {}, "skipped_modules": [], "removed": []}
    try:
        tar, manifest = _open_artifact(src, sha256, key)
    except Rejected as exc:
        result["rejected"] = str(exc)
        return result
    with tar:
        if manifest["jit_dir"] != jit_rel:
            result["rejected"] = "artifact's JIT dir is %s, this host's %s" % (manifest["jit_dir"], jit_rel)
            return result
        incoming, result["skipped_modules"] = _plan(manifest, jit_dir)
        if check_mode:
            result["seeded"] = incoming
            return result
        try:
            staging = tempfile.mkdtemp(prefix=".%s.seed-" % os.path.basename(workspace), dir=os.path.dirname(workspace))
        except OSError as exc:
            raise KernelCacheError("cannot unpack beside the workspace: %s" % os_error_reason(exc)) from exc
        try:
            try:
                root = _extract(tar, manifest, staging)
            except Rejected as exc:
                result["rejected"] = str(exc)
                return result
            if incoming and ninja is None:
                ninja = find_ninja(run)
            _merge(root, manifest, workspace, jit_rel, incoming, ninja, result)
        except OSError as exc:
            raise KernelCacheError("cannot seed %s: %s" % (workspace, os_error_reason(exc))) from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return result


def _merge(root, manifest, workspace, jit_rel, incoming, ninja, result):
    mtime_ns = time.time_ns()
    jit_dir = os.path.join(workspace, jit_rel)
    os.makedirs(jit_dir, exist_ok=True)
    # Files outside the module dirs (generated sources, other caches): only where missing locally.
    module_tops = set()
    staged_jit = os.path.join(root, jit_rel)
    if os.path.isdir(staged_jit):
        module_tops = {jit_rel + "/" + name for name in os.listdir(staged_jit) if name != "tmp"}
    for rel in sorted(manifest["files"]):
        top = "/".join(rel.split("/")[:len(jit_rel.split("/")) + 1])
        if top in module_tops and os.path.isdir(os.path.join(root, top)):
            continue  # inside a module dir: moved whole below, or not at all
        target = os.path.join(workspace, rel)
        if os.path.lexists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.move(os.path.join(root, rel), target)
        os.utime(target, ns=(mtime_ns, mtime_ns))
    for name in incoming:
        target = os.path.join(jit_dir, name)
        with build_lock(jit_dir, name) as taken:
            if not taken:
                result["rejected_modules"][name] = "a FlashInfer build holds %s/tmp/%s.lock: left to it" % (jit_dir, name)
                continue
            if module_problem(jit_dir, name) is None:  # built while this ran
                result["skipped_modules"].append(name)
                continue
            if os.path.lexists(target):  # broken: never left in place
                remove_path(target)
                result["removed"].append(name)
            shutil.move(os.path.join(root, jit_rel, name), target)
            try:
                settle_ninja(target, ninja, mtime_ns)
                fresh, explain = ninja_up_to_date(target, ninja)
            except KernelCacheError as exc:
                fresh, explain = False, str(exc)
            problem = module_problem(jit_dir, name)
            if fresh and problem is None:
                result["seeded"].append(name)
            else:
                shutil.rmtree(target)
                result["rejected_modules"][name] = explain or "its .so is %s" % problem
    result["skipped_modules"].sort()


# ---- relocation: a module dir built for one venv, proven for another ----------------------------
#
# A new venv whose kernel inputs did not change (one unrelated package added) holds the same
# FlashInfer, the same headers, the same targets and CUDA; only its path and its workspace's differ,
# and ninja names both in build.ninja, in each command (hashed into .ninja_log) and in .ninja_deps.
# relocate_module() copies a module dir the serving venv built, moves those paths, and keeps it only
# when it is proven: every input ninja recorded under a moved prefix has the same bytes at its new
# path (read now, both sides), every other input is where ninja last saw it (the source module dir is
# up to date), ninja's own hash of every source command reproduces its log (so the new hashes are
# ninja's), and after settling ninja -n finds nothing to do. FlashInfer's own build, run next,
# rewrites build.ninja if it would generate anything else, and ninja then rebuilds.

RELOCATE_STAGING = ".relocate-"  # a staging dir beside the module dir; one a killed run left is swept
RAPID_SEED = 0xBDD89AA982704029
RAPID_SECRET = (0x2D358DCCAA6C78A5, 0x8BB84B93962EACC9, 0x4B33A62ED433D4A3)
MASK64 = (1 << 64) - 1


def _rapid_mum(a, b):
    product = a * b
    return product & MASK64, (product >> 64) & MASK64


def _rapid_mix(a, b):
    low, high = _rapid_mum(a, b)
    return low ^ high


def rapidhash(data):
    """ninja's hash of a command in .ninja_log (src/build_log.cc, HashCommand: rapidhash,
    src/third_party/rapidhash/rapidhash.h, RAPIDHASH_FAST and _UNROLLED, little endian; ninja >= 1.12,
    log v7) of `data` (bytes), as an int."""
    data, size, secret = bytes(data), len(data), RAPID_SECRET

    def r64(at):
        return struct.unpack_from("<Q", data, at)[0]

    def r32(at):
        return struct.unpack_from("<I", data, at)[0]

    seed = (RAPID_SEED ^ _rapid_mix(RAPID_SEED ^ secret[0], secret[1]) ^ size) & MASK64
    if size <= 16:
        if size >= 4:
            last, delta = size - 4, (size & 24) >> (size >> 3)
            a, b = (r32(0) << 32) | r32(last), (r32(delta) << 32) | r32(last - delta)
        elif size:
            a, b = (data[0] << 56) | (data[size >> 1] << 32) | data[size - 1], 0
        else:
            a = b = 0
    else:
        left, at = size, 0
        if left > 48:
            see1 = see2 = seed
            while left >= 48:
                seed = _rapid_mix(r64(at) ^ secret[0], r64(at + 8) ^ seed)
                see1 = _rapid_mix(r64(at + 16) ^ secret[1], r64(at + 24) ^ see1)
                see2 = _rapid_mix(r64(at + 32) ^ secret[2], r64(at + 40) ^ see2)
                at, left = at + 48, left - 48
            seed ^= see1 ^ see2
        if left > 16:
            seed = _rapid_mix(r64(at) ^ secret[2], r64(at + 8) ^ seed ^ secret[1])
            if left > 32:
                seed = _rapid_mix(r64(at + 16) ^ secret[2], r64(at + 24) ^ seed)
        a, b = r64(at + left - 16), r64(at + left - 8)
    a, b = _rapid_mum(a ^ secret[1], b ^ seed)
    return _rapid_mix(a ^ secret[0] ^ size, b ^ secret[1])


def _move_path(path, moves):
    """`path` with the first matching (old, new) prefix of `moves` replaced; unchanged when none matches."""
    for old, new in moves:
        if path == old or path.startswith(old + "/"):
            return new + path[len(old):]
    return path


def _deps_paths(path):
    """Every path the deps log `path` names (outputs and the inputs ninja recorded), in id order."""
    _head, records = _deps_records(path)
    return [payload[:-4].rstrip(b"\0").decode("utf-8", "surrogateescape") for is_deps, payload in records if not is_deps]


def _move_deps(path, moves):
    """Rewrite each path record of the deps log `path` through `moves` (a record keeps its id check)."""
    head, records = _deps_records(path)
    moved = []
    for is_deps, payload in records:
        if not is_deps:
            name = _move_path(payload[:-4].rstrip(b"\0").decode("utf-8", "surrogateescape"), moves).encode("utf-8", "surrogateescape")
            payload = name + b"\0" * (-len(name) % 4) + payload[-4:]
        moved.append((is_deps, payload))
    _write_deps(path, head, moved)


def _commands(module_dir, ninja):
    """{output: the command ninja runs for it} (ninja -t compdb: the evaluated command ninja hashes)."""
    done = _ninja(ninja, module_dir, "-t", "compdb")
    if done.returncode != 0:
        raise KernelCacheError("ninja -t compdb failed in %s: %s" % (module_dir, _last_line(done)))
    try:
        entries = json.loads(done.stdout)
    except ValueError as exc:
        raise KernelCacheError("ninja -t compdb in %s printed no JSON (%s)" % (module_dir, exc)) from exc
    return {os.path.normpath(os.path.join(entry["directory"], entry["output"])): entry["command"] for entry in entries}


def _build_inputs(build_ninja):
    """The explicit inputs of every build statement of a FlashInfer build.ninja (absolute paths)."""
    inputs = []
    with open(build_ninja, encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            if line.startswith("build ") and ":" in line:
                inputs += [word for word in line.split(":", 1)[1].split()[1:] if word.startswith("/")]
    return inputs


INCLUDE_FLAG = re.compile(r"(?:^|\s)(?:-I|-isystem\s+)(/[^\s$]+)")


def _include_dirs(build_ninja):
    """The absolute include directories of a build.ninja's flags (-I<dir>, -isystem <dir>)."""
    with open(build_ninja, encoding="utf-8", errors="surrogateescape") as handle:
        return sorted(set(INCLUDE_FLAG.findall(handle.read())))


def _raise(exc):
    raise exc


def _tree_difference(old, new):
    """None when the trees `old` and `new` hold the same files with the same bytes, else the first
    difference (a file only on one side, or one whose bytes differ). A directory that cannot be
    read raises (OSError): nothing unread is taken for the same."""
    def files(root):
        return {os.path.relpath(os.path.join(base, name), root)
                for base, _dirs, names in os.walk(root, onerror=_raise) for name in names}
    old_files, new_files = files(old), files(new)
    for rel in sorted(old_files ^ new_files):
        return "%s is only in %s" % (rel, old if rel in old_files else new)
    for rel in sorted(old_files):
        if not filecmp.cmp(os.path.join(old, rel), os.path.join(new, rel), shallow=False):
            return "%s differs from %s" % (os.path.join(new, rel), os.path.join(old, rel))
    return None


def relocate_module(src_dir, dst_dir, moves, ninja):
    """Copy the module dir `src_dir` (built for another venv) to `dst_dir`, its paths moved by `moves`
    ([(old prefix, new prefix)], the venv's and the workspace's, each as written and as resolved),
    and keep it only when proven (see above). Returns None when `dst_dir` holds the proven module,
    else why not (nothing is left). The caller holds FlashInfer's lock of the module on both sides."""
    moves = sorted({(old.rstrip("/"), new.rstrip("/")) for old, new in moves}, key=lambda move: -len(move[0]))
    fresh, explain = ninja_up_to_date(src_dir, ninja)
    if not fresh:
        return "the serving venv's %s is not up to date (%s)" % (src_dir, explain)
    src_commands = _commands(src_dir, ninja)
    log_path = os.path.join(src_dir, ".ninja_log")
    with open(log_path, encoding="utf-8", errors="surrogateescape") as handle:
        log = handle.read().splitlines()
    if not log or log[0] != "# ninja log v7":
        return "%s is not a ninja log v7 (%s)" % (log_path, log[0] if log else "empty")
    entries = [line.split("\t") for line in log[1:] if line.strip()]
    if any(len(entry) != 5 for entry in entries):
        return "%s has a line that is not 5 fields" % log_path
    for _start, _end, _mtime, output, recorded in entries:
        if output in src_commands and "%x" % rapidhash(src_commands[output].encode("utf-8", "surrogateescape")) != recorded:
            return "ninja's hash of the command of %s is not reproduced (another ninja?)" % output
    deps = os.path.join(src_dir, ".ninja_deps")
    outputs = set(src_commands)
    inputs = set(_deps_paths(deps) if os.path.exists(deps) else []) | set(_build_inputs(os.path.join(src_dir, "build.ninja")))
    for path in sorted(inputs - outputs):
        moved = _move_path(path, moves)
        if moved != path:
            try:
                same = file_sha256(path) == file_sha256(moved)
            except OSError as exc:
                return "input %s: %s" % (moved, os_error_reason(exc))
            if not same:
                return "input %s differs from %s, which the serving venv's build read" % (moved, path)
    # Headers a compiler leaves out of its deps (gcc -MMD omits -isystem ones): every include
    # directory the flags name under a moved prefix holds the same files with the same bytes.
    for path in _include_dirs(os.path.join(src_dir, "build.ninja")):
        moved = _move_path(path, moves)
        if moved != path:
            difference = _tree_difference(path, moved)
            if difference:
                return "include directory %s: %s" % (moved, difference)
    staging = tempfile.mkdtemp(prefix="%s%s." % (RELOCATE_STAGING, os.path.basename(dst_dir)), dir=os.path.dirname(dst_dir))
    try:
        target = os.path.join(staging, os.path.basename(dst_dir))
        shutil.copytree(src_dir, target, symlinks=True)
        build = os.path.join(target, "build.ninja")
        with open(build, encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
        for old, new in moves:
            text = text.replace(old + "/", new + "/")
        _write_atomic(build, text.encode("utf-8", "surrogateescape"))
        if os.path.exists(os.path.join(target, ".ninja_deps")):
            _move_deps(os.path.join(target, ".ninja_deps"), moves)
        new_commands = _commands(target, ninja)
        strays = [output for output in new_commands if os.path.realpath(os.path.dirname(output)) != os.path.realpath(dst_dir)]
        if strays:
            return "after the move %s is still built outside %s (a path spelt another way?)" % (strays[0], dst_dir)
        lines = [log[0]]
        for start, end, mtime, output, _hash in entries:
            if output not in src_commands:
                continue  # an output build.ninja no longer names: ninja ignores it
            moved = _move_path(output, moves)
            if moved not in new_commands:
                return "no build statement for %s after the move" % moved
            lines.append("\t".join((start, end, mtime, moved, "%x" % rapidhash(new_commands[moved].encode("utf-8", "surrogateescape")))))
        _write_atomic(os.path.join(target, ".ninja_log"), ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        os.replace(target, dst_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    try:
        settle_ninja(dst_dir, ninja, time.time_ns())
        fresh, explain = ninja_up_to_date(dst_dir, ninja)
    except KernelCacheError as exc:
        fresh, explain = False, str(exc)
    if not fresh:
        shutil.rmtree(dst_dir, ignore_errors=True)
        return "ninja would rebuild it after the move: %s" % explain
    return None
