"""The rollout's drain (playbooks/tasks/rollout_drain_sglang_router.yml) against the real SGLang
model gateway: smg 1.13.0 from PyPI (requirements-dev.txt), run on this machine with --dp-aware,
in front of stand-in SGLang servers (sglang_standin.py: a real server needs a GPU and weights).

The gateway keeps every registered URL verbatim, so the workers here are registered the way another
tool or an operator may have spelled them; the drain is the task file itself, included by a play on
a local host whose inventory names the worker as the rollout would (http://<ansible_host>:<port>).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DRAIN = os.path.join(ROOT, "playbooks", "tasks", "rollout_drain_sglang_router.yml")
STANDIN = os.path.join(os.path.dirname(__file__), "sglang_standin.py")
SMG = shutil.which("smg") or os.path.join(os.path.dirname(sys.executable), "smg")

PLAY = textwrap.dedent("""\
    - name: Drain or undrain this host's workers at the gateway
      hosts: all
      gather_facts: false
      tasks:
        - name: The rollout's drain tasks
          ansible.builtin.include_tasks: %s
    """) % DRAIN


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def wait_for(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s" % what)


class Gateway:
    def __init__(self, url):
        self.url = url

    def workers(self):
        status, document = call(self.url + "/workers")
        assert status == 200, document
        return document["workers"]

    def urls(self):
        return sorted(entry["url"] for entry in self.workers())

    def register(self, url):
        status, document = call(self.url + "/workers", "POST", {"url": url})
        assert status == 202, document
        # A --dp-aware gateway holds a data-parallel worker as url@rank entries with dp_base_url.
        wait_for(lambda: any(url in (e["url"], e.get("dp_base_url")) and e.get("is_healthy") for e in self.workers()),
                 "%s registered" % url)

    def clear(self):
        for entry in self.workers():
            call("%s/workers/%s" % (self.url, entry["id"]), "DELETE")
        wait_for(lambda: not self.workers(), "an empty gateway")


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    """The gateway and three stand-in servers: two plain ones and one with two data-parallel ranks."""
    if not os.path.exists(SMG):
        pytest.fail("smg is not installed (requirements-dev.txt pins it; run ./scripts/bootstrap.sh)")
    log = tmp_path_factory.mktemp("gateway") / "smg.log"
    ports = {"gateway": free_port(), "metrics": free_port(), "a": free_port(), "b": free_port(), "dp": free_port()}
    started = [subprocess.Popen([sys.executable, STANDIN, str(ports[name])] + (["2"] if name == "dp" else []))
               for name in ("a", "b", "dp")]
    with open(log, "w") as handle:
        started.append(subprocess.Popen(
            [SMG, "launch", "--host", "127.0.0.1", "--port", str(ports["gateway"]), "--prometheus-host", "127.0.0.1",
             "--prometheus-port", str(ports["metrics"]), "--disable-tokenizer-autoload", "--dp-aware",
             "--health-check-interval-secs", "1", "--log-level", "warn"],
            stdout=handle, stderr=subprocess.STDOUT))
    gateway = Gateway("http://127.0.0.1:%d" % ports["gateway"])
    try:
        wait_for(lambda: _answers(gateway), "the gateway to answer (log: %s)" % log)
        yield gateway, ports
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=10)


def _answers(gateway):
    try:
        return call(gateway.url + "/workers")[0] == 200
    except OSError:
        return False


@pytest.fixture
def gateway(processes):
    gateway, ports = processes
    gateway.clear()
    return gateway, ports


def drain(tmp_path, gateway, action, ports):
    """The drain task file for a host at 127.0.0.1 serving `ports` (service name -> port)."""
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    endpoints = {name: {"port": port, "url": "http://127.0.0.1:%d" % port} for name, port in ports.items()}
    extra = {"ansible_host": "127.0.0.1", "rollout_action": action, "__rollout_router_url": gateway.url,
             "__rollout_drain_timeout": 10, "sglang_services_endpoints": endpoints, "sglang_services_units": {}}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(["ansible-playbook", "-i", "node,", "-c", "local", str(play), "-e", json.dumps(extra)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n"):])[0]
    calls = {}
    for task in report["plays"][0]["tasks"]:
        result = task["hosts"].get("node", {})
        calls[task["task"]["name"]] = [item["item"] for item in result.get("results", []) if not item.get("skipped")]
    return calls  # task name -> the loop items it ran (the gateway calls it made)


def test_every_spelling_and_every_rank_of_the_host_s_workers_leaves_the_gateway(tmp_path, gateway):
    gw, ports = gateway
    a, b, dp = ports["a"], ports["b"], ports["dp"]
    # This host serves a and dp; the gateway holds a in two spellings the inventory does not use,
    # dp as its two ranks, and b (another host's worker, which must stay).
    for url in ("http://127.0.0.1:%d/" % a, "http://localhost:%d" % a, "http://127.0.0.1:%d" % dp,
                "http://127.0.0.1:%d" % b):
        gw.register(url)
    assert gw.urls() == sorted(["http://127.0.0.1:%d/" % a, "http://localhost:%d" % a, "http://127.0.0.1:%d" % b,
                                "http://127.0.0.1:%d@0" % dp, "http://127.0.0.1:%d@1" % dp])
    calls = drain(tmp_path, gw, "drain", {"eagle3": a, "dflash": dp})
    assert len(calls["Router | Remove them from the router"]) == 4  # a twice, dp's two ranks
    # The gateway answers a removal with 202 and removes in the background.
    wait_for(lambda: gw.urls() == ["http://127.0.0.1:%d" % b], "only b left: %s" % gw.urls(), timeout=20)


def test_the_undrain_adds_no_second_copy_of_a_worker_the_gateway_holds_in_another_spelling(tmp_path, gateway):
    gw, ports = gateway
    a, b = ports["a"], ports["b"]
    gw.register("http://127.0.0.1:%d/" % a)  # a is there, spelled with a slash; b is not
    calls = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b})
    assert calls["Router | Add them back"] == ["http://127.0.0.1:%d" % b]  # the only POST /workers
    wait_for(lambda: len(gw.workers()) == 2 and all(e.get("is_healthy") for e in gw.workers()),
             "b registered and nothing else (the gateway holds %s)" % gw.urls())
    assert gw.urls() == sorted(["http://127.0.0.1:%d/" % a, "http://127.0.0.1:%d" % b])
    # Again: both are there, nothing is registered.
    calls = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b})
    assert calls["Router | Add them back"] == []
    assert gw.urls() == sorted(["http://127.0.0.1:%d/" % a, "http://127.0.0.1:%d" % b])
