"""The fleet_report action (plugins/action/fleet_report.py) as a play on the controller runs it:
ansible-playbook against two local hosts (the action never connects to a host)."""

import json
import os
import subprocess
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

PLAY = textwrap.dedent("""\
    - name: Report
      hosts: all
      gather_facts: false
      tasks:
        - name: A row for a only
          ansible.builtin.set_fact:
            rollout_report_row: "{{ inventory_hostname | blackwell.sglang.fleet_report_row({'result': 'ok', 'batch': 1}) }}"
          when: inventory_hostname == 'a'

        - name: The report
          blackwell.sglang.fleet_report:
            dir: "{{ report_dir }}"
            run_id: "{{ run_id | default(omit) }}"
            title: Unit
            hosts: "{{ ansible_play_hosts_all }}"
            rows: "{{ rows | default(ansible_play_hosts_all | map('extract', hostvars) | map(attribute='rollout_report_row', default={}) | list) }}"
          run_once: true
          register: report

        - name: What it returned
          ansible.builtin.debug:
            var: report
          run_once: true
    """)


def play(tmp_path, *args):
    path = tmp_path / "play.yml"
    path.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    # Under ./scripts/mutation.sh, mutmut's first pass (MUTANT_UNDER_TEST=stats) records which test calls
    # which function, in this process only: in ansible-playbook's processes each call would look for
    # mutmut's setup.cfg in their working directory and fail the task. The play runs the code as is.
    if env.get("MUTANT_UNDER_TEST") == "stats":
        del env["MUTANT_UNDER_TEST"]
    proc = subprocess.run(["ansible-playbook", "-i", "a,b,", "-c", "local", str(path)] + list(args),
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    start = proc.stdout.index("{\n")
    tasks = json.JSONDecoder().raw_decode(proc.stdout[start:])[0]["plays"][0]["tasks"]
    return proc.returncode, tasks[1]["hosts"]["a"]


def test_writes_four_files_and_reports_no_change(tmp_path):
    rc, result = play(tmp_path, "-e", "report_dir=%s" % (tmp_path / "r"), "-e", "run_id=20261201T000000Z")
    assert rc == 0 and result["changed"] is False and result["written"] is True
    assert sorted(os.listdir(tmp_path / "r")) == ["fleet-20261201T000000Z.json", "fleet-20261201T000000Z.md",
                                                  "fleet-latest.json", "fleet-latest.md"]
    assert [(row["host"], row["result"]) for row in result["report"]] == [("a", "ok"), ("b", "not reached")]
    assert (tmp_path / "r" / "fleet-latest.md").read_text() == result["markdown"]
    assert result["markdown"].startswith("# Unit (20261201T000000Z)\n")


def test_without_a_run_id_it_takes_the_utc_time(tmp_path):
    rc, result = play(tmp_path, "-e", "report_dir=%s" % tmp_path)
    assert rc == 0 and len(result["run_id"]) == 16 and result["run_id"].endswith("Z")
    assert os.path.exists(tmp_path / ("fleet-%s.json" % result["run_id"]))


def test_check_mode_writes_nothing(tmp_path):
    rc, result = play(tmp_path, "--check", "-e", "report_dir=%s" % (tmp_path / "r"))
    assert rc == 0 and result["written"] is False and not os.path.exists(tmp_path / "r")


def test_a_directory_that_cannot_be_written_fails_with_its_name(tmp_path):
    (tmp_path / "file").write_text("")
    rc, result = play(tmp_path, "-e", "report_dir=%s" % (tmp_path / "file" / "r"))
    assert rc != 0 and result["failed"]
    assert result["msg"].startswith("fleet_report: cannot write the report in %s on the controller: " % (tmp_path / "file" / "r"))


def test_rows_must_match_the_hosts(tmp_path):
    rc, result = play(tmp_path, "-e", "report_dir=%s" % tmp_path, "-e", '{"rows": [{}]}')
    assert rc != 0 and result["msg"] == "fleet_report: 1 rows for 2 hosts; give one row ({} for none) per host"
    rc, result = play(tmp_path, "-e", "report_dir=%s" % tmp_path, "-e", '{"rows": ["x", {}]}')
    assert rc != 0 and result["msg"] == "fleet_report: every row must be a dict (a rollout_report_row fact, or {})"
    assert os.listdir(tmp_path) == ["play.yml"]


# The same action in this process (ActionModule.run with a task of our own): what each argument does,
# each test a few milliseconds (the plays above are the end-to-end check that Ansible finds it).

def action(tmp_path, check_mode=False, **args):
    from types import SimpleNamespace

    from ansible_collections.blackwell.sglang.plugins.action.fleet_report import ActionModule

    task = SimpleNamespace(args=dict(args), check_mode=check_mode, async_val=0, action="blackwell.sglang.fleet_report")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=str(tmp_path)))
    return ActionModule(task, connection, None, None, None).run(task_vars={})


def test_in_process_rows_pair_with_hosts_in_order(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.module_utils.rollout import fleet_report_row

    result = action(tmp_path, dir=str(tmp_path / "r"), run_id="20261201T000000Z", title="T", hosts=["a", "b"],
                    rows=[fleet_report_row("a", {"result": "ok", "batch": 1}), {}])
    assert result["changed"] is False and result["written"] is True and "failed" not in result
    assert result["run_id"] == "20261201T000000Z"
    assert [(row["host"], row["result"]) for row in result["report"]] == [("a", "ok"), ("b", "not reached")]
    assert result["markdown"].startswith("# T (20261201T000000Z)\n")
    assert sorted(os.path.basename(path) for path in result["files"]) == sorted(os.listdir(tmp_path / "r"))
    document = json.loads((tmp_path / "r" / "fleet-20261201T000000Z.json").read_text())
    assert document["play"] == "T" and document["run"] == "20261201T000000Z" and document["rows"] == result["report"]


def test_in_process_no_rows_gives_every_host_an_empty_row_and_the_default_title(tmp_path):
    result = action(tmp_path, dir=str(tmp_path), run_id="r1", hosts=["a", "b"])
    assert [(row["host"], row["result"]) for row in result["report"]] == [("a", "not reached"), ("b", "not reached")]
    assert result["markdown"].startswith("# Fleet report (r1)\n")


def test_in_process_run_id_defaults_to_the_utc_time(tmp_path):
    import datetime

    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0, tzinfo=None)
    result = action(tmp_path, dir=str(tmp_path), hosts=["a"])
    after = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert before <= datetime.datetime.strptime(result["run_id"], "%Y%m%dT%H%M%SZ") <= after
    assert os.path.exists(tmp_path / ("fleet-%s.md" % result["run_id"]))


def test_in_process_check_mode_writes_nothing(tmp_path):
    result = action(tmp_path, check_mode=True, dir=str(tmp_path / "r"), run_id="r1", hosts=["a"])
    assert result["written"] is False and result["changed"] is False and not os.path.exists(tmp_path / "r")
    assert [row["host"] for row in result["report"]] == ["a"] and result["files"]


def test_in_process_bad_rows_fail_before_anything_is_written(tmp_path):
    result = action(tmp_path, dir=str(tmp_path / "r"), hosts=["a", "b"], rows=[{}])
    assert result == {"failed": True, "msg": "fleet_report: 1 rows for 2 hosts; give one row ({} for none) per host"}
    result = action(tmp_path, dir=str(tmp_path / "r"), hosts=["a", "b"], rows=[{}, {}, {}])
    assert result["failed"] is True and result["msg"].startswith("fleet_report: 3 rows for 2 hosts")
    result = action(tmp_path, dir=str(tmp_path / "r"), hosts=["a", "b"], rows=[{}, "x"])
    assert result == {"failed": True, "msg": "fleet_report: every row must be a dict (a rollout_report_row fact, or {})"}
    assert not os.path.exists(tmp_path / "r")


def test_in_process_a_directory_that_cannot_be_written_names_it_and_the_setting(tmp_path):
    (tmp_path / "file").write_text("")
    result = action(tmp_path, dir=str(tmp_path / "file" / "r"), run_id="r1", hosts=["a"])
    assert result["failed"] is True and set(result) == {"failed", "msg"}
    assert result["msg"].startswith("fleet_report: cannot write the report in %s on the controller: " % (tmp_path / "file" / "r"))
    assert result["msg"].endswith(". Set rollout_report_dir to a directory you can write.")


def test_in_process_the_run_id_is_utc_whatever_the_local_zone_and_no_warning_is_shown(tmp_path, monkeypatch):
    import datetime
    import time

    from ansible.plugins import action as action_base

    warnings = []
    monkeypatch.setattr(action_base.display, "warning", lambda msg, *a, **k: warnings.append(msg))
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving
    time.tzset()
    try:
        result = action(tmp_path, dir=str(tmp_path), hosts=["a"])
    finally:
        monkeypatch.undo()
        time.tzset()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - datetime.datetime.strptime(result["run_id"], "%Y%m%dT%H%M%SZ")).total_seconds()) < 60
    assert warnings == []
