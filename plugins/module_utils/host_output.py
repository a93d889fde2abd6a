# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one checked parse of what a command on a host printed (the interpreters' probes, the venv's
helpers, nvcc): {"value": parsed value or None, "problem": one sentence or None}. The sentence names
the command, what it printed (cut to SHOWN characters), what was expected and the variable to fix, so
a role fails in one line (ansible.builtin.assert on the problem) instead of a raw Jinja or JSON
error. A registered result is read as Ansible registers it: rc, stdout, stderr.
"""

from __future__ import annotations

import json
import re

from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import nvcc_release

SHOWN = 160
COMPUTE_NAME = re.compile(r"^compute_[0-9]+[af]?$")
KINDS = ("json", "nvcc_release", "gpu_archs")


def shown(text, last_line=False):
    """A command's output as a message shows it: trimmed (with `last_line`, its last line: the
    exception of a traceback), cut to SHOWN characters, 'nothing' when empty."""
    text = (text if isinstance(text, str) else "").strip()
    if last_line and text:
        text = text.splitlines()[-1].strip()
    if not text:
        return "nothing"
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def read(result, command, kind, variable, keys=()):
    """What `command` printed (its registered `result`), read as `kind`:
    - json: a JSON object holding every one of `keys` -> the object;
    - nvcc_release: `nvcc --version` output -> its release, M.m;
    - gpu_archs: `nvcc --list-gpu-arch` output -> its compute_XX names.
    {"value": ..., "problem": None} when it reads, {"value": None, "problem": sentence} when not (a
    failed command is a problem too, with its exit status and standard error)."""
    if kind not in KINDS:
        raise ValueError("kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    result = result or {}
    stdout = result.get("stdout")
    stdout = stdout if isinstance(stdout, str) else ""
    rc = result.get("rc")
    value = None
    if rc == 0:
        value = _PARSERS[kind](stdout, keys)
    if value is not None:
        return {"value": value, "problem": None}
    expected = _EXPECTED[kind](keys)
    if rc != 0:
        status = "exited with status %s" % (rc,) if rc is not None else "did not run (%s)" % (result.get("msg") or "no exit status")
        # A program that could not be started: Ansible's command module says why in msg (rc 2, no output).
        errors = result.get("stderr")
        if not (isinstance(errors, str) and errors.strip()) and rc is not None and result.get("msg") != "non-zero return code":
            errors = result.get("msg")
        problem = "%s %s, printing %s (standard error: %s), where %s was expected; check %s" % (
            command, status, shown(stdout), shown(errors, last_line=True), expected, variable)
    else:
        problem = "%s printed %s, where %s was expected; check %s" % (command, shown(stdout), expected, variable)
    return {"value": None, "problem": problem}


def _json(stdout, keys):
    try:
        value = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(value, dict) or any(key not in value for key in keys):
        return None
    return value


def _release(stdout, _keys):
    return nvcc_release(stdout)


def _archs(stdout, _keys):
    words = stdout.split()
    if not words or not all(COMPUTE_NAME.match(word) for word in words):
        return None
    return words


_PARSERS = {"json": _json, "nvcc_release": _release, "gpu_archs": _archs}
_EXPECTED = {
    "json": lambda keys: "a JSON object" + (" with %s" % ", ".join(keys) if keys else ""),
    "nvcc_release": lambda _keys: "nvcc's version text with its release (\"Cuda compilation tools, release M.m\")",
    "gpu_archs": lambda _keys: "the compute_XX names of the targets nvcc builds",
}
