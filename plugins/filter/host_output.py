# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checked read of a host command's output (module_utils/host_output.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.host_output import read


def host_output(result, command, kind, variable, keys=None):
    """registered result | host_output(command, kind, variable, keys) -> {value, problem}."""
    try:
        return read(result, command, kind, variable, keys or ())
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"host_output": host_output}
