"""A fleet rollout's cost: figures on the machine it runs on (a benchmark: prints, asserts nothing).

Uses the `fleet` Molecule scenario's nodes (two PRO 6000-like nodes and a B300-like one, reached
over SSH as an unprivileged user with sudo, whose units run the scenario's stand-in server) and runs
playbooks/rollout.yml as an operator would:
  0. a rollout to the default venv spec, to start from a settled fleet (printed, not a figure),
  1. a rollout that changes nothing,
  2. a rollout with a real venv change (one small pinned package more: a new venv id, its kernel
     caches built once on node 1 and seeded on node 2, built for its own key on the B300, each node
     drained, switched, restarted, gated and smoke-tested in its batch),
  3. that rollout again (nothing to do).
For each: wall seconds, and each play's seconds (settings, preflight, stage, switch) from Ansible's
JSON callback.

  source scripts/env.sh && molecule converge -s fleet     # once: creates and converges the nodes
  python benchmarks/rollout.py [extra package, default tomli-w==1.1.0 (not one the tests use)]
  molecule destroy -s fleet
"""

import datetime
import glob
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def inventory():
    out = subprocess.check_output(["molecule", "list", "-s", "fleet", "-f", "plain"], text=True, cwd=ROOT)
    if "fleet-pro6000-1" not in out:
        sys.exit("the fleet nodes are not there: source scripts/env.sh && molecule converge -s fleet")
    paths = glob.glob(os.path.expanduser("~/.ansible/tmp/molecule.*.fleet/inventory/ansible_inventory.yml"))
    if not paths:
        sys.exit("no inventory of the fleet scenario: molecule converge -s fleet")
    return max(paths, key=os.path.getmtime)


def seconds(duration):
    start, end = (datetime.datetime.fromisoformat(duration[k].replace("Z", "+00:00")) for k in ("start", "end"))
    return (end - start).total_seconds()


def rollout(inv, *extra):
    args = ["ansible-playbook", "-i", inv, os.path.join(ROOT, "playbooks", "rollout.yml")]
    for value in extra:
        args += ["-e", json.dumps(value)]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    began = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.monotonic() - began
    start = re.search(r"^\{$", proc.stdout, re.M)
    if proc.returncode or not start:
        sys.exit("rollout.yml failed (rc %d): %s %s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:]))
    report = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
    plays = {}
    for play in report["plays"]:  # a serial play appears once per batch
        name = play["play"]["name"][:32]
        plays[name] = plays.get(name, 0.0) + seconds(play["play"]["duration"])
    changed = sum(stats.get("changed", 0) for stats in report["stats"].values())
    return wall, plays, changed, len(report["stats"])


def main():
    package = sys.argv[1] if len(sys.argv) > 1 else "tomli-w==1.1.0"
    inv = inventory()
    print("fleet scenario, %d cores on this machine" % os.cpu_count())
    runs = [("settle (the default venv spec)", {}),
            ("no-op rollout", {}),
            ("rollout with a venv change (+%s)" % package, {"sglang_venv_packages": ["sglang==0.5.23", package]}),
            ("the same rollout again (no-op)", {"sglang_venv_packages": ["sglang==0.5.23", package]})]
    for title, extra in runs:
        wall, plays, changed, hosts = rollout(inv, extra)
        print("%s: %d hosts, %.1f s wall, changed=%d; per play: %s" % (
            title, hosts, wall, changed, ", ".join("%s %.1f s" % (name, secs) for name, secs in plays.items())))


if __name__ == "__main__":
    main()
