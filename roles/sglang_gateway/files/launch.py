"""Launcher of the SGLang model gateway (smg), installed by the blackwell.sglang.sglang_gateway role.

The workers: smg starts with the workers of the manifest named by SGLANG_GATEWAY_MANIFEST (written
only by the blackwell.sglang.gateway_manifest module: {"version": 1, "workers": [{"url": ...}]}),
given as --worker-urls. The gateway runs in smg's single-model mode, as sglang-router did: with
--discovery-provider smg switches to its multi-model (IGW) mode, where POST /generate without
"model" answers 400 missing_model, and native SGLang clients send none. So the manifest is read
here, at each start, and a running gateway is changed through its worker API (the role and the
rollout's drain do both): a worker a rollout drained stays out across a restart of the gateway.
A manifest that cannot be read stops the start (exit 2) with one line in the journal.

smg reads its keys only from its arguments (smg 1.13.0 router_args.py: --api-key and
--control-plane-api-keys have no environment variable or file), and a process's arguments are
readable in /proc by every local user. So the unit runs this file with the arguments that are not
secret; it appends the keys from the environment (the role's env file, 0640 root:sglang-gateway,
read by systemd) and runs smg in this process (smg/cli.py main(argv)): the keys are in neither the
unit, the command line nor the journal. smg then renames the process "smg::router" (setproctitle).

  SGLANG_GATEWAY_API_KEY                      -> --api-key KEY
  SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_<n>    -> --control-plane-api-keys 'id:name:role:key' ... (by n)
"""

import json
import os
import sys

API_KEY = "SGLANG_GATEWAY_API_KEY"
CONTROL_PLANE = "SGLANG_GATEWAY_CONTROL_PLANE_API_KEY_"
MANIFEST = "SGLANG_GATEWAY_MANIFEST"


class ManifestError(Exception):
    pass


def manifest_args(environ):
    """--worker-urls and the manifest's worker URLs ([] when it lists none or no manifest is named)."""
    path = environ.pop(MANIFEST, "")
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        sys.stderr.write("sglang-gateway launch.py: no worker manifest at %s yet: starting with no workers\n" % path)
        return []
    except (OSError, ValueError) as exc:
        raise ManifestError("cannot read the worker manifest %s: %s" % (path, exc)) from exc
    workers = document.get("workers") if isinstance(document, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, dict) and isinstance(w.get("url"), str) for w in workers):
        raise ManifestError("the worker manifest %s is not {\"version\": 1, \"workers\": [{\"url\": ...}]}: "
                            "run the sglang_gateway role again" % path)
    if document.get("version") != 1:
        raise ManifestError("the worker manifest %s has version %r, not 1: run the sglang_gateway role again"
                            % (path, document.get("version")))
    special = [worker["url"] for worker in workers if worker.get("worker_type", "regular") != "regular"]
    if special:
        raise ManifestError("the worker manifest %s has prefill/decode workers (%s): --worker-urls takes regular "
                            "workers only" % (path, ", ".join(special)))
    urls = [worker["url"] for worker in workers]
    return ["--worker-urls"] + urls if urls else []


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
    try:
        workers = manifest_args(os.environ)
    except ManifestError as exc:
        sys.stderr.write("sglang-gateway launch.py: %s\n" % exc)
        return 2
    argv = sys.argv[1:] + workers + secret_args(os.environ)
    try:
        from smg.cli import main as smg_main
    except ImportError as exc:
        sys.stderr.write("sglang-gateway launch.py: cannot import smg (%s): run the sglang_gateway role again\n" % exc)
        return 2
    smg_main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
