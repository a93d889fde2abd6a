# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang services this collection manages: the one home of their names and labels.

Each runs as the unit ``sglang-<name>.service``. The sglang_services filters, the
``blackwell.sglang.sglang_services`` lookup (the role's list) and the unit template read this; the
sglang_services and GPU checks parse ``cuda_visible_devices`` with ``gpu_set``.
"""

from __future__ import annotations

import re

# name -> what the unit's Description= calls it; in the order the role handles them.
SERVICES = {
    "eagle3": "EAGLE-3 speculative decoding",
    "autoregressive": "autoregressive",
    "dflash": "DFlash speculative decoding",
}


def unit_name(name):
    """'eagle3' -> 'sglang-eagle3.service'."""
    return "sglang-%s.service" % name


def gpu_set(value):
    """CUDA_VISIBLE_DEVICES setting -> list of ints in the order given (CUDA numbers the devices in
    that order); [] means all GPUs. ValueError if bad."""
    if value in (None, "", []):
        return []
    items = value if isinstance(value, list) else re.split(r"\s*,\s*", str(value).strip())
    devices = []
    for item in items:
        if isinstance(item, bool) or not re.match(r"^\d+$", str(item).strip()):
            raise ValueError("%r is not a GPU index" % (item,))
        devices.append(int(str(item).strip()))
    if len(set(devices)) != len(devices):
        raise ValueError("%r names a GPU twice" % (value,))
    return devices
