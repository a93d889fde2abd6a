# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The units' ExecStartPre= pre-warm check, run with the SGLang venv's interpreter:

    /opt/sglang/current/bin/python /usr/local/lib/blackwell-sglang/flashinfer_prewarm.py --modules sampling

The sglang_services role installs it beside flashinfer_jit.py, the flashinfer_jit_cache module's own
check/build/repair code (plugins/module_utils/flashinfer_jit.py), which does the work. Exits 0 with one
summary line when every module is built (compiling what is missing), 1 with one line naming the
reason otherwise. `--help` lists the options.
"""

import sys

# Run as a file, Python puts this file's directory first on sys.path: flashinfer_jit is the copy
# beside it, and nothing there shadows FlashInfer's own packages.
from flashinfer_jit import command

if __name__ == "__main__":
    STATUS, LINE = command(sys.argv[1:])
    (sys.stdout if STATUS == 0 else sys.stderr).write(LINE + "\n")
    sys.exit(STATUS)
