# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' shared input checks (module_utils/preflight.py) as filters over {variable: value}
dicts, so a preflight names every bad variable at once:

    {{ {'sglang_node_home': sglang_node_home} | blackwell.sglang.path_problems(dedicated=true) }}
"""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import (
    bool_problem,
    dedicated_dir_problem,
    env_file_problem,
    path_problem,
)


def _checked(mapping, check):
    return [problem for problem in (check(name, value) for name, value in mapping.items()) if problem]


def path_problems(mapping, dedicated=False):
    """{variable: path} -> one sentence per path that is not absolute and normalised; with
    `dedicated`, also per directory the system shares (the roles own or re-group these)."""
    return _checked(mapping, dedicated_dir_problem if dedicated else path_problem)


def env_file_problems(mapping):
    """{variable: file} -> one sentence per env file whose directory is not one the role may own."""
    return _checked(mapping, env_file_problem)


def bool_problems(mapping):
    """{variable: value} -> one sentence per value that is not a boolean as operators write one."""
    return _checked(mapping, bool_problem)


class FilterModule:
    def filters(self):
        return {
            "path_problems": path_problems,
            "env_file_problems": env_file_problems,
            "bool_problems": bool_problems,
        }
