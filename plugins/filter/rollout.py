# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fleet rollout (playbooks/rollout.yml) and the fleet report (rollout and site);
the logic lives in plugins/module_utils/rollout.py."""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils.rollout import (
    fleet_report_row, rollout_problems)


class FilterModule:
    def filters(self):
        return {
            "rollout_problems": rollout_problems,
            "fleet_report_row": fleet_report_row,
        }
