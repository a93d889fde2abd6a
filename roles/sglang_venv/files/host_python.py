# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Describe this interpreter for sglang_venv: version, and the wheel tags pip download must ask
for on the controller (stdlib only: a bare host has no `packaging`). Prints one JSON object."""
import json
import os
import platform
import sys

machine = platform.machine()
libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None  # "glibc 2.36"
platforms = ["linux_%s" % machine]
if libc and libc.startswith("glibc "):
    major, minor = (int(x) for x in libc.split()[1].split(".")[:2])
    legacy = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}
    for m in range(minor, 4, -1):
        platforms.append("manylinux_%d_%d_%s" % (major, m, machine))
        if m in legacy:
            platforms.append("%s_%s" % (legacy[m], machine))
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "abi": "cp%d%d" % sys.version_info[:2],
    "libc": libc,
    "platforms": platforms,
}))
