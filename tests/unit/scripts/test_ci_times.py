"""scripts/ci-times.py: minutes per step, Molecule action and test file from a test.sh log."""

import importlib.util
import os
import textwrap

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "ci-times.py")
SPEC = importlib.util.spec_from_file_location("ci_times", SCRIPT)
ci_times = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ci_times)

LOG = """\
23:58:00 === bootstrap
23:58:30 [bootstrap] ready
23:59:00 === molecule test -s default
23:59:10 INFO     [default > converge] Executing
00:05:10 INFO     [default > verify] Executing
00:09:10 === all tests passed
00:09:11 | step | minutes | budget |
"""
BESIDE = """\
23:59:00 === molecule test -s apt
23:59:05 INFO     [apt > converge] Executing
00:01:05 INFO     [apt > verify] Executing
00:02:00 plain output
"""
JUNIT = """<testsuites><testsuite>
<testcase classname="molecule.default.tests.test_flashinfer" name="a" time="90.0"/>
<testcase classname="molecule.default.tests.test_flashinfer" name="b" time="30.0"/>
<testcase classname="molecule.default.tests.test_b300" name="c" time="6"/>
</testsuite></testsuites>"""


def write(tmp_path, name, text):
    (tmp_path / name).write_text(textwrap.dedent(text))


def rows(tmp_path, budget=None):
    lines, over = ci_times.table(str(tmp_path), budget or {})
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in lines[2:]}, over


def test_steps_actions_and_test_files_across_midnight(tmp_path):
    write(tmp_path, "test.log", LOG)
    write(tmp_path, "molecule-default.xml", JUNIT)
    table, over = rows(tmp_path)
    assert table["bootstrap"][0] == "1.0"
    assert table["molecule test -s default"][0] == "10.2"
    assert table["default > converge"][0] == "6.0"
    assert table["default > verify"][0] == "4.0"
    assert table["default > verify > test_flashinfer.py"][0] == "2.0"
    assert table["default > verify > test_b300.py"][0] == "0.1"
    assert table["**total**"][0] == "11.2"
    assert not over


def test_scenarios_beside_are_timed_on_the_same_clock(tmp_path):
    write(tmp_path, "test.log", LOG)
    write(tmp_path, "beside.log", BESIDE)
    table, _over = rows(tmp_path)
    assert table["molecule test -s apt (beside the others)"][0] == "3.0"
    assert table["apt > converge"][0] == "2.0"
    assert table["apt > verify"][0] == "0.9"
    assert table["**total**"][0] == "11.2"


def test_budget_marks_what_is_over(tmp_path):
    write(tmp_path, "test.log", LOG)
    table, over = rows(tmp_path, {"molecule default": 10, "bootstrap": 2, "total": 30})
    assert table["molecule test -s default"] == ["10.2", "10 OVER |"]
    assert table["bootstrap"] == ["1.0", "2 |"]
    assert over


def test_unfinished_run_is_said_so(tmp_path):
    write(tmp_path, "test.log", LOG.split("00:09:10", maxsplit=1)[0])
    table, _over = rows(tmp_path)
    assert "**total** (did not finish)" in table


def test_budget_file_is_read(tmp_path):
    (tmp_path / "budget.yml").write_text("---\ntotal: 30\nmolecule default: 17.5\n")
    assert ci_times.read_budget(str(tmp_path / "budget.yml")) == {"total": 30.0, "molecule default": 17.5}


def test_disk_peak_above_the_start_against_its_budget(tmp_path):
    write(tmp_path, "test.log", LOG)
    write(tmp_path, "disk.log", """\
        # disk.py: epoch, used and free bytes of the filesystem holding /var/lib/containers/storage
        1000 50000000000 60000000000
        1010 91500000000 18500000000
        1020 60000000000 50000000000
        """)
    table, over = rows(tmp_path, {"disk_gb": 40})
    assert table["peak above the start"] == ["41.5", "40 OVER |"]
    assert table["least free"] == ["18.5", "|"]
    assert "disk (GB, /var/lib/containers/storage, 3 samples)" in table
    assert over
    table, over = rows(tmp_path, {"disk_gb": 42})
    assert table["peak above the start"] == ["41.5", "42 |"] and not over


def test_budget_file_with_the_disk_needs_reads(tmp_path):
    path = tmp_path / "budget.yml"
    path.write_text("total: 45\ndisk_gb: 40\ndisk_need_gb:\n  default: 24\n")
    assert ci_times.read_budget(str(path)) == {"total": 45.0, "disk_gb": 40.0}


def test_the_wait_for_the_other_lane_is_not_the_last_scenarios_time(tmp_path):
    write(tmp_path, "test.log", """\
        10:00:00 === molecule test -s wheelhouse
        10:00:10 INFO     [wheelhouse > destroy] Executing
        10:01:00 === waiting for the scenarios beside the others
        10:11:00 === output of the scenarios run beside the others: fleet
        10:11:01 === all tests passed
        """)
    table, _over = rows(tmp_path)
    assert table["molecule test -s wheelhouse"][0] == "1.0"
    assert table["wheelhouse > destroy"][0] == "0.8"
    assert not any(name.startswith("waiting for") for name in table)
    assert table["**total**"][0] == "11.0"
