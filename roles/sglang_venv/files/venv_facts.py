# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Versions read from the installed venv itself (run with its interpreter; imports nothing heavy:
torch's CUDA version is read from torch/version.py, not by importing torch). Prints JSON."""
import importlib.util
import json
import os
import re
import sys
from importlib import metadata


def version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def torch_cuda():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path) as handle:
            match = re.search(r"^cuda\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", handle.read(), re.M)
    except OSError:
        return None
    return match.group(1) if match else None


print(json.dumps({
    "python": sys.executable,
    "python_version": "%d.%d.%d" % sys.version_info[:3],
    "sglang": version("sglang"),
    "flashinfer": version("flashinfer-python"),
    "torch": version("torch"),
    "torch_cuda": torch_cuda(),
}))
