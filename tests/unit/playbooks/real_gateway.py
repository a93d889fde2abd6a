"""What the tests against the real model gateway share (test_drain_real_gateway.py,
test_rollout_under_load.py): the paths of the parts they run, the gateway's test key, free ports,
the gateway's API and a wait, and the environment an ansible-playbook of this checkout needs."""

import json
import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
STANDIN = os.path.join(ROOT, "molecule", "fleet", "files", "standin.py")
LAUNCHER = os.path.join(ROOT, "roles", "sglang_gateway", "files", "launch.py")
KEY = "test-gateway-key"

_TAKEN = set()


def free_port():
    """A free port below Linux's ephemeral range (32768 and up): a port the kernel hands out here
    can be taken by a gateway's own outgoing connection before the process meant for it binds it."""
    while True:
        port = random.randint(20000, 32000)
        if port in _TAKEN:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _TAKEN.add(port)
        return port


def call(url, method="GET", body=None, key=KEY):
    """(status, JSON body) of one request; (0, {"error"}) when nothing listens (yet)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
    except urllib.error.URLError as error:
        return 0, {"error": str(error)}


def wait_for(predicate, what, timeout=30):
    """The predicate's first true value within `timeout` seconds (a connection reset while a process
    starts counts as not yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s" % what)


def ansible_env():
    """The environment of an ansible-playbook run of this checkout, with the JSON callback."""
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
                ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")


def run_role_entry(tmp_path, role, tasks_from, hosts, extra_vars, args=()):
    """ansible-playbook of one play that includes `role`'s `tasks_from` on `hosts` (an inventory's
    hosts: {name: vars}), run in `tmp_path` with `extra_vars` (-e, JSON) and `args`; (rc, output)."""
    (tmp_path / "play.yml").write_text(json.dumps([{
        "name": "The %s role's %s" % (role, tasks_from), "hosts": "all", "gather_facts": False,
        "tasks": [{"name": tasks_from, "ansible.builtin.include_role": {"name": "blackwell.sglang." + role, "tasks_from": tasks_from}}]}]))
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts}}))
    proc = subprocess.run(["ansible-playbook", "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra_vars)] + list(args),
                          capture_output=True, text=True, env=ansible_env(), cwd=str(tmp_path), check=False)
    return proc.returncode, proc.stdout + proc.stderr
