"""A fleet of two PRO 6000-like nodes with the same kernel cache key behind the real model gateway
(smg, on a third, light node), reached over SSH as an unprivileged user with sudo, rolled out and
rolled back through that gateway.

In order (each test starts from what the previous one left): the converge is site.yml, as a new
fleet is brought up: the two nodes staged at once (FlashInfer's JIT modules built on node 1 only,
node 2 seeded from the controller's store), each service started once and gated, then the
gateway in front of them, one entry per worker; the fleet report says so. Node 1 switches to a new venv (built and warmed before current
moves; the new venv only adds an unrelated package, so its module is relocated from the serving
venv's workspace, not compiled); node 2 installs that venv afterwards (its sources newer than node 1's objects, as on a real
fleet) and seeds it without compiling. A version that fails its health gate on the canary is rolled
back by itself (no compile), and the rollout stops before the other node. A failed warm-up leaves
current alone; a truncated artifact makes node 2 build locally and end whole, and its export repairs
the store; bad rollout settings and a bad host setting stop the rollout before anything changed.
Node 2 told it has B300s (another key) builds its own artifact, never node 1's; a change of the
units' environment alone, then of a unit alone, that fails is undone from the snapshot taken
before the switch and the node put back at the gateway. A rollout of both nodes (the canary,
then the rest) while a load of real requests goes through the gateway: none fails. Last, node 2 is
rebooted (its container restarted): the unit's privileged device step runs first, as root, and the
service comes back on its venv with its caches where they were.

Every rollout here drains through the gateway node's smg (rollout_drain: sglang_gateway, the scenario's
host_vars). The SGLang server is the one part replaced: molecule/fleet/files/standin.py, started
by the units through prepare.yml's drop-in (a lab node has no GPU), and NVIDIA's nvidia-modprobe
(molecule/fleet/files/nvidia-modprobe, which records its calls). Everything else runs for real,
the gateway included; task order, results and task start times come from Ansible's JSON callback.
"""

import datetime
import glob
import importlib.util
import json
import os
import re
import subprocess
import threading
import time
import urllib.request

import testinfra
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NODE1, NODE2, GATEWAY = "fleet-pro6000-1", "fleet-pro6000-2", "fleet-gateway"
# The tests look at the nodes as root through podman; the playbooks reach them over SSH as `ops`.
HOSTS = {name: testinfra.get_host("podman://" + name) for name in (NODE1, NODE2)}
GATEWAY_HOST = testinfra.get_host("podman://" + GATEWAY)
with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "sglang_gateway.yml"), encoding="utf-8") as _handle:
    GATEWAY_VARS = yaml.safe_load(_handle)
SPEC = importlib.util.spec_from_file_location("loadgen", os.path.join(ROOT, "scripts", "loadgen.py"))
loadgen = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(loadgen)
STORE = os.path.join(os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "..", "kernels")
REPORTS = os.path.join(os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "..", "reports")
UPGRADED = {"sglang_venv_packages": ["sglang==0.5.23", "tomli-w==1.2.0"]}
MODULE = "quantization"
ROLLOUT = os.path.join("playbooks", "rollout.yml")
UNIT = "sglang-eagle3.service"  # the lab's active service
# The drain's first change and the undrain's (roles/rollout/tasks/gateway.yml).
OUT = "Gateway | Out of rotation in the manifest (each gateway host)"
BACK = "Gateway | Back in rotation in the manifest (each gateway host)"


def stage(limit, *extra_vars):
    """Run molecule/fleet/stage.yml; return (rc, {host: [(task name, result), ...]}, text)."""
    return playbook(os.path.join("molecule", "fleet", "stage.yml"), limit, *extra_vars)


def playbook(path, limit, *extra_vars):
    """Run a playbook (path from the repository root) with the JSON callback; return (rc, {host: [(task
    name, result), ...]}, text)."""
    args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, path), "--limit", limit]
    for value in extra_vars:  # a dict as JSON, "--option" as is, a string as -e name=value
        args += [value] if isinstance(value, str) and value.startswith("--") else \
            ["-e", value if isinstance(value, str) else json.dumps(value)]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    start = re.search(r"^\{$", proc.stdout, re.M)
    assert start, proc.stdout + proc.stderr
    report = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
    tasks = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                # The task's start (UTC, the callback's), for the phase times of test 13.
                tasks.setdefault(host, []).append((task["task"]["name"], dict(result, _started=task["task"]["duration"]["start"])))
    return proc.returncode, tasks, proc.stdout[-6000:] + proc.stderr[-3000:]


def recorded(name):
    """What the node's last kernel cache run did (kernel_cache_result, recorded by the playbook)."""
    return json.loads(HOSTS[name].file("/var/tmp/bsg-kernel-cache.json").content_string)


def current(name):
    return HOSTS[name].file("/opt/sglang/current").linked_to


def module_dir(name, venv=None):
    venv_id = os.path.basename(venv or current(name))
    return "/var/lib/sglang/kernel-caches/%s/.cache/flashinfer/0.7.2/120f/cached_ops/%s" % (venv_id, MODULE)


def stats(name, directory):
    """{file: (size, mtime, sha256)} of a module dir on a node."""
    out = HOSTS[name].check_output("cd %s && for f in *; do [ -f \"$f\" ] && echo \"$f $(stat -c '%%s %%Y' \"$f\") "
                                   "$(sha256sum < \"$f\" | cut -c1-64)\"; done" % directory)
    return {line.split()[0]: tuple(line.split()[1:]) for line in out.splitlines()}


def ninja_has_nothing_to_do(name, directory):
    out = HOSTS[name].run("runuser -u sglang -- env PATH=/opt/sglang/current/bin:/usr/bin:/bin ninja -n -C %s" % directory)
    return out.rc == 0 and "no work to do" in out.stdout


def store_records():
    return {os.path.basename(p): json.load(open(p)) for p in glob.glob(os.path.join(STORE, "*.json"))}


def index(tasks, name, changed=True):
    """Position of the first task called `name` (with the given changed state, None: either) in a host's run."""
    for position, (task, result) in enumerate(tasks):
        # The JSON callback names a role's task "<role> : <name>".
        if task.split(" : ", 1)[-1] == name and changed in (None, bool(result.get("changed"))) and not result.get("skipped"):
            return position
    raise AssertionError("no %s task %r in %s" % ("changed" if changed else "unchanged", name, [task for task, _result in tasks]))


def reports():
    """The fleet reports of the scenario's runs, oldest first (fleet-<UTC run id>.json)."""
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(REPORTS, "fleet-2*.json")))]


def rows(report):
    return {row["host"]: row for row in report["rows"]}


def serving(name):
    """The venv the stand-in server of the node's active service was started from."""
    return json.loads(HOSTS[name].check_output(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:30000/server_info').read().decode())\""))["venv"]


def starts(name):
    """Every start of the stand-in server on the node: [venv id, ...]."""
    return [line.split()[1] for line in HOSTS[name].file("/var/lib/sglang/standin-starts.log").content_string.splitlines()]


def unit(name):
    """The active service's unit and drop-ins as systemd has them loaded."""
    return HOSTS[name].check_output("systemctl cat %s" % UNIT)


def started_at(name):
    return HOSTS[name].check_output("systemctl show -P ActiveEnterTimestampMonotonic %s" % UNIT)


def address(name):
    """A node's address on podman's network (how the gateway and the controller reach it)."""
    return json.loads(subprocess.check_output(["podman", "container", "inspect", name]))[0]["NetworkSettings"]["IPAddress"]


def gateway_url():
    return "http://%s:%d" % (address(GATEWAY), GATEWAY_VARS["sglang_gateway_port"])


def gateway(path, body=None):
    """(status, JSON answer) of a call to the gateway from the controller, with its key."""
    request = urllib.request.Request(gateway_url() + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + GATEWAY_VARS["sglang_gateway_api_key"],
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def worker_urls():
    return sorted("http://%s:30000" % address(name) for name in HOSTS)


def assert_gateway_holds_each_worker_once():
    """GET /workers lists each node's service once, healthy; the manifest lists each once; none is drained."""
    workers = gateway("/workers")[1]["workers"]
    assert sorted(w["url"] for w in workers) == worker_urls() and all(w["is_healthy"] for w in workers), workers
    manifest = json.loads(GATEWAY_HOST.file("/var/lib/sglang-gateway/workers.json").content_string)
    assert sorted(w["url"] for w in manifest["workers"]) == worker_urls(), manifest
    drained = GATEWAY_HOST.file("/var/lib/sglang-gateway/drained.json")
    assert not drained.exists or json.loads(drained.content_string) == [], drained.content_string


def test_1_site_built_once_seeded_the_second_node_and_put_the_gateway_in_front():
    one, two = recorded(NODE1), recorded(NODE2)
    assert one["key_id"] == two["key_id"]  # same venv, targets, CUDA: one key
    assert (one["source"], one["built"], one["exported"]) == ("built", [MODULE], [MODULE])
    assert (two["source"], two["seeded"], two["built"]) == ("seeded", [MODULE], [])
    # The store holds that key's one artifact, recorded with its checksum and the host that built it.
    assert sorted(store_records()) == [one["key_id"] + ".json"]
    record = store_records()[one["key_id"] + ".json"]
    assert record["host"] == NODE1 and record["modules"] == [MODULE]
    # Node 2's objects are node 1's bytes, and ninja (FlashInfer's own build) has nothing to do.
    built, seeded = stats(NODE1, module_dir(NODE1)), stats(NODE2, module_dir(NODE2))
    assert {f: s[2] for f, s in seeded.items() if f.endswith((".o", ".so"))} == \
        {f: s[2] for f, s in built.items() if f.endswith((".o", ".so"))}
    assert ninja_has_nothing_to_do(NODE2, module_dir(NODE2))
    # The converge's report (the first): both nodes installed and ok, node 1 built, node 2 seeded.
    first, latest = reports()[0], reports()[-1]
    assert {h: (r["result"], r["cache"], r["venv"]) for h, r in rows(first).items()} == {
        NODE1: ("ok", "built", "none -> " + os.path.basename(current(NODE1))),
        NODE2: ("ok", "seeded", "none -> " + os.path.basename(current(NODE2)))}
    assert "12.0" in rows(first)[NODE1]["flashinfer"] and "12.0" in rows(first)[NODE2]["flashinfer"]
    # The seconds each node spent compiling: node 1's build of the module, none on node 2.
    assert rows(first)[NODE1]["built"] == one["build_seconds"] > 0 and rows(first)[NODE2]["built"] == 0.0, first
    # Each service started once, on its current venv; the idempotence run (the latest report)
    # restarted nothing and moved no venv.
    for name in HOSTS:
        assert starts(name) == [os.path.basename(current(name))]
        assert serving(name) == current(name)
    assert {h: (r["result"], r["venv"]) for h, r in rows(latest).items()} == {
        name: ("ok", os.path.basename(current(name))) for name in HOSTS}
    assert os.path.exists(os.path.join(REPORTS, "fleet-latest.md"))
    # The gateway node runs the real smg with each node's service once, healthy (at the node's
    # address: the service listens on every address), and serves SGLang's native /generate with no
    # "model" through it, as sglang-router did.
    assert GATEWAY_HOST.check_output("systemctl is-active sglang-gateway.service") == "active"
    assert not GATEWAY_HOST.file("/opt/sglang").exists and not GATEWAY_HOST.file("/opt/cuda").exists  # a light node
    assert_gateway_holds_each_worker_once()
    status, answer = gateway("/generate", {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8}})
    assert status == 200 and "Paris (stand-in" in answer["text"], answer


def test_2_a_venv_whose_kernel_inputs_did_not_change_compiles_nothing_before_current_moves():
    # The new venv adds one unrelated package (tomli-w): FlashInfer, its headers, the targets and CUDA
    # are the same. The serving venv's module is relocated to the new venv's paths and proven (every
    # input the same bytes, ninja has nothing to do), FlashInfer's own build then builds nothing, and
    # the new key is exported, all before the switch moved current.
    before = current(NODE1)
    rc, tasks, text = stage(NODE1, UPGRADED)
    assert rc == 0, text
    run = tasks[NODE1]
    relocate = index(run, "Cache | Relocate the serving venv's modules whose kernel inputs did not change")
    warm = index(run, "Warm | Build the JIT modules (repairs what a killed build left)", changed=False)
    switch = index(run, "Switch | Point current at the venv")
    assert relocate < warm < index(run, "Export | Fetch the artifact") < switch
    assert (run[relocate][1]["relocated"], run[relocate][1]["relocate_rejected"]) == ([MODULE], {})
    assert (run[warm][1]["built"], run[warm][1]["skipped_modules"]) == ([], [MODULE])
    after = current(NODE1)
    assert after != before and HOSTS[NODE1].file("/opt/sglang/previous").linked_to == before
    assert recorded(NODE1) == dict(recorded(NODE1), source="relocated", relocated=[MODULE], built=[], build_seconds=0.0)
    # The same objects, at the new venv's paths; the old venv's build is left as it was.
    assert {f: s[2] for f, s in stats(NODE1, module_dir(NODE1, after)).items() if f.endswith((".o", ".so"))} == \
        {f: s[2] for f, s in stats(NODE1, module_dir(NODE1, before)).items() if f.endswith((".o", ".so"))}
    build = HOSTS[NODE1].file(module_dir(NODE1, after) + "/build.ninja").content_string
    assert os.path.basename(after) in build and os.path.basename(before) not in build
    assert ninja_has_nothing_to_do(NODE1, module_dir(NODE1, after)) and ninja_has_nothing_to_do(NODE1, module_dir(NODE1, before))
    assert len(store_records()) == 2  # a new venv is a new key, exported


def fresh_copies(name, venv):
    """Give the venv's FlashInfer and TVM-FFI files new inodes with the current mtime, the same bytes:
    what a host that downloads the wheels later has. (uv hardlinks a venv's files from its cache, and
    node 2's cache holds those wheels since the converge, so the new venv would share their old mtimes.)"""
    site = venv + "/lib/python3.11/site-packages"
    HOSTS[name].check_output(
        "runuser -u sglang -- find %s/flashinfer %s/tvm_ffi -type f -exec sh -c "
        "'for f; do cp \"$f\" \"$f.fresh\" && mv \"$f.fresh\" \"$f\"; done' sh {} +" % (site, site))


def test_3_the_second_node_installs_that_venv_later_and_compiles_nothing():
    # The venv built first (sglang_venv's tasks only: current does not move), its sources made newer
    # than node 1's objects, then the staging run: seeded, and ninja finds nothing to do.
    rc, _tasks, text = stage(NODE2, UPGRADED, "--tags=sglang_venv_install")
    assert rc == 0, text
    fresh_copies(NODE2, HOSTS[NODE1].file("/opt/sglang/current").linked_to)
    rc, tasks, text = stage(NODE2, UPGRADED)
    assert rc == 0, text
    run = tasks[NODE2]
    assert index(run, "Store | Check, unpack and prove it") < index(run, "Switch | Point current at the venv")
    warm = index(run, "Warm | Build the JIT modules (repairs what a killed build left)", changed=False)
    assert run[warm][1]["built"] == [] and run[warm][1]["skipped_modules"] == [MODULE]
    assert recorded(NODE2) == dict(recorded(NODE2), source="seeded", seeded=[MODULE], built=[])
    assert current(NODE2) == current(NODE1)
    # The venv's sources are newer than node 1's objects (installed after they were built), yet the
    # unpacked module is ninja-clean: the seed made ninja's view consistent.
    sources = HOSTS[NODE2].check_output(
        "stat -c %%Y %s/lib/python3.11/site-packages/flashinfer/__init__.py" % current(NODE2))
    assert int(sources) > int(stats(NODE1, module_dir(NODE1))[MODULE + ".so"][1])
    assert ninja_has_nothing_to_do(NODE2, module_dir(NODE2))


def test_4_a_canary_that_fails_is_rolled_back_by_itself_and_the_rollout_stops():
    # Both nodes run the new venv (tests 2 and 3); the rollout goes back to the original (warm
    # everywhere), which the stand-in is told to fail for: a version that
    # does not come up healthy.
    original, upgraded = HOSTS[NODE1].file("/opt/sglang/previous").linked_to, current(NODE1)
    assert HOSTS[NODE2].file("/opt/sglang/previous").linked_to == original and current(NODE2) == upgraded
    for host in HOSTS.values():
        host.check_output("echo %s > /etc/sglang/standin-fail" % os.path.basename(original))
    other = (current(NODE2), started_at(NODE2), starts(NODE2), unit(NODE2))
    # Two restarts by an operator first: with the converge's start, the unit's StartLimitBurst (3 in
    # two hours) is used up, and the rollout's restart and the rollback's must still start it.
    for restart in ("restart", "restart"):
        HOSTS[NODE1].check_output("systemctl %s %s" % (restart, UNIT))
    so = {venv: stats(NODE1, module_dir(NODE1, venv)) for venv in (original, upgraded)}
    try:
        rc, tasks, text = playbook(ROLLOUT, "all", {"rollout_serial": [1, "100%"]})
    finally:
        for host in HOSTS.values():
            host.check_output("rm -f /etc/sglang/standin-fail")
    assert rc != 0, text
    run = tasks[NODE1]
    # Switched, failed its health gate, back on previous, gated again, in that order. (The drain
    # through the real gateway is tested in tests/unit/playbooks/test_drain_real_gateway.py.)
    assert index(run, "Switch | Point current at the venv") < index(run, "Rollback | Why this host failed", changed=False) \
        < index(run, "Rollback | Stage previous", changed=False)
    assert (current(NODE1), HOSTS[NODE1].file("/opt/sglang/previous").linked_to) == (upgraded, original)
    assert serving(NODE1) == upgraded
    assert starts(NODE1)[-2:] == [os.path.basename(original), os.path.basename(upgraded)]
    report = rows(reports()[-1])
    assert (report[NODE1]["result"], report[NODE1]["batch"]) == ("rolled back", 1)
    assert "did not answer http://127.0.0.1:30000/health_generate with 200 within 20 s" in report[NODE1]["reason"]
    assert report[NODE1]["venv"] == "%s (staged %s)" % (os.path.basename(upgraded), os.path.basename(original))
    assert (report[NODE2]["result"], report[NODE2]["venv"]) == (
        "not reached", "%s (staged %s)" % (os.path.basename(upgraded), os.path.basename(original)))
    # The other node was never touched: same venv link, same unit, same service start.
    assert (current(NODE2), started_at(NODE2), starts(NODE2), unit(NODE2)) == other
    # Nothing compiled: the staged (original) venv was warm, and both caches are byte- and mtime-identical.
    warm = index(run, "Warm | Build the JIT modules (repairs what a killed build left)", changed=False)
    assert run[warm][1]["built"] == []
    assert {venv: stats(NODE1, module_dir(NODE1, venv)) for venv in (original, upgraded)} == so
    # Drained before its switch and undrained after the rollback's gate: back at the gateway, once.
    assert index(run, OUT) < index(run, "Switch | Point current at the venv") \
        < index(run, "Rollback | Stage previous", changed=False) < index(run, BACK)
    assert_gateway_holds_each_worker_once()


def test_5_a_failed_warm_up_leaves_current_where_it_was():
    links = current(NODE1), HOSTS[NODE1].file("/opt/sglang/previous").linked_to
    rc, _tasks, text = stage(NODE1, dict(UPGRADED, sglang_node_prewarm_modules=["no_such_module"]))
    assert rc != 0
    assert "FlashInfer 0.7.2 has no JIT module 'no_such_module'" in text
    assert (current(NODE1), HOSTS[NODE1].file("/opt/sglang/previous").linked_to) == links


def test_6_a_truncated_artifact_is_rejected_and_the_node_builds_whole():
    upgraded = current(NODE2)
    key = os.path.basename(glob.glob(os.path.join(STORE, os.path.basename(upgraded) + "-*.tar.gz"))[0])[:-len(".tar.gz")]
    artifact = os.path.join(STORE, key + ".tar.gz")
    with open(artifact, "r+b") as handle:
        handle.truncate(os.path.getsize(artifact) // 2)
    HOSTS[NODE2].check_output("rm -rf /var/lib/sglang/kernel-caches/%s/.cache" % os.path.basename(upgraded))
    rc, tasks, text = stage(NODE2, UPGRADED)  # the venv in service, whose cache was wiped
    assert rc == 0, text
    done = recorded(NODE2)
    assert "truncated or replaced" in done["rejected"]
    assert (done["source"], done["built"]) == ("built", [MODULE])
    assert ninja_has_nothing_to_do(NODE2, module_dir(NODE2))
    # Its export replaced the bad artifact: the store's file matches its record again.
    record = store_records()[key + ".json"]
    assert subprocess.check_output(["sha256sum", artifact], text=True).split()[0] == record["sha256"]
    assert record["host"] == NODE2


def test_7_the_export_playbook_puts_a_serving_hosts_cache_in_the_store():
    # The store lost node 1's key (wiped); node 1's workspace holds what its services compiled.
    venv_id = os.path.basename(current(NODE1))
    for path in glob.glob(os.path.join(STORE, venv_id + "-*")):
        os.unlink(path)
    before = stats(NODE1, module_dir(NODE1))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    proc = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
                           os.path.join(ROOT, "playbooks", "kernel_cache_export.yml"), "--limit", NODE1],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    [record] = [r for name, r in store_records().items() if name.startswith(venv_id + "-")]
    assert (record["host"], record["modules"]) == (NODE1, [MODULE])
    assert stats(NODE1, module_dir(NODE1)) == before  # the host's cache untouched


def changed_tasks(tasks):
    return [task for host in tasks.values() for task, result in host if result.get("changed")]


def test_8_bad_rollout_settings_stop_it_before_anything_changed(tmp_path):
    before = {name: (current(name), started_at(name)) for name in HOSTS}
    a_file = tmp_path / "report-is-a-file"
    a_file.write_text("")
    rc, tasks, text = playbook(ROLLOUT, "all", {"rollout_serial": [1, 0], "rollout_drain": "bogus",
                                                "rollout_report_dir": str(a_file), "rollout_action": "undrain"})
    assert rc != 0
    for message in ("rollout_serial entry 0 is not a positive number", "rollout_drain 'bogus' is none of none, sglang_gateway, sglang_router",
                    "rollout_report_dir: %s on the controller is not a directory" % a_file,
                    'rollout_action is set by the rollout for each step of the drain: do not give it', "Nothing was changed."):
        assert message in text
    rc, tasks2, text = playbook(ROLLOUT, "all", "rollout_drain=/nonexistent/drain.yml")
    assert rc != 0 and "rollout_drain: the tasks file /nonexistent/drain.yml does not exist on the controller" in text
    # A --limit that leaves the gateway out: the drain could not reach it, so nothing starts.
    rc, tasks3, text = playbook(ROLLOUT, NODE1, UPGRADED)
    assert rc != 0 and "the gateway host(s) %s are outside this run (--limit)" % GATEWAY in text, text
    assert changed_tasks(tasks) == changed_tasks(tasks2) == changed_tasks(tasks3) == []
    assert {name: (current(name), started_at(name)) for name in HOSTS} == before


def test_9_a_bad_setting_or_a_taken_port_on_one_host_stops_the_rollout_before_any_host_changed():
    before = {name: (current(name), started_at(name), recorded(name)) for name in HOSTS}
    rc, tasks, text = playbook(ROLLOUT, "all", dict(UPGRADED, sglang_venv_keep="{{ 0 if inventory_hostname == '%s' else 3 }}" % NODE2))
    assert rc != 0
    failed = {host: result.get("msg", "") for host, run in tasks.items() for _task, result in run if result.get("failed")}
    assert list(failed) == [NODE2] and "sglang_venv_keep must be >= 1" in failed[NODE2], text
    assert changed_tasks(tasks) == []
    assert {name: (current(name), started_at(name), recorded(name)) for name in HOSTS} == before
    # The services' port moved to one another service of node 2 already listens on (root's, not the
    # service user's): refused on node 2 by its preflight, naming the port and the variable; nothing
    # changed anywhere (node 1 would have moved its service to that port).
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "lab.yml"), encoding="utf-8") as handle:
        common = yaml.safe_load(handle)["sglang_services_common"]
    HOSTS[NODE2].check_output("systemd-run --unit=bsg-port-holder /usr/bin/python3 -m http.server --bind 127.0.0.1 30007 "
                              "&& for i in $(seq 50); do ss -Hltn 'sport = :30007' | grep -q . && exit 0; sleep 0.1; done; exit 1")
    try:
        rc, tasks, text = playbook(ROLLOUT, "all", UPGRADED, {"sglang_services_common": dict(common, port=30007)})
    finally:
        HOSTS[NODE2].run("systemctl stop bsg-port-holder")
    assert rc != 0
    failed = {host: result.get("msg", "") for host, run in tasks.items() for _task, result in run if result.get("failed")}
    assert list(failed) == [NODE2], text
    assert "port 30007 of the eagle3 service is already in use on this host: a socket of uid 0 listens on it, not sglang's" \
        in failed[NODE2] and "sglang_services_common.port or sglang_services_eagle3.port" in failed[NODE2], failed
    assert changed_tasks(tasks) == []
    assert {name: (current(name), started_at(name), recorded(name)) for name in HOSTS} == before


def test_10_a_node_of_another_key_builds_its_own_and_never_gets_that_artifact():
    # Node 2 is told its GPUs are B300s (compute capability 10.3). Its venv is node 1's, whose 12.0f
    # artifact is in the store, but the targets are part of the key: a new key, so node 2 builds its
    # own for 10.3a and exports it beside node 1's. (This was a third, B300-like node of the fleet.)
    before = store_records()
    venv = os.path.basename(current(NODE2))
    rc, _tasks, text = stage(NODE2, UPGRADED, {"sglang_node_gpu_archs": ["10.3"]})
    assert rc == 0, text
    done = recorded(NODE2)
    assert (done["source"], done["built"]) == ("built", [MODULE]) and not done.get("seeded"), done
    assert done["key_id"] not in {record["key_id"] for record in before.values()}
    [(name, record)] = [(name, record) for name, record in store_records().items() if name not in before]
    assert (record["host"], record["key"]["targets"], record["key_id"]) == (NODE2, ["10.3a"], done["key_id"])
    assert name.startswith(venv + "-")
    ninja = HOSTS[NODE2].file(module_dir(NODE2).replace("/120f/", "/103a/") + "/build.ninja").content_string
    assert "-gencode=arch=compute_103a,code=sm_103a" in ninja and "compute_120" not in ninja


def test_11_an_env_only_change_that_fails_is_restored_from_the_snapshot():
    # An env-only change that breaks the server (the stand-in reads STANDIN_UNHEALTHY=1 from its
    # environment and answers 503 on /health_generate), the venv unchanged: the canary's units and env
    # files are kept before its switch, it restarts, fails its health gate, gets them back, restarts
    # and passes; the rollout stops before node 2. (Before, only a venv change was undone: the canary
    # stayed down with the broken env file.)
    env_file = "/etc/sglang/sglang-eagle3.env"
    before = (HOSTS[NODE1].file(env_file).content_string, unit(NODE1), current(NODE1))
    node1, node2 = starts(NODE1), starts(NODE2)
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "lab.yml"), encoding="utf-8") as handle:
        eagle3 = yaml.safe_load(handle)["sglang_services_eagle3"]
    # The venv both nodes serve (tests 3 and 4), so that only the env file changes.
    assert current(NODE1) == current(NODE2) and os.path.basename(current(NODE1)) != starts(NODE1)[0]
    rc, tasks, text = playbook(ROLLOUT, "all", UPGRADED, {"sglang_services_eagle3": dict(eagle3, env={"STANDIN_UNHEALTHY": "1"})})
    assert rc != 0, text
    run = tasks[NODE1]
    assert index(run, "Snapshot | Copy them", changed=None) \
        < index(run, "Restart | Restart the service") \
        < index(run, "Rollback | Why this host failed", changed=False) \
        < index(run, "Restore | The units and env files as they were")
    report = rows(reports()[-1])
    assert (report[NODE1]["result"], report[NODE1]["batch"]) == ("rolled back", 1), report[NODE1]
    assert "did not answer http://127.0.0.1:30000/health_generate with 200 within 20 s" in report[NODE1]["reason"]
    assert report[NODE2]["result"] == "not reached"
    # Node 1 is what it was (env file, unit, venv), started twice more (the failed start, the restored
    # one) and serving; node 2 was never restarted.
    assert (HOSTS[NODE1].file(env_file).content_string, unit(NODE1), current(NODE1)) == before
    assert "STANDIN_UNHEALTHY" not in HOSTS[NODE1].file(env_file).content_string
    assert starts(NODE1) == node1 + [os.path.basename(current(NODE1))] * 2
    assert serving(NODE1) == current(NODE1)
    assert HOSTS[NODE1].check_output("systemctl is-active %s" % UNIT) == "active"
    assert starts(NODE2) == node2
    assert_gateway_holds_each_worker_once()


def test_12_a_unit_only_change_that_fails_is_restored_from_the_snapshot():
    # A change of the unit alone that breaks the server: LimitNOFILE=3 (sglang_services_limit_nofile)
    # leaves Python no file to open, so the pre-warm check and the server cannot start; env files and
    # venv unchanged. The canary's unit comes back from the snapshot, it restarts and serves; the
    # rollout stops before node 2.
    env_file = "/etc/sglang/sglang-eagle3.env"
    before = (HOSTS[NODE1].file(env_file).content_string, unit(NODE1), current(NODE1))
    node1, node2 = starts(NODE1), starts(NODE2)
    assert "LimitNOFILE=1048576" in before[1]
    rc, tasks, text = playbook(ROLLOUT, "all", UPGRADED, {"sglang_services_limit_nofile": 3})
    assert rc != 0, text
    run = tasks[NODE1]
    assert index(run, "Snapshot | Copy them", changed=None) \
        < index(run, "Rollback | Why this host failed", changed=False) \
        < index(run, "Restore | The units and env files as they were")
    report = rows(reports()[-1])
    assert (report[NODE1]["result"], report[NODE1]["batch"]) == ("rolled back", 1), report[NODE1]
    assert report[NODE2]["result"] == "not reached"
    # Node 1 is what it was (unit, env file, venv) and serving, started once more (the restored
    # unit: the broken one never got as far as the stand-in), and back at the gateway (undrained
    # after the restored unit's gate); node 2 was never restarted.
    assert (HOSTS[NODE1].file(env_file).content_string, unit(NODE1), current(NODE1)) == before
    assert starts(NODE1) == node1 + [os.path.basename(current(NODE1))]
    assert serving(NODE1) == current(NODE1)
    assert HOSTS[NODE1].check_output("systemctl is-active %s" % UNIT) == "active"
    assert starts(NODE2) == node2
    assert index(run, OUT) < index(run, "Restore | The units and env files as they were") < index(run, BACK)
    assert_gateway_holds_each_worker_once()


def utc_seconds(stamp):
    """Seconds since the epoch of the JSON callback's task start ('2026-12-06T14:00:00.123456Z')."""
    return datetime.datetime.fromisoformat(stamp.rstrip("Z")).replace(tzinfo=datetime.timezone.utc).timestamp()


class InFlight(threading.Thread):
    """The test's own look at each node's requests in flight (its server's /v1/loads, from the
    controller, every 0.2 s) while the rollout runs: [(time, node, in flight)]."""

    def __init__(self):
        super().__init__(daemon=True)
        self.urls = {name: "http://%s:30000/v1/loads" % address(name) for name in HOSTS}
        self.samples, self.done = [], threading.Event()

    def run(self):
        while not self.done.is_set():
            for name, url in self.urls.items():
                try:
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        running = sum(load["num_running_reqs"] for load in json.loads(answer.read())["loads"])
                except (OSError, ValueError, KeyError):
                    running = 0  # restarting: nothing in flight
                self.samples.append((time.time(), name, running))
            time.sleep(0.2)

    def before(self, name, moment, window=2.0):
        """The most requests seen in flight on the node in the `window` seconds up to `moment`."""
        return max([n for t, node, n in self.samples if node == name and moment - window <= t <= moment] or [0])


DELAY = 1.0  # seconds each stand-in answer takes during test 13 (/etc/sglang/standin.json)


def test_13_a_rollout_through_the_real_gateway_loses_no_request(capsys):
    # A change of the service's environment on both nodes (harmless: the stand-in ignores it), rolled
    # out as an operator would (the canary, then the rest), each node drained at the gateway,
    # restarted, gated, smoke-tested and undrained, while 8 clients send SGLang's native /generate
    # (half of them streamed) through the gateway from the controller for the whole rollout. Each
    # stand-in answer takes 1 s, so requests are in flight on each node as its drain starts.
    with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "lab.yml"), encoding="utf-8") as handle:
        eagle3 = yaml.safe_load(handle)["sglang_services_eagle3"]
    changed = dict(eagle3, env={"STANDIN_NOTE": "rolled out under load"})
    node1, node2 = starts(NODE1), starts(NODE2)
    for host in HOSTS.values():
        host.check_output("echo '{\"delay\": %s}' > /etc/sglang/standin.json && chmod 0644 /etc/sglang/standin.json" % DELAY)
    watch = InFlight()
    watch.start()
    load = loadgen.Load(gateway_url(), concurrency=8, duration=loadgen.MAX_DURATION, stream_share=0.5,
                        key=GATEWAY_VARS["sglang_gateway_api_key"], timeout=60).start()
    try:
        time.sleep(3 * DELAY)  # requests in flight on both nodes before the first drain
        rc, tasks, text = playbook(ROLLOUT, "all", UPGRADED, {"sglang_services_eagle3": changed})
        time.sleep(3 * DELAY)  # and on both after the last undrain
    finally:
        report = load.stop()
        watch.done.set()
        for host in HOSTS.values():
            host.check_output("rm -f /etc/sglang/standin.json")
    assert rc == 0, text
    phases = {}
    for name in HOSTS:
        run = tasks[name]
        moments = [utc_seconds(run[index(run, task, changed=None)][1]["_started"]) for task in (
            "Gateway | This host's workers, as the gateway names them, and the gateways",
            "Switch | Changes from here are undone if the host fails (rollback.yml)",
            BACK,
            "Switch | Done, back in rotation")]
        phases[name] = {"in_flight": watch.before(name, moments[0]), "drain": moments[1] - moments[0],
                        "restart": moments[2] - moments[1], "undrain": moments[3] - moments[2]}
    lines = ["fleet rollout through the real gateway: %s" % loadgen.describe(report)]
    lines += ["  first %s failure: %s" % (kind, why) for kind, why in report["examples"].items()]
    lines += ["  %s (batch %s): %d requests in flight as its drain started; drain %.1f s, restart to gate and smoke %.1f s, "
              "undrain %.1f s" % (name, rows(reports()[-1])[name]["batch"], phase["in_flight"], phase["drain"],
                                  phase["restart"], phase["undrain"]) for name, phase in phases.items()]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert report["failed"] == 0, "\n".join(lines)
    assert report["total"] >= 100 and report["streamed"] >= report["total"] // 3, report
    assert all(phase["in_flight"] >= 1 for phase in phases.values()), phases  # in flight at every drain
    # The canary (batch 1) first, then the rest; each node restarted once, on its venv, and the
    # gateway holds each worker once again, healthy.
    report_rows = rows(reports()[-1])
    assert {h: (r["batch"], r["result"], r["built"]) for h, r in report_rows.items()} == {NODE1: (1, "ok", 0.0), NODE2: (2, "ok", 0.0)}
    assert starts(NODE1) == node1 + [os.path.basename(current(NODE1))] and starts(NODE2) == node2 + [os.path.basename(current(NODE2))]
    assert int(started_at(NODE1)) < int(started_at(NODE2))
    assert "STANDIN_NOTE" in HOSTS[NODE2].file("/etc/sglang/sglang-eagle3.env").content_string
    assert_gateway_holds_each_worker_once()


def unit_time(name, prop):
    """A unit's timestamp property as seconds since the epoch (systemd's own clock, microseconds)."""
    text = HOSTS[name].check_output("systemctl show --timestamp=us+utc -P %s %s" % (prop, UNIT))
    return datetime.datetime.strptime(text.strip(), "%a %Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=datetime.timezone.utc).timestamp()


def modprobe_calls(name):
    log = HOSTS[name].file("/var/log/bsg-nvidia-modprobe.log")
    return log.content_string.splitlines() if log.exists else []


def test_14_a_rebooted_node_runs_its_device_step_first_and_serves_again_from_the_same_caches():
    # The outage: after a boot, the service is the first CUDA user and CUDA's own call of the
    # setuid nvidia-modprobe is refused by the sandbox. The unit runs it first, privileged (+), while
    # the server keeps NoNewPrivileges= and its exposure; the unit starts after the persistence daemon.
    unit_text = unit(NODE2)
    assert "ExecStartPre=+/usr/bin/nvidia-modprobe -u -c=0" in unit_text
    assert unit_text.index("ExecStartPre=+/usr/bin/nvidia-modprobe") < unit_text.index("flashinfer_prewarm.py")
    assert "nvidia-persistenced.service" in HOSTS[NODE2].check_output("systemctl show -P After %s" % UNIT).split()
    workspace = module_dir(NODE2)
    caches, venv, calls, started = stats(NODE2, workspace), current(NODE2), modprobe_calls(NODE2), starts(NODE2)
    subprocess.run(["podman", "restart", "--time", "30", NODE2], check=True, capture_output=True, timeout=180)
    deadline = time.monotonic() + 180
    while HOSTS[NODE2].run("systemctl is-active %s" % UNIT).stdout.strip() != "active" or len(starts(NODE2)) == len(started):
        assert time.monotonic() < deadline, HOSTS[NODE2].run("journalctl -b -u %s --no-pager" % UNIT).stdout
        time.sleep(2)
    new_calls = modprobe_calls(NODE2)[len(calls):]
    assert len(new_calls) == 1, (new_calls, HOSTS[NODE2].run("journalctl -b -u %s --no-pager" % UNIT).stdout)  # once, at this start
    when, user, capabilities, arguments = new_calls[0].split(" ", 3)
    assert (user, arguments) == ("uid=0", "args=-u -c=0")
    # every capability the container has (init's bounding set), not the server's empty set
    bounding = HOSTS[NODE2].check_output("grep CapBnd /proc/1/status").split()[1]
    assert int(capabilities.split(":")[1], 16) == int(bounding, 16) != 0
    assert float(when) <= unit_time(NODE2, "ExecMainStartTimestamp")
    assert HOSTS[NODE2].check_output("systemctl show -P NoNewPrivileges %s" % UNIT).strip() == "yes"
    exposure = re.search(r"Overall exposure level for %s: ([0-9.]+)" % re.escape(UNIT),
                         HOSTS[NODE2].run("systemd-analyze security --no-pager %s" % UNIT).stdout)
    assert exposure and float(exposure.group(1)) <= 5.0, exposure
    # On the same venv, from the same caches: nothing rebuilt, nothing for ninja to do.
    assert current(NODE2) == venv and starts(NODE2) == started + [os.path.basename(venv)]
    assert stats(NODE2, workspace) == caches and ninja_has_nothing_to_do(NODE2, workspace)
    # Not checked here: the gateway. A restarted container gets a new address on podman's network
    # (a real host keeps its own), so the gateway's entry for it is stale; the last test of the scenario.
