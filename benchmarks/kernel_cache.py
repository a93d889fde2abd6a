"""Compile once, seed the fleet: figures on the machine it runs on (a benchmark: prints, asserts nothing).

Uses the `fleet` Molecule scenario's two PRO 6000-like nodes (same kernel cache key) and its playbook
molecule/fleet/stage.yml (site.yml without the units), with the scenario's own store:
  1. node 1 cold: its workspace and the store emptied, then the warm list built (FlashInfer's build),
  2. the artifact node 1 exported (MB),
  3. node 2 with that artifact: its workspace emptied, then seeded and proven instead of compiling,
  4. a switch to a new venv on node 1 and the rollback: compile seconds of the rollback.
Seconds are Ansible's task durations (ansible.posix.json callback) of the build on node 1 and of
seeding + proof on node 2.

  source scripts/env.sh && molecule converge -s fleet     # once: creates and converges the nodes
  python benchmarks/kernel_cache.py [modules, comma-separated; default sampling]
  molecule destroy -s fleet
"""

import datetime
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NODE1, NODE2 = "fleet-pro6000-1", "fleet-pro6000-2"
BUILD = "Warm | Build the JIT modules (repairs what a killed build left)"
SEED = "Store | Check, unpack and prove it"


def inventory():
    out = subprocess.check_output(["molecule", "list", "-s", "fleet", "-f", "plain"], text=True, cwd=ROOT)
    if NODE1 not in out:
        sys.exit("the fleet nodes are not there: source scripts/env.sh && molecule converge -s fleet")
    # Molecule's ephemeral directory of the scenario (~/.ansible/tmp/molecule.<hash>.fleet).
    paths = glob.glob(os.path.expanduser("~/.ansible/tmp/molecule.*.fleet/inventory/ansible_inventory.yml"))
    if not paths:
        sys.exit("no inventory of the fleet scenario: molecule converge -s fleet")
    return max(paths, key=os.path.getmtime)  # the newest: the checkout that converged the nodes last


def stage(inv, limit, *extra):
    args = ["ansible-playbook", "-i", inv, os.path.join(ROOT, "molecule", "fleet", "stage.yml"), "--limit", limit]
    for value in extra:
        args += ["-e", value if isinstance(value, str) else json.dumps(value)]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    start = re.search(r"^\{$", proc.stdout, re.M)
    if proc.returncode or not start:
        sys.exit("stage.yml failed (rc %d): %s %s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:]))
    report = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
    tasks = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                # The JSON callback names a role's task "<role> : <name>".
                name = task["task"]["name"].split(" : ", 1)[-1]
                tasks.setdefault(host, []).append((name, task["task"].get("duration", {}), result))
    return tasks


def seconds(tasks, host, name):
    """Wall seconds of the task(s) called `name` that ran on `host` (not skipped)."""
    total = 0.0
    for task, duration, result in tasks[host]:
        if task == name and not result.get("skipped") and duration.get("start") and duration.get("end"):
            start, end = (datetime.datetime.fromisoformat(duration[k].replace("Z", "+00:00")) for k in ("start", "end"))
            total += (end - start).total_seconds()
    return total


def result(tasks, host, name):
    return [r for task, _d, r in tasks[host] if task == name and not r.get("skipped")][-1]


def podman(node, command):
    return subprocess.check_output(["podman", "exec", node, "sh", "-c", command], text=True)


def main():
    modules = (sys.argv[1] if len(sys.argv) > 1 else "sampling").split(",")
    inv = inventory()
    store = os.path.join(os.path.dirname(os.path.dirname(inv)), "kernels")
    warm = {"sglang_node_prewarm_modules": modules}
    cores = podman(NODE1, "nproc").strip()
    print("modules %s, %s cores, store %s" % (",".join(modules), cores, store))
    for node in (NODE1, NODE2):
        podman(node, "rm -rf /var/lib/sglang/kernel-caches/$(basename $(readlink /opt/sglang/current))/.cache")
    for path in glob.glob(os.path.join(store, "*")):
        os.unlink(path)

    tasks = stage(inv, NODE1, warm)
    cold = seconds(tasks, NODE1, BUILD)
    print("node 1, cold build of the warm list: %.1f s (FlashInfer's module seconds %s)"
          % (cold, result(tasks, NODE1, BUILD).get("seconds")))
    [record] = [json.load(open(p)) for p in glob.glob(os.path.join(store, "*.json"))]
    print("artifact %s: %.1f MB (%d bytes), modules %s" % (record["key_id"], record["bytes"] / 1e6, record["bytes"],
                                                           ",".join(record["modules"])))

    tasks = stage(inv, NODE2, warm)
    seeded = seconds(tasks, NODE2, SEED) + seconds(tasks, NODE2, BUILD)
    print("node 2 with the artifact: %.1f s (seed and proof %.1f s, FlashInfer's build check %.1f s), built %s"
          % (seeded, seconds(tasks, NODE2, SEED), seconds(tasks, NODE2, BUILD), result(tasks, NODE2, BUILD)["built"]))
    print("ratio cold / seeded: %.1f" % (cold / seeded if seeded else float("inf")))

    upgraded = dict(warm, sglang_venv_packages=["sglang==0.5.23", "tomli-w==1.2.0"])
    stage(inv, NODE1, upgraded)
    tasks = stage(inv, NODE1, warm, "sglang_venv_rollback=true")
    back = result(tasks, NODE1, BUILD)
    print("rollback on node 1: compile seconds %.1f (built %s; the build check took %.1f s)"
          % (sum(back.get("seconds", {}).get(m, 0) for m in back["built"]), back["built"], seconds(tasks, NODE1, BUILD)))


if __name__ == "__main__":
    main()
