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
