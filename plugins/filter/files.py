# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the files the roles render (module_utils/in_place.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.in_place import InPlaceError, stale_paths


def files_stale(wanted, found):
    """wanted (path, checksum, owner, group, mode) | files_stale(find_result.files) -> the paths
    whose template task must run."""
    try:
        return stale_paths(wanted, found)
    except InPlaceError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"files_stale": files_stale}
