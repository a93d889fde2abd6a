"""Helpers shared by the verify tests: run playbooks against the scenario's nodes as an operator would.

The lab's two host types are two scenarios with one node each: `default` (molecule-pro6000) and
`b300` (molecule-b300), whose tests/conftest.py loads this file. Each test file says which node it
checks (testinfra_hosts). Playbooks run by the tests are limited to the PRO 6000 node unless a test
names another.
"""

import json
import os
import re
import shlex
import subprocess
import tempfile

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PRO6000 = "molecule-pro6000"
B300 = "molecule-b300"
# The units' environment: the flashinfer role's file, then the kernel caches of the venv in service
# (read through current), as the units' EnvironmentFile= lines have them.
FLASHINFER_ENV = "/etc/sglang/flashinfer.env"
VENV_ENV = "/opt/sglang/current/venv.env"
UNIT_ENV = "$(grep -hv '^#' %s %s | xargs)" % (FLASHINFER_ENV, VENV_ENV)


def env_lines(text):
    """KEY=VALUE lines of an env file as a dict (comments and blank lines left out)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def jit_dir(host, arch, version="0.7.2"):
    """FlashInfer's JIT dir for the venv in service: its workspace is what venv.env names."""
    workspace = env_lines(host.file(VENV_ENV).content_string)["FLASHINFER_WORKSPACE_BASE"]
    return "%s/.cache/flashinfer/%s/%s/cached_ops" % (workspace, version, arch)


# The playbook that runs one role of the collection (extra var or host var bsg_role).
ROLE_PLAYBOOK = "molecule/default/role.yml"
# The lab's EAGLE-3 settings (inventories/lab/group_vars/lab.yml), for tests that pass the service's
# dict as an extra var (which replaces the whole dict).
with open(os.path.join(ROOT, "inventories", "lab", "group_vars", "lab.yml")) as _handle:
    LAB_EAGLE3 = yaml.safe_load(_handle)["sglang_services_eagle3"]


@pytest.fixture(autouse=True)
def one_worker_per_node(request):
    """Molecule runs these tests on two pytest-xdist workers, one per lab node (each file's
    xdist_group mark, --dist loadgroup): a node's tests must run in order on one worker, or one test's
    playbook changes the node under another's fingerprint. pytest-xdist marks a grouped test by a
    "@group" suffix of its node id; with pytest 9.2 that suffix silently stopped taking effect
    (pytest-dev/pytest-xdist#1386). A test that was not grouped fails before it touches a node."""
    item = request.node
    if (getattr(request.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
            and "@" not in item.nodeid.rpartition("]")[2]):
        pytest.fail("pytest-xdist did not keep this test in its xdist_group (%s): see requirements-dev.txt "
                    "on the pytest and pytest-xdist versions" % item.nodeid, pytrace=False)


FINGERPRINT_SCRIPT = os.path.join(ROOT, "tests", "fingerprint.sh")
# Where fingerprints are kept on the nodes (not a path the roles own); prepare.yml makes it.
FINGERPRINTS = "/var/tmp/bsg-fingerprints"


class Fingerprint:
    """A fingerprint kept in a file on the node (it has about 175,000 lines on a converged node)."""

    def __init__(self, host, path):
        self.host = host
        self.path = path
        self.digest = host.check_output("sha256sum %s" % shlex.quote(path)).split()[0]


def fingerprint(host, *paths):
    """tests/fingerprint.sh run on the node: every fact "nothing changed" covers (contents, modes,
    owners, link targets to full depth, unit states, packages, the service user), one per line.
    With no paths, the paths the collection's roles own."""
    with open(FINGERPRINT_SCRIPT) as handle:
        script = handle.read()
    path = host.check_output("mkdir -p %s && mktemp %s/fingerprint.XXXXXX" % (FINGERPRINTS, FINGERPRINTS))
    host.check_output("sh -s -- %s > %s <<'BSG_FINGERPRINT'\n%sBSG_FINGERPRINT"
                      % (" ".join(shlex.quote(p) for p in paths), path, script))
    return Fingerprint(host, path)


def recorded_fingerprint(host, name):
    """A fingerprint prepare.yml or converge.yml recorded (FINGERPRINTS/<name>)."""
    return Fingerprint(host, "%s/%s" % (FINGERPRINTS, name))


def assert_unchanged(before, after, what="the node"):
    """Two fingerprints are the same; otherwise fail with the lines that differ."""
    if before.digest != after.digest:
        diff = before.host.run("diff %s %s | head -n 80" % (shlex.quote(before.path), shlex.quote(after.path)))
        raise AssertionError("%s changed:\n%s" % (what, diff.stdout))


def ansible_env(**extra):
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".cache", "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    env.update(extra)
    return env


def _run_playbook(path, *extra_vars, limit=PRO6000):
    """Run a playbook (relative to the repository root) on one node with extra vars (dicts); return (rc, output)."""
    args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, path), "--limit", limit]
    for value in extra_vars:  # a dict as JSON; a string as written (-e name=true, the README's form)
        args += ["-e", value if isinstance(value, str) else json.dumps(value)]
    proc = subprocess.run(args, capture_output=True, text=True, env=ansible_env(), cwd=ROOT, check=False)
    return proc.returncode, proc.stdout + proc.stderr


class CaseResult:
    """What one case host did: failed (bool), changed (task count), text (every message, folded),
    tasks (the names of the tasks it ran, in order), results (their results, in the same order)."""

    def __init__(self, stats, results, tasks=()):
        self.failed = stats.get("failures", 0) > 0 or stats.get("unreachable", 0) > 0
        self.changed = stats.get("changed", 0)
        self.tasks = list(tasks)
        self.results = list(results)
        texts = []
        pending = list(results)
        while pending:  # a loop's result holds one result per item
            result = pending.pop(0)
            for key in ("msg", "stderr", "stdout"):
                value = result.get(key)
                if isinstance(value, str) and value:
                    texts.append(value)
            pending.extend(item for item in result.get("results", []) if isinstance(item, dict))
        self.text = " ".join(" ".join(texts).split())

    def __repr__(self):
        return "CaseResult(failed=%s, changed=%s, text=%r)" % (self.failed, self.changed, self.text[-2000:])


def ssh_login(node):
    """How the scenario reaches `node` (host_vars/molecule-node.yml, with its paths resolved): SSH as
    root through `podman exec <node> sshd -i`, the key prepare.yml made."""
    ssh = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "ssh")
    return {
        "ansible_connection": "ansible.builtin.ssh", "ansible_user": "root", "ansible_host": node,
        "ansible_ssh_private_key_file": os.path.join(ssh, "id_ed25519"),
        "ansible_ssh_common_args": '-o ProxyCommand="podman exec -i %%h /usr/sbin/sshd -i" -o UserKnownHostsFile=%s '
                                   "-o StrictHostKeyChecking=accept-new" % os.path.join(ssh, "known_hosts"),
    }


def run_cases(cases, playbook=ROLE_PLAYBOOK, node=PRO6000, groups=("lab", "pro6000"), extra_args=()):
    """Run `playbook` once for many independent cases, in parallel.

    Each case (name -> host vars, e.g. {"bsg_role": ..., "cuda_toolkit_version": "13.0"}) becomes an
    inventory host that reaches `node` over SSH as the scenario does (ssh_login), in the node's groups (so
    the lab's group_vars apply, and a case's own vars override them as -e did per run before). One
    ansible-playbook run with Ansible's JSON callback (plus `extra_args`, e.g. ["--check"]); returns
    {name: CaseResult}.
    """
    with open(os.environ["MOLECULE_INVENTORY_FILE"]) as handle:
        node_vars = yaml.safe_load(handle)["all"]["hosts"][node]
    connection = {key: value for key, value in node_vars.items() if key.startswith("ansible_")}
    connection.setdefault("ansible_host", node)
    connection.update(ssh_login(node))
    hosts = {"case-%s" % name: dict(connection, **values) for name, values in cases.items()}
    inventory = {"all": {"children": {group: {"hosts": {host: None for host in hosts}} for group in groups}},
                 "case_hosts": {"hosts": hosts}}
    with tempfile.TemporaryDirectory() as tmp:
        # One SSH connection per case host: sshd refuses more than MaxSessions (10) on one shared one.
        # Twenty-odd logins at once through `podman exec` on two busy cores can take longer than
        # ssh's 10 s: a longer timeout and retries, so that a slow login is not an unreachable case.
        for index, host in enumerate(hosts.values()):
            host.update(ansible_control_path=os.path.join(tmp, "cp%d" % index), ansible_ssh_timeout=60,
                        ansible_ssh_retries=3)
        path = os.path.join(tmp, "cases.yml")
        with open(path, "w") as handle:
            yaml.safe_dump(inventory, handle)
        args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-i", path,
                os.path.join(ROOT, playbook), "--limit", "case_hosts", "--forks", str(max(5, len(hosts)))] + list(extra_args)
        env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
        proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    # The JSON document starts on a line of its own; ansible.cfg's profile_tasks prints around it.
    start = re.search(r"^\{$", proc.stdout, re.M)
    try:
        report = json.JSONDecoder().raw_decode(proc.stdout[start.start():])[0]
    except (AttributeError, ValueError) as exc:
        raise AssertionError("ansible-playbook printed no JSON report (rc %d): %s %s"
                             % (proc.returncode, proc.stdout, proc.stderr)) from exc
    results = {host: [] for host in hosts}
    names = {host: [] for host in hosts}
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                if host in results:
                    results[host].append(result)
                    names[host].append(task.get("task", {}).get("name", ""))
    return {name: CaseResult(report["stats"].get("case-%s" % name, {}), results["case-%s" % name], names["case-%s" % name])
            for name in cases}


@pytest.fixture
def run_playbook():
    """run_playbook(path, *extra_vars): e.g. one role's playbook (molecule/default/role.yml) instead of
    the whole site.yml, for cases that fail in that role's preflight."""
    return _run_playbook
