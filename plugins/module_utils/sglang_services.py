# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang services this collection manages: the one home of their names and labels.

Each runs as the unit ``sglang-<name>.service``. The sglang_services filters, the
``blackwell.sglang.sglang_services`` lookup (the role's list) and the unit template read this.
"""

from __future__ import annotations

# name -> what the unit's Description= calls it; in the order the role handles them.
SERVICES = {
    "eagle3": "EAGLE-3 speculative decoding",
    "autoregressive": "autoregressive",
    "dflash": "DFlash speculative decoding",
}


def unit_name(name):
    """'eagle3' -> 'sglang-eagle3.service'."""
    return "sglang-%s.service" % name
