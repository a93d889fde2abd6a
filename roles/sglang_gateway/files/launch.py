"""Launcher of the SGLang model gateway (smg), installed by the blackwell.sglang.sglang_gateway role.

smg reads its keys only from its arguments (smg 1.13.0 router_args.py: --api-key and
--control-plane-api-keys have no environment variable or file), and a process's arguments are
readable in /proc by every local user. So the unit runs this file with the arguments that are not
secret; it appends the keys from the environment (the role's env file, 0640 root:sglang-gateway,
read by systemd) and runs smg in this process (smg/cli.py main(argv)): the keys are in neither the
unit, the command line nor the journal. smg then renames the process "smg::router" (setproctitle).

  SGLANG_GATEWAY_API_KEY                      -> --api-key KEY
  SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_<n>    -> --control-plane-api-keys 'id:name:role:key' ... (by n)
"""

import os
import sys

API_KEY = "SGLANG_GATEWAY_API_KEY"
CONTROL_PLANE = "SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_"


def secret_args(environ):
    """The key arguments from `environ`, taking the variables out of it (smg starts no process, but
    nothing after this needs them)."""
    args = []
    key = environ.pop(API_KEY, "")
    if key:
        args += ["--api-key", key]
    names = sorted((name for name in list(environ) if name.startswith(CONTROL_PLANE)),
                   key=lambda name: int(name[len(CONTROL_PLANE):]) if name[len(CONTROL_PLANE):].isdigit() else -1)
    entries = [environ.pop(name) for name in names]
    entries = [entry for entry in entries if entry]
    if entries:
        args += ["--control-plane-api-keys"] + entries
    return args


def main():
    argv = sys.argv[1:] + secret_args(os.environ)
    try:
        from smg.cli import main as smg_main
    except ImportError as exc:
        sys.stderr.write("sglang-gateway launch.py: cannot import smg (%s): run the sglang_gateway role again\n" % exc)
        return 2
    smg_main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
