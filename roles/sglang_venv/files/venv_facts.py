# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Versions read from the installed venv itself (run with its interpreter; imports nothing heavy:
torch's CUDA version is read from torch/version.py, not by importing torch), and what is missing from
it: every file an installed distribution's RECORD lists (its code, its console scripts such as
bin/ninja, its data) must still be there; "damaged" names each distribution that lacks one, with its
version, so that the sglang_venv role reinstalls it at that version (tasks/repair.yml). Prints
JSON, or one line "venv_facts: error: <reason>" on stderr and exits 1."""
import csv
import importlib.util
import json
import os
import re
import sys
from importlib import metadata

# A venv is only ever built whole (its marker file last): a damaged one is removed and built again.
FIX = ("remove the venv %s and re-run site.yml (it builds it again), or roll back to the previous one "
       "(sglang_venv_rollback: true)" % os.path.realpath(sys.prefix))


class FactsError(Exception):
    """What the operator must fix (the message says what)."""


def text(exc):
    """An exception's message on one line."""
    return " ".join(str(exc).split())


def version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:  # a half-written .dist-info (no METADATA, not text)
        raise FactsError("cannot read the installed version of %s (%s: %s): %s" % (dist, type(exc).__name__, text(exc), FIX))


def torch_cuda():
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as exc:
        raise FactsError("cannot locate torch in %s (%s: %s): %s" % (sys.prefix, type(exc).__name__, text(exc), FIX))
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path) as handle:
            match = re.search(r"^cuda\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", handle.read(), re.M)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise FactsError("cannot read torch's CUDA version from %s (%s): %s" % (path, getattr(exc, "strerror", None) or text(exc), FIX))
    return match.group(1) if match else None


def damaged():
    """{name: {"version", "missing" (how many), "examples" (up to 3, relative to site-packages)}} of the
    installed distributions a RECORD file of which is gone (compiled bytecode aside: it is made on use)."""
    found = {}
    for dist in metadata.distributions():
        # The RECORD file itself, not dist.files: from Python 3.12 on, importlib.metadata leaves the
        # files that are gone out of dist.files (its skip_missing_files), which is what is looked for.
        recorded = [row[0] for row in csv.reader((dist.read_text("RECORD") or "").splitlines()) if row and row[0]]
        missing = [path for path in recorded
                   if not path.endswith(".pyc") and not os.path.lexists(dist.locate_file(path))]
        if missing:
            found[dist.metadata["Name"]] = {"version": dist.version, "missing": len(missing), "examples": missing[:3]}
    return found


def main():
    try:
        facts = {
            "python": sys.executable,
            "python_version": "%d.%d.%d" % sys.version_info[:3],
            "sglang": version("sglang"),
            "flashinfer": version("flashinfer-python"),
            "torch": version("torch"),
            "torch_cuda": torch_cuda(),
            "damaged": damaged(),
        }
    except FactsError as exc:
        sys.stderr.write("venv_facts: error: %s\n" % exc)
        return 1
    except Exception as exc:  # one line for the operator, not a traceback
        sys.stderr.write("venv_facts: error: unexpected %s: %s\n" % (type(exc).__name__, text(exc)))
        return 1
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
