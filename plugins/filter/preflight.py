# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' shared input checks (module_utils/preflight.py) as filters over {variable: value}
dicts, so a preflight names every bad variable at once, and the sglang_node role's check of the
shared paths (module_utils/role_checks.py):

    {{ {'kernel_cache_dir': kernel_cache_dir} | blackwell.sglang.path_problems(dedicated=true) }}

Each filter is documented in plugins/filter/<name>.yml.
"""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import bool_problems, env_file_problems, path_problems
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import sglang_node_problems, sglang_venv_problems


class FilterModule:
    def filters(self):
        return {
            "path_problems": path_problems,
            "env_file_problems": env_file_problems,
            "bool_problems": bool_problems,
            "sglang_node_problems": sglang_node_problems,
            "sglang_venv_problems": sglang_venv_problems,
        }
