# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which rendered files are not in place on a host, from one ansible.builtin.find run.

A converged host keeps every env file and unit as the roles render them, and each
ansible.builtin.template task costs two module runs even when the file is in place (a stat with
its checksum, then the file module for owner, group and mode). The roles instead list every file
they render with the SHA-1 of its content (rendered on the controller by the same template) and
its owner, group and mode, read them all with one `find` (get_checksum), and run the template
task only for what this returns: a file that is missing, not a regular file, or differs in
content, owner, group or mode. So an edited or removed file is always rewritten by the template
task, with its validate step, its diff and its handler.
"""

from __future__ import annotations


class InPlaceError(ValueError):
    pass


def _mode(value, path):
    """'0644', '644', 420 -> 0o644; what find reports ('0644') and what a task gives."""
    try:
        return int(value, 8) if isinstance(value, str) else int(value)
    except (TypeError, ValueError) as exc:
        raise InPlaceError("mode of %s must be an octal string such as '0644', got %r" % (path, value)) from exc


def stale_paths(wanted, found):
    """The paths of `wanted` (dicts: path, checksum (SHA-1 hex of the content), owner, group, mode)
    that `found` (ansible.builtin.find's `files`, with get_checksum) does not show in place, in the
    order of `wanted`."""
    seen = {entry.get("path"): entry for entry in found or []}
    stale = []
    for item in wanted:
        for key in ("path", "checksum", "owner", "group", "mode"):
            if key not in item:
                raise InPlaceError("each wanted file needs path, checksum, owner, group and mode; %r has no %s" % (item, key))
        entry = seen.get(item["path"])
        if (entry is None or not entry.get("isreg")
                or entry.get("checksum") != item["checksum"]
                or entry.get("pw_name") != item["owner"] or entry.get("gr_name") != item["group"]
                or _mode(entry.get("mode"), item["path"]) != _mode(item["mode"], item["path"])):
            stale.append(item["path"])
    return stale
