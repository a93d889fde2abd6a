# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA compute-capability targets and the toolkit versions that can build them.

Shared by the controller-side filters (role preflight) and the modules. Pure Python: no I/O.
"""

from __future__ import annotations

import re

try:  # controller side and SGLang venvs always have packaging
    from packaging.version import Version
except ImportError:  # pragma: no cover - a bare target interpreter
    from ansible.module_utils.compat.version import LooseVersion as Version  # type: ignore

ARCH_RE = re.compile(r"^(?P<major>[0-9]{1,2})\.(?P<minor>[0-9])(?P<suffix>[af]?)$")
TOOLKIT_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")

# compute capability -> (first CUDA toolkit that can build it, first toolkit that no longer can)
# Sources: the CUDA toolkit release notes and `nvcc --list-gpu-arch` of each release.
ARCH_TOOLKIT = {
    "7.5": ("10.0", None),
    "8.0": ("11.0", None),
    "8.6": ("11.1", None),
    "8.7": ("11.4", None),
    "8.8": ("13.0", None),
    "8.9": ("11.8", None),
    "9.0": ("11.8", None),
    "10.0": ("12.8", None),   # B200/GB200
    "10.1": ("12.8", "13.0"),  # renamed 11.0 in CUDA 13.0
    "10.3": ("12.9", None),   # B300/GB300
    "11.0": ("13.0", None),
    "12.0": ("12.8", None),   # RTX PRO 6000 Blackwell, RTX 50xx
    "12.1": ("12.9", None),   # GB10 (DGX Spark)
}

# Arch-specific ("a") and family ("f") targets came later than the plain ones on Blackwell.
SUFFIX_MIN_TOOLKIT = {"f": "12.9"}
SUFFIX_ARCH_MIN_TOOLKIT = {("9.0", "a"): "12.0", ("10.3", "a"): "12.9", ("12.1", "a"): "12.9", ("12.0", "a"): "12.8"}


class ArchError(ValueError):
    """A target arch is malformed, unknown, or cannot be built by the given toolkit."""


def parse_arch(arch):
    """Split '12.0f' into ('12.0', 'f'). Raise ArchError for anything not M.m[a|f]."""
    match = ARCH_RE.match(str(arch).strip())
    if not match:
        raise ArchError(
            "target arch %r is not of the form M.m (e.g. '12.0' for RTX PRO 6000, '10.3' for B300)" % (arch,)
        )
    base = "%s.%s" % (int(match.group("major")), match.group("minor"))
    if base not in ARCH_TOOLKIT:
        raise ArchError(
            "unknown compute capability %r; known: %s" % (base, ", ".join(sorted(ARCH_TOOLKIT, key=Version)))
        )
    return base, match.group("suffix")


def compute_name(arch):
    """'12.0' -> 'compute_120' (the name nvcc --list-gpu-arch prints)."""
    base, _suffix = parse_arch(arch)
    return "compute_" + base.replace(".", "")


def min_toolkit(arch):
    """The first CUDA toolkit (major.minor) that builds this target, suffix included."""
    base, suffix = parse_arch(arch)
    need = ARCH_TOOLKIT[base][0]
    for extra in (SUFFIX_MIN_TOOLKIT.get(suffix), SUFFIX_ARCH_MIN_TOOLKIT.get((base, suffix))):
        if extra and Version(extra) > Version(need):
            need = extra
    return need


def toolkit_problems(archs, toolkit_version):
    """Return one human-readable message per target that `toolkit_version` cannot build.

    An empty list means every target is buildable. Malformed input is reported, not raised, so a
    preflight can show every problem at once.
    """
    problems = []
    version = str(toolkit_version).strip()
    if not TOOLKIT_VERSION_RE.match(version):
        return ["CUDA toolkit version %r is not a full X.Y.Z version (e.g. 13.0.2)" % (toolkit_version,)]
    if not isinstance(archs, (list, tuple)):
        return ["target archs must be a list such as ['12.0'], got %r" % (archs,)]
    have = Version(version)
    for arch in archs:
        try:
            base, suffix = parse_arch(arch)
        except ArchError as exc:
            problems.append(str(exc))
            continue
        need = min_toolkit(arch)
        if have < Version(need):
            problems.append(
                "target %s needs CUDA toolkit >= %s, but %s was requested" % (arch, need, version)
            )
        gone = ARCH_TOOLKIT[base][1]
        if gone and have >= Version(gone):
            problems.append(
                "target %s is not built by CUDA toolkit >= %s (requested %s)" % (arch, gone, version)
            )
    return problems
