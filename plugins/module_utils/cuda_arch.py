# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA compute-capability targets and the toolkit versions that can build them.

Shared by the controller-side filters (role preflight) and the modules. Pure Python: no I/O.
"""

from __future__ import annotations

import re

# The one place the collection imports packaging: the controller (ansible-core needs it) and the
# SGLang venvs always have it; a bare host interpreter running a module falls back to Ansible's copy.
try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - a bare target interpreter
    from ansible.module_utils.compat.version import LooseVersion as Version  # type: ignore

    InvalidVersion = ValueError  # type: ignore

ARCH_RE = re.compile(r"^(?P<major>[0-9]{1,2})\.(?P<minor>[0-9])(?P<suffix>[af]?)$")
TOOLKIT_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
# `nvcc --version`: "Cuda compilation tools, release 13.0, V13.0.88".
NVCC_RELEASE_RE = re.compile(r"release ([0-9]+\.[0-9]+),")

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


def arch_key(base):
    """Sort key of a compute capability 'M.m' (no suffix): '12.0' -> (12, 0), so 9.0 < 10.3 < 12.0."""
    major, minor = base.split(".")
    return int(major), int(minor)


def target_key(target):
    """Sort key of a target 'M.m[a|f]' (known to the table or not): '12.0f' -> ((12, 0), 'f')."""
    match = ARCH_RE.match(str(target).strip())
    if not match:
        raise ArchError("target %r is not of the form M.m[a|f]" % (target,))
    return (int(match.group("major")), int(match.group("minor"))), match.group("suffix")


def nvcc_release(text):
    """The release (M.m) in `nvcc --version` output, e.g. '13.0'; None when there is none."""
    match = NVCC_RELEASE_RE.search(text or "")
    return match.group(1) if match else None


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
            "unknown compute capability %r; known: %s" % (base, ", ".join(sorted(ARCH_TOOLKIT, key=arch_key)))
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


def parse_version(value, what):
    """A version (PEP 440 with packaging) of `what` ('CUDA', 'FlashInfer'); ArchError when empty or not one."""
    text = str(value).strip() if value is not None else ""
    if not text:
        raise ArchError("%s version is empty" % what)
    try:
        return Version(text)
    except (InvalidVersion, TypeError, ValueError) as exc:
        raise ArchError("%s version %r is not a version number" % (what, value)) from exc


def toolkit_gap(arch, toolkit):
    """Why CUDA `toolkit` (a version: '12.8', '13.0.2') cannot build `arch` (suffix included).

    Returns (need, gone): `need` is the first toolkit that builds it when `toolkit` is older, `gone`
    the first that no longer does when `toolkit` is that or newer; each None when it does not apply,
    so (None, None) means buildable. Raises ArchError for a malformed or unknown arch. The one home
    of this check: the toolkit preflight, FlashInfer's target rendering and the JIT pre-warm use it.
    """
    base, _suffix = parse_arch(arch)
    have = Version(str(toolkit).strip())
    need = min_toolkit(arch)
    gone = ARCH_TOOLKIT[base][1]
    return (need if have < Version(need) else None), (gone if gone and have >= Version(gone) else None)


def toolkit_problems(archs, toolkit_version, name="target archs"):
    """Return one human-readable message per target that `toolkit_version` cannot build.

    An empty list means every target is buildable. Malformed input is reported, not raised, so a
    preflight can show every problem at once; `name` (the operator's variable) prefixes a malformed list
    or entry.
    """
    problems = []
    version = str(toolkit_version)
    if not TOOLKIT_VERSION_RE.fullmatch(version):  # not stripped: the version names a directory
        return ["CUDA toolkit version %r is not a full X.Y.Z version (e.g. 13.0.2)" % (toolkit_version,)]
    if not isinstance(archs, (list, tuple)):
        return ["%s must be a list such as ['12.0'], got %r" % (name, archs)]
    for arch in archs:
        try:
            need, gone = toolkit_gap(arch, version)
        except ArchError as exc:
            problems.append("%s: %s" % (name, exc))
            continue
        if need:
            problems.append(
                "target %s needs CUDA toolkit >= %s, but %s was requested" % (arch, need, version)
            )
        if gone:
            problems.append(
                "target %s is not built by CUDA toolkit >= %s (requested %s)" % (arch, gone, version)
            )
    return problems


def gpu_coverage_problems(gpu_ccs, archs, name):
    """The GPUs found (bare compute capabilities, nvidia_gpu_info's) that no target of `archs`
    (M.m[a|f], the list variable `name`) is for, as one sentence; [] when every GPU is covered or
    there are no GPUs. Malformed targets are skipped here (toolkit_problems reports them)."""
    bases = set()
    for arch in archs if isinstance(archs, (list, tuple)) else ():
        try:
            bases.add(parse_arch(arch)[0])
        except ArchError:
            continue
    missing = sorted({str(cc).strip() for cc in gpu_ccs or ()} - bases, key=lambda cc: target_key(cc)[0])
    if not missing:
        return []
    return ["%s [%s] does not cover the GPUs found on this host (compute capability %s); set sglang_node_gpu_archs "
            "(or %s) for this host's group to the GPUs' compute capabilities"
            % (name, ", ".join(str(arch) for arch in archs or ()), ", ".join(missing), name)]
