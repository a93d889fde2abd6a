# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fleet rollout (roles/rollout) and the fleet report (rollout and site);
the logic lives in plugins/module_utils/rollout.py and, for the workers' identity at the model
gateway, plugins/module_utils/gateway.py; the gateway role's preflight check in
plugins/module_utils/role_checks.py. Each filter is documented in plugins/filter/<name>.yml; the
wrappers here only turn the module_utils' errors into Ansible's filter error."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils import gateway, rollout
from ansible_collections.blackwell.sglang.plugins.module_utils.gateway import admin_key_of
from ansible_collections.blackwell.sglang.plugins.module_utils.rollout import (
    drain_gone_problems, drain_load_problems, fleet_report_row, gateway_keys, pending_registrations, registrations, rollout_gateways, rollout_problems,
    undrain_problems)
from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import sglang_gateway_problems


def gateway_workers_of(entries, urls):
    """The entries of the gateway's GET /workers list that are one of `urls`, in any spelling and
    every data-parallel rank (module_utils/gateway.py; names are resolved on the controller)."""
    try:
        return gateway.workers_of(entries, urls)
    except gateway.WorkerURLError as exc:
        raise AnsibleFilterError("gateway_workers_of: %s" % exc) from exc


def gateway_calls(results, urls, action):
    """The worker API calls of a drain step (remove or register) from the gateways' GET /workers
    answers (module_utils/rollout.py, ``gateway_calls``)."""
    try:
        return rollout.gateway_calls(results, urls, action)
    except (gateway.WorkerURLError, ValueError) as exc:
        raise AnsibleFilterError("gateway_calls: %s" % exc) from exc


def gateway_missing_workers(urls, entries):
    """The URLs of `urls` that the gateway's GET /workers list holds in no spelling."""
    try:
        return gateway.missing_workers(urls, entries)
    except gateway.WorkerURLError as exc:
        raise AnsibleFilterError("gateway_missing_workers: %s" % exc) from exc


def gateway_inventory_worker_urls(hostvars_by_host):
    """The worker URLs of ``{host: hostvars}``: ``http://<address>:<port>`` per active service in each
    host's ``sglang_services_endpoints`` (module_utils/gateway.py, ``inventory_worker_urls``); the
    gateway role's manifest and the rollout's drain of one host both name workers through it."""
    try:
        return gateway.inventory_worker_urls(hostvars_by_host)
    except (gateway.MissingEndpointsError, gateway.WorkerURLError) as exc:
        raise AnsibleFilterError("gateway_inventory_worker_urls: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {
            "rollout_problems": rollout_problems,
            "rollout_gateways": rollout_gateways,
            "rollout_gateway_keys": gateway_keys,
            "drain_gone_problems": drain_gone_problems,
            "drain_load_problems": drain_load_problems,
            "gateway_undrain_problems": undrain_problems,
            "gateway_calls": gateway_calls,
            "gateway_registrations": registrations,
            "gateway_pending_registrations": pending_registrations,
            "fleet_report_row": fleet_report_row,
            "gateway_workers_of": gateway_workers_of,
            "gateway_missing_workers": gateway_missing_workers,
            "gateway_inventory_worker_urls": gateway_inventory_worker_urls,
            "sglang_gateway_problems": sglang_gateway_problems,
            "gateway_admin_key": admin_key_of,
        }
