"""The fleet rollout's settings checks and the fleet report (plugins/module_utils/rollout.py)."""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import rollout as r

GOOD = {"serial": [1, "25%", "100%"], "drain": "none", "drain_file": {"exists": False}, "router_url": "",
        "drain_timeout": 300, "smoke_timeout": "120", "rollback": True, "report_dir": "/root/.cache/reports",
        "report_dir_stat": {"exists": True, "isdir": True, "writeable": True, "path": "/root/.cache/reports"}}


@pytest.mark.parametrize("serial", [1, "1", 5, "25%", "100%", " 50 % ", [1, "25%", "100%"], ["1", 2]])
def test_serial_ansible_takes(serial):
    assert r.serial_problems(serial) == []


@pytest.mark.parametrize("serial, bad", [
    (0, "0"), (-1, "-1"), ("0%", "'0%'"), ("101%", "'101%'"), ("x", "'x'"), (True, "True"), (None, "None"),
    (1.5, "1.5"), ([1, "0"], "'0'"), ([1, "fifty%"], "'fifty%'"), ({"a": 1}, "{'a': 1}"),
])
def test_serial_refused_names_the_entry(serial, bad):
    [problem] = r.serial_problems(serial)
    assert problem.startswith("rollout_serial entry %s " % bad)


def test_serial_empty_list():
    assert r.serial_problems([]) == ["rollout_serial is an empty list; give e.g. [1, '25%', '100%']"]


def test_good_settings_have_no_problems():
    assert r.rollout_problems(GOOD) == []
    assert r.rollout_problems(dict(GOOD, drain="sglang_router", router_url="http://router:30000")) == []
    assert r.rollout_problems(dict(GOOD, drain="/etc/drain.yml", drain_file={"exists": True, "isreg": True})) == []
    assert r.rollout_problems(dict(GOOD, drain="sglang_gateway", gateway_hosts=["gw-1"])) == []
    # One second is enough for each timeout; the gateway's may be left out (120 s).
    assert r.rollout_problems(dict(GOOD, drain_timeout=1, smoke_timeout="1", gateway_timeout=1)) == []
    # A report directory not there yet: its parent's stat is given, writable.
    assert r.rollout_problems(dict(GOOD, report_dir_stat={"exists": True, "isdir": True, "writeable": True})) == []


@pytest.mark.parametrize("over, message", [
    ({"drain": "bogus"}, "rollout_drain 'bogus' is none of none, sglang_gateway, sglang_router; a tasks file must be given by its absolute path"),
    ({"drain": ""}, "rollout_drain must be none, sglang_gateway, sglang_router or the path of a tasks file, not ''"),
    ({"drain": None}, "rollout_drain must be none, sglang_gateway, sglang_router or the path of a tasks file, not None"),
    ({"drain": "/etc/drain.yml"}, "rollout_drain: the tasks file /etc/drain.yml does not exist on the controller"),
    ({"drain": "/etc", "drain_file": {"exists": True, "isreg": False}}, "rollout_drain: /etc is not a file"),
    ({"drain": "sglang_router"}, "rollout_drain=sglang_router needs rollout_router_url, the gateway's absolute base URL (http://gateway:30000), not ''"),
    ({"drain": "sglang_router", "router_url": "router:30000"}, "rollout_drain=sglang_router needs rollout_router_url"),
    ({"drain": "sglang_router", "router_url": "ftp://router:30000"}, "rollout_drain=sglang_router needs rollout_router_url"),
    ({"drain": "sglang_router", "router_url": "http://router:30000/v1"}, "rollout_drain=sglang_router needs rollout_router_url"),
    ({"drain": "sglang_gateway", "gateway_hosts": []}, "rollout_drain=sglang_gateway needs a host in the inventory group sglang_gateway "
                                                       "(the sglang_gateway role runs the gateway there)"),
    ({"drain_timeout": "soon"}, "rollout_drain_timeout must be a whole number of seconds >= 1, not 'soon'"),
    ({"drain_timeout": None}, "rollout_drain_timeout must be a whole number of seconds >= 1, not None"),
    ({"gateway_timeout": 0}, "rollout_gateway_timeout must be a whole number of seconds >= 1, not 0"),
    ({"drain_timeout": 0}, "rollout_drain_timeout must be a whole number of seconds >= 1, not 0"),
    ({"smoke_timeout": "-5"}, "rollout_smoke_timeout must be a whole number of seconds >= 1, not '-5'"),
    ({"smoke_timeout": True}, "rollout_smoke_timeout must be a whole number of seconds >= 1, not True"),
    ({"report_dir": "reports"}, "rollout_report_dir must be an absolute path on the controller, not 'reports'"),
    ({"report_dir_stat": {"exists": True, "isdir": False, "path": "/root/.cache/reports"}},
     "rollout_report_dir: /root/.cache/reports on the controller is not a directory"),
    ({"report_dir_stat": {"exists": True, "isdir": True, "writeable": False, "path": "/srv"}},
     "rollout_report_dir: /srv on the controller is not writable by the controller user"),
    # A stat without its path: the setting names the directory.
    ({"report_dir_stat": {"exists": True, "isdir": False}}, "rollout_report_dir: /root/.cache/reports on the controller is not a directory"),
    ({"report_dir_stat": {"exists": True, "isdir": True, "writeable": False}},
     "rollout_report_dir: /root/.cache/reports on the controller is not writable by the controller user"),
])
def test_each_bad_setting_is_named(over, message):
    [problem] = r.rollout_problems(dict(GOOD, **over))
    assert problem.startswith(message)


def test_every_problem_at_once():
    problems = r.rollout_problems(dict(GOOD, serial=[0], drain="bogus", report_dir="x"))
    assert len(problems) == 3


GPUS = {"present": True, "count": 2, "compute_capabilities": ["12.0"], "interconnect": "pcie",
        "driver_version": "580.95.05",
        "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}] * 2}
FACTS = {"group": "lab,pro6000", "gpus": GPUS, "cuda": "13.0.2", "targets": ["12.0f"], "fix": "none",
         "venv_before": "/opt/sglang/venvs/aaaa", "venv_staged": "/opt/sglang/venvs/bbbb",
         "venv_now": "/opt/sglang/venvs/bbbb", "sglang": "0.5.23",
         "kernel_cache": {"source": "seeded", "build_seconds": 0}, "endpoints": {"eagle3": {"url": "http://127.0.0.1:30000", "port": 30000}},
         "backends": "eagle3 on 12.0: attention flashinfer, moe_runner auto, sampling flashinfer",
         "validation": "2 GPU(s): kernel 12.0f ran on 0,1; all-reduce 0,1 41.0 GB/s; 38.2 s",
         "health": "healthy", "batch": 2, "seconds": 41.5, "result": "ok", "reason": ""}


def test_a_row_from_the_roles_facts():
    row = r.fleet_report_row("pro-1", FACTS)
    assert row == {
        "host": "pro-1", "group": "lab,pro6000", "gpus": "2 x NVIDIA RTX PRO 6000 Blackwell Server Edition (cc 12.0, pcie)",
        "driver": "580.95.05", "cuda": "13.0.2", "flashinfer": "12.0f (none)", "venv_before": "aaaa",
        "venv_staged": "bbbb", "venv_now": "bbbb", "venv": "aaaa -> bbbb", "sglang": "0.5.23", "cache": "seeded", "built": 0.0, "service": "eagle3",
        "backends": "eagle3 on 12.0: attention flashinfer, moe_runner auto, sampling flashinfer",
        "validation": "2 GPU(s): kernel 12.0f ran on 0,1; all-reduce 0,1 41.0 GB/s; 38.2 s",
        "health": "healthy", "batch": 2, "seconds": 41.5, "result": "ok", "reason": ""}
    json.dumps(row)  # plain data: the report's JSON


def test_rows_of_hosts_without_gpus_unchanged_venvs_and_hosts_never_reached():
    row = r.fleet_report_row("lab-1", dict(FACTS, gpus={"present": False, "gpus": []}, venv_before="/v/bbbb", seconds=0))
    assert (row["gpus"], row["driver"], row["venv"], row["seconds"]) == ("none", "", "bbbb", 0)
    row = r.fleet_report_row("fresh", dict(FACTS, venv_before=""))
    assert row["venv"] == "none -> bbbb"
    # Rolled back (current is where it was) or not reached yet (current never moved): the staged one in brackets.
    assert r.fleet_report_row("back", dict(FACTS, venv_now="/v/aaaa"))["venv"] == "aaaa (staged bbbb)"
    assert r.fleet_report_row("later", dict(FACTS, venv_now=None))["venv"] == "aaaa (staged bbbb)"
    empty = r.fleet_report_row("gone", {})
    assert (empty["result"], empty["gpus"], empty["service"], empty["flashinfer"], empty["seconds"], empty["validation"]) == \
        ("not reached", "none", "none", "? (?)", "", "not run")
    assert r.fleet_report_rows([("a", r.fleet_report_row("a", FACTS)), ("gone", {})])[1] == empty


def test_markdown_table():
    rows = [r.fleet_report_row("pro-1", dict(FACTS, batch=1)),
            r.fleet_report_row("pro-2", dict(FACTS, result="rolled back", reason="health | 503")),
            r.fleet_report_row("b300-1", {})]
    text = r.fleet_report_markdown(rows, "Rollout")
    lines = text.splitlines()
    assert lines[0] == "# Rollout"
    assert lines[2].startswith("| host | group | GPUs |") and lines[2].endswith("| seconds | result |")
    assert lines[3] == "|" + " --- |" * len(r.COLUMNS)
    assert lines[4].startswith("| pro-1 | lab,pro6000 | 2 x NVIDIA") and lines[4].endswith("| 1 | 41.5 | ok |")
    assert lines[5].endswith("| rolled back |")
    assert lines[6].startswith("| b300-1 |") and lines[6].endswith("| not reached |")
    assert "- pro-2: health \\| 503" in lines  # reasons below, pipes escaped
    assert lines[-1] == "ok 1, rolled back 1, not reached 1"


def test_the_filters_are_these_functions():
    from ansible_collections.blackwell.sglang.plugins.module_utils.gateway import admin_key_of
    from ansible_collections.blackwell.sglang.plugins.module_utils.role_checks import sglang_gateway_problems
    from ansible_collections.blackwell.sglang.plugins.filter.rollout import (
        FilterModule, gateway_calls, gateway_inventory_worker_urls, gateway_missing_workers,
        gateway_workers_of)
    assert FilterModule().filters() == {"rollout_problems": r.rollout_problems, "fleet_report_row": r.fleet_report_row,
                                        "gateway_workers_of": gateway_workers_of,
                                        "gateway_missing_workers": gateway_missing_workers,
                                        "gateway_inventory_worker_urls": gateway_inventory_worker_urls,
                                        "sglang_gateway_problems": sglang_gateway_problems,
                                        "rollout_gateways": r.rollout_gateways, "drain_gone_problems": r.drain_gone_problems,
                                        "drain_load_problems": r.drain_load_problems,
                                        "gateway_undrain_problems": r.undrain_problems,
                                        "gateway_calls": gateway_calls,
                                        "gateway_registrations": r.registrations,
                                        "gateway_pending_registrations": r.pending_registrations,
                                        "gateway_admin_key": admin_key_of, "rollout_gateway_keys": r.gateway_keys}


def test_each_gateway_gets_its_own_keys_unless_the_rollout_names_one():
    hostvars = {"gw1": {"sglang_gateway_api_key": "one"},
                "gw2": {"sglang_gateway_api_key": "two", "sglang_gateway_control_plane_api_keys": ["ops:ops:admin:two-admin"]},
                "gw3": {}}
    keys = r.gateway_keys("sglang_gateway", ["gw1", "gw2", "gw3"], hostvars)
    assert keys == {"gw1": {"headers": {"Authorization": "Bearer one"}, "server": "one"},
                    "gw2": {"headers": {"Authorization": "Bearer two-admin"}, "server": "two"},
                    "gw3": {"headers": {}, "server": ""}}
    keys = r.gateway_keys("sglang_gateway", ["gw1", "gw2"], hostvars, "all-admin", "all-server")
    assert keys["gw1"] == keys["gw2"] == {"headers": {"Authorization": "Bearer all-admin"}, "server": "all-server"}
    assert r.gateway_keys("sglang_router", ["gw1"], hostvars, "k", "s") == {
        "localhost": {"headers": {"Authorization": "Bearer k"}, "server": "s"}}
    assert r.gateway_keys("none", ["gw1"], hostvars) == r.gateway_keys("/srv/drain.yml", ["gw1"], hostvars) == {}


def test_the_report_is_written_as_json_and_markdown_and_replaced_by_the_next_batch(tmp_path):
    directory = str(tmp_path / "reports" / "new")  # made on the first write
    pairs = [("pro-1", r.fleet_report_row("pro-1", dict(FACTS, batch=1))), ("gone", {})]
    document, markdown, files = r.write_fleet_report(directory, "20261201T000000Z", "Rollout", pairs)
    assert [os.path.basename(f) for f in files] == ["fleet-20261201T000000Z.json", "fleet-20261201T000000Z.md",
                                                    "fleet-latest.json", "fleet-latest.md"]
    assert sorted(os.listdir(directory)) == sorted(os.path.basename(f) for f in files)  # no temporary left
    on_disk = json.load(open(files[0]))
    assert on_disk == document and on_disk["run"] == "20261201T000000Z" and on_disk["play"] == "Rollout"
    assert [row["result"] for row in on_disk["rows"]] == ["ok", "not reached"]
    assert open(files[1]).read() == markdown == open(files[3]).read()
    assert markdown.splitlines()[0] == "# Rollout (20261201T000000Z)"
    assert oct(os.stat(files[2]).st_mode & 0o777) == "0o644"
    # The next batch rewrites the same run's files; the latest follows.
    pairs[1] = ("gone", r.fleet_report_row("gone", dict(FACTS, result="rolled back")))
    r.write_fleet_report(directory, "20261201T000000Z", "Rollout", pairs)
    assert [row["result"] for row in json.load(open(files[2]))["rows"]] == ["ok", "rolled back"]


def test_check_mode_writes_nothing(tmp_path):
    _doc, markdown, files = r.write_fleet_report(str(tmp_path / "r"), "run", "Site", [("a", {})], write=False)
    assert not os.path.exists(str(tmp_path / "r")) and markdown.endswith("not reached 1\n") and len(files) == 4


def test_a_directory_that_cannot_be_written_raises(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError):
        r.write_fleet_report(str(blocker / "reports"), "run", "Site", [("a", {})])
    assert blocker.read_text() == "not a directory"


# The drain's reading of the gateway's and the server's answers (roles/rollout/tasks/gateway.yml).
W1, W2 = "http://10.0.0.1:30000", "http://10.0.0.2:30000"
GW = {"host": "gw-1", "url": "http://127.0.0.1:30080"}


def workers(*entries):
    return {"status": 200, "json": {"workers": list(entries)}, "item": GW}


def test_the_drain_is_confirmed_only_when_no_spelling_or_rank_is_listed():
    assert r.drain_gone_problems([workers({"url": W2})], [W1], 120) == []
    assert r.drain_gone_problems([workers({"url": "http://10.0.0.1:30000@1", "dp_base_url": W1}, {"url": W2})], [W1], 120) == [
        "gateway gw-1 (http://127.0.0.1:30080) still lists http://10.0.0.1:30000@1 after 120 s; the service was not restarted"]
    assert r.drain_gone_problems([{"status": 401, "msg": "Status code was 401", "item": GW}], [W1], 120) == [
        "gateway gw-1 (http://127.0.0.1:30080) answered GET /workers with HTTP 401: Status code was 401"]
    assert r.drain_gone_problems([{"status": 200, "json": {"error": "x"}, "item": GW}], [W1], 120) == [
        "gateway gw-1 (http://127.0.0.1:30080) answered GET /workers with no worker list"]
    assert r.drain_gone_problems([{"skipped": True}], [W1], 120) == []


def test_the_undrain_is_confirmed_only_when_every_worker_and_rank_is_healthy_and_ready():
    healthy = {"url": W1, "is_healthy": True, "status": "ready"}
    assert r.undrain_problems([workers(healthy)], [W1], 60) == []
    assert r.undrain_problems([workers(healthy)], [W1, W2], 60) == [
        "gateway gw-1 (http://127.0.0.1:30080): http://10.0.0.2:30000 not listed after 60 s"]
    pending = {"url": W1 + "@1", "dp_base_url": W1, "is_healthy": False, "status": "pending"}
    assert r.undrain_problems([workers(dict(healthy, url=W1 + "@0", dp_base_url=W1), pending)], [W1], 60) == [
        "gateway gw-1 (http://127.0.0.1:30080): http://10.0.0.1:30000 listed but not healthy "
        "(http://10.0.0.1:30000@1: is_healthy False, status pending) after 60 s"]


def test_the_calls_of_a_drain_step_are_made_at_each_gateway_that_answered():
    gw2 = {"host": "gw-2", "url": "http://127.0.0.1:30081"}
    rank = {"id": "u-1", "url": W1 + "@1", "dp_base_url": W1}
    answers = [workers(rank, {"id": "u-2", "url": W2}),
               {"status": 200, "json": {"workers": [{"id": "u-3", "url": "http://10.0.0.1:30000/"}]}, "item": gw2},
               {"status": 401, "msg": "Status code was 401", "item": GW}, {"skipped": True}]
    assert r.gateway_calls(answers, [W1], "remove") == [
        {"host": "gw-1", "gateway": "http://127.0.0.1:30080", "id": "u-1", "url": W1 + "@1"},
        {"host": "gw-2", "gateway": "http://127.0.0.1:30081", "id": "u-3", "url": "http://10.0.0.1:30000/"}]
    # Registered where no spelling of it is held; a gateway that did not answer gets no call.
    assert r.gateway_calls(answers, [W1, W2], "register") == [
        {"host": "gw-2", "gateway": "http://127.0.0.1:30081", "url": W2}]
    with pytest.raises(ValueError, match="neither remove nor register"):
        r.gateway_calls(answers, [W1], "add")
    from ansible.errors import AnsibleFilterError
    from ansible_collections.blackwell.sglang.plugins.filter.rollout import gateway_calls
    with pytest.raises(AnsibleFilterError, match="^gateway_calls: "):
        gateway_calls(answers, ["not a url"], "remove")
    assert gateway_calls(answers, [W1, W2], "register") == [{"host": "gw-2", "gateway": "http://127.0.0.1:30081", "url": W2}]


def test_a_registration_is_known_by_its_worker_id_and_pending_while_the_gateway_says_so():
    call = {"host": "gw-1", "gateway": "http://127.0.0.1:30080", "url": W1}
    posted = [{"json": {"status": "accepted", "worker_id": "u-9"}, "item": call},
              {"json": {"error": "bad"}, "item": dict(call, url=W2)}, {"skipped": True}]
    made = r.registrations(posted)
    assert made == [dict(call, id="u-9")]
    assert r.pending_registrations([{"status": 200, "json": {"id": "u-9", "status": "pending"}, "item": made[0]}]) == made
    for done in ({"status": 200, "json": {"id": "u-9", "status": "ready"}}, {"status": 404, "json": {"error": "gone"}},
                 {"skipped": True}):
        assert r.pending_registrations([dict(done, item=made[0])]) == []


def test_a_server_that_is_not_listening_has_nothing_in_flight():
    refused = {"status": -1, "msg": "Status code was -1 and not [200]: Request failed: <urlopen error [Errno 111] Connection refused>",
               "item": {"key": "eagle3", "value": {"url": "http://127.0.0.1:30000"}}}
    assert r.drain_load_problems([refused], 300) == []
    assert r.drain_load_problems([refused], 300, units={"eagle3": {"active": "inactive/dead"}}) == []
    # Its unit runs, yet nothing listens at the port the inventory now names: in flight unknown.
    assert r.drain_load_problems([refused], 300, units={"eagle3": {"active": "active/running"}}) == [
        "cannot tell what eagle3 has in flight: nothing listens at http://127.0.0.1:30000/v1/loads although its unit "
        "is running (does this change move its port?); set rollout_drain_require_loads=false to restart without that figure"]
    timed_out = dict(refused, msg="Status code was -1 and not [200]: Request failed: <urlopen error timed out>")
    assert r.drain_load_problems([timed_out], 300) == [
        "cannot tell what eagle3 has in flight: http://127.0.0.1:30000/v1/loads answered HTTP -1; "
        "set rollout_drain_require_loads=false to restart without that figure"]


def loads(status=200, body=None, key="eagle3"):
    return {"status": status, "json": body, "item": {"key": key, "value": {"url": "http://127.0.0.1:30000"}}}


def test_in_flight_requests_come_from_the_server_s_figures_and_an_unreadable_answer_fails():
    idle = {"loads": [{"dp_rank": 0, "num_running_reqs": 0, "num_waiting_reqs": 0}]}
    busy = {"loads": [{"dp_rank": 0, "num_running_reqs": 2, "num_waiting_reqs": 0}, {"dp_rank": 1, "num_running_reqs": 1, "num_waiting_reqs": 3}]}
    assert r.drain_load_problems([loads(body=idle)], 300) == []
    assert r.drain_load_problems([loads(body=busy)], 300) == [
        "http://127.0.0.1:30000/v1/loads still has 3 running and 3 waiting requests after 300 s (rollout_drain_timeout)"]
    for answer, said in ((loads(401, {"error": "Unauthorized"}), "HTTP 401"), (loads(404), "HTTP 404"),
                         (loads(body={"unexpected": True}), "with no load report"), (loads(body={"loads": [1]}), "with no load report")):
        assert r.drain_load_problems([answer], 300) == [
            "cannot tell what eagle3 has in flight: http://127.0.0.1:30000/v1/loads answered %s; set "
            "rollout_drain_require_loads=false to restart without that figure" % said]
        assert r.drain_load_problems([answer], 300, require=False) == []


def test_the_gateways_of_each_drain():
    assert r.rollout_gateways("sglang_router", "http://gw:30000/", [], {}) == [{"host": "localhost", "url": "http://gw:30000", "manifest": ""}]
    hostvars = {"gw-1": {"sglang_gateway_local_url": "http://127.0.0.1:30080", "sglang_gateway_manifest": "/var/lib/sglang-gateway/workers.json"}}
    assert r.rollout_gateways("sglang_gateway", "", ["gw-1"], hostvars) == [
        {"host": "gw-1", "url": "http://127.0.0.1:30080", "manifest": "/var/lib/sglang-gateway/workers.json"}]


def test_the_drain_sends_the_gateway_its_admin_key():
    from ansible_collections.blackwell.sglang.plugins.filter.rollout import FilterModule
    gateway_admin_key = FilterModule().filters()["gateway_admin_key"]
    assert gateway_admin_key({"sglang_gateway_api_key": "k"}) == "k"
    assert gateway_admin_key({"sglang_gateway_api_key": "k", "sglang_gateway_control_plane_api_keys": [
        "r:Reader:user:u1", "a:Ops:admin:a:with:colons"]}) == "a:with:colons"
    assert gateway_admin_key({}) == ""


def test_a_skipped_gateway_is_passed_over_and_the_next_one_still_read():
    # A loop result skipped (a gateway without a URL) comes first; the one after it still counts.
    call = {"host": "gw-1", "gateway": "http://127.0.0.1:30080", "url": W1}
    assert r.registrations([{"skipped": True}, {"status": 500, "json": "text"},
                            {"json": {"worker_id": 9}, "item": call}]) == [dict(call, id="9")]
    assert r.pending_registrations([{"skipped": True}, {"status": 200, "json": "text", "item": call},
                                    {"status": 200, "json": {"status": "pending"}, "item": call}]) == [call]
    healthy = {"url": W1, "is_healthy": True, "status": "ready"}
    assert r.undrain_problems([{"skipped": True}, workers(healthy)], [W1], 60) == []
    assert r.undrain_problems([{"skipped": True}, workers()], [W1], 60) == [
        "gateway gw-1 (http://127.0.0.1:30080): http://10.0.0.1:30000 not listed after 60 s"]


def test_a_worker_is_healthy_only_when_is_healthy_is_true_and_its_status_ready_or_absent():
    assert r.unhealthy_workers([W1], [{"url": W1, "is_healthy": True}]) == {}
    assert r.unhealthy_workers([W1], [{"url": W1, "is_healthy": True, "status": "pending"}]) == {
        W1: "listed but not healthy (http://10.0.0.1:30000: is_healthy True, status pending)"}
    # Every URL is looked at, after one not listed; every bad rank is named.
    assert r.unhealthy_workers([W2, W1], [{"url": W1 + "@0", "dp_base_url": W1, "is_healthy": False},
                                          {"url": W1 + "@1", "dp_base_url": W1, "is_healthy": 1, "status": "ready"}]) == {
        W2: "not listed",
        W1: "listed but not healthy (http://10.0.0.1:30000@0: is_healthy False, status None, "
            "http://10.0.0.1:30000@1: is_healthy 1, status ready)"}


def test_every_server_is_read_after_a_skipped_refused_or_unread_one():
    busy = loads(body={"loads": [{"num_running_reqs": 2, "num_waiting_reqs": 0}]}, key="dflash")
    refused = {"status": -1, "msg": "Request failed: <urlopen error [Errno 111] Connection refused>",
               "item": {"key": "eagle3", "value": {"url": "http://127.0.0.1:30001"}}}
    still = "http://127.0.0.1:30000/v1/loads still has 2 running and 0 waiting requests after 300 s (rollout_drain_timeout)"
    assert r.drain_load_problems([{"skipped": True}, busy], 300) == [still]
    assert r.drain_load_problems([refused, busy], 300) == [still]
    assert r.drain_load_problems([loads(404), busy], 300, require=False) == [still]
    # Only waiting requests hold the restart too.
    assert r.drain_load_problems([loads(body={"loads": [{"num_running_reqs": 0, "num_waiting_reqs": 1}]})], 300) == [
        "http://127.0.0.1:30000/v1/loads still has 0 running and 1 waiting requests after 300 s (rollout_drain_timeout)"]


def test_an_answer_without_a_service_name_or_a_status_is_still_worded():
    nameless = {"json": {"error": "x"}, "item": {"value": {"url": "http://127.0.0.1:30000"}}}
    assert r.drain_load_problems([nameless], 300) == [
        "cannot tell what the service has in flight: http://127.0.0.1:30000/v1/loads answered HTTP ?; set "
        "rollout_drain_require_loads=false to restart without that figure"]


def test_every_gateway_is_read_after_a_skipped_or_unread_one_and_every_spelling_left_is_named():
    unread = {"status": 401, "msg": "Status code was 401", "item": GW}
    left = workers({"url": W1 + "@1", "dp_base_url": W1}, {"url": W1 + "@0", "dp_base_url": W1})
    assert r.drain_gone_problems([{"skipped": True}, unread, left], [W1], 120) == [
        "gateway gw-1 (http://127.0.0.1:30080) answered GET /workers with HTTP 401: Status code was 401",
        "gateway gw-1 (http://127.0.0.1:30080) still lists http://10.0.0.1:30000@0, http://10.0.0.1:30000@1 after 120 s; "
        "the service was not restarted"]


def test_a_gateway_host_without_its_facts_has_an_empty_url_and_manifest():
    assert r.rollout_gateways("sglang_gateway", "", ["gw-9"], {}) == [{"host": "gw-9", "url": "", "manifest": ""}]


def test_a_row_of_a_host_never_reached_and_of_odd_facts_in_full():
    assert r.fleet_report_row("gone", {}) == {
        "host": "gone", "group": "", "gpus": "none", "driver": "", "cuda": "", "flashinfer": "? (?)", "venv_before": "",
        "venv_staged": "", "venv_now": "", "venv": "", "sglang": "", "cache": "", "built": "", "service": "none", "backends": "", "validation": "not run",
        "health": "not checked", "batch": "", "seconds": "", "result": "not reached", "reason": ""}
    row = r.fleet_report_row("x", {"venv_before": "/v/aaaa", "venv_now": "", "targets": ["12.0f", "10.3a"],
                                   "endpoints": {"eagle3": {}, "dflash": {}}, "batch": "x", "seconds": "None",
                                   "kernel_cache": {"source": "built", "build_seconds": 179.04}})
    assert (row["venv"], row["flashinfer"], row["service"], row["batch"], row["seconds"], row["cache"], row["built"]) == (
        "aaaa -> none", "12.0f 10.3a (?)", "dflash, eagle3", "", "", "built", 179.0)
    assert r.fleet_report_row("x", dict(FACTS, seconds="1.26"))["seconds"] == 1.3


def test_markdown_of_rows_with_missing_cells_and_a_reason_on_two_lines():
    assert r.fleet_report_markdown([r.fleet_report_row("a", {"result": "ok", "reason": "line1\nline2 | x"}), {"host": "b"},
                                    {"host": "c", "result": "ok"}]) == (
        "# Fleet report\n\n| host | group | GPUs | driver | CUDA | FlashInfer targets (fix) | venv (before -> now) | "
        "SGLang (staged) | kernel cache | kernels built (s) | active service | backends (SGLang resolved) | GPU validation | "
        "health | batch | seconds | result |\n"
        "|" + " --- |" * 17 + "\n"
        "| a |  | none |  |  | ? (?) |  |  |  |  | none |  | not run | not checked |  |  | ok |\n"
        "| b |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  |\n"
        "| c |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  | ok |\n"
        "\n- a: line1 line2 \\| x\n\nok 2\n")


def test_the_report_files_are_readable_json_and_a_directory_of_mode_0755(tmp_path):
    old = os.umask(0)
    try:
        document, _markdown, files = r.write_fleet_report(str(tmp_path / "r"), "r1", "T", [("b", {}), ("a", {})])
    finally:
        os.umask(old)
    assert oct(os.stat(str(tmp_path / "r")).st_mode & 0o777) == "0o755"
    text = open(files[0]).read()
    assert text.startswith('{\n    "play": "T",\n    "rows": [\n        {\n            "backends": "",') and text.endswith("}\n")
    assert json.loads(text) == document


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    def refuse(_src, _dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        r.write_fleet_report(str(tmp_path), "r1", "T", [("a", {})])
    assert os.listdir(str(tmp_path)) == []


# ---- what the survivors of the mutation run showed untested ----

def test_one_percent_is_a_serial_and_a_missing_timeout_is_named():
    assert r.serial_problems("1%") == []
    settings = dict(GOOD)
    del settings["drain_timeout"]
    assert r.rollout_problems(settings) == ["rollout_drain_timeout must be a whole number of seconds >= 1, not None"]


def test_a_report_dir_problem_names_the_path_that_was_looked_at():
    # The report directory is not there yet: its nearest existing parent was stat'ed, and is a file.
    stat = {"exists": True, "isdir": False, "path": "/srv/reports"}
    assert r.rollout_problems(dict(GOOD, report_dir="/srv/reports/fleet", report_dir_stat=stat)) == [
        "rollout_report_dir: /srv/reports on the controller is not a directory"]


def test_gpus_of_mixed_models_and_unknown_fields():
    gpus = {"present": True, "compute_capabilities": ["10.3", "12.0"], "interconnect": "nvlink",
            "gpus": [{"name": "B300"}, {"name": "PRO 6000"}, {"name": "B300"}]}
    assert r.fleet_report_row("h", {"gpus": gpus})["gpus"] == "2 x B300, 1 x PRO 6000 (cc 10.3 12.0, nvlink)"
    assert r.fleet_report_row("h", {"gpus": {"present": True, "gpus": [{"name": "B300"}]}})["gpus"] == "1 x B300 (cc ?, ?)"


@pytest.mark.parametrize("before, staged, now, venv", [
    ("/opt/sglang/venvs/aaaa/", "/opt/sglang/venvs/bbbb/", "/opt/sglang/venvs/aaaa/", "aaaa (staged bbbb)"),
    ("aaaa", "bbbb", "bbbb", "aaaa -> bbbb"),   # ids without a directory
    ("/v/venvX/", "/v/bbbb", "/v/bbbb", "venvX -> bbbb"),
])
def test_venv_ids_from_paths_with_a_trailing_slash_or_none(before, staged, now, venv):
    row = r.fleet_report_row("h", {"venv_before": before, "venv_staged": staged, "venv_now": now, "seconds": ""})
    assert (row["venv_before"], row["venv_staged"], row["venv"], row["seconds"]) == (
        before.rstrip("/").rsplit("/", 1)[-1], "bbbb", venv, "")


def test_markdown_counts_each_result():
    rows = [{"host": "a", "result": "ok"}, {"host": "b", "result": "failed"}, {"host": "c", "result": "ok"}]
    assert r.fleet_report_markdown(rows).splitlines()[-1] == "ok 2, failed 1"


def test_the_report_files_are_replaced_from_a_temporary_file_beside_them(tmp_path, monkeypatch):
    # os.replace is atomic only within one filesystem: the temporary file is made in the report's directory.
    replaced, real_replace = [], os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    _document, _markdown, files = r.write_fleet_report(str(tmp_path), "r1", "T", [("a", {})])
    assert [dst for _src, dst in replaced] == files
    for src, _dst in replaced:
        assert os.path.dirname(src) == str(tmp_path) and os.path.basename(src).startswith(".fleet-")


def test_the_router_url_loses_only_its_trailing_slashes():
    assert r.rollout_gateways("sglang_router", "http://GW-BOX/", [], {}) == [
        {"host": "localhost", "url": "http://GW-BOX", "manifest": ""}]


def test_a_drain_step_reads_every_gateway_after_an_unread_one_and_registers_at_each():
    gw2 = {"host": "gw-2", "url": "http://127.0.0.1:30081"}
    answers = [{"status": 503, "item": GW}, workers(), {"status": 200, "json": {"workers": []}, "item": gw2}]
    assert r.gateway_calls(answers, [W1], "register") == [
        {"host": "gw-1", "gateway": "http://127.0.0.1:30080", "url": W1},
        {"host": "gw-2", "gateway": "http://127.0.0.1:30081", "url": W1}]
    with pytest.raises(ValueError) as error:
        r.gateway_calls([workers()], [W1], "add")
    assert str(error.value) == "gateway_calls: action 'add' is neither remove nor register"


@pytest.mark.parametrize("result, why", [
    ({"status": 500}, "the gateway answered GET /workers with HTTP 500"),
    ({"item": {}}, "the gateway answered GET /workers with HTTP ?"),
    ({"item": {}, "status": 200, "json": [1]}, "the gateway answered GET /workers with no worker list"),
    ({"item": "gw", "status": 200, "json": {"workers": "x"}}, "the gateway answered GET /workers with no worker list"),
])
def test_an_answer_from_a_gateway_not_named_is_worded(result, why):
    assert r.drain_gone_problems([result], [W1], 60) == [why]


def test_the_undrain_reads_every_gateway_after_an_unread_one():
    gw2 = {"host": "gw-2", "url": "http://127.0.0.1:30081"}
    assert r.undrain_problems([{"status": 503, "item": GW}, {"status": 200, "json": {"workers": []}, "item": gw2}],
                              [W1], 60) == [
        "gateway gw-1 (http://127.0.0.1:30080) answered GET /workers with HTTP 503",
        "gateway gw-2 (http://127.0.0.1:30081): http://10.0.0.1:30000 not listed after 60 s"]


def test_a_load_answer_without_its_service_item_is_still_read():
    assert r.drain_load_problems([{"item": "svc", "status": 200, "json": {"loads": [{"num_running_reqs": 1}]}}], 30) == [
        "?/v1/loads still has 1 running and 0 waiting requests after 30 s (rollout_drain_timeout)"]
