#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: flashinfer_prewarm_command
short_description: Install the FlashInfer pre-warm command that SGLang units run as ExecStartPre=
version_added: "0.1.0"
description:
  - Writes this module's own copy of the collection's C(module_utils/flashinfer_jit.py) (the
    check/build/repair code of M(blackwell.sglang.flashinfer_jit_cache)) and of the
    C(module_utils/cuda_arch.py) it imports into O(path), in their package layout
    (C(<path>/ansible_collections/blackwell/sglang/plugins/module_utils/), with empty
    C(__init__.py) files), plus a launcher
    C(<path>/flashinfer_prewarm.py). The files come from the module's own payload, so the command on
    the host is always the code the module itself runs, of the same collection version.
  - A unit runs it with the SGLang venv's interpreter, as the service user, with the environment
    systemd loaded from the FlashInfer environment file; the command imports nothing but the
    standard library, C(packaging) and FlashInfer, and needs no Ansible on the host.
    C(<venv>/bin/python <path>/flashinfer_prewarm.py --modules sampling) exits 0 when every module
    is built (seconds when warm), compiles what is missing, and exits 1 with one line naming the
    reason otherwise. C(--help) lists its options.
  - Only files whose content or mode differs are written (atomically); files are C(0644) and the
    directories it creates C(0755) whatever the umask (the units' service user must read them),
    owned by the user the module runs as (root with C(become)).
author:
  - blackwell.sglang developers (!UNKNOWN)
options:
  path:
    description: Directory the command is installed in. Created when missing.
    type: path
    default: /usr/local/lib/blackwell-sglang
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports which files would be written; writes nothing.
  diff_mode:
    support: full
    details: One diff per file that changes (its old and new text).
  platform:
    platforms: posix
notes:
  - Failure modes, one line each naming the path, the cause and the fix - O(path) (or a directory
    below it) cannot be created or written (permission denied - run it as root with C(become); no
    space left; a read-only file system); a file of the command cannot be read or is not UTF-8 text; a path
    in the layout exists but is not a directory or regular file.
  - "The installed launcher fails in one line too - C(flashinfer_jit: error: cannot load the pre-warm code
    beside <launcher> ...) when run with an interpreter that lacks C(packaging) or without its package copy."
seealso:
  - module: blackwell.sglang.flashinfer_jit_cache
"""

EXAMPLES = r"""
- name: Install the pre-warm command
  blackwell.sglang.flashinfer_prewarm_command:
    path: /usr/local/lib/blackwell-sglang
  become: true
  register: prewarm

- name: A unit runs it before the server
  ansible.builtin.debug:
    msg: "ExecStartPre=/opt/sglang/current/bin/python {{ prewarm.command }} --modules sampling"
"""

RETURN = r"""
command:
  description: Path of the launcher to run with the SGLang venv's interpreter.
  returned: always
  type: str
  sample: /usr/local/lib/blackwell-sglang/flashinfer_prewarm.py
files:
  description: Every file of the command, launcher first.
  returned: always
  type: list
  elements: str
  sample:
    - /usr/local/lib/blackwell-sglang/flashinfer_prewarm.py
    - /usr/local/lib/blackwell-sglang/ansible_collections/__init__.py
    - /usr/local/lib/blackwell-sglang/ansible_collections/blackwell/sglang/plugins/module_utils/flashinfer_jit.py
    - /usr/local/lib/blackwell-sglang/ansible_collections/blackwell/sglang/plugins/module_utils/cuda_arch.py
written:
  description: The files that were written (would be, in check mode) because they were missing or differed.
  returned: always
  type: list
  elements: str
"""

import errno
import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_arch
from ansible_collections.blackwell.sglang.plugins.module_utils import flashinfer_jit

LAUNCHER = '''\
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""FlashInfer JIT pre-warm check, installed by blackwell.sglang.flashinfer_prewarm_command; the
SGLang units run it as ExecStartPre= with the SGLang venv's interpreter:

    /opt/sglang/current/bin/python %(command)s --modules sampling

The work is done by the copy of the collection's module_utils/flashinfer_jit.py beside it (the
flashinfer_jit_cache module's own code). Exits 0 with one summary line when every module is built
(compiling what is missing), 1 with one line naming the reason otherwise. `--help` lists the options.
"""

import subprocess
import sys

try:
    # Run as a file, Python puts this file's directory first on sys.path: the package copy beside it.
    from ansible_collections.blackwell.sglang.plugins.module_utils.flashinfer_jit import command
except ImportError as exc:  # the unit's journal gets one line, not a traceback
    sys.stderr.write("flashinfer_jit: error: cannot load the pre-warm code beside %%s (%%s): run it with the SGLang "
                     "venv's interpreter; re-run site.yml to reinstall it\\n" %% (__file__, exc))
    raise SystemExit(1)


def run(argv, env=None, cwd=None):
    """How the pre-warm code runs a program (nvcc --version) here, where there is no AnsibleModule."""
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)


if __name__ == "__main__":
    STATUS, LINE = command(sys.argv[1:], run)
    (sys.stdout if STATUS == 0 else sys.stderr).write(LINE + "\\n")
    raise SystemExit(STATUS)
'''

PACKAGE = ("ansible_collections", "blackwell", "sglang", "plugins", "module_utils")
# The command's code: flashinfer_jit and what it imports from this collection.
LIBRARIES = (flashinfer_jit, cuda_arch)
# The units run it as the service user: readable by all, whatever the umask.
FILE_MODE = 0o644
DIR_MODE = 0o755


def own_source(module):
    """The text of an imported module_utils module, from wherever this module runs (a file, or the
    zip Ansible ships a module in)."""
    return module.__loader__.get_source(module.__name__)


def wanted_files(path):
    """[(file path, text)] of the command installed in `path`, launcher first."""
    command = os.path.join(path, "flashinfer_prewarm.py")
    files = [(command, LAUNCHER % {"command": command})]
    # Empty __init__.py files make the copy a regular package, so it wins over any other
    # ansible_collections on the venv's path.
    for depth in range(1, len(PACKAGE) + 1):
        files.append((os.path.join(path, *PACKAGE[:depth] + ("__init__.py",)), ""))
    for library in LIBRARIES:
        name = library.__name__.rsplit(".", 1)[-1] + ".py"
        files.append((os.path.join(path, *PACKAGE + (name,)), own_source(library)))
    return files


def read_text(path):
    if not os.path.lexists(path):
        return None
    if not os.path.isfile(path) or os.path.islink(path):
        raise ValueError("%s exists but is not a regular file" % path)
    try:
        with open(path) as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise ValueError("%s is not UTF-8 text (%s): remove it, this module writes it again" % (path, exc.reason)) from exc


def os_error_message(doing, path, exc):
    """One line: what failed on which path, why, and what to change."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        fix = "run it as root (become: true) or set path to a directory this user can write"
    elif exc.errno == errno.ENOSPC:
        fix = "free space on that file system"
    elif exc.errno == errno.EROFS:
        fix = "set path to a directory on a writable file system"
    else:
        fix = "fix that path and run again"
    return "flashinfer_prewarm_command: cannot %s %s (%s): %s" % (doing, path, exc.strerror or exc, fix)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def make_dirs(directory):
    """Create the missing directories down to `directory`, each DIR_MODE whatever the umask."""
    missing = []
    while not os.path.isdir(directory):
        if os.path.lexists(directory):
            raise ValueError("%s exists but is not a directory" % directory)
        missing.append(directory)
        directory = os.path.dirname(directory)
    for created in reversed(missing):
        os.mkdir(created)
        os.chmod(created, DIR_MODE)


def write_text(module, path, text):
    make_dirs(os.path.dirname(path))
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".flashinfer_prewarm.")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    module.atomic_move(tmp, path)
    # atomic_move gives a new file the umask's mode: the service user must read it (ExecStartPre=).
    os.chmod(path, FILE_MODE)


def install(module, path):
    files = wanted_files(path)
    written, diffs = [], []
    for file_path, text in files:
        try:
            current = read_text(file_path)
            mode = mode_of(file_path) if current is not None else None
        except ValueError as exc:
            module.fail_json(msg="flashinfer_prewarm_command: %s" % exc)
        except OSError as exc:
            module.fail_json(msg=os_error_message("read", file_path, exc))
        if current == text and mode == FILE_MODE:
            continue
        written.append(file_path)
        header = file_path
        if current == text:
            header = "%s (mode %04o -> %04o)" % (file_path, mode, FILE_MODE)
        diffs.append({"before_header": header, "after_header": header,
                      "before": current or "", "after": text})
        if not module.check_mode:
            try:
                write_text(module, file_path, text)
            except ValueError as exc:
                module.fail_json(msg="flashinfer_prewarm_command: %s" % exc)
            except OSError as exc:
                module.fail_json(msg=os_error_message("write", file_path, exc))
    result = dict(changed=bool(written), command=files[0][0], files=[file_path for file_path, _text in files], written=written)
    if module._diff:
        result["diff"] = diffs
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(path=dict(type="path", default="/usr/local/lib/blackwell-sglang")),
        supports_check_mode=True,
    )
    module.exit_json(**install(module, module.params["path"]))


if __name__ == "__main__":
    main()
