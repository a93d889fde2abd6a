# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input checks every role's preflight shares: paths, dedicated directories, environment files,
role-managed environment variables and operator booleans. Pure functions (no I/O): each returns a
sentence naming the variable and what to change, or None when the value is good.

Why so strict: these values end up in systemd units (EnvironmentFile=, ExecStartPre=), in KEY=VALUE
environment files that systemd reads without quoting, and in PATH. A leading colon, an empty
component or a relative part there means "the current directory" to PATH and a different file to
systemd; a directory for the roles' files must not be one the system shares (the roles change owner,
group and mode only of directories they created: module_utils/owned_directories.py).
"""

from __future__ import annotations

import posixpath
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.blackwell.sglang.plugins.module_utils.cache_census import LOCATIONS, NAME as CACHE_NAME

# Characters a role-managed path may hold: safe unquoted in unit files, env files and PATH.
PATH_CHARS = re.compile(r"[A-Za-z0-9._+@/-]+")
PATH_CHARS_TEXT = "letters, digits and . _ + @ - /"

# Directories the system shares: a role must never own, re-group or chmod them, nor write its own
# environment files straight into them. Their subdirectories named for the collection are fine
# (/etc/sglang, /opt/sglang, /var/lib/sglang). Sources: the Filesystem Hierarchy Standard 3.0 and
# the directories systemd and Debian/Ubuntu/RHEL packages manage.
SYSTEM_DIRS = frozenset("""
/ /bin /boot /dev /etc /etc/default /etc/profile.d /etc/systemd /etc/systemd/system /etc/sysconfig
/etc/ssl /etc/ssl/certs /etc/apt /home /lib /lib32 /lib64 /libx32 /lost+found /media /mnt /opt /proc
/root /run /sbin /snap /srv /sys /tmp /usr /usr/bin /usr/include /usr/lib /usr/lib64 /usr/libexec
/usr/local /usr/local/bin /usr/local/include /usr/local/lib /usr/local/sbin /usr/local/share /usr/sbin
/usr/share /usr/src /var /var/cache /var/lib /var/local /var/log /var/opt /var/spool /var/tmp
/var/mail /var/run /var/lock
""".split())
# A directory named for the collection: sglang, sglang-*, sglang_*, blackwell-sglang, .blackwell-sglang
# (the roles' own: module_utils/owned_directories.py; a drop-in directory's rule leaves it alone).
COLLECTION_DIR = re.compile(r"^\.?(blackwell-)?sglang([-_.].*)?$")
# Trees that are not files on a disk: nothing of the roles belongs under them.
PSEUDO_TREES = ("/proc/", "/sys/", "/dev/", "/run/", "/tmp/", "/var/tmp/")

# Environment variables the roles set for every unit (the cuda_toolkit and flashinfer roles' env
# files, the sglang_services role's per-service file): a service's own `env` may not set them,
# since its file is read last and would silently win. Name -> what to do instead.
# Kernel caches: the roles keep one workspace per venv, outside /tmp, where they survive a restart
# and switch with the venv (the file <venv>/venv.env names them).
KERNEL_CACHES = "set sglang_node_kernel_cache_dir (each venv's kernel caches live in <dir>/<venv id>) instead"
MANAGED_ENV = {
    "CUDA_HOME": "set cuda_toolkit_version / cuda_toolkit_pip_prefix (flashinfer_cuda_home) instead",
    "CUDA_PATH": "set cuda_toolkit_version / cuda_toolkit_pip_prefix (flashinfer_cuda_home) instead",
    "PATH": "remove it: the flashinfer role writes PATH with CUDA_HOME/bin first (flashinfer_cuda_home)",
    "CUDA_VISIBLE_DEVICES": "set the service's cuda_visible_devices instead",
    "FLASHINFER_CUDA_ARCH_LIST": "set sglang_node_gpu_archs (or flashinfer_cuda_archs) instead",
    "TRITON_HOME": KERNEL_CACHES,
    "HOME": "set sglang_node_home instead",
    "NCCL_P2P_DISABLE": "set sglang_services_nccl_p2p (auto, on or off) instead",
    "SGLANG_CRASH_ON_JIT_COMPILE": "set sglang_services_crash_on_jit_compile instead",
    "TRITON_PTXAS_PATH": "set kernel_cache_triton_ptxas (triton or toolkit) instead",
    "TRITON_PTXAS_BLACKWELL_PATH": "set kernel_cache_triton_ptxas (triton or toolkit) instead",
}
# Every cache of the serving stack is the kernel_cache role's, in the venv's workspace (the table:
# module_utils/cache_census.py).
MANAGED_ENV.update((name, KERNEL_CACHES) for name in LOCATIONS)
# Emptied on every start of a unit (PrivateTmp=yes) or at boot.
TEMPORARY_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# Every FLASHINFER_* variable is the flashinfer role's (FLASHINFER_JIT_VERBOSE makes debug builds).
MANAGED_ENV_PREFIXES = {"FLASHINFER_": "set the flashinfer role's variables (flashinfer_*) instead"}


def path_problem(name, value):
    """Why `value` is not an absolute, normalised path for variable `name`; None when it is."""
    if not isinstance(value, str) or not value:
        return "%s must be an absolute path, got %r" % (name, value)
    if not value.startswith("/"):
        return "%s must be an absolute path (start with /), got %r" % (name, value)
    if value != "/" and value.endswith("/"):
        return "%s must not end with / (got %r); write %r" % (name, value, value.rstrip("/"))
    parts = value.split("/")[1:]
    if value != "/" and "" in parts:
        return "%s has an empty component (//) in %r" % (name, value)
    if "." in parts or ".." in parts:
        return "%s must be normalised, without . or .. components, got %r" % (name, value)
    if not PATH_CHARS.fullmatch(value):
        bad = sorted(set(ch for ch in value if not PATH_CHARS.fullmatch(ch)))
        return "%s holds %s in %r; a path here may hold only %s (':' splits PATH, spaces and newlines break env files)" % (
            name, ", ".join(repr(ch) for ch in bad), value, PATH_CHARS_TEXT)
    return None


def dedicated_dir_problem(name, value):
    """Why `value` cannot be a directory for the roles' files; None when it can. The first, clearer
    message for the directories everyone knows; the guard for any other directory the roles did not
    create is module_utils/owned_directories.py (the owned_directories module, on the host)."""
    problem = path_problem(name, value)
    if problem:
        return problem
    if value in SYSTEM_DIRS:
        return ("%s is %s, a directory the system shares; the roles keep their files out of it. "
                "Use a directory of its own, e.g. %s" % (name, value, posixpath.join(value, "sglang")))
    drop_in = _drop_in(value)
    if drop_in:
        return ("%s is %s, in %s, a drop-in directory whose every file another program reads; the roles keep their "
                "files out of it. Use a directory of its own, e.g. /etc/sglang" % (name, value, drop_in))
    tree = _pseudo_tree(value)
    if tree:
        return "%s is %s, under %s (not kept on disk, or cleared); use a directory of its own" % (name, value, tree)
    return None


def _pseudo_tree(value):
    return next((tree for tree in PSEUDO_TREES if value.startswith(tree)), None)


def _drop_in(value):
    """The drop-in directory (/etc/<name>.d: sudoers.d, pam.d, cron.d, sysctl.d, a unit's .d) that
    `value` is or lies in; None when there is none."""
    parts = value.split("/")
    if len(parts) < 3 or parts[1] != "etc":
        return None
    for index, part in enumerate(parts[2:], 2):
        if COLLECTION_DIR.match(part):
            return None  # /etc/sglang/env.d: the collection's own
        if part.endswith(".d"):
            return "/".join(parts[:index + 1])
    return None


def env_file_problem(name, value):
    """Why `value` cannot be an environment file the roles write; None when it can. Its directory
    holds the roles' env files (group of the service user, so the units can read them): never one the
    system shares (/etc, /etc/default), a drop-in directory or a scratch tree."""
    problem = path_problem(name, value)
    if problem:
        return problem
    directory = posixpath.dirname(value)
    if directory in SYSTEM_DIRS or _pseudo_tree(directory):
        return ("%s is %s, a file in %s, a directory the system shares; the roles keep their files out of it: "
                "put the file in a directory of its own, e.g. /etc/sglang/%s" % (name, value, directory, posixpath.basename(value)))
    drop_in = _drop_in(directory)
    if drop_in:
        return ("%s is %s, a file in %s, a drop-in directory whose every file another program reads; the roles keep their "
                "files out of it: put the file in a directory of its own, e.g. /etc/sglang/%s"
                % (name, value, drop_in, posixpath.basename(value)))
    return None


def managed_env_problem(where, key, value=None):
    """Why a service's env may not set `key` (to `value`); None when it may. A cache location says
    what the value would cost: in /tmp a compile after every restart, anywhere else one cache for
    every venv (the units read each venv's workspace through current)."""
    advice = MANAGED_ENV.get(key)
    if advice is None:
        advice = next((text for prefix, text in MANAGED_ENV_PREFIXES.items() if key.startswith(prefix)), None)
    if advice is None and CACHE_NAME.match(key):  # any cache: the table's, the operator's, one SGLang computes
        advice = KERNEL_CACHES + " (a cache the collection does not place: kernel_cache_locations)"
    if advice is None:
        return None
    cache = key in LOCATIONS or CACHE_NAME.match(key)
    if cache and isinstance(value, str) and value:
        path = posixpath.normpath(value)
        temporary = next((base for base in TEMPORARY_DIRS if path == base or path.startswith(base + "/")), None)
        if temporary:
            return ("%s: env %s=%s points into %s, which is emptied on every start of the unit (PrivateTmp=) or at boot: "
                    "every restart would compile again on the serving path. The kernel_cache role places it in the venv's "
                    "workspace; remove it" % (where, key, value, temporary))
        return ("%s: env %s=%s would be one cache for every venv of the host, so a switch or rollback meets the other "
                "version's builds (the units read each venv's workspace through current). The kernel_cache role places it "
                "in the venv's workspace; remove it (to move every venv's caches, %s)" % (where, key, value, KERNEL_CACHES.replace(" instead", "")))
    return "%s: env %s is managed by the roles; %s" % (where, key, advice)


def as_bool(value):
    """True/False for a boolean as operators pass one (true/false, yes/no, on/off, 1/0, from -e or
    an inventory string), by Ansible's own rule (module_utils.parsing.convert_bool, the one the
    argument specs' bool type uses); ValueError for anything else."""
    try:
        return boolean(value)  # strict: anything but a boolean spelling is a TypeError
    except TypeError as exc:
        raise ValueError("%r is not a boolean (use true or false)" % (value,)) from exc


def bool_problem(name, value):
    """Why `value` is not a boolean for variable `name`; None when it is one."""
    try:
        as_bool(value)
    except ValueError as exc:
        return "%s: %s" % (name, exc)
    return None


def _checked(mapping, check):
    return [problem for problem in (check(name, value) for name, value in (mapping or {}).items()) if problem]


def path_problems(mapping, dedicated=False):
    """{variable: path} -> one sentence per path that is not absolute and normalised; with
    `dedicated`, also per directory the system shares or drop-in directory under /etc (the roles
    keep their files out of these)."""
    return _checked(mapping, dedicated_dir_problem if dedicated else path_problem)


def env_file_problems(mapping):
    """{variable: file} -> one sentence per env file whose directory is not one the role may own."""
    return _checked(mapping, env_file_problem)


def bool_problems(mapping):
    """{variable: value} -> one sentence per value that is not a boolean as operators write one."""
    return _checked(mapping, bool_problem)
