#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: flashinfer_jit_artifact
short_description: Pack a venv's FlashInfer JIT kernels into an artifact, or seed a host from one
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Compile once per fleet. Hosts with the same venv, the same targets and the same CUDA toolkit build
    the same kernels; the first host packs its per-venv workspace (O(workspace_base)) into a tar.gz
    (O(dest)), the controller stores it, and the other hosts seed their workspace from it (O(src))
    instead of compiling.
  - Every artifact carries a key (O(workspace_base), the venv, FlashInfer's version and targets, the
    CUDA home and release, and a sha256 over the venv's C(*.dist-info/RECORD) files, so the same
    wheels) and a manifest with every file's sha256 and size. An artifact whose checksum, key or
    manifest does not match is rejected as a whole and nothing of it is merged (RV(rejected)).
  - Seeding moves in each module dir the host lacks or holds broken (a missing, empty, truncated or
    non-ELF C(.so)); modules whole on the host are left as they are; other files (FlashInfer's
    generated sources, other kernel caches of the workspace) are added only where missing.
    Each moved-in module is then settled for ninja (every file's mtime set to now,
    C(ninja -t restat), every C(.ninja_deps) record's mtime set to now) and proven with FlashInfer's
    own ninja (C(ninja -n)). One that ninja would rebuild is removed again (RV(rejected_modules)) and
    is built locally by M(blackwell.sglang.flashinfer_jit_cache).
  - "Relocation (O(relocate_from)): a new venv whose kernel inputs did not change (one unrelated
    package added) compiles nothing. Each module whole in another venv's workspace (the serving
    venv's) and missing here is copied, its paths moved to this venv's and this workspace's in
    C(build.ninja), C(.ninja_deps) and C(.ninja_log) (whose command hashes are recomputed with ninja's
    own hash, rapidhash, after ninja's hash of every old command was reproduced), and kept only when
    proven: the source module is up to date for ninja; every input ninja recorded under the old venv
    or workspace has the same bytes at its new path; every include directory the flags name there
    holds the same files with the same bytes; after settling, C(ninja -n) finds nothing to do; every
    output lies in the new module dir; and FlashInfer's own C(build.ninja) for this venv (its
    C(write_ninja())) is the relocated one, byte for byte (so its flags, CUDA home, compilers and paths
    are this venv's). Both module dirs are held under FlashInfer's build lock meanwhile. Otherwise
    nothing of it is kept (RV(relocate_rejected)) and it is built. Only modules FlashInfer has a
    generator for are relocated; on the lab the C(sampling) module moved in 1.3 s, against 179 s to
    compile."
  - Must run with the SGLang venv's interpreter (C(ansible_python_interpreter)) and as the service
    user, with the environment files the services use (O(env_file)); their C(PATH) gives the
    C(ninja) FlashInfer runs.
options:
  workspace_base:
    description:
      - C(FLASHINFER_WORKSPACE_BASE) of this venv, the per-venv workspace that is packed or seeded
        (FlashInfer's cache is its C(.cache/flashinfer)).
    type: path
    required: true
  src:
    description:
      - An artifact on the host to seed the workspace from (made by O(dest) on a host with the same key).
    type: path
  checksum:
    description: sha256 of O(src) (hex, optionally prefixed C(sha256:)); a file that differs is rejected.
    type: str
  dest:
    description:
      - Pack the workspace into this tar.gz (written atomically, mode C(0644)). Left as it is when its
        manifest already lists the same key and files.
    type: path
  relocate_from:
    description:
      - Another venv's workspace base (the serving venv's) to relocate whole modules from, for those
        this workspace lacks or holds broken; with O(relocate_venv).
    type: path
  relocate_venv:
    description: The venv that built O(relocate_from)'s modules (its real path); its files are compared with this venv's.
    type: path
  stamp:
    description:
      - A verification stamp file (JSON) for an inspection (neither O(src) nor O(dest)). When its
        fingerprint equals the one computed now, the key and the modules recorded there are returned
        without importing FlashInfer (RV(verified) is C(unchanged)); otherwise the workspace is
        inspected in full and the stamp replaced (never in check mode).
      - With O(src) or O(dest), the seed or the pack always runs; afterwards the workspace as it is
        then is recorded in the stamp for the next inspection.
      - "The fingerprint, by content (C(module_utils/verified.py)): the venv's C(*.dist-info/RECORD)
        files and the stat of every file they list, of every file under C(CUDA_HOME) and under
        O(workspace_base), the environment after O(env_file) (without sudo's and ssh's
        per-connection variables) and this collection's code that computes the key."
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - blackwell.sglang.flashinfer_env
attributes:
  check_mode:
    support: full
    details:
      - With O(src), verifies the checksum, the manifest and the key and reports what would be seeded;
        with O(dest), reports whether the artifact would be written. Writes nothing.
  diff_mode:
    support: full
    details: The whole modules in the JIT dir, before and after.
  platform:
    platforms: posix
notes:
  - Rejections, returned in RV(rejected) (the task does not fail; the modules are then built locally) -
    a checksum that differs (truncated or replaced file); a file that is not a tar.gz or has no
    C(manifest.json) first; another key (the message names each field that differs, with both values);
    a member not in the manifest, not a plain file or outside C(workspace/); a member whose sha256 or
    size differs from the manifest; a broken C(.so) in it.
  - Failure modes, one line each naming the cause and the fix - no C(flashinfer) in the interpreter;
    no C(nvcc) under C(CUDA_HOME); no C(*.dist-info/RECORD) in the venv; O(src) missing or unreadable;
    C(ninja) not on C(PATH); FlashInfer's JIT dir outside O(workspace_base); O(dest) inside the
    workspace or not writable; a workspace file that changed while it was packed (a build running);
    no space, permission denied or a read-only file system under the workspace or beside it (the
    artifact is unpacked into a temporary dir beside the workspace, on the same file system).
  - A module whose FlashInfer build lock (C(<jit dir>/tmp/<module>.lock)) is held by a running build
    is left to that build and listed in RV(rejected_modules).
seealso:
  - module: blackwell.sglang.flashinfer_jit_cache
"""

EXAMPLES = r"""
- name: Pack the warm workspace on the first host
  blackwell.sglang.flashinfer_jit_artifact:
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/current/venv.env]
    workspace_base: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c
    dest: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c.tar.gz
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python
  register: packed

- name: Seed another host from the stored artifact
  blackwell.sglang.flashinfer_jit_artifact:
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/current/venv.env]
    workspace_base: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c
    src: /var/lib/sglang/kernel-caches/incoming.tar.gz
    checksum: "{{ packed.packed.sha256 }}"
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python
  register: seeded
"""

RETURN = r"""
key:
  description: What must be equal for kernels to be reused; an artifact seeds only a host with an equal key.
  returned: always
  type: dict
  sample:
    venv: /opt/sglang/venvs/sglang-20260101-1a2b3c
    workspace: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c
    flashinfer_version: 0.7.2
    targets: ["12.0f"]
    cuda_home: /opt/cuda/13.0.2
    cuda_version: "13.0"
    packages: 5b1f0c0e3f9e4c6f0d0c7a1b2e3d4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4
key_id:
  description: A file-name-safe id of RV(key) (venv name, targets, CUDA release, 12 hex digits of its sha256).
  returned: always
  type: str
  sample: sglang-20260101-1a2b3c-120f-cuda13.0-3f2a9c0d1b7e
cache_dir:
  description: FlashInfer's JIT dir for this version and these targets (C(FLASHINFER_JIT_DIR)).
  returned: always
  type: str
  sample: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c/.cache/flashinfer/0.7.2/120f/cached_ops
modules:
  description: Modules in RV(cache_dir) whose C(.so) is whole after the run (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [sampling, topk]
warmable:
  description:
    - The RV(modules) FlashInfer can generate by name (C(flashinfer.jit.<name>.gen_<name>_module) or
      C(flashinfer.jit.gen_<name>_module) exists), so M(blackwell.sglang.flashinfer_jit_cache) can check them.
  returned: always
  type: list
  elements: str
  sample: [sampling, topk]
verified:
  description: C(checked) when the workspace was inspected in full, C(unchanged) when O(stamp) proved it unchanged.
  returned: when stamp is given and neither src nor dest
  type: str
  sample: unchanged
verified_at:
  description: When the inspection that the stamp records ran (UTC, ISO 8601).
  returned: when verified is unchanged
  type: str
  sample: "2026-12-02T17:40:12Z"
relocated:
  description: Modules relocated from O(relocate_from) and proven (would be relocated, in check mode).
  returned: when relocate_from is given
  type: list
  elements: str
  sample: [sampling]
relocate_rejected:
  description: Modules of O(relocate_from) that were not relocated (they are built), each with the reason.
  returned: when relocate_from is given
  type: dict
  sample: {sampling: "input /opt/sglang/venvs/2b3c/lib/python3.11/site-packages/flashinfer/data/include/flashinfer/sampling.cuh differs from ..."}
seeded:
  description: Modules moved in from O(src) and proven up to date by ninja (would be, in check mode).
  returned: when src is given
  type: list
  elements: str
  sample: [sampling]
rejected:
  description: Why O(src) as a whole was not used (nothing of it was merged); null when it was.
  returned: when src is given
  type: str
  sample: "artifact was built for another key; differs in cuda_version (artifact \"12.9\", host \"13.0\")"
rejected_modules:
  description: Modules of O(src) that were not kept, each with the reason (ninja's first C(-d explain) line).
  returned: when src is given
  type: dict
  sample: {topk: "ninja explain: output topk.cuda.o older than most recent input /opt/cuda/13.0.2/include/cuda.h"}
skipped_modules:
  description: Modules of O(src) that were already whole on the host and were left as they are.
  returned: when src is given
  type: list
  elements: str
removed:
  description:
    - Module dirs of the host with a broken C(.so) that were removed (replaced by the artifact's, or,
      when ninja rejected that, left to be built locally).
  returned: when src is given
  type: list
  elements: str
packed:
  description:
    - The artifact at O(dest) - C(path); C(bytes), its size in bytes; C(sha256); C(modules), the
      modules in it; C(files), the number of files in it; C(left_out), what was not packed and why
      (a module dir whose C(.so) is not whole, another broken C(.so)). C(bytes) and C(sha256) are
      null in check mode when the artifact would be written.
  returned: when dest is given
  type: dict
  sample:
    path: /var/lib/sglang/kernel-caches/sglang-20260101-1a2b3c.tar.gz
    bytes: 48213377
    sha256: 9d1c0b0f6b1e2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5
    modules: [sampling, topk]
    files: 61
    left_out: []
"""

import importlib
import os
import shutil
import sys
import sysconfig

# Run as a plain script (python3 .../flashinfer_jit_artifact.py args.json), Python puts this file's
# directory first on sys.path, and FlashInfer's probe for its own AOT package, `flashinfer_jit_cache`,
# would import the module of that name beside this one. Take that entry out.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import kernel_cache as kc  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils.run import module_runner  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import verified  # noqa: E402


def warmable(names):
    """The names FlashInfer has a generator for (looked up, not called)."""
    found = []
    for name in names:
        if not name.isidentifier():
            continue
        for module_name in ("flashinfer.jit.%s" % name, "flashinfer.jit"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            if callable(getattr(module, "gen_%s_module" % name, None)):
                found.append(name)
                break
    return found


def host_key(cache, workspace, run):
    """This host's key: the venv, the workspace, FlashInfer's version and targets, the CUDA toolkit,
    the installed wheels."""
    nvcc, release = cache.nvcc(run)
    return kc.cache_key(
        venv=os.path.realpath(sys.prefix), workspace=workspace, flashinfer_version=cache.version,
        targets=cache.target_archs(), cuda_home=os.path.dirname(os.path.dirname(nvcc)), cuda_version=release,
        packages=kc.record_digest(sysconfig.get_paths()["purelib"]),
    )


def run(module):
    params = module.params
    workspace = os.path.abspath(params["workspace_base"])
    fj.prepare_environment(params["env_file"], workspace)

    def inputs():
        return verified.jit_inputs(check="inspect", workspace=workspace, code=(fj, kc, verified, sys.modules[__name__]))

    if params["stamp"] and not params["src"] and not params["dest"] and not params["relocate_from"]:  # an inspection: reads only
        return verified.run(params["stamp"], inputs, lambda: inspect(module, workspace),
                            check_mode=module.check_mode, warn=module.warn)
    with verified.given_environment():
        result = inspect(module, workspace)
    if params["stamp"] and not module.check_mode:
        # A seed or a pack has just inspected the workspace as it is now: that is what the next
        # inspection would find, so it is recorded for it (with the environment this run was given).
        kept = {name: result[name] for name in ("key", "key_id", "cache_dir", "modules", "warmable")}
        problem = verified.Stamp(params["stamp"]).write(verified.fingerprint(inputs()), dict(kept, changed=False))
        if problem:
            module.warn(problem + ": the next run checks in full again")
    return result


def relocate(module, cache, workspace):
    """Relocate the modules whole in relocate_from's JIT dir (same FlashInfer version and targets:
    the same relative JIT dir) that this workspace lacks or holds broken, and that FlashInfer can
    generate (module_utils/kernel_cache.py, relocate_module; then FlashInfer's own build.ninja for
    this venv must be the relocated one, byte for byte). One that fails any step is built instead."""
    params = module.params
    old_workspace, old_venv = os.path.abspath(params["relocate_from"]), params["relocate_venv"]
    new_venv = sys.prefix
    jit_rel = kc.jit_relpath(workspace, cache.jit_dir)
    old_jit = os.path.join(old_workspace, jit_rel)
    result = {"relocated": [], "relocate_rejected": {}}
    if os.path.realpath(old_workspace) == os.path.realpath(workspace) or os.path.realpath(old_venv) == os.path.realpath(new_venv):
        return result
    wanted = [name for name in kc.whole_modules(old_jit) if kc.module_problem(cache.jit_dir, name) is not None]
    if module.check_mode or not wanted:
        result["relocated"] = wanted
        return result
    ninja = kc.find_ninja(module_runner(module))
    # Each prefix as written and as resolved: FlashInfer may write either (Path.resolve()).
    moves = [(path(old_venv), path(new_venv)) for path in (os.path.abspath, os.path.realpath)]
    moves += [(path(old_workspace), path(workspace)) for path in (os.path.abspath, os.path.realpath)]
    os.makedirs(cache.jit_dir, exist_ok=True)
    for leftover in os.listdir(cache.jit_dir):  # what a killed relocation left
        if leftover.startswith(kc.RELOCATE_STAGING):
            shutil.rmtree(os.path.join(cache.jit_dir, leftover), ignore_errors=True)
    for name in wanted:
        reason = relocate_one(cache, name, os.path.join(old_jit, name), moves, ninja)
        if reason:
            result["relocate_rejected"][name] = reason
        else:
            result["relocated"].append(name)
    return result


def relocate_one(cache, name, source, moves, ninja):
    """Relocate module `name` from `source` under FlashInfer's lock on both sides; None, or why not."""
    spec = cache.spec(name)
    if spec is None or not callable(getattr(spec, "write_ninja", None)):
        return "FlashInfer %s has no generator for %s: it is built where it is needed" % (cache.version, name)
    target = os.path.join(cache.jit_dir, name)
    with kc.build_lock(os.path.dirname(source), name) as source_free, kc.build_lock(cache.jit_dir, name) as target_free:
        if not (source_free and target_free):
            return "a FlashInfer build holds its lock: left to it"
        if kc.module_problem(cache.jit_dir, name) is None:
            return "built here while this ran"
        try:
            if os.path.lexists(target):  # broken (whole ones are not wanted): never left in place
                kc.remove_path(target)
            reason = kc.relocate_module(source, target, moves, ninja)
            if reason:
                return reason
            relocated = open(os.path.join(target, "build.ninja"), "rb").read()
            spec.write_ninja()  # FlashInfer's own file for this venv, written where it differs
            if open(os.path.join(target, "build.ninja"), "rb").read() != relocated:
                kc.remove_path(target)
                return "FlashInfer %s writes another build.ninja for this venv (its flags, CUDA or paths differ)" % cache.version
        except (kc.KernelCacheError, OSError, ValueError, KeyError, RuntimeError) as exc:
            if os.path.lexists(target):
                kc.remove_path(target)
            return "%s: %s" % (type(exc).__name__, exc)
    return None


def inspect(module, workspace):
    """The key and the workspace's modules; with src, seed; with dest, pack."""
    params = module.params
    cache = fj.FlashInferCache()
    key = host_key(cache, workspace, module_runner(module))
    before = kc.whole_modules(cache.jit_dir)
    result = dict(key=key, key_id=kc.key_id(key), cache_dir=cache.jit_dir, changed=False)
    after = before
    if params["relocate_from"]:
        result.update(relocate(module, cache, workspace))
        result["changed"] = bool(result["relocated"])
        after = sorted(set(before) | set(result["relocated"])) if module.check_mode else kc.whole_modules(cache.jit_dir)
    if params["src"]:
        if not os.path.isfile(params["src"]):
            raise kc.KernelCacheError("src %s is not a file: copy the artifact to the host first" % params["src"])
        # ninja (found on PATH when a module is to be moved in) is not needed to verify or in check mode.
        seeded = kc.seed(params["src"], params["checksum"], key, workspace, cache.jit_dir, check_mode=module.check_mode,
                         run=module_runner(module))
        result.update(seeded)
        result["changed"] = result["changed"] or bool(seeded["seeded"] or seeded["removed"])
        after = sorted(set(before) | set(seeded["seeded"])) if module.check_mode else kc.whole_modules(cache.jit_dir)
    if params["dest"]:
        packed = kc.pack(workspace, key, params["dest"], cache.jit_dir, check_mode=module.check_mode)
        result["changed"] = result["changed"] or packed.pop("changed")
        result["packed"] = packed
    result["modules"] = after
    result["warmable"] = warmable(after)
    if module._diff:
        result["diff"] = {
            "before": {"cache_dir": cache.jit_dir, "modules": before},
            "after": {"cache_dir": cache.jit_dir, "modules": after},
        }
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            env_file=dict(type="list", elements="path"),
            workspace_base=dict(type="path", required=True),
            src=dict(type="path"),
            checksum=dict(type="str"),
            dest=dict(type="path"),
            stamp=dict(type="path"),
            relocate_from=dict(type="path"),
            relocate_venv=dict(type="path"),
        ),
        required_together=[("src", "checksum"), ("relocate_from", "relocate_venv")],
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except (fj.JitCacheError, kc.KernelCacheError) as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:  # kernel_cache turns those it expects into KernelCacheError; never a traceback all the same
        module.fail_json(msg=fj.os_error_reason(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
