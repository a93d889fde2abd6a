"""What a site.yml run that changes nothing costs per host: figures on the machine it runs on (a
benchmark: prints, asserts nothing).

Uses the lab (inventories/lab: an RTX PRO 6000-like and a B300-like node, podman containers reached
over SSH as root; ./scripts/lab.sh creates and converges them) and runs site.yml as an operator
would, with Ansible's JSON callback:
  1. both nodes at once (forks as ansible.cfg sets them), a few times: the wall seconds of each run,
  2. one node alone (--limit): the cost of one host,
  3. both nodes one after the other (--forks 1): how a run grows with hosts when forks < hosts,
and the slowest tasks of the last run of step 1 (each host's seconds), with how many tasks reported
changed (a no-op run must report none) and which checks were proven by their verification stamps
(verified: unchanged) rather than run again.

  ./scripts/lab.sh                          # once: creates and converges the lab nodes
  python benchmarks/noop_converge.py [runs, default 3]
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def site(*extra):
    """One site.yml run on the lab; (wall seconds, the JSON report)."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", "inventories/lab", "site.yml"] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    match = re.search(r"^\{$", proc.stdout, re.M)
    if proc.returncode != 0 or match is None:
        sys.exit("site.yml failed (rc %d): %s%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:]))
    return wall, json.JSONDecoder().raw_decode(proc.stdout[match.start():])[0]


def seconds(task):
    """A task's duration, from the callback's ISO timestamps (all its hosts)."""
    duration = task.get("task", {}).get("duration", {})
    if not (duration.get("start") and duration.get("end")):
        return 0.0
    start, end = (datetime.fromisoformat(duration[key].replace("Z", "+00:00")) for key in ("start", "end"))
    return (end - start).total_seconds()


def summary(report):
    rows, stamps = [], {}
    for play in report["plays"]:
        for task in play["tasks"]:
            name = task["task"]["name"]
            for host, result in task["hosts"].items():
                rows.append((seconds(task), host, name))
                if result.get("verified"):
                    stamps.setdefault(result["verified"], set()).add(name)
    changed = {host: stats.get("changed", 0) for host, stats in report["stats"].items()}
    return rows, stamps, changed


def main(runs):
    print("no-op site.yml on the lab (%s), %d runs" % (", ".join(("lab-pro6000", "lab-b300")), runs))
    walls, report = [], None
    for _run in range(runs):
        wall, report = site()
        walls.append(wall)
    rows, stamps, changed = summary(report)
    tasks = len({row[2] for row in rows})
    print("both nodes at once: wall %s s (median %.1f s); %d tasks per host; changed %s"
          % (", ".join("%.1f" % w for w in walls), statistics.median(walls), tasks, changed))
    one = site("--limit", "lab-pro6000")[0]
    print("one node alone (lab-pro6000): wall %.1f s" % one)
    serial = site("--forks", "1")[0]
    print("both nodes with --forks 1: wall %.1f s (%.1f s per host)" % (serial, serial / 2))
    for verdict, names in sorted(stamps.items()):
        print("checks %s: %s" % (verdict, "; ".join(sorted(names))))
    print("slowest tasks of the last run (seconds, host, task):")
    for duration, host, name in sorted(rows, reverse=True)[:12]:
        print("  %6.2f  %-12s %s" % (duration, host, name))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
