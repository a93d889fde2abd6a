# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a module hands the collection's shared code a way to run a program.

The shared code (``flashinfer_jit``, ``kernel_cache``, ``gpu_validate``) never starts a program itself:
it calls the ``run(argv, env=None, cwd=None)`` it is given (``env``: the whole environment of the
program, else this process's), which returns an object with ``returncode``, ``stdout`` and ``stderr``
(text: a ``subprocess.CompletedProcess``) and raises ``OSError`` when the program cannot
start (so each caller can name the program and the fix). In a module that is
``AnsibleModule.run_command`` (ansible-test's sanity, from ansible-core 2.21 on, refuses
``subprocess`` calls in modules and module_utils); the pre-warm command the units run has no
AnsibleModule, and its launcher (``flashinfer_prewarm_command``) passes its own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess


@contextlib.contextmanager
def _environment(env):
    """os.environ is `env` (run_command gives the program a copy of os.environ), then as it was."""
    if env is None:
        yield
        return
    wanted = {str(key): str(value) for key, value in env.items()}
    bad = sorted(key for key, value in wanted.items() if not key or "=" in key or "\0" in key + value)
    if bad:
        raise ValueError("environment variables that cannot be set: %s" % ", ".join(repr(key) for key in bad))
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(wanted)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def module_runner(module):
    """run(argv, env=None, cwd=None) for shared code, through `module`'s run_command; an OSError (the
    program is missing or cannot be executed) is raised to the caller, not turned into the module's
    failure. `env` is the program's environment instead of this process's (run_command still drops its
    own module paths from PYTHONPATH); its values never appear in argv."""

    def run(argv, env=None, cwd=None):
        if cwd is not None and not os.path.isdir(cwd):  # run_command would end the module (fail_json)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
        try:
            with _environment(env):
                # No $VAR or ~ expansion: a probe's Python code is an argument.
                rc, out, err = module.run_command([str(arg) for arg in argv], cwd=cwd, handle_exceptions=False,
                                                  expand_user_and_vars=False, ignore_invalid_cwd=False)
        except OSError as exc:
            if isinstance(exc.filename, bytes):  # run_command passes the arguments as bytes
                exc.filename = os.fsdecode(exc.filename)
            raise
        return subprocess.CompletedProcess(argv, rc, out, err)

    return run
