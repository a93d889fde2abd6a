"""Compile once per key across a fleet: two PRO 6000-like nodes with the same key.

In order (each test starts from what the previous one left): the converge built FlashInfer's JIT
modules on node 1 only and seeded node 2 from the controller's store; node 1 switches to a new venv
(built and warmed before current moves); node 2 installs that venv afterwards (its sources newer than
node 1's objects, as on a real fleet) and seeds it without compiling; both roll back without
compiling; a truncated artifact makes node 2 build locally and end whole, and its export repairs the
store. Playbooks run as an operator would (molecule/fleet/stage.yml is site.yml without the units,
which a lab node cannot start); the task order and results come from Ansible's JSON callback.
"""

import glob
import json
import os
import re
import subprocess

import testinfra

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NODE1, NODE2 = "fleet-pro6000-1", "fleet-pro6000-2"
HOSTS = {name: testinfra.get_host("podman://" + name) for name in (NODE1, NODE2)}
STORE = os.path.join(os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"]), "..", "kernels")
UPGRADED = {"sglang_venv_packages": ["sglang==0.5.23", "tomli-w==1.2.0"]}
MODULE = "quantization"


def stage(limit, *extra_vars):
    """Run molecule/fleet/stage.yml; return (rc, {host: [(task name, result), ...]}, text)."""
    args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
            os.path.join(ROOT, "molecule", "fleet", "stage.yml"), "--limit", limit]
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
                tasks.setdefault(host, []).append((task["task"]["name"], result))
    return proc.returncode, tasks, proc.stdout[-6000:] + proc.stderr[-3000:]


def recorded(name):
    """What the node's last kernel cache run did (flashinfer_kernel_cache, recorded by the playbook)."""
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
    """Position of the first task called `name` (with the given changed state) in a host's run."""
    for position, (task, result) in enumerate(tasks):
        # The JSON callback names a role's task "<role> : <name>".
        if task.split(" : ", 1)[-1] == name and bool(result.get("changed")) == changed and not result.get("skipped"):
            return position
    raise AssertionError("no %s task %r in %s" % ("changed" if changed else "unchanged", name, [task for task, _result in tasks]))


def test_1_converge_built_once_and_seeded_the_second_node():
    one, two = recorded(NODE1), recorded(NODE2)
    assert one["key_id"] == two["key_id"]  # same venv, targets, CUDA: one key
    assert (one["source"], one["built"], one["exported"]) == ("built", [MODULE], [MODULE])
    assert (two["source"], two["seeded"], two["built"]) == ("seeded", [MODULE], [])
    # The store holds that one artifact, recorded with its checksum and the host that built it.
    [(record_name, record)] = store_records().items()
    assert record_name == one["key_id"] + ".json" and record["host"] == NODE1 and record["modules"] == [MODULE]
    # Node 2's objects are node 1's bytes, and ninja (FlashInfer's own build) has nothing to do.
    built, seeded = stats(NODE1, module_dir(NODE1)), stats(NODE2, module_dir(NODE2))
    assert {f: s[2] for f, s in seeded.items() if f.endswith((".o", ".so"))} == \
        {f: s[2] for f, s in built.items() if f.endswith((".o", ".so"))}
    assert ninja_has_nothing_to_do(NODE2, module_dir(NODE2))


def test_2_a_switch_warms_the_new_venv_before_current_moves():
    before = current(NODE1)
    rc, tasks, text = stage(NODE1, UPGRADED)
    assert rc == 0, text
    run = tasks[NODE1]
    # Built (FlashInfer's own build, changed) and exported before the switch moved current.
    warm = index(run, "Warm | Build the JIT modules (repairs what a killed build left)")
    switch = index(run, "Switch | Point current at the venv")
    assert warm < index(run, "Export | Fetch the artifact") < switch
    assert run[warm][1]["built"] == [MODULE]
    after = current(NODE1)
    assert after != before and HOSTS[NODE1].file("/opt/sglang/previous").linked_to == before
    assert recorded(NODE1)["source"] == "built"
    assert len(store_records()) == 2  # a new venv is a new key


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


def test_4_rolling_back_compiles_nothing():
    so = {name: stats(name, module_dir(name, HOSTS[name].file("/opt/sglang/previous").linked_to)) for name in HOSTS}
    rc, tasks, text = stage("all", "sglang_venv_rollback=true")
    assert rc == 0, text
    for name in HOSTS:
        warm = index(tasks[name], "Warm | Build the JIT modules (repairs what a killed build left)", changed=False)
        assert tasks[name][warm][1]["built"] == [], name
        assert recorded(name)["source"] == "warm"
        assert stats(name, module_dir(name)) == so[name]  # not one byte or mtime touched


def test_5_a_failed_warm_up_leaves_current_where_it_was():
    links = current(NODE1), HOSTS[NODE1].file("/opt/sglang/previous").linked_to
    rc, _tasks, text = stage(NODE1, dict(UPGRADED, sglang_node_prewarm_modules=["no_such_module"]))
    assert rc != 0
    assert "FlashInfer 0.7.2 has no JIT module 'no_such_module'" in text
    assert (current(NODE1), HOSTS[NODE1].file("/opt/sglang/previous").linked_to) == links


def test_6_a_truncated_artifact_is_rejected_and_the_node_builds_whole():
    upgraded = HOSTS[NODE2].file("/opt/sglang/previous").linked_to
    key = os.path.basename(glob.glob(os.path.join(STORE, os.path.basename(upgraded) + "-*.tar.gz"))[0])[:-len(".tar.gz")]
    artifact = os.path.join(STORE, key + ".tar.gz")
    with open(artifact, "r+b") as handle:
        handle.truncate(os.path.getsize(artifact) // 2)
    HOSTS[NODE2].check_output("rm -rf /var/lib/sglang/kernel-caches/%s/.cache" % os.path.basename(upgraded))
    rc, tasks, text = stage(NODE2, UPGRADED)  # forward again, to the venv whose cache was wiped
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
