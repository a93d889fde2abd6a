# Added by the blackwell.sglang collection (role flashinfer) to FlashInfer >= 0.2.0, < 0.3.1.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""FLASHINFER_CUDA_ARCH_LIST for FlashInfer releases that do not read it.

FlashInfer 0.2.x-0.3.0 take their CUDA targets from torch's ``_get_cuda_arch_flags()``
(``TORCH_CUDA_ARCH_LIST``, else the visible GPUs clamped to what torch was built for): its JIT
compile flags, its cache dir name and ``check_cuda_arch()`` all come from there. A host without a
GPU gets no target at all, a torch that does not know sm120/sm103 rejects them, and a GPU may get a
plain ``compute_120`` without the arch-specific features the kernels need.

``flashinfer/__init__.py`` imports this module first (one line the role adds, marked
``blackwell.sglang``). It makes torch's function, for this process, answer from
``FLASHINFER_CUDA_ARCH_LIST`` (the variable FlashInfer itself reads from 0.3.1 on, e.g. ``12.0a``
or ``12.0a 10.3a``) when that is set; unset, torch's own function runs unchanged.

What it can expect fails as one exception with one line that says what to change, never an error of
its own making: an entry it cannot read is a ValueError (FlashInfer's callers, and the collection's
pre-warm, report it in one line); a torch without the function is an ImportError of
``import flashinfer``.
"""

import os
import re

import torch.utils.cpp_extension as _cpp_ext

_ARCH = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")
# Imported twice (a reload): keep wrapping torch's original, not this wrapper.
_torch_get_cuda_arch_flags = getattr(_cpp_ext, "_blackwell_sglang_original", None) or getattr(
    _cpp_ext, "_get_cuda_arch_flags", None)
if _torch_get_cuda_arch_flags is None:
    raise ImportError("blackwell.sglang arch patch: this torch has no torch.utils.cpp_extension._get_cuda_arch_flags "
                      "to answer from FLASHINFER_CUDA_ARCH_LIST; install FlashInfer >= 0.3.1, which reads the list "
                      "itself (set sglang_venv_flashinfer_version, re-run site.yml)")


def _get_cuda_arch_flags(cflags=None):
    listed = os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if not listed:
        return _torch_get_cuda_arch_flags(cflags)
    # Same contract as torch's: arch flags already in cflags win.
    for flag in cflags or ():
        if "TORCH_EXTENSION_NAME" not in flag and "arch" in flag:
            return []
    flags = []
    for arch in listed:
        match = _ARCH.match(arch)
        if not match:
            raise ValueError("FLASHINFER_CUDA_ARCH_LIST: cannot read %r (expected e.g. 12.0a or 10.3a): fix it where "
                             "it is set (the flashinfer role writes it from flashinfer_cuda_archs; re-run site.yml)" % arch)
        number = "".join(match.group(1, 2, 3))
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (number, number))
        if match.group(4):
            flags.append("-gencode=arch=compute_%s,code=compute_%s" % (number, number))
    return flags


_cpp_ext._blackwell_sglang_original = _torch_get_cuda_arch_flags
_cpp_ext._get_cuda_arch_flags = _get_cuda_arch_flags
