# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Own only what you create: which directories the roles may set owner, group and mode of, and
whether a directory they may not is fit to be used as it is (the owned_directories module).

A directory is the roles' own when a role created it (this host's record of created directories:
its real path and inode, so that a directory removed and made again by someone else is not) or when
its path carries the collection's name (a component named sglang, sglang-*, blackwell-sglang:
/etc/sglang, /opt/sglang, /var/lib/sglang/kernel-caches, /usr/local/lib/blackwell-sglang). Any other existing directory is
foreign: used as it is when the service user already has the access it needs and it is not writable
by every user, refused otherwise, naming the variable, the path, its owner, group and mode.
The functions here read nothing but what they are given (stat results, group lists), so that the
rule is tested on its own; the module does the I/O.
"""

from __future__ import annotations

import json
import re
import stat

from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import COLLECTION_DIR

COLLECTION_NAME = "sglang"
# A component that carries the collection's name (preflight.COLLECTION_DIR): sglang, sglang-gateway,
# sglang_x, blackwell-sglang, .blackwell-sglang; not one that merely holds the word (team-sglang-models).
NAMED = COLLECTION_DIR
# Where a host records the directories the roles created: root's, named for the collection.
RECORD = "/var/lib/blackwell-sglang/created-directories.json"
RECORD_VERSION = 1
MODE = re.compile(r"^0?[0-7]{3}$")
ACCESS = ("none", "read", "write")
# The permission bits each access needs: read = list and enter (r-x), write = also create (rwx).
NEEDED_BITS = {"none": 0, "read": 0o5, "write": 0o7}
ACCESS_TEXT = {"read": "read and enter it (r-x)", "write": "create files in it (rwx)"}


def carries_collection_name(path):
    """Whether a component of `path` is named for the collection (NAMED)."""
    return any(NAMED.match(part) for part in path.split("/"))


def parse_mode(value):
    """'0755' / '755' -> 0o755; ValueError naming the value for anything else (no setuid, setgid or
    sticky bits: the roles' directories need none)."""
    text = "%s" % (value,)
    if not MODE.match(text):
        raise ValueError("mode %r is not an octal mode like 0755" % (value,))
    return int(text, 8)


def read_record(text):
    """The record's {real path: inode}; ValueError saying what is wrong with the file's text."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("not JSON (%s)" % exc) from exc
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or not isinstance(data.get("directories"), dict):
        raise ValueError("not a version %d record ({\"version\": %d, \"directories\": {path: {\"inode\": N}}})"
                         % (RECORD_VERSION, RECORD_VERSION))
    record = {}
    for path, entry in data["directories"].items():
        inode = entry.get("inode") if isinstance(entry, dict) else None
        if not isinstance(inode, int) or isinstance(inode, bool):
            raise ValueError("the entry of %s has no inode number" % path)
        record[path] = inode
    return record


def write_record(record):
    """The record's text for {real path: inode}."""
    return json.dumps({"version": RECORD_VERSION, "directories": {path: {"inode": inode} for path, inode in sorted(record.items())}},
                      indent=2, sort_keys=True) + "\n"


def is_own(real_path, st, record):
    """Whether the existing directory at `real_path` (its stat `st`) is the roles' own."""
    return carries_collection_name(real_path) or record.get(real_path) == st.st_ino


def mode_text(st):
    return "%04o" % stat.S_IMODE(st.st_mode)


def granted(st, uid, groups):
    """The permission bits (rwx, 0-7) the mode of `st` grants a user (uid, None when the user does not
    exist yet; `groups` its gids): the owner's, the group's or the others' bits, whichever apply
    first, as the kernel picks them (ACLs are not read); all of them for root."""
    if uid == 0:
        return 0o7
    mode = stat.S_IMODE(st.st_mode)
    if uid is not None and st.st_uid == uid:
        return (mode >> 6) & 0o7
    if st.st_gid in groups:
        return (mode >> 3) & 0o7
    return mode & 0o7


def foreign_problem(variable, path, st, owner, group, user, uid, groups, access):
    """Why the foreign directory `path` (stat `st`, owner and group names `owner`, `group`) cannot be
    used as it is for `user` (uid `uid`, None when the user does not exist yet; `groups` the gids
    it is in, or will be in) who needs `access` (none, read, write); None when it can."""
    mode = stat.S_IMODE(st.st_mode)
    reasons, advice = [], []
    if mode & stat.S_IWOTH:
        reasons.append("every user may write into it")
        advice.append("take every user's write access away")
    needed = NEEDED_BITS[access]
    if needed and uid != 0:
        if granted(st, uid, groups) & needed != needed:
            reasons.append("%s needs to %s and may not%s" % (
                user, ACCESS_TEXT[access], " (the user does not exist yet)" if uid is None else ""))
            advice.append("give %s that access" % user)
    if not reasons:
        return None
    return ("%s: %s exists and is not the roles' own (they did not create it and no part of its path names %s): "
            "owner %s, group %s, mode %s; %s. The roles change the owner, group and mode only of directories they "
            "created: set %s to a directory of its own (a new path, or one named for %s), or %s yourself"
            % (variable, path, COLLECTION_NAME, owner, group, mode_text(st), "; ".join(reasons), variable, COLLECTION_NAME,
               " and ".join(advice)))
