# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pip_index_args (module_utils/pip_index.py): index settings -> the arguments pip and uv take for
them. Documented in plugins/filter/pip_index_args.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils.pip_index import index_args


def pip_index_args(index_url, extra_index_urls=None):
    """module_utils/pip_index.index_args, its TypeError as Ansible's filter error."""
    try:
        return index_args(index_url, extra_index_urls)
    except TypeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"pip_index_args": pip_index_args}
