# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which targets FlashInfer JIT-compiles for, and how to spell them in FLASHINFER_CUDA_ARCH_LIST.

Three steps, each a pure function (no I/O):

1. ``select_archs``: the GPUs found on the host decide the targets; without GPUs (an image build,
   a CI runner) the inventory list ``flashinfer_cuda_archs`` does. When both are present they
   must name the same compute capabilities, or the host is misconfigured.
2. ``render_archs``: spell each target for the installed FlashInfer and CUDA toolkit. A bare
   ``12.0`` becomes ``12.0f`` (family target, CUDA >= 12.9 and FlashInfer >= 0.6.7) or ``12.0a``;
   Hopper and later get the arch-specific ``a`` target; a suffix the operator wrote is kept.
   Older FlashInfer releases (0.4.x) build a plain ``compute_120`` for ``12.0``, which lacks the
   Blackwell-only instructions, so the suffix is always written out here.
3. ``cache_arch_dir``: the arch component of FlashInfer's JIT cache directory for that list.
"""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import (
    ArchError,
    Version,
    arch_key,
    parse_arch,
    parse_version,
    target_key,
    toolkit_gap,
)

# The first FlashInfer release whose JIT builds the sm120 family target ("12.0f").
FLASHINFER_FAMILY_SM120 = "0.6.7"
# ... and the family target itself needs this toolkit (cuda_arch.SUFFIX_MIN_TOOLKIT).
CUDA_FAMILY_TARGETS = "12.9"
# From Hopper on, FlashInfer's kernels need the arch-specific ("a") target, e.g. wgmma on sm90.
ARCH_SPECIFIC_FROM_MAJOR = 9


def _as_list(value, what):
    """None/empty -> []; a list/tuple -> list of stripped strings; anything else is an error."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ArchError("%s must be a list such as ['12.0'], got %r" % (what, value))
    return [str(item).strip() for item in value]


def select_archs(gpu_ccs, inventory_archs):
    """Return the FlashInfer targets for one host, sorted ascending and without duplicates.

    ``gpu_ccs``: the compute capabilities of the GPUs found (``nvidia_gpu_info``'s
    ``compute_capabilities``, e.g. ``['12.0']``); empty or None when the host has none.
    ``inventory_archs``: the operator's ``flashinfer_cuda_archs`` (e.g. ``['12.0']``); empty or
    None when unset.

    Each entry is a base arch ``M.m``. An inventory entry that the operator wrote with a suffix
    (``12.0a``) keeps it, so that ``render_archs`` takes it as written; its base is what is compared
    with the GPUs. Raises ArchError when the two lists name different compute capabilities, when
    the inventory names one base twice with different suffixes, or when neither list has anything.
    """
    found = set()
    for cc in _as_list(gpu_ccs, "GPU compute capabilities"):
        base, suffix = parse_arch(cc)
        if suffix:
            raise ArchError("GPU compute capability %r must be a bare M.m such as '12.0'" % (cc,))
        found.add(base)
    gpus = sorted(found, key=arch_key)

    wanted = {}  # base -> entry as the operator wrote it (normalised: '12.0', '12.0a')
    for entry in _as_list(inventory_archs, "flashinfer_cuda_archs"):
        base, suffix = parse_arch(entry)
        spelled = base + suffix
        if wanted.setdefault(base, spelled) != spelled:
            raise ArchError(
                "flashinfer_cuda_archs names %s twice, as %s and %s; keep one" % (base, wanted[base], spelled)
            )
    inventory = sorted(wanted, key=arch_key)

    if gpus and inventory and gpus != inventory:
        raise ArchError(
            "flashinfer_cuda_archs %s does not match the GPUs found on this host (compute capability %s); "
            "fix the inventory or leave flashinfer_cuda_archs unset to use the GPUs"
            % (", ".join(inventory), ", ".join(gpus))
        )
    if inventory:
        return [wanted[base] for base in inventory]
    if gpus:
        return gpus
    raise ArchError(
        "no FlashInfer target arch: no NVIDIA GPU was found on this host and flashinfer_cuda_archs is not set "
        "(set it, e.g. ['12.0'] for RTX PRO 6000 or ['10.3'] for B300)"
    )


def _default_suffix(base, cuda, flashinfer):
    """The suffix a bare base arch gets for this toolkit and FlashInfer."""
    if base == "12.0":
        if cuda >= Version(CUDA_FAMILY_TARGETS) and flashinfer >= Version(FLASHINFER_FAMILY_SM120):
            return "f"
        return "a"
    if arch_key(base)[0] >= ARCH_SPECIFIC_FROM_MAJOR:
        return "a"
    return ""


def render_archs(archs, cuda_version, flashinfer_version):
    """Spell targets for FLASHINFER_CUDA_ARCH_LIST, e.g. (['12.0'], '13.0', '0.7.2') -> ['12.0f'].

    ``cuda_version``: the nvcc release (``12.8``, ``12.9.1``, ``13.0.88``).
    ``flashinfer_version``: the installed flashinfer-python (``0.6.8``, ``0.4.0``).

    Bare ``12.0`` renders ``12.0f`` when CUDA >= 12.9 and FlashInfer >= 0.6.7, else ``12.0a``;
    other archs from 9.0 on render ``M.ma`` (``10.3a``, ``12.1a``, ``9.0a``); older ones stay plain.
    A suffixed entry is taken as written. Every rendered target is then checked against the toolkit;
    ArchError lists each one it cannot build, e.g. ``10.3a needs CUDA >= 12.9; nvcc is 12.8``.
    The result is sorted ascending, without duplicates.
    """
    entries = _as_list(archs, "target archs")
    if not entries:
        raise ArchError("no target arch to render")
    cuda = parse_version(cuda_version, "CUDA")
    flashinfer = parse_version(flashinfer_version, "FlashInfer")
    cuda_text = str(cuda_version).strip()

    rendered = []
    problems = []
    for entry in entries:
        base, suffix = parse_arch(entry)
        target = base + (suffix or _default_suffix(base, cuda, flashinfer))
        need, gone = toolkit_gap(target, cuda_text)
        if need:
            problems.append("%s needs CUDA >= %s; nvcc is %s" % (target, need, cuda_text))
        if gone:
            problems.append("%s is not built by CUDA >= %s; nvcc is %s" % (target, gone, cuda_text))
        if target not in rendered:
            rendered.append(target)
    if problems:
        raise ArchError("\n".join(problems))
    return sorted(rendered, key=target_key)


def cache_arch_dir(rendered):
    """FlashInfer's cache directory component for these targets: ['12.0f'] -> '120f'.

    FlashInfer joins ``<major><minor+suffix>`` of each target with ``_``, sorted by
    (major, minor+suffix), e.g. ['12.0f', '10.3a'] -> '103a_120f'.
    """
    entries = _as_list(rendered, "rendered archs")
    if not entries:
        raise ArchError("no rendered target arch to name a cache directory for")
    parts = set()
    for entry in entries:
        base, suffix = parse_arch(entry)
        major, minor = base.split(".")
        parts.add((int(major), minor + suffix))
    return "_".join("%d%s" % part for part in sorted(parts))


def flashinfer_targets(gpu_ccs, inventory_archs, cuda_version, flashinfer_version):
    """{'archs': ['12.0f'], 'cache_arch': '120f', 'source': 'gpus'|'inventory', 'error': None}: the
    FLASHINFER_CUDA_ARCH_LIST for these GPUs (or, without GPUs, the inventory's archs), this CUDA
    and this FlashInfer.

    Errors (inventory disagreeing with the GPUs, a toolkit too old for a target, nothing to target)
    are returned in 'error', so a preflight can fail with that text before anything is compiled.
    """
    try:
        selected = select_archs(gpu_ccs, inventory_archs)
        archs = render_archs(selected, cuda_version, flashinfer_version)
        return {
            "archs": archs,
            "cache_arch": cache_arch_dir(archs),
            "source": "gpus" if gpu_ccs else "inventory",
            "error": None,
        }
    except ArchError as exc:
        return {"archs": [], "cache_arch": None, "source": None, "error": str(exc)}


def flashinfer_select_problems(gpu_ccs, inventory_archs):
    """The targets check that needs nothing installed (no nvcc, no FlashInfer): the GPUs found and
    flashinfer_cuda_archs name the same compute capabilities, and there is something to target.
    [] when good, else [the sentence] (select_archs)."""
    try:
        select_archs(gpu_ccs, inventory_archs)
    except ArchError as exc:
        return [str(exc)]
    return []
