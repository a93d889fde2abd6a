#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: flashinfer_jit_cache
short_description: Clear, pre-warm and repair FlashInfer's JIT kernel cache
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Asks the installed FlashInfer where its JIT cache is
    (C(flashinfer.jit.env.FLASHINFER_JIT_DIR), i.e.
    C($FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<arch>/cached_ops) from 0.4.1), which
    targets it builds for (its own C(TARGET_CUDA_ARCHS), checked with its own C(check_cuda_arch())),
    and how to build each module (C(flashinfer.jit.<name>.gen_<name>_module())). Nothing is guessed.
  - C(state=present) builds the requested modules compile-only with FlashInfer's own ninja build, so
    no GPU is needed, and skips what is built (FlashInfer's ninja decides; a warm check of the
    C(sampling) module takes about 4 seconds). Before that it repairs what a killed or interrupted
    build leaves, a zero-byte, truncated or non-ELF C(.so) (removed, then relinked) and lock files
    no process holds.
  - Must run with the SGLang venv's interpreter (C(ansible_python_interpreter)) and as the service
    user, with the same environment file the services use (O(env_file)), so FlashInfer's build
    files never see another environment and the services never rebuild.
  - C(FLASHINFER_JIT_VERBOSE) and C(FLASHINFER_JIT_DEBUG) are removed from the environment; they
    switch FlashInfer to debug builds (C(-G -O0)), many times slower and not what services load.
options:
  state:
    description:
      - C(present) builds missing modules and repairs broken ones.
      - C(absent) removes this FlashInfer version's cache for these targets
        (C(.cache/flashinfer/<version>/<arch>)), or the whole C(.cache/flashinfer) with O(scope=all).
      - C(rebuilt) is C(absent) then C(present).
    type: str
    choices: [present, absent, rebuilt]
    default: present
  modules:
    description:
      - FlashInfer JIT modules to warm, by name (C(sampling) serves C(top_k_top_p_sampling_from_probs)).
      - Default C([sampling, topk]), restricted to those the installed FlashInfer has.
      - An empty list only inspects and checks the targets (a probe).
    type: list
    elements: str
  workspace_base:
    description: Overrides C(FLASHINFER_WORKSPACE_BASE) (the cache lives in its C(.cache/flashinfer)).
    type: path
  scratch_workspace:
    description:
      - Run in a new empty C(FLASHINFER_WORKSPACE_BASE) (a C(blackwell-sglang-probe.*) directory in
        the system's temporary directory) that the module removes before it returns, also when it fails.
        FlashInfer creates its workspace when it is imported; a probe (O(modules=[])) this way writes
        nothing where a service's cache lives. Mutually exclusive with O(workspace_base).
    type: bool
    default: false
  jobs:
    description: Parallel compile jobs for ninja (C(MAX_JOBS)); default is ninja's own (cores + 2).
    type: int
  scope:
    description: With O(state=absent) or O(state=rebuilt), C(version) removes this version/arch dir only; C(all) removes every version.
    type: str
    choices: [version, all]
    default: version
  expected_archs:
    description:
      - FlashInfer target spellings the host must end up with (e.g. C([12.0f])). When given, the
        module fails unless FlashInfer's own target-arch set equals it.
    type: list
    elements: str
  stamp:
    description:
      - A verification stamp file (JSON) for O(state=present). When its fingerprint equals the one
        computed now, the module returns the result recorded there without importing FlashInfer
        (RV(verified) is C(unchanged)); otherwise it checks in full and, when that passes, replaces
        the stamp (never in check mode).
      - "The fingerprint, by content (C(module_utils/verified.py)): the venv's C(*.dist-info/RECORD)
        files and the stat (size, mtime, ctime, inode, mode, owner) of every file they list, the stat
        of every file under C(CUDA_HOME) and, unless O(modules) is empty (a probe), under
        C(FLASHINFER_WORKSPACE_BASE), the environment after O(env_file) (without sudo's and ssh's
        per-connection variables; a probe without C(FLASHINFER_WORKSPACE_BASE)), O(state),
        O(modules), O(expected_archs), O(scope) and this collection's code that runs the check.
        Writing a file always changes its ctime, so an edited FlashInfer file is always checked
        again."
      - Ignored with O(state=absent) and O(state=rebuilt), which always run.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - blackwell.sglang.flashinfer_env
attributes:
  check_mode:
    support: full
    details: Reports what would be built, repaired or removed; builds and removes nothing.
  diff_mode:
    support: full
    details: The list of compiled modules in this version/arch cache, before and after.
  platform:
    platforms: posix
notes:
  - Failure modes, each with a message that says what to fix - no C(flashinfer) in the interpreter;
    C(nvcc) missing under C(CUDA_HOME) or too old for a target (names both versions); FlashInfer's
    own arch error (for example C(FlashInfer requires GPUs with sm75 or higher)) when its target
    set is empty; targets that differ from O(expected_archs); an unknown module name; a failed
    ninja build (FlashInfer's ninja output is returned).
  - Failure modes of the host, one line each naming the cause and the fix, never a traceback -
    C(ninja) missing from the venv (the message names C(<venv>/bin/ninja) and says to re-run
    C(site.yml), whose sglang_venv role reinstalls what is missing from a venv), or the venv's C(bin) not on C(PATH);
    an C(nvcc) that cannot be started; an O(env_file) that is missing, unreadable, a directory or not
    text; a cache file or directory the user cannot read, write or remove (run as the service user),
    a directory where a file was expected, a full or read-only file system; a library torch or
    FlashInfer cannot load while being imported.
  - Compile time on 2 CPU cores without a GPU - C(sampling) for C(12.0f) about 110 s; C(topk) takes
    over 7 minutes even on 16 cores.
seealso:
  - name: FlashInfer JIT
    description: FlashInfer's JIT compilation and cache layout.
    link: https://docs.flashinfer.ai/
"""

EXAMPLES = r"""
- name: Pre-warm the sampling kernels as the service user with the units' environment
  blackwell.sglang.flashinfer_jit_cache:
    modules: [sampling]
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/current/venv.env]
    expected_archs: ["12.0f"]
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python

- name: Probe only - FlashInfer's targets and cache dir, no build
  blackwell.sglang.flashinfer_jit_cache:
    modules: []
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/current/venv.env]
  register: probe

- name: Throw this version's cache away and build it again
  blackwell.sglang.flashinfer_jit_cache:
    state: rebuilt
    modules: [sampling, topk]
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/current/venv.env]
    jobs: 16
"""

RETURN = r"""
cache_dir:
  description: FlashInfer's JIT dir for this version and these targets (C(FLASHINFER_JIT_DIR)).
  returned: always
  type: str
  sample: /var/lib/sglang/.cache/flashinfer/0.7.2/120f/cached_ops
flashinfer_version:
  description: The installed FlashInfer's version (C(flashinfer.__version__)).
  returned: always
  type: str
  sample: 0.7.2
archs:
  description: FlashInfer's own target-arch set (C(TARGET_CUDA_ARCHS)), as C(M.m) plus suffix.
  returned: always
  type: list
  elements: str
  sample: ["12.0f"]
nvcc:
  description: Path and release of the nvcc FlashInfer runs (C(CUDA_HOME/bin/nvcc --version)).
  returned: when state is present or rebuilt
  type: dict
  sample: {path: /opt/cuda/13.0.2/bin/nvcc, version: "13.0"}
built:
  description: Modules compiled or relinked by this run.
  returned: always
  type: list
  elements: str
  sample: [sampling]
skipped_modules:
  description:
    - Modules that were already built and up to date (named so because Ansible reserves C(skipped)
      in a result for a skipped task).
  returned: always
  type: list
  elements: str
repaired:
  description: What was repaired, one line each (broken C(.so) files, stale lock files).
  returned: always
  type: list
  elements: str
  sample: ["sampling.so: truncated: section headers end at byte 1893312, file has 4096"]
removed:
  description: Directories removed by C(absent)/C(rebuilt).
  returned: always
  type: list
  elements: str
seconds:
  description: Wall time per module, in seconds (build or up-to-date check); empty when RV(verified) is C(unchanged).
  returned: always
  type: dict
  sample: {sampling: 112.4}
verified:
  description:
    - C(checked) when the check ran in full, C(unchanged) when O(stamp) proved its inputs unchanged
      since the run recorded at RV(verified_at) (then RV(built) is empty and the modules that run
      built or found up to date are in RV(skipped_modules)).
  returned: when stamp is given and state is present
  type: str
  sample: unchanged
verified_at:
  description: When the full check that the stamp records passed (UTC, ISO 8601).
  returned: when verified is unchanged
  type: str
  sample: "2026-12-02T17:40:12Z"
"""

import os
import pathlib
import shutil
import sys
import tempfile

# Run as a plain script (python3 .../flashinfer_jit_cache.py args.json), Python puts this file's
# directory first on sys.path, and FlashInfer's probe for its own AOT package, also named
# `flashinfer_jit_cache`, would import this module instead. Take that entry out.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import verified  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils.run import module_runner  # noqa: E402


def workspace():
    """FlashInfer's workspace base (flashinfer/jit/env.py: FLASHINFER_WORKSPACE_BASE, else the home)."""
    return os.environ.get("FLASHINFER_WORKSPACE_BASE") or str(pathlib.Path.home())


def inputs(params):
    """What the check's answer depends on (module_utils/verified.py), read after prepare_environment().
    MAX_JOBS changes how fast a build runs, not what it builds; a probe reads no workspace."""
    probe = params["modules"] == []
    return verified.jit_inputs(
        check={name: params[name] for name in ("state", "modules", "expected_archs", "scope")},
        workspace=None if probe else workspace(), code=(fj, verified, sys.modules[__name__]),
        drop=("MAX_JOBS",) + (("FLASHINFER_WORKSPACE_BASE",) if probe else ()),
    )


def steady(result):
    """What a run that finds nothing changed returns: every module up to date, nothing done. The
    cache dir is kept relative to the workspace (a probe's scratch workspace is new on every run)."""
    kept = {name: value for name, value in result.items() if name not in ("before", "after", "cache_dir")}
    kept.update(built=[], skipped_modules=sorted(set(result["built"]) | set(result["skipped_modules"])),
                repaired=[], removed=[], seconds={},
                cache_dir_in_workspace=os.path.relpath(result["cache_dir"], workspace()))
    return kept


def run(module):
    """The shared run (module_utils/flashinfer_jit.ensure, also the units' ExecStartPre=) as a module,
    in a scratch workspace base (removed afterwards) with `scratch_workspace`."""
    if not module.params["scratch_workspace"]:
        return _run(module, module.params["workspace_base"])
    scratch = tempfile.mkdtemp(prefix="blackwell-sglang-probe.")
    try:
        return _run(module, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(module, workspace_base):
    params = module.params
    fj.prepare_environment(params["env_file"], workspace_base, params["jobs"])

    def check():
        return fj.ensure(
            module_runner(module), state=params["state"], modules=params["modules"], expected_archs=params["expected_archs"],
            scope=params["scope"], check_mode=module.check_mode, check_targets=True,
        )

    stamp = params["stamp"] if params["state"] == "present" else None
    result = verified.run(stamp, lambda: inputs(params), check, steady=steady, check_mode=module.check_mode, warn=module.warn)
    before, after = result.pop("before", None), result.pop("after", None)
    if result.get("verified") == "unchanged":  # from the stamp: proven, not listed again
        result["cache_dir"] = os.path.join(workspace(), result.pop("cache_dir_in_workspace"))
        before = after = sorted(result["skipped_modules"])
    if module._diff:
        result["diff"] = {
            "before": {"cache_dir": result["cache_dir"], "modules": before},
            "after": {"cache_dir": result["cache_dir"], "modules": after},
        }
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent", "rebuilt"]),
            modules=dict(type="list", elements="str"),
            env_file=dict(type="list", elements="path"),
            workspace_base=dict(type="path"),
            scratch_workspace=dict(type="bool", default=False),
            jobs=dict(type="int"),
            scope=dict(type="str", default="version", choices=["version", "all"]),
            expected_archs=dict(type="list", elements="str"),
            stamp=dict(type="path"),
        ),
        mutually_exclusive=[("workspace_base", "scratch_workspace")],
        supports_check_mode=True,
    )
    if module.params["jobs"] is not None and module.params["jobs"] < 1:
        module.fail_json(msg="jobs must be >= 1, got %d" % module.params["jobs"])
    try:
        result = run(module)
    except fj.JitCacheError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:  # fj turns those it expects into JitCacheError; never a traceback all the same
        module.fail_json(msg=fj.os_error_reason(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
