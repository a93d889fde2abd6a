# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the nvidia-smi output that the nvidia_gpu_info module reads.

Pure Python: no I/O. The module runs the commands; these functions only read their text.

- ``QUERY_GPU_ARGS``: the per-GPU inventory, one CSV line per GPU, e.g.
  ``0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-1b2c..., 12.0, 97887, 580.95.05``.
- ``TOPO_ARGS``: the link matrix between GPUs (``NV18`` = 18 bonded NVLinks; ``PIX``, ``PXB``,
  ``PHB``, ``NODE``, ``SYS`` = PCIe and host paths).
- ``driver_error``: the messages nvidia-smi prints instead of data when the driver is missing,
  not loaded, mismatched with its library, or sees no GPU.
"""

from __future__ import annotations

import re

QUERY_FIELDS = ("index", "name", "uuid", "compute_cap", "memory.total", "driver_version")
QUERY_GPU_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
TOPO_ARGS = ("topo", "-m")
# The loaded kernel module's own line: its flavour (open or proprietary) and version.
NVRM_VERSION_FILE = "/proc/driver/nvidia/version"
# NVRM_VERSION_FILE, first line:
#   open:        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (...)"
#   proprietary: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec  8 11:22:45 UTC 2025"
# (the open string is built in NVIDIA/open-gpu-kernel-modules, src/nvidia/Makefile).
NVRM_RE = re.compile(r"NVRM version:\s+NVIDIA UNIX (?P<open>Open )?(?:\S+ )?Kernel Module(?: for \S+)?\s+(?P<version>[0-9]+(?:\.[0-9]+)+)")


# Known failure texts, matched case-insensitively anywhere in the output.
DRIVER_ERROR_PATTERNS = (
    re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver[^\n]*", re.I),
    re.compile(r"No devices were found[^\n]*", re.I),
    re.compile(r"Failed to initialize NVML[^\n]*", re.I),
    re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so[^\n]*", re.I),
    re.compile(r"Unable to determine the device handle for GPU[^\n]*", re.I),
    re.compile(r"Field \"[^\"]+\" is not a valid field to query[^\n]*", re.I),
    re.compile(r"NVML library version: [^\n]*", re.I),
)

NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]", "")

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
CC_RE = re.compile(r"^[0-9]{1,2}\.[0-9]$")
GPU_LABEL_RE = re.compile(r"^GPU(?P<index>[0-9]+)$")
NVLINK_RE = re.compile(r"^NV[0-9]+$")
PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")  # SOC: older drivers' name for SYS

INTERCONNECT_NVLINK = "nvlink"
INTERCONNECT_PCIE = "pcie"
INTERCONNECT_NONE = "none"


class NvidiaSmiParseError(ValueError):
    """nvidia-smi printed something these parsers do not understand."""


def driver_error(text):
    """Return the driver error lines nvidia-smi printed (joined with a space), or None.

    ``text`` is stdout and stderr together; nvidia-smi prints most of these to stdout.
    """
    found = []
    for pattern in DRIVER_ERROR_PATTERNS:
        for match in pattern.finditer(text or ""):
            line = match.group(0).strip()
            if line not in found:
                found.append(line)
    if not found:
        return None
    # Keep the order in which they appear in the output.
    return " ".join(sorted(found, key=(text or "").find))


def _optional(value):
    return None if value.strip() in NOT_AVAILABLE else value.strip()


def _optional_int(value, field, line):
    value = _optional(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise NvidiaSmiParseError("%s %r is not a whole number in line %r" % (field, value, line)) from None


def parse_query_gpu(text):
    """Parse ``nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,driver_version
    --format=csv,noheader,nounits`` output into a list of dicts sorted by index:

    ``{'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-...', 'compute_capability': '9.0',
    'memory_mib': 143771, 'driver_version': '570.172.08'}``

    Fields nvidia-smi reports as ``[N/A]`` / ``[Not Supported]`` (memory.total on GB10's unified
    memory) become None. Blank lines are skipped. Raises NvidiaSmiParseError on anything else.
    """
    gpus = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < len(QUERY_FIELDS):
            raise NvidiaSmiParseError(
                "expected %d comma-separated fields (%s), got %r" % (len(QUERY_FIELDS), ", ".join(QUERY_FIELDS), line)
            )
        # The name is the only field that could hold a comma; the others are fixed-format.
        index, uuid, compute_cap, memory, driver = cells[0], cells[-4], cells[-3], cells[-2], cells[-1]
        name = ", ".join(cells[1:-4])
        gpu_index = _optional_int(index, "index", line)
        if gpu_index is None:
            raise NvidiaSmiParseError("GPU index missing in line %r" % (line,))
        compute_cap = _optional(compute_cap)
        if compute_cap is not None and not CC_RE.match(compute_cap):
            raise NvidiaSmiParseError("compute_cap %r is not of the form M.m in line %r" % (compute_cap, line))
        gpus.append(
            {
                "index": gpu_index,
                "name": name,
                "uuid": _optional(uuid),
                "compute_capability": compute_cap,
                "memory_mib": _optional_int(memory, "memory.total", line),
                "driver_version": _optional(driver),
            }
        )
    return sorted(gpus, key=lambda gpu: gpu["index"])


def parse_topology(text):
    """Parse ``nvidia-smi topo -m`` into ``{0: {1: 'NV18', ...}, 1: {...}}`` (GPU index -> peer -> link).

    Only the GPU-to-GPU cells are kept: NIC rows and columns, CPU/NUMA affinity and the legend
    are ignored. The diagonal (``X``) is left out. Works with tab- or space-separated columns.
    Raises NvidiaSmiParseError when no GPU header line is found or a row is short.
    """
    columns = None
    matrix = {}
    for line in (text or "").splitlines():
        tokens = ANSI_ESCAPE.sub("", line).split()
        label = GPU_LABEL_RE.match(tokens[0]) if tokens else None
        if not label:
            continue  # NIC rows, the legend, blank lines
        if columns is None:
            # The header: a blank cell, then GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA Affinity ...
            if len(tokens) > 1 and tokens[1] == "X":
                raise NvidiaSmiParseError("nvidia-smi topo -m output has a GPU row before its header line")
            columns = []
            for token in tokens:
                column = GPU_LABEL_RE.match(token)
                if not column:
                    break
                columns.append(int(column.group("index")))
            continue
        cells = tokens[1:1 + len(columns)]
        if len(cells) < len(columns):
            raise NvidiaSmiParseError("topology row %r has fewer cells than GPU columns" % (line.strip(),))
        index = int(label.group("index"))
        matrix[index] = dict((peer, link) for peer, link in zip(columns, cells) if peer != index)
    if columns is None:
        raise NvidiaSmiParseError("no GPU header line (GPU0 GPU1 ...) in nvidia-smi topo -m output")
    return matrix


def interconnect(matrix):
    """Classify a topology from ``parse_topology``: 'nvlink', 'pcie' or 'none'.

    'nvlink' only when every pair of GPUs is joined by NVLink (NV#, directly or through NVSwitch);
    'pcie' when any pair goes over PCIe or the host (PIX, PXB, PHB, NODE, SYS); 'none' for fewer
    than two GPUs. Raises NvidiaSmiParseError for a link type it does not know.
    """
    if len(matrix) < 2:
        return INTERCONNECT_NONE
    links = [link for peers in matrix.values() for link in peers.values()]
    unknown = sorted(set(link for link in links if not NVLINK_RE.match(link) and link not in PCIE_LINKS))
    if unknown:
        raise NvidiaSmiParseError("unknown GPU link type(s) in nvidia-smi topo -m: %s" % ", ".join(unknown))
    if links and all(NVLINK_RE.match(link) for link in links):
        return INTERCONNECT_NVLINK
    return INTERCONNECT_PCIE


def parse_nvrm_version(text):
    """/proc/driver/nvidia/version -> {'kernel_module': 'open'|'proprietary'|None, 'driver_version': str|None}."""
    match = NVRM_RE.search(text or "")
    if not match:
        return {"kernel_module": None, "driver_version": None}
    return {"kernel_module": "open" if match.group("open") else "proprietary", "driver_version": match.group("version")}
