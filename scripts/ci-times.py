# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the minutes of a ./scripts/test.sh run went, against the budget in tests/ci-budget.yml.

Usage: python scripts/ci-times.py [.cache/test-times] [--budget tests/ci-budget.yml]

Reads what scripts/test.sh leaves in its times directory:
  test.log        every line prefixed HH:MM:SS; steps start at "=== <step>", Molecule actions at
                  "INFO     [<scenario> > <action>] Executing"
  beside.log      the same for the scenarios test.sh ran in a second process (same clock)
  unit.xml, molecule-<scenario>.xml   pytest's JUnit files (seconds per test case)
and prints a Markdown table: minutes per step, per Molecule action, and per test file (the sum of
its test cases), with the budget of each step and scenario beside it. Over-budget rows are marked
"OVER"; the exit code is 0 either way (a budget is a plan, the table the measurement).
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

import yaml

LINE = re.compile(r"^(\d\d):(\d\d):(\d\d) (.*)$")
STEP = re.compile(r"^=== (.+)$")
ACTION = re.compile(r"^INFO\s+\[(\S+) > (\S+)\] Executing$")
SCENARIO_STEP = re.compile(r"^molecule test -s (\S+)$")


def read_log(path, origin=None):
    """[(seconds since origin, text, absolute seconds)]; origin defaults to the log's first line.

    A clock that passes midnight keeps counting. Missing file: [].
    """
    if not os.path.exists(path):
        return []
    events, offset, last = [], 0, None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            match = LINE.match(raw.rstrip("\n"))
            if not match:
                continue
            clock = int(match.group(1)) * 3600 + int(match.group(2)) * 60 + int(match.group(3))
            if last is not None and clock + offset < last:
                offset += 86400
            last = clock + offset
            events.append((last, match.group(4)))
    if not events:
        return []
    start = events[0][0] if origin is None else origin
    if start > events[0][0] + 43200:  # origin before midnight, this log after it
        start -= 86400
    return [(when - start, text, when) for when, text in events]


def spans(events, pattern):
    """[(name, start, end)] for each line matching pattern, ending where the next one starts."""
    marks = [(when, pattern.match(text)) for when, text, _clock in events]
    marks = [(when, match) for when, match in marks if match]
    end_of_log = events[-1][0] if events else 0
    result = []
    for index, (when, match) in enumerate(marks):
        end = marks[index + 1][0] if index + 1 < len(marks) else end_of_log
        result.append((match.groups(), when, end))
    return result


def junit_files(path):
    """{test file: seconds} from a JUnit file (classname a.b.tests.test_x -> test_x.py)."""
    if not os.path.exists(path):
        return {}
    files = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "?").split(".")[-1] + ".py"
        files[name] = files.get(name, 0.0) + float(case.get("time", 0) or 0)
    return files


def read_budget(path):
    """{'total': minutes, 'bootstrap': minutes, 'molecule default': minutes, ...} (tests/ci-budget.yml)."""
    if not path or not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return {str(key): float(value) for key, value in (yaml.safe_load(handle) or {}).items()
                if isinstance(value, (int, float))}


def disk(times_dir):
    """(peak GB above the first sample, least free GB, filesystem path, samples) from disk.log, or None."""
    path = os.path.join(times_dir, "disk.log")
    if not os.path.exists(path):
        return None
    where, samples = "?", []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("#"):
                where = line.rsplit(" holding ", 1)[-1].strip()
                continue
            fields = line.split()
            if len(fields) == 3 and all(f.isdigit() for f in fields):
                samples.append((int(fields[1]), int(fields[2])))
    if not samples:
        return None
    start = samples[0][0]
    return (max(used for used, _free in samples) - start) / 1e9, min(free for _used, free in samples) / 1e9, where, len(samples)


def minutes(seconds):
    return "%.1f" % (seconds / 60.0)


def table(times_dir, budget):
    events = read_log(os.path.join(times_dir, "test.log"))
    if not events:
        return ["no timestamped log in %s: run ./scripts/test.sh first" % times_dir], False
    rows = ["| step | minutes | budget |", "| --- | ---: | ---: |"]
    over = False

    def row(name, seconds, limit=None):
        nonlocal over
        mark = ""
        if limit is not None and seconds / 60.0 > limit:
            mark, over = " OVER", True
        rows.append("| %s | %s | %s%s |" % (name, minutes(seconds), "" if limit is None else "%g" % limit, mark))

    def steps_of(log_events, beside):
        steps = [(groups[0], start, end) for groups, start, end in spans(log_events, STEP)]
        actions = spans(log_events, ACTION)
        for name, start, end in steps:
            if name == "all tests passed" or name.startswith(("output of the scenarios run beside", "waiting for the scenarios beside")):
                continue
            scenario = SCENARIO_STEP.match(name)
            key = "molecule " + scenario.group(1) if scenario else name
            row(name + (" (beside the others)" if beside else ""), end - start, budget.get(key))
            if not scenario:
                continue
            for (owner, action), a_start, a_end in actions:
                if owner == scenario.group(1) and start <= a_start < end:
                    row("%s > %s" % (owner, action), min(a_end, end) - a_start)
            files = junit_files(os.path.join(times_dir, "molecule-%s.xml" % scenario.group(1)))
            for test_file, seconds in sorted(files.items(), key=lambda item: -item[1]):
                row("%s > verify > %s" % (scenario.group(1), test_file), seconds)
        return steps

    steps = steps_of(events, False)
    # The scenarios test.sh runs in a second process log to beside.log, on the same clock.
    beside = read_log(os.path.join(times_dir, "beside.log"), origin=events[0][2])
    if beside:
        steps_of(beside, True)
    finished = [start for name, start, _end in steps if name == "all tests passed"]
    total = finished[0] if finished else events[-1][0]
    row("**total**" + ("" if finished else " (did not finish)"), total, budget.get("total"))
    sampled = disk(times_dir)
    if sampled:
        peak, least, where, count = sampled
        limit = budget.get("disk_gb")
        mark = " OVER" if limit is not None and peak > limit else ""
        over = over or bool(mark)
        rows += ["", "| disk (GB, %s, %d samples) | GB | budget |" % (where, count), "| --- | ---: | ---: |",
                 "| peak above the start | %.1f | %s%s |" % (peak, "" if limit is None else "%g" % limit, mark),
                 "| least free | %.1f | |" % least]
    return rows, over


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("times_dir", nargs="?", default=".cache/test-times")
    parser.add_argument("--budget", default=os.path.join(os.path.dirname(__file__), "..", "tests", "ci-budget.yml"))
    args = parser.parse_args(argv)
    rows, over = table(args.times_dir, read_budget(args.budget))
    sys.stdout.write("\n".join(rows) + "\n")
    if over:
        sys.stdout.write("ci-times: some steps took longer, or the run used more disk, than tests/ci-budget.yml allows (OVER above)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
