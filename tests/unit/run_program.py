"""The `run` the tests give the collection's shared code (module_utils/flashinfer_jit, kernel_cache,
gpu_validate): `run(argv, env=None, cwd=None)`.

It runs the program with subprocess, as the pre-warm launcher's does (flashinfer_prewarm_command);
a module passes AnsibleModule.run_command (module_utils/run.py), which the module tests exercise.
"""

import subprocess


def run(argv, env=None, cwd=None):
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
