# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet_report action: writes the fleet report on the controller (documentation in
plugins/modules/fleet_report.py; the logic in plugins/module_utils/rollout.py)."""

from __future__ import annotations

import datetime

from ansible.plugins.action import ActionBase

from ansible_collections.blackwell.sglang.plugins.module_utils.rollout import write_fleet_report

ARGUMENT_SPEC = {
    "dir": {"type": "path", "required": True},
    "run_id": {"type": "str"},
    "title": {"type": "str", "default": "Fleet report"},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "rows": {"type": "list", "elements": "raw", "default": []},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hosts, rows = args["hosts"], args["rows"] or []
        if len(rows) not in (0, len(hosts)):
            result.update(failed=True, msg="fleet_report: %d rows for %d hosts; give one row ({} for none) per host"
                          % (len(rows), len(hosts)))
            return result
        if any(not isinstance(row, dict) for row in rows):
            result.update(failed=True, msg="fleet_report: every row must be a dict (a rollout_report_row fact, or {})")
            return result
        run_id = args["run_id"] or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        write = not self._task.check_mode
        try:
            document, markdown, files = write_fleet_report(
                args["dir"], run_id, args["title"], list(zip(hosts, rows or [{}] * len(hosts))), write=write)
        except OSError as exc:
            result.update(failed=True, msg="fleet_report: cannot write the report in %s on the controller: %s. "
                          "Set rollout_report_dir to a directory you can write." % (args["dir"], exc))
            return result
        result.update(changed=False, run_id=run_id, files=files, written=write, report=document["rows"],
                      markdown=markdown)
        return result
