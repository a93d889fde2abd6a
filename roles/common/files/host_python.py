# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Describe this interpreter for sglang_venv: version, and the wheel tags pip download must ask
for on the controller (stdlib only: a bare host has no `packaging`). Prints one JSON object, or one
line "host_python: error: <reason>" on stderr and exits 1."""
import json
import os
import platform
import re
import sys


def glibc_version():
    """'glibc 2.36'; None on a system without confstr."""
    if not hasattr(os, "confstr"):
        return None
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError) as exc:  # musl and other C libraries have no CS_GNU_LIBC_VERSION
        raise ValueError("this host's C library is not glibc (os.confstr('CS_GNU_LIBC_VERSION'): %s): SGLang's "
                         "wheels are manylinux; set sglang_venv_python (sglang_gateway_python for the gateway) "
                         "to an interpreter of a glibc system" % exc)


def describe():
    machine = platform.machine()
    libc = glibc_version()
    platforms = ["linux_%s" % machine]
    if libc and libc.startswith("glibc "):
        match = re.match(r"^glibc (\d+)\.(\d+)", libc)
        if not match:
            raise ValueError("cannot read the glibc version %r of this host: set sglang_venv_python "
                             "(sglang_gateway_python for the gateway) to an "
                             "interpreter of a glibc system (SGLang's wheels are manylinux)" % libc)
        major, minor = int(match.group(1)), int(match.group(2))
        legacy = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}
        for m in range(minor, 4, -1):
            platforms.append("manylinux_%d_%d_%s" % (major, m, machine))
            if m in legacy:
                platforms.append("%s_%s" % (legacy[m], machine))
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "abi": "cp%d%d" % sys.version_info[:2],
        "libc": libc,
        "platforms": platforms,
    }


def main():
    try:
        print(json.dumps(describe()))
    except ValueError as exc:
        sys.stderr.write("host_python: error: %s\n" % exc)
        return 1
    except Exception as exc:  # one line for the operator, not a traceback
        sys.stderr.write("host_python: error: unexpected %s: %s\n" % (type(exc).__name__, " ".join(str(exc).split())))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
