#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_cache_census
short_description: Prove that every cache the installed SGLang venv declares lies in the venv's workspace
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Learns from the installed packages every cache location the serving stack will use, and fails,
    naming each variable and the file that reads it, when one would land outside the venv's
    kernel-cache workspace (the service user's home, C(/tmp), a path every venv shares). A compile,
    a tune or a download there happens again on the serving path, after a restart (C(PrivateTmp=)
    empties C(/tmp)), a switch or a rollback.
  - "SGLang's own: its registry C(sglang/srt/environ.py) (class C(Envs), loaded from its file, which
    is standard library only), every string variable named like a cache location and every one whose
    default is computed from C(SGLANG_CACHE_DIR), resolved by SGLang's own C(get()); and
    C(third_party_cache_defaults()) (Triton, TorchInductor, C(CUDA_CACHE_PATH), TileLang, FlashInfer)."
  - "Every other package: each quoted name ending in C(CACHE_DIR), C(CACHE_PATH), C(CACHE_HOME),
    C(CACHE_ROOT), C(WORKSPACE_BASE) or C(WORKSPACE_DIR) in its Python sources (about 35000 files,
    2 seconds, for SGLang 0.5.23's venv)."
  - A declared name passes when the environment (after O(env_file)) sets it to a path inside
    O(workspace), or when it is known not to be a kernel cache (model, tokenizer and dataset
    downloads; the table in C(module_utils/cache_census.py), or O(exempt)). The same table renders
    the venv's environment file (filter P(blackwell.sglang.kernel_cache_environment#filter)).
  - With O(targets), asks Triton itself which C(ptxas) it compiles each target with
    (C(triton.backends.nvidia.compiler.get_ptxas), which honours C(TRITON_PTXAS_PATH) and
    C(TRITON_PTXAS_BLACKWELL_PATH)) and fails when that ptxas's CUDA release cannot build the target
    (a Triton whose bundled ptxas predates C(sm_103a) breaks B300 schedulers, sglang#14075); the
    table of targets is the collection's (C(module_utils/cuda_arch.py)).
  - Must run with the SGLang venv's interpreter (C(ansible_python_interpreter)) and as the service
    user, with the environment files the units read. Reads only; changes nothing on the host but
    O(stamp).
options:
  workspace:
    description: The venv's kernel-cache workspace, where every cache must resolve.
    type: path
    required: true
  env_file:
    description:
      - Environment files applied in order before the census (a later file wins, as with systemd's
        C(EnvironmentFile=) lines); missing or unreadable ones fail.
    type: list
    elements: path
  locations:
    description:
      - Caches the operator places beyond the collection's table, variable to a directory relative
        to O(workspace); the same dict as the filter's. A name of the table may not be moved.
    type: dict
    default: {}
  exempt:
    description: Declared names that are no kernel cache, name to why (reported in RV(exempt)).
    type: dict
    default: {}
  targets:
    description:
      - The GPU targets the services run on (C(10.3a), C(12.0f)); Triton's C(ptxas) for each is checked
        (RV(triton_ptxas)). Empty skips the check; a venv without Triton passes it.
    type: list
    elements: str
    default: []
  stamp:
    description:
      - A verification stamp file (JSON). When the fingerprint of the venv's packages (every
        C(*.dist-info/RECORD) and the stat of each file it lists), the environment and this code
        equals the stamp's, the last result is returned without scanning (RV(verified)
        C(unchanged)); otherwise the census runs and, when it passes, replaces the stamp (never in
        check mode).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads only, as in a normal run; the stamp is not written.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - "Failure modes: an O(env_file) that cannot be read; C(sglang/srt/environ.py) that raises when
    loaded (named with its error); a declared name that is neither placed nor exempt (RV(unplaced));
    a cache that resolves outside O(workspace) (RV(misplaced), with whether an env file set it or it
    is the package's default); a ptxas Triton would use that cannot build one of O(targets) (its path
    and CUDA release named); an O(locations) entry that is not a relative directory or moves a
    cache of the table."
seealso:
  - module: blackwell.sglang.flashinfer_jit_cache
"""

EXAMPLES = r"""
- name: Every cache the venv declares is in its workspace
  blackwell.sglang.kernel_cache_census:
    workspace: /var/lib/sglang/kernel-caches/03cc642be31cb6ed
    env_file: [/etc/sglang/flashinfer.env, /opt/sglang/venvs/03cc642be31cb6ed/venv.env]
    stamp: /opt/sglang/venvs/03cc642be31cb6ed/.blackwell-sglang/cache-census.json
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/venvs/03cc642be31cb6ed/bin/python
"""

RETURN = r"""
declared:
  description: Each cache location a package declares, name to the file (relative to site-packages) that reads it.
  type: dict
  returned: always (empty when verified is unchanged)
  sample: {"CUTE_DSL_CACHE_DIR": "flashinfer/data/cutlass/python/CuTeDSL/cutlass/base_dsl/cache_helpers.py"}
sglang:
  description: SGLang's cache locations as its own code resolves them with the env files applied (C(null) for a hard-coded default).
  type: dict
  returned: always
  sample: {"SGLANG_CACHE_DIR": "/var/lib/sglang/kernel-caches/03cc642be31cb6ed/sglang"}
placed:
  description: Name to the path inside the workspace.
  type: dict
  returned: always
exempt:
  description: Declared names that are no kernel cache, name to why.
  type: dict
  returned: always
unplaced:
  description: Declared names the environment does not set (the census fails), name to the file that reads it.
  type: dict
  returned: always
misplaced:
  description: Names that resolve outside the workspace (the census fails), name to C(NAME=path (origin)).
  type: dict
  returned: always
triton_ptxas:
  description:
    - For each of O(targets), the C(ptxas) Triton compiles it with (C(path)), its CUDA release (C(version), from
      C(ptxas --version) as Triton reads it) and C(problem) (null when it builds the target).
  type: dict
  returned: always
  sample: {"10.3a": {"path": "/opt/sglang/venvs/03cc642be31cb6ed/lib/python3.11/site-packages/triton/backends/nvidia/bin/ptxas-blackwell",
                     "version": "13.3", "problem": null}}
files:
  description: Python files scanned (0 when verified is unchanged).
  type: int
  returned: always
seconds:
  description: Wall time of the census, in seconds (0 when RV(verified) is C(unchanged)).
  type: float
  returned: always
verified:
  description: C(checked) when the census ran, C(unchanged) when O(stamp) proved its inputs unchanged.
  type: str
  returned: when stamp is given
"""

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.blackwell.sglang.plugins.module_utils import cache_census  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit as fj  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import verified  # noqa: E402


def run(params):
    workspace = params["workspace"]

    def check():
        start = time.monotonic()
        dirs = verified.package_dirs()
        result = cache_census.census(workspace, dirs, params["locations"], params["exempt"])
        result["triton_ptxas"] = cache_census.triton_ptxas(params["targets"])
        result["seconds"] = round(time.monotonic() - start, 1)
        result["changed"] = False
        problems = [cache_census.problem(result, workspace)] + [
            "kernel_cache: " + found["problem"] for found in result["triton_ptxas"].values() if found["problem"]]
        problems = [text for text in problems if text]
        if problems:
            raise cache_census.CensusError("; ".join(problems))
        return result

    def inputs():
        return {"check": {name: params[name] for name in ("workspace", "locations", "exempt", "targets")},
                "environment": verified.environment(), "venv": verified.venv_signature(),
                # a ptxas the environment points Triton at (the CUDA home's) is an input of the check too
                "cuda_home": verified.tree_signature(os.environ.get("CUDA_HOME", "")) if params["targets"] else None,
                "code": verified.code_signature(cache_census, cache_census.cuda_arch, verified, sys.modules[__name__])}

    def steady(result):
        return dict(result, declared={}, files=0, seconds=0.0)

    fj.prepare_environment(params["env_file"])
    return verified.run(params["stamp"], inputs, check, steady=steady, check_mode=params["check_mode"], warn=params["warn"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            workspace=dict(type="path", required=True),
            env_file=dict(type="list", elements="path"),
            locations=dict(type="dict", default={}),
            exempt=dict(type="dict", default={}),
            targets=dict(type="list", elements="str", default=[]),
            stamp=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params, check_mode=module.check_mode, warn=module.warn)
    try:
        cache_census.locations(params["locations"])
        for target in params["targets"]:
            cache_census.cuda_arch.parse_arch(target)
        module.exit_json(**run(params))
    except (cache_census.CensusError, fj.JitCacheError, cache_census.cuda_arch.ArchError) as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=fj.os_error_reason(exc))


if __name__ == "__main__":
    main()
