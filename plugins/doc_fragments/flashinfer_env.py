# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The units' environment files, as the FlashInfer modules take them (flashinfer_jit_cache, flashinfer_jit_artifact)."""

    DOCUMENTATION = r"""
options:
  env_file:
    description:
      - systemd-style environment files (C(KEY=VALUE) lines) applied in order before FlashInfer is
        imported, a later one winning as with the units' C(EnvironmentFile=) lines; normally the two
        the C(flashinfer) role writes for the units, C(/etc/sglang/flashinfer.env) (targets,
        C(CUDA_HOME)) and the venv's C(<venv>/venv.env) (C(PATH) with its C(bin), its kernel caches).
      - A single path is a list of one.
    type: list
    elements: path
"""
