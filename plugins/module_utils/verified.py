# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification stamps: a check that passed is not redone while its inputs are provably the same.

A slow check (FlashInfer's probe and warm check, the kernel cache key, SGLang's argument parse)
computes a fingerprint of everything its answer depends on, by content:

- the venv's installed packages: every ``*.dist-info/RECORD`` (which holds each installed file's
  sha256) and the stat of every file those RECORDs list (size, mtime, ctime, inode, mode). Writing
  a file's content always changes its ctime, which no user-space call can set back (stat(2)), so an
  edited file -- a lost patch, a hand fix, a reinstall -- always changes the fingerprint, even when
  its mtime is restored;
- trees the check reads (the CUDA home, the kernel-cache workspace): the same stat of every file;
- the environment the check runs with (the env files applied), minus variables that differ on
  every connection (sudo's and ssh's own);
- the check's own arguments and this collection's code that runs it (a new collection version
  verifies again).

The stamp (a small JSON file on the host, next to what it vouches for) keeps the fingerprint and
the result of the last run that passed. When the fingerprint computed now equals the stamp's, the
check returns that result without running (``verified: unchanged``); otherwise the check runs in
full and, when it passes, the stamp is replaced (atomically; never in check mode). A stamp that is
missing, unreadable or of another format is simply a miss. Anything that differs only by metadata
(a ``touch``) costs one needless full check, never a missed one.

Pure standard library: runs on the hosts in the SGLang venv's interpreter.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import hashlib
import json
import os
import sys
import sysconfig
import tempfile
import time

FORMAT = 1
# Set anew by sudo, su, ssh or the shell on every connection: not an input of any check.
VOLATILE_PREFIXES = ("SUDO_", "SSH_", "ANSIBLE_")
VOLATILE = frozenset(("_", "PWD", "OLDPWD", "SHLVL", "TERM", "MAIL", "LS_COLORS", "XDG_SESSION_ID",
                      "XDG_RUNTIME_DIR", "XDG_SESSION_CLASS", "XDG_SESSION_TYPE", "MOTD_SHOWN"))


class Signature:
    """A sha256 over named, length-prefixed fields, in the order they are added."""

    def __init__(self):
        self._parts = []

    def add(self, name, value):
        data = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
        head = name.encode("utf-8", "surrogateescape")
        self._parts.append(b"%d:%s\0%d:%s" % (len(head), head, len(data), data))

    def hexdigest(self):
        return hashlib.sha256(b"".join(self._parts)).hexdigest()


def stat_line(path):
    """What changes when a file's content, mode, owner or identity changes; 'missing' for none.
    Symbolic links are followed (a link to another target changes the line through ino)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    return "%o %d %d %d %d %d %d %d" % (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                        st.st_dev, st.st_uid, st.st_gid)


def _record_paths(record_path, data):
    """The files one RECORD lists, as absolute normalised paths (RECORD is CSV: path,hash,size; a
    path is quoted only when it holds a comma or a quote, so the common line is split directly)."""
    base = os.path.dirname(os.path.dirname(record_path))
    text = data.decode("utf-8", "surrogateescape")
    for line in text.splitlines():
        if line.startswith('"'):
            row = next(csv.reader([line]), None)
            name = row[0] if row else ""
        else:
            name = line.split(",", 1)[0]
        if name:
            yield os.path.normpath(os.path.join(base, name))


def package_dirs():
    """The directories this interpreter imports installed packages from: its site-packages
    (sysconfig purelib and platlib) and every other directory on sys.path that holds a
    ``*.dist-info``."""
    paths = sysconfig.get_paths()
    found = []
    for path in [paths["purelib"], paths["platlib"]] + list(sys.path):
        if path and os.path.isdir(path) and os.path.realpath(path) not in found and (
                path in (paths["purelib"], paths["platlib"]) or glob.glob(os.path.join(glob.escape(path), "*.dist-info"))):
            found.append(os.path.realpath(path))
    return found


def venv_signature(dirs=None):
    """sha256 hex over the installed packages: each ``*.dist-info/RECORD`` (bytes) and the stat
    line of every file it lists, in the directories `dirs` (default: package_dirs()), and the
    interpreter itself."""
    signature = Signature()
    signature.add("interpreter", "%s %s" % (sys.version, stat_line(os.path.realpath(sys.executable))))
    for directory in package_dirs() if dirs is None else dirs:
        records = sorted(glob.glob(os.path.join(glob.escape(directory), "*.dist-info", "RECORD")))
        signature.add("directory", "%s %d" % (directory, len(records)))
        for record in records:
            with open(record, "rb") as handle:
                data = handle.read()
            signature.add(os.path.relpath(record, directory), data)
            for path in _record_paths(record, data):
                signature.add(path, stat_line(path))
    return signature.hexdigest()


def tree_signature(root):
    """sha256 hex over the stat line of every file under `root` (links followed, each directory
    once), by relative name in walk order (sorted). A missing `root` has its own signature."""
    signature = Signature()
    signature.add("root", root)
    if not root or not os.path.isdir(root):
        signature.add("missing", stat_line(root) if root else "unset")
        return signature.hexdigest()
    seen = set()
    pending = [(root, "")]
    while pending:
        directory, rel = pending.pop()
        try:
            st = os.stat(directory)
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            signature.add(rel or ".", "unreadable %s" % exc.errno)
            continue
        if (st.st_dev, st.st_ino) in seen:  # a link back up the tree
            continue
        seen.add((st.st_dev, st.st_ino))
        for entry in entries:
            name = rel + "/" + entry.name if rel else entry.name
            if entry.is_dir():  # follows links
                pending.append((entry.path, name))
            else:
                signature.add(name, stat_line(entry.path))
    return signature.hexdigest()


def environment(environ=None, drop=()):
    """The environment a check runs with, as a sorted list of 'NAME=value', without the variables
    that change on every connection and those in `drop`."""
    environ = os.environ if environ is None else environ
    return sorted("%s=%s" % (name, value) for name, value in environ.items()
                  if name not in VOLATILE and name not in drop and not name.startswith(VOLATILE_PREFIXES))


def code_signature(*modules):
    """sha256 hex over the source of the given Python modules (this collection's code that makes
    the check: a new version of it verifies again). Read through each module's loader by its spec's
    name, so it works from a file, from Ansible's module zip and for a module run as __main__."""
    signature = Signature()
    for module in modules:
        spec = getattr(module, "__spec__", None)
        name = spec.name if spec is not None else module.__name__
        loader = getattr(spec, "loader", None) or getattr(module, "__loader__", None)
        try:
            source = loader.get_source(name)
        except (AttributeError, ImportError, OSError):
            source = None
        if source is None:  # no loader that can tell: the file itself
            with open(module.__file__, "rb") as handle:
                source = handle.read()
        signature.add(name, source)
    return signature.hexdigest()


def jit_inputs(check, workspace, code, drop=()):
    """The inputs of a check of JIT-built kernels, run in the venv's interpreter after the env files
    were applied: the check's own arguments (`check`, JSON-able), the environment (without `drop`),
    the venv's packages, every file under CUDA_HOME and under `workspace` (None: not read, as for a
    probe), and the code of the modules in `code` (the collection's, which makes the check)."""
    return {
        "check": check,
        "environment": environment(drop=drop),
        "venv": venv_signature(),
        "cuda_home": tree_signature(os.environ.get("CUDA_HOME", "")),
        "workspace": None if workspace is None else tree_signature(workspace),
        "code": code_signature(*code),
    }


@contextlib.contextmanager
def given_environment():
    """Puts os.environ back as it was on entry: what a check imported may have set variables
    (SGLang sets its caches' on import), and a fingerprint is of the environment the check was
    given, which is what the next run (a new process) computes before any import."""
    environ = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)


def fingerprint(parts):
    """sha256 hex of the JSON of `parts` (a dict of the check's inputs, each JSON-able)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


class Stamp:
    """The stamp file at `path`: the fingerprint and result of the last check that passed."""

    def __init__(self, path):
        self.path = path

    def read(self):
        """The stamp's content, or None when it is missing, unreadable or not of this format."""
        try:
            with open(self.path, "r", encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("result"), dict):
            return None
        return data

    def result_if(self, digest):
        """The recorded result when the stamp holds `digest`, else None."""
        data = self.read()
        if data is None or data.get("fingerprint") != digest:
            return None
        result = dict(data["result"])
        result["verified"] = "unchanged"
        result["verified_at"] = data.get("verified_at")
        return result

    def write(self, digest, result):
        """Replace the stamp (a new file renamed over the old one). Returns None, or why it could not
        be written (a stamp that cannot be written only costs the next run a full check)."""
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".stamp.", dir=directory)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"format": FORMAT, "fingerprint": digest,
                           "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "result": result}, out, sort_keys=True)
            os.chmod(temporary, 0o644)
            os.replace(temporary, self.path)
        except OSError as exc:
            return "cannot write the verification stamp %s (%s)" % (self.path, exc.strerror or exc)
        return None

    def remove(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def run(stamp_path, inputs, check, steady=None, check_mode=False, warn=None):
    """A check, skipped while its inputs are the same as when it last passed.

    `inputs()` returns the fingerprint's parts now (a dict); `check()` runs the check in full and
    returns its result (it raises on failure: nothing is recorded then). `steady(result)` gives
    what a later run returns when nothing changed (e.g. built modules become up-to-date ones);
    by default the result as it is, with changed false. Without `stamp_path` the check just runs.
    The result carries `verified`: ``unchanged`` (from the stamp) or ``checked`` (run in full);
    a stamp that could not be written is passed to `warn` (AnsibleModule.warn)."""
    if not stamp_path:
        return check()
    stamp = Stamp(stamp_path)
    cached = stamp.result_if(fingerprint(inputs()))
    if cached is not None:
        return cached
    with given_environment():
        result = check()
    result["verified"] = "checked"
    if not check_mode:
        keep = dict(steady(result) if steady else result)
        keep["changed"] = False
        for name in ("diff", "verified", "verified_at"):
            keep.pop(name, None)
        problem = stamp.write(fingerprint(inputs()), keep)  # after the check: what it left is what is vouched for
        if problem and warn:
            warn(problem + ": the next run checks in full again")
    return result
