#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: owned_directories
short_description: Make the roles' directories, and change owner, group and mode only of those the roles own
version_added: 0.1.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - The roles' one way to make a directory on a host (in place of M(ansible.builtin.file) with
    C(state=directory), which takes over any directory it is given). Each of O(directories) is
    checked first; when one is refused nothing on the host changes, and every refusal is named.
  - A directory is the roles' own when a role created it, or when a component of its real path
    is named for the collection (C(sglang), C(sglang-*) or C(blackwell-sglang), as in C(/etc/sglang),
    C(/opt/sglang/venvs), C(/var/lib/sglang/kernel-caches), C(/usr/local/lib/blackwell-sglang); not
    C(/mnt/team-sglang-models)).
  - A path reached through a symbolic link that lies in a directory a user other than root may change
    is refused (the service user could point it at one of root's directories); owner, group and mode
    are set through a handle that does not follow a link.
  - The module records each directory it creates (parents included) in O(record), by real path and inode number, so that a directory removed and made again
    by someone else is not taken for the roles' own (the entries of directories gone since, such as a
    pruned workspace, are dropped whenever it is written).
  - A missing directory is created (missing parents too, C(root:root 0755)) with O(directories[].owner),
    O(directories[].group) and O(directories[].mode), whatever the umask. An existing own directory
    gets them (changed when one differed).
  - An existing directory that is not the roles' own (system configuration such as C(/etc/sudoers.d),
    secrets such as C(/etc/ssl/private), another package's or user's data) is never changed. It is used
    as it is when O(directories[].user) already has the O(directories[].access) the role needs
    (by the owner, group or other bits of its mode that apply to that user; ACLs are not read), can
    enter every directory on the way to it, and it is not writable by every user. Otherwise the module fails, naming the variable, the path, its owner,
    group and mode, and what the user needs.
  - The directories the system shares (C(/etc), C(/opt), C(/var/lib), ...;
    C(module_utils/preflight.py)) and the trees not kept on disk (C(/tmp), C(/run), ...) are refused
    first, with a message that suggests a directory of its own.
options:
  directories:
    description: The directories, in order (a parent before its children).
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute, normalised path.
        type: path
        required: true
      variable:
        description: The variable the operator sets for this path, named in every message about it.
        type: str
        required: true
      owner:
        description: Owner of a directory the roles own (a user name).
        type: str
        default: root
      group:
        description:
          - Group of a directory the roles own (a group name). Also taken as O(directories[].user)'s
            group when that user does not exist yet (the roles create it with this group).
        type: str
        default: root
      mode:
        description: Mode of a directory the roles own, in octal (C(0755)); no setuid, setgid or sticky bits.
        type: str
        default: "0755"
      user:
        description: The service user that uses the directory (needed unless O(directories[].access=none)).
        type: str
      access:
        description:
          - What O(directories[].user) needs in a directory that is not the roles' own for it to be used
            as it is - C(read) (list and enter, C(r-x)), C(write) (also create files, C(rwx)) or
            C(none) (only root uses it).
        type: str
        choices: [none, read, write]
        default: read
  record:
    description:
      - This host's record of the directories the roles created (JSON, C(root) C(0644)), read and,
        when a directory is created, rewritten atomically.
    type: path
    default: /var/lib/blackwell-sglang/created-directories.json
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Reports what would be created or changed and refuses what would be refused; changes nothing.
      - An owner or group that does not exist yet (the role creates it before this task) is reported
        as a change.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Failure modes, one sentence each, all at once, before any change - a path that is not absolute and
    normalised or is a shared system directory (C(module_utils/preflight.py)); a path that exists and
    is not a directory; a foreign directory that does not fit (above); an owner or group that does not
    exist (not in check mode); a mode that is not octal; no O(directories[].user) where one is needed;
    a record that is not the module's JSON (it is kept as it is - move it aside and run again; the
    directories it named then count as foreign, used as they are where they fit). An OS error while
    creating or changing (permission denied without C(become), no space, a read-only file system)
    fails naming the path.
  - The ownership facts come from the directory's C(lstat) (after its symlinks are resolved), the user
    and group databases (C(pwd), C(grp), C(os.getgrouplist)) and the record.
seealso:
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: The service's directories (an operator's /etc/sudoers.d here is refused, unchanged)
  blackwell.sglang.owned_directories:
    directories:
      - {path: "{{ sglang_services_env_dir }}", variable: sglang_services_env_dir, owner: root,
         group: "{{ sglang_services_user }}", mode: "0755", user: "{{ sglang_services_user }}", access: read}
      - {path: "{{ sglang_services_pycache_dir }}", variable: sglang_services_pycache_dir,
         owner: "{{ sglang_services_user }}", group: "{{ sglang_services_user }}", mode: "0750",
         user: "{{ sglang_services_user }}", access: write}
  become: true

- name: The same check before anything changes (a preflight)
  blackwell.sglang.owned_directories:
    directories: "{{ my_directories }}"
  check_mode: true
  changed_when: false
"""

RETURN = r"""
directories:
  description:
    - One entry per directory, in order - C(path), C(variable) and C(state), one of C(created),
      C(changed) (owner, group or mode set), C(unchanged) (the roles' own, as it should be) or
      C(foreign) (not the roles' own; used as it is).
  returned: success
  type: list
  elements: dict
  sample:
    - {path: /etc/sglang, variable: sglang_services_env_dir, state: unchanged}
    - {path: /srv/cache, variable: kernel_cache_dir, state: foreign}
created:
  description: The directories created (or, in check mode, that would be), parents first.
  returned: success
  type: list
  elements: str
  sample: [/srv/sglang, /srv/sglang/venvs]
problems:
  description: On failure, one sentence per refused directory.
  returned: failure
  type: list
  elements: str
"""

import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.blackwell.sglang.plugins.module_utils import owned_directories as owned
from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import dedicated_dir_problem


def _name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def _id(lookup, name):
    try:
        return lookup(name)[2]
    except KeyError:
        return None


def _user_access(user, group):
    """(uid, gids) of the service user; (None, {gid of `group`}) when the user does not exist yet."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        gid = _id(grp.getgrnam, group)
        return None, set() if gid is None else {gid}
    return entry.pw_uid, set(os.getgrouplist(user, entry.pw_gid))


class Plan:
    """What the module does, worked out before any change."""

    def __init__(self, module, record):
        self.module = module
        self.record = record
        self.problems = []
        self.entries = []
        self.create = []  # (path, uid, gid, mode) in order: parents as root 0755
        self.fix = []  # (path, uid, gid, mode) of own directories that differ
        self.planned = set()

    def add(self, item):
        variable, path = item["variable"], item["path"]
        problem = dedicated_dir_problem(variable, path)
        if problem is None and item["access"] != "none" and not item["user"]:
            problem = "%s: %s needs a user (the one that uses it) for access %s" % (variable, path, item["access"])
        try:
            mode = owned.parse_mode(item["mode"])
        except ValueError as exc:
            problem = problem or "%s: %s" % (variable, exc)
        if problem:
            self.problems.append(problem)
            return
        real = os.path.realpath(path)
        problem = (dedicated_dir_problem(variable, real) if real != path else None) or _link_problem(variable, path)
        if problem is None and item["user"] and item["access"] != "none":
            problem = _passage_problem(variable, real, item["user"], item["group"])
        if problem:
            self.problems.append(problem)
            return
        try:
            st = os.stat(real)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            self.problems.append("%s: cannot read %s: %s" % (variable, real, to_native(exc.strerror)))
            return
        if st is None:
            self._create(item, real, mode)
        elif not stat.S_ISDIR(st.st_mode):
            self.problems.append("%s: %s exists and is not a directory" % (variable, real))
        elif owned.is_own(real, st, self.record):
            self._own(item, real, st, mode)
        else:
            self._foreign(item, real, st)

    def _ids(self, item):
        """(uid, gid) of the item's owner and group: None for one that does not exist (a problem
        except in check mode, where the role would have created it)."""
        uid, gid = _id(pwd.getpwnam, item["owner"]), _id(grp.getgrnam, item["group"])
        for what, value, number in (("owner", item["owner"], uid), ("group", item["group"], gid)):
            if number is None and not self.module.check_mode:
                self.problems.append("%s: the %s %s of %s does not exist (the role creates it before this task)"
                                     % (item["variable"], what, value, item["path"]))
        return uid, gid

    def _create(self, item, real, mode):
        uid, gid = self._ids(item)
        parent = os.path.dirname(real)
        parents = []
        while parent not in self.planned and not os.path.lexists(parent):
            parents.insert(0, parent)
            parent = os.path.dirname(parent)
        for path in parents:
            self.create.append((path, 0, 0, 0o755))
            self.planned.add(path)
        if real in self.planned:  # planned as the parent of an earlier entry: this entry says how it is to be
            self.create = [(real, uid, gid, mode) if entry[0] == real else entry for entry in self.create]
        else:
            self.create.append((real, uid, gid, mode))
            self.planned.add(real)
        self.entries.append({"path": real, "variable": item["variable"], "state": "created"})

    def _own(self, item, real, st, mode):
        uid, gid = self._ids(item)
        differs = (uid is None or gid is None or st.st_uid != uid or st.st_gid != gid or stat.S_IMODE(st.st_mode) != mode)
        if differs:
            self.fix.append((real, uid, gid, mode))
        self.entries.append({"path": real, "variable": item["variable"], "state": "changed" if differs else "unchanged"})

    def _foreign(self, item, real, st):
        uid, groups = _user_access(item["user"], item["group"]) if item["user"] else (0, set())
        problem = owned.foreign_problem(item["variable"], real, st, _name(pwd.getpwuid, st.st_uid), _name(grp.getgrgid, st.st_gid),
                                        item["user"], uid, groups, item["access"])
        if problem:
            self.problems.append(problem)
        else:
            self.entries.append({"path": real, "variable": item["variable"], "state": "foreign"})


def _link_problem(variable, path):
    """Why `path` may not be followed: a symbolic link on the way to it (or it itself) that lies in a
    directory a user other than root may change (the service user could point it at a directory
    of root's, which the module would then hand over); None when there is none."""
    parts = path.split("/")[1:]
    for index in range(1, len(parts) + 1):
        current = "/" + "/".join(parts[:index])
        try:
            st = os.lstat(current)
        except OSError:
            return None  # the rest does not exist yet: created, not followed
        if stat.S_ISLNK(st.st_mode):
            parent = os.path.dirname(current)
            pst = os.lstat(parent)
            if pst.st_uid != 0 or stat.S_IMODE(pst.st_mode) & 0o022:
                return ("%s: %s is reached through the symbolic link %s, in %s, which a user other than root may change "
                        "(owner %s, mode %s); name the directory itself" % (
                            variable, path, current, parent, _name(pwd.getpwuid, pst.st_uid), owned.mode_text(pst)))
    return None


def _passage_problem(variable, real, user, group):
    """Why `user` cannot reach `real`: an existing directory on the way to it that does not let it
    enter (x); None when there is none (or the user is root)."""
    uid, groups = _user_access(user, group)
    parent = os.path.dirname(real)
    ancestors = []
    while parent != "/":
        ancestors.insert(0, parent)
        parent = os.path.dirname(parent)
    for ancestor in ancestors:
        try:
            st = os.stat(ancestor)
        except OSError:
            return None
        if not owned.granted(st, uid, groups) & 0o1:
            owner, group = _name(pwd.getpwuid, st.st_uid), _name(grp.getgrgid, st.st_gid)
            return ("%s: %s may not enter %s (owner %s, group %s, mode %s) on the way to %s; choose a directory it can "
                    "reach" % (variable, user, ancestor, owner, group, owned.mode_text(st), real))
    return None


def _read_record(module, path):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg="cannot read the record of created directories %s: %s" % (path, to_native(exc)))
    try:
        return owned.read_record(text)
    except ValueError as exc:
        module.fail_json(msg="the record of created directories %s is %s; it is kept as it is: move it aside and run again "
                         "(the directories it named then count as not the roles' own, used as they are where they fit)" % (path, exc))


def _write_record(record_path, record):
    os.makedirs(os.path.dirname(record_path), mode=0o755, exist_ok=True)
    scratch = record_path + ".tmp"
    with open(scratch, "w", encoding="utf-8") as handle:
        handle.write(owned.write_record(record))
    os.chmod(scratch, 0o644)
    os.replace(scratch, record_path)


def _set(path, uid, gid, mode):
    """Owner, group and mode (whatever the umask) of the directory `path` itself, through a handle
    that does not follow a link put in its place meanwhile; its inode number."""
    handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(handle, uid, gid)
        os.fchmod(handle, mode)
        return os.fstat(handle).st_ino
    finally:
        os.close(handle)


def _apply(module, plan, record_path):
    """Create and change as planned; the directories created are recorded even when a later step
    fails (they are the roles' own)."""
    record, created, current, error = dict(plan.record), [], None, None
    try:
        for current, uid, gid, mode in plan.create:
            os.mkdir(current, mode)
            created.append(current)
            record[current] = _set(current, uid, gid, mode)
        for current, uid, gid, mode in plan.fix:
            _set(current, uid, gid, mode)
    except OSError as exc:
        error = "cannot create or change %s: %s" % (current, to_native(exc.strerror or exc))
    if created:
        try:
            # Entries of directories gone since (a pruned workspace) leave the record when it is written.
            _write_record(record_path, {path: inode for path, inode in record.items() if os.path.isdir(path)})
        except OSError as exc:
            error = (error + "; and " if error else "") + "cannot write the record of created directories %s: %s" % (
                record_path, to_native(exc.strerror or exc))
    if error:
        module.fail_json(msg=error, created=created)


def main():
    item = dict(
        path=dict(type="path", required=True),
        variable=dict(type="str", required=True),
        owner=dict(type="str", default="root"),
        group=dict(type="str", default="root"),
        mode=dict(type="str", default="0755"),
        user=dict(type="str"),
        access=dict(type="str", choices=list(owned.ACCESS), default="read"),
    )
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", required=True, options=item),
            record=dict(type="path", default=owned.RECORD),
        ),
        supports_check_mode=True,
    )
    record_path = module.params["record"]
    plan = Plan(module, _read_record(module, record_path))
    for entry in module.params["directories"]:
        plan.add(entry)
    if plan.problems:
        module.fail_json(msg="; ".join(plan.problems), problems=plan.problems)
    if not module.check_mode:
        _apply(module, plan, record_path)
    module.exit_json(changed=bool(plan.create or plan.fix), directories=plan.entries,
                     created=[path for path, _uid, _gid, _mode in plan.create])


if __name__ == "__main__":
    main()
