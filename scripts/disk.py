# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disk for the test runs: this project's podman nodes, the free space they need, what a run used.

Usage:
  python scripts/disk.py sample FILE [--interval 10]   append "epoch used avail" (bytes) of the
        filesystem that holds podman's containers to FILE until killed (scripts/test.sh runs it)
  python scripts/disk.py check LANE [LANE ...]          exit 1 with one message when less is free
        than the lanes need together: a lane is SCENARIO[,SCENARIO...] run one after another, which
        needs the largest of them; lanes run side by side (tests/ci-budget.yml: disk_need_gb)
  python scripts/disk.py clean [--scenario NAME]        remove the nodes an interrupted run of this
        project's Molecule scenarios left (every scenario, or one), say what each held and the GB freed
  python scripts/disk.py nodes                          this project's containers and what each holds
  python scripts/disk.py free                           free bytes on the filesystem of podman's storage

This project's containers are found by what it gave them, never by a name alone: a scenario's nodes
carry the label io.blackwell-sglang.scenario=<scenario> (each molecule.yml's platforms), the lab's
are the hosts of inventories/lab (playbooks/lab.yml makes them; ./scripts/lab.sh --remove removes
them). Another project's containers, Molecule's or not, whatever their names, are left alone.
GB are 10^9 bytes, as df -H and podman print them.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUDGET = os.path.join(ROOT, "tests", "ci-budget.yml")
LAB_INVENTORY = os.path.join(ROOT, "inventories", "lab", "hosts.yml")
LABEL = "io.blackwell-sglang.scenario"
GB = 1e9


def storage_path():
    """The directory podman keeps its containers in (its graph root), or the nearest one that exists."""
    try:
        path = subprocess.run(["podman", "info", "--format", "{{.Store.GraphRoot}}"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        path = "/var/lib/containers/storage"
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return path or "/"


def usage(path):
    """(used, free) bytes of the filesystem holding path; free is what an unprivileged write may use."""
    stat = os.statvfs(path)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize, stat.f_bavail * stat.f_frsize


def needs(budget_path=BUDGET):
    """{scenario: GB} from the budget file's disk_need_gb."""
    with open(budget_path, encoding="utf-8") as handle:
        return {str(k): float(v) for k, v in ((yaml.safe_load(handle) or {}).get("disk_need_gb") or {}).items()}


def lab_names(inventory=None):
    """The container names of the lab's hosts (their ansible_host in inventories/lab/hosts.yml)."""
    inventory, names = inventory or LAB_INVENTORY, []

    def walk(group):
        for host, hostvars in ((group or {}).get("hosts") or {}).items():
            names.append(((hostvars or {}).get("ansible_host")) or host)
        for child in ((group or {}).get("children") or {}).values():
            walk(child)

    with open(inventory, encoding="utf-8") as handle:
        for group in (yaml.safe_load(handle) or {}).values():
            walk(group)
    return names


def podman_json(*args):
    proc = subprocess.run(["podman", *args, "--format", "json"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit("disk.py: podman %s failed: %s" % (" ".join(args), proc.stderr.strip()))
    return json.loads(proc.stdout or "[]")


def containers(scenario=None, sizes=False):
    """[(name, what it is, bytes or None)] of this project's containers: a scenario's nodes (by
    label) and the lab's (by the lab inventory's names); with sizes, what each writes on disk."""
    args = ["ps", "-a"] + (["--size"] if sizes else [])
    found = []
    lab = set(lab_names()) if scenario is None else set()
    for entry in podman_json(*args):
        names = entry.get("Names") or []
        name = names[0] if names else entry.get("Id", "?")[:12]
        labels = entry.get("Labels") or {}
        if LABEL in labels and scenario in (None, labels[LABEL]):
            kind = "node of Molecule scenario %s" % labels[LABEL]
        elif name in lab:
            kind = "lab node (./scripts/lab.sh --remove)"
        else:
            continue
        size = (entry.get("Size") or {}).get("rwSize") if sizes else None
        found.append((name, kind, size))
    return found


def describe(found):
    if not found:
        return ["  (none of this project's containers exist)"]
    return ["  %-24s %8s  %s" % (name, "?" if size is None else "%.1f GB" % (size / GB), kind)
            for name, kind, size in found]


def check(lanes, budget_path=BUDGET, path=None):
    """None when the filesystem has what the lanes need together, else the message that says how
    much is free and needed, what holds the space and the commands that free it. A lane is a
    comma-separated list of scenarios run one after another (it needs the largest of them); the
    lanes run side by side (their needs add up)."""
    path = path or storage_path()
    table = needs(budget_path)
    lanes = [[s for s in lane.split(",") if s] for lane in lanes]
    unknown = sorted({s for lane in lanes for s in lane if s not in table})
    if unknown:
        return ("disk.py: no disk_need_gb for %s in %s: add what each scenario's nodes hold at their largest"
                % (", ".join(unknown), os.path.relpath(budget_path, ROOT)))
    largest = [max(lane, key=table.get) for lane in lanes if lane]
    need = sum(table[s] for s in largest)
    _used, free = usage(path)
    if free >= need * GB:
        return None
    first = "disk.py: not enough free disk for Molecule %s: %.1f GB free on %s, %.1f GB needed (%s; tests/ci-budget.yml: disk_need_gb)." % (
        " beside ".join(",".join(lane) for lane in lanes), free / GB, path, need, " + ".join("%s %g" % (s, table[s]) for s in largest))
    lines = [first, "This project's containers hold:"] + describe(containers(sizes=True)) + [
        "Free it: ./scripts/test.sh --clean (what an interrupted test run left),"
        " ./scripts/lab.sh --remove (the lab's nodes); `podman system df` shows everything else."]
    return "\n".join(lines)


def clean(scenario=None):
    """Remove this project's scenario nodes (label); return the lines that say what went."""
    path = storage_path()
    found = [c for c in containers(scenario=scenario, sizes=True) if c[1].startswith("node of")]
    if not found:
        return ["disk.py clean: no node of this project's Molecule scenarios%s is left" %
                ("" if scenario is None else " (" + scenario + ")")]
    before = usage(path)[1]
    lines = ["disk.py clean: removing the nodes of this project's Molecule scenarios:"] + describe(found)
    proc = subprocess.run(["podman", "rm", "--force", "--time", "0"] + [name for name, _kind, _size in found],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit("\n".join(lines) + "\ndisk.py clean: podman rm failed: " + proc.stderr.strip())
    lines.append("disk.py clean: freed %.1f GB on %s (%.1f GB free now)"
                 % ((usage(path)[1] - before) / GB, path, usage(path)[1] / GB))
    return lines


def sample(target, interval):
    path = storage_path()
    with open(target, "a", encoding="utf-8") as handle:
        handle.write("# %s: epoch, used and free bytes of the filesystem holding %s\n" % (os.path.basename(__file__), path))
        while True:
            used, free = usage(path)
            handle.write("%d %d %d\n" % (time.time(), used, free))
            handle.flush()
            time.sleep(interval)


def main(argv):
    parser = argparse.ArgumentParser(prog="scripts/disk.py", description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    p_sample = sub.add_parser("sample")
    p_sample.add_argument("file")
    p_sample.add_argument("--interval", type=float, default=10.0)
    p_check = sub.add_parser("check")
    p_check.add_argument("lanes", nargs="+")
    p_check.add_argument("--budget", default=BUDGET)
    p_clean = sub.add_parser("clean")
    p_clean.add_argument("--scenario")
    sub.add_parser("nodes")
    sub.add_parser("free")
    args = parser.parse_args(argv)
    if shutil.which("podman") is None and args.command != "sample":
        print("disk.py: podman is not installed (./scripts/bootstrap.sh installs it)", file=sys.stderr)
        return 2
    if args.command == "sample":
        sample(args.file, args.interval)
    elif args.command == "check":
        message = check(args.lanes, args.budget)
        if message:
            print(message, file=sys.stderr)
            return 1
    elif args.command == "clean":
        print("\n".join(clean(args.scenario)))
    elif args.command == "free":
        print(usage(storage_path())[1])
    else:
        print("\n".join(describe(containers(sizes=True))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
