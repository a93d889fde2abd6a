# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_services role's filters: settings -> SGLang argv, input problems, GPU sharing
(Conflicts=), endpoints and systemd ExecStart= quoting. The logic and its tests live in
plugins/module_utils/sglang_services.py and plugins/module_utils/role_checks.py; each filter is
documented in plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import (
    sglang_services_custom_all_reduce,
    sglang_services_gpu_problems,
    sglang_services_input_problems,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import (  # noqa: F401 (the tests' names)
    extra_argv,
    gpu_set,
    sglang_service_argv,
    sglang_services_active_list,
    sglang_services_argvs,
    sglang_services_conflicts,
    sglang_services_endpoints,
    sglang_services_gpu_sets,
    sglang_services_port_problems,
    sglang_services_problems,
    systemd_exec,
)


class FilterModule:
    def filters(self):
        return {
            "sglang_services_port_problems": sglang_services_port_problems,
            "sglang_service_argv": sglang_service_argv,
            "sglang_extra_argv": extra_argv,
            "sglang_services_argvs": sglang_services_argvs,
            "sglang_services_problems": sglang_services_problems,
            "sglang_services_input_problems": sglang_services_input_problems,
            "sglang_services_gpu_problems": sglang_services_gpu_problems,
            "sglang_services_custom_all_reduce": sglang_services_custom_all_reduce,
            "sglang_services_conflicts": sglang_services_conflicts,
            "sglang_services_active_list": sglang_services_active_list,
            "sglang_services_endpoints": sglang_services_endpoints,
            "sglang_services_gpu_sets": sglang_services_gpu_sets,
            "sglang_gpu_set": gpu_set,
            "systemd_exec": systemd_exec,
        }
