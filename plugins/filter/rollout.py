# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fleet rollout (playbooks/rollout.yml) and the fleet report (rollout and site);
the logic lives in plugins/module_utils/rollout.py and, for the workers' identity at the model
gateway, plugins/module_utils/gateway.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils import gateway
from ansible_collections.blackwell.sglang.plugins.module_utils.rollout import (
    fleet_report_row, rollout_problems)


def gateway_workers_of(entries, urls):
    """The entries of the gateway's GET /workers list that are one of `urls`, in any spelling and
    every data-parallel rank (module_utils/gateway.py; names are resolved on the controller)."""
    try:
        return gateway.workers_of(entries, urls)
    except gateway.WorkerURLError as exc:
        raise AnsibleFilterError("gateway_workers_of: %s" % exc) from exc


def gateway_missing_workers(urls, entries):
    """The URLs of `urls` that the gateway's GET /workers list holds in no spelling."""
    try:
        return gateway.missing_workers(urls, entries)
    except gateway.WorkerURLError as exc:
        raise AnsibleFilterError("gateway_missing_workers: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {
            "rollout_problems": rollout_problems,
            "fleet_report_row": fleet_report_row,
            "gateway_workers_of": gateway_workers_of,
            "gateway_missing_workers": gateway_missing_workers,
        }
