"""The rollout's drain (playbooks/tasks/rollout_drain_gateway.yml) against the real SGLang model
gateway: smg 1.13.0 from PyPI (requirements-dev.txt), run on this machine, in front of stand-in
SGLang servers (molecule/fleet/files/standin.py: a real server needs a GPU and weights; it answers
the gateway's probes and reports its own requests in flight).

Two gateways, as the two drains meet them:
  - rollout_drain=sglang_router: a gateway this collection does not run (--dp-aware, --api-key),
    edited through its worker API. Workers are registered the way another tool or an operator may
    have spelled them.
  - rollout_drain=sglang_gateway: the gateway as the sglang_gateway role runs it (file discovery,
    --discovery-file, --api-key), edited through its manifest by the gateway_manifest module.
The drain is the task file itself, included by a play on a local host whose inventory names its
worker as the rollout would (http://<ansible_host>:<port>). Each failure class of the drain is
shown: a worker that never comes back healthy, an unreadable load answer, a missing key.
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DRAIN = os.path.join(ROOT, "playbooks", "tasks", "rollout_drain_gateway.yml")
STANDIN = os.path.join(ROOT, "molecule", "fleet", "files", "standin.py")
SMG = shutil.which("smg") or os.path.join(os.path.dirname(sys.executable), "smg")
KEY = "test-gateway-key"

PLAY = textwrap.dedent("""\
    - name: Drain or undrain this host's workers at the gateway
      hosts: all
      gather_facts: false
      tasks:
        - name: The rollout's drain tasks
          ansible.builtin.include_tasks: %s
    """) % DRAIN


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


def wait_for(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s" % what)


class Gateway:
    def __init__(self, url, argv, log, manifest=None):
        self.url, self.argv, self.log, self.manifest = url, argv, log, manifest
        self.process = None

    def start(self):
        with open(self.log, "a") as handle:
            self.process = subprocess.Popen(self.argv, stdout=handle, stderr=subprocess.STDOUT)
        wait_for(self.answers, "the gateway to answer (log: %s)" % self.log)

    def stop(self):
        if self.process:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=20)
            self.process = None

    def answers(self):
        try:
            return call(self.url + "/workers")[0] == 200
        except OSError:
            return False

    def workers(self):
        status, document = call(self.url + "/workers")
        assert status == 200, document
        return document["workers"]

    def urls(self):
        return sorted(entry["url"] for entry in self.workers())

    def healthy(self):
        return sorted(entry["url"] for entry in self.workers() if entry.get("is_healthy") and entry.get("status") == "ready")

    def register(self, url):
        status, document = call(self.url + "/workers", "POST", {"url": url})
        assert status == 202, document
        # A --dp-aware gateway holds a data-parallel worker as url@rank entries with dp_base_url.
        wait_for(lambda: any(url in (e["url"], e.get("dp_base_url")) and e.get("is_healthy") for e in self.workers()),
                 "%s registered" % url)

    def clear(self):
        if self.manifest:
            write_manifest(self.manifest, [])
            drained = os.path.join(os.path.dirname(self.manifest), "drained.json")
            if os.path.exists(drained):
                os.unlink(drained)
        for entry in self.workers():
            call("%s/workers/%s" % (self.url, entry["id"]), "DELETE")
        wait_for(lambda: not self.workers(), "an empty gateway")


def write_manifest(path, urls):
    with open(path + ".tmp", "w") as handle:
        json.dump({"version": 1, "workers": [{"url": url} for url in urls]}, handle)
    os.replace(path + ".tmp", path)  # smg rereads it on the rename


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    """Three stand-in servers (two plain, one with two data-parallel ranks) and the two gateways."""
    if not os.path.exists(SMG):
        pytest.fail("smg is not installed (requirements-dev.txt pins it; run ./scripts/bootstrap.sh)")
    work = tmp_path_factory.mktemp("gateway")
    knobs = work / "standin.json"
    knobs.write_text("{}")
    ports = {name: free_port() for name in ("router", "router_metrics", "managed", "managed_metrics", "a", "b", "dp")}
    started = [subprocess.Popen([sys.executable, STANDIN, "server", "--port", str(ports[name]), "--state-dir", str(work),
                                 "--config", str(knobs)] + (["--dp-size", "2"] if name == "dp" else []))
               for name in ("a", "b", "dp")]
    common = ["--host", "127.0.0.1", "--disable-tokenizer-autoload", "--health-check-interval-secs", "1",
              "--log-level", "warn", "--prometheus-host", "127.0.0.1", "--api-key", KEY]
    manifest = str(work / "workers.json")
    write_manifest(manifest, [])
    gateways = {
        "sglang_router": Gateway("http://127.0.0.1:%d" % ports["router"],
                                 [SMG, "launch", "--port", str(ports["router"]), "--prometheus-port",
                                  str(ports["router_metrics"]), "--dp-aware"] + common, work / "router.log"),
        # As the sglang_gateway role runs it (roles/sglang_gateway/vars/main.yml): file discovery.
        "sglang_gateway": Gateway("http://127.0.0.1:%d" % ports["managed"],
                                  [SMG, "launch", "--port", str(ports["managed"]), "--prometheus-port",
                                   str(ports["managed_metrics"]), "--discovery-provider", "file",
                                   "--discovery-file", manifest] + common, work / "managed.log", manifest),
    }
    try:
        for gateway in gateways.values():
            gateway.start()
        yield gateways, ports, knobs
    finally:
        for gateway in gateways.values():
            gateway.stop()
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=10)


@pytest.fixture
def router(processes):
    gateways, ports, knobs = processes
    knobs.write_text("{}")
    gateways["sglang_router"].clear()
    return gateways["sglang_router"], ports, knobs


@pytest.fixture
def managed(processes):
    gateways, ports, knobs = processes
    knobs.write_text("{}")
    gateways["sglang_gateway"].clear()
    return gateways["sglang_gateway"], ports, knobs


def drain(tmp_path, gateway, action, ports, mode, ok=True, **settings):
    """The drain task file for a host at 127.0.0.1 serving `ports` (service name -> port); returns
    (task name -> the loop items it ran, the output)."""
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    endpoints = {name: {"port": port, "url": "http://127.0.0.1:%d" % port} for name, port in ports.items()}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {
        "node": {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "gw": {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
               "sglang_gateway_local_url": gateway.url,
               "sglang_gateway_manifest": gateway.manifest or ""}}}}))
    extra = dict({"rollout_action": action, "__rollout_drain": mode, "__rollout_router_url": gateway.url,
                  "__rollout_gateway_hosts": ["gw"], "__rollout_gateway_api_key": KEY, "__rollout_server_api_key": "",
                  "__rollout_gateway_timeout": 10, "__rollout_drain_timeout": 10, "__rollout_drain_require_loads": True,
                  "sglang_services_endpoints": endpoints,
                  "sglang_services_units": {name: {"active": "active/running"} for name in ports}}, **settings)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), "--limit", "node", str(play), "-e", json.dumps(extra)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert (proc.returncode == 0) == ok, proc.stdout[-5000:] + proc.stderr[-2000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n"):])[0]
    calls = {}
    for task in report["plays"][0]["tasks"]:
        result = task["hosts"].get("node", {})
        calls[task["task"]["name"]] = [item.get("item") for item in result.get("results", []) if not item.get("skipped")]
    return calls, proc.stdout


def test_router_every_spelling_and_every_rank_of_the_host_s_workers_is_gone_before_the_drain_returns(tmp_path, router):
    gw, ports, _knobs = router
    a, b, dp = ports["a"], ports["b"], ports["dp"]
    # This host serves a and dp; the gateway holds a in two spellings the inventory does not use,
    # dp as its two ranks, and b (another host's worker, which must stay).
    for url in ("http://127.0.0.1:%d/" % a, "http://localhost:%d" % a, "http://127.0.0.1:%d" % dp,
                "http://127.0.0.1:%d" % b):
        gw.register(url)
    assert gw.urls() == sorted(["http://127.0.0.1:%d/" % a, "http://localhost:%d" % a, "http://127.0.0.1:%d" % b,
                                "http://127.0.0.1:%d@0" % dp, "http://127.0.0.1:%d@1" % dp])
    calls, _out = drain(tmp_path, gw, "drain", {"eagle3": a, "dflash": dp}, "sglang_router")
    assert len(calls["Gateway | Remove them through the API"]) == 4  # a twice, dp's two ranks
    # The gateway answers a removal with 202 and removes in the background; the drain waited for it.
    assert gw.urls() == ["http://127.0.0.1:%d" % b]


def test_router_the_undrain_adds_no_second_copy_and_returns_once_each_worker_is_healthy(tmp_path, router):
    gw, ports, _knobs = router
    a, b = ports["a"], ports["b"]
    gw.register("http://127.0.0.1:%d/" % a)  # a is there, spelled with a slash; b is not
    calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b}, "sglang_router")
    assert calls["Gateway | Register them through the API (those it holds in no spelling)"] == ["http://127.0.0.1:%d" % b]
    assert gw.healthy() == sorted(["http://127.0.0.1:%d/" % a, "http://127.0.0.1:%d" % b])  # no wait: the drain did
    calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b}, "sglang_router")
    assert calls["Gateway | Register them through the API (those it holds in no spelling)"] == []
    assert gw.urls() == sorted(["http://127.0.0.1:%d/" % a, "http://127.0.0.1:%d" % b])


def test_router_a_worker_that_never_comes_back_healthy_fails_the_undrain(tmp_path, router):
    gw, ports, _knobs = router
    down = free_port()  # nothing listens: the gateway keeps it pending, never healthy
    _calls, out = drain(tmp_path, gw, "undrain", {"eagle3": down}, "sglang_router", ok=False, __rollout_gateway_timeout=4)
    assert "undrain of node: gateway localhost (%s): http://127.0.0.1:%d not listed after 4 s; the host is out of rotation" % (
        gw.url, down) in out


def test_router_without_the_gateway_s_key_the_drain_fails_and_says_why(tmp_path, router):
    gw, ports, _knobs = router
    gw.register("http://127.0.0.1:%d" % ports["a"])
    _calls, out = drain(tmp_path, gw, "drain", {"eagle3": ports["a"]}, "sglang_router", ok=False, __rollout_gateway_api_key="")
    assert "401" in out
    assert gw.urls() == ["http://127.0.0.1:%d" % ports["a"]]  # nothing was removed


def test_managed_the_manifest_drain_is_confirmed_and_survives_a_gateway_restart(tmp_path, managed):
    gw, ports, _knobs = managed
    a, b = ports["a"], ports["b"]
    write_manifest(gw.manifest, ["http://127.0.0.1:%d" % a, "http://127.0.0.1:%d" % b])
    wait_for(lambda: gw.healthy() == sorted(["http://127.0.0.1:%d" % a, "http://127.0.0.1:%d" % b]), "both registered")
    calls, _out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway")
    assert calls["Gateway | Out of rotation in the manifest (each gateway host)"]
    assert gw.urls() == ["http://127.0.0.1:%d" % b]  # gone when the drain returned
    with open(gw.manifest) as handle:
        assert [w["url"] for w in json.load(handle)["workers"]] == ["http://127.0.0.1:%d" % b]
    # A restart of the gateway while the host is drained starts from the manifest: a stays out,
    # past smg's 30 s reread too (a worker removed only through the API is back by then).
    gw.stop()
    gw.start()
    wait_for(lambda: gw.healthy() == ["http://127.0.0.1:%d" % b], "b back after the restart")
    _calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_gateway")
    assert gw.healthy() == sorted(["http://127.0.0.1:%d" % a, "http://127.0.0.1:%d" % b])
    with open(os.path.join(os.path.dirname(gw.manifest), "drained.json")) as handle:
        assert json.load(handle) == []


def test_an_unreadable_load_answer_fails_the_drain_unless_told_otherwise(tmp_path, managed):
    gw, ports, knobs = managed
    a = ports["a"]
    write_manifest(gw.manifest, ["http://127.0.0.1:%d" % a])
    wait_for(lambda: gw.healthy() == ["http://127.0.0.1:%d" % a], "a registered")
    for answer, said in (("error", "answered HTTP 500"), ("garbage", "answered with no load report")):
        knobs.write_text(json.dumps({"loads": answer}))
        _calls, out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", ok=False)
        assert "cannot tell what eagle3 has in flight: http://127.0.0.1:%d/v1/loads %s" % (a, said) in out
    drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", __rollout_drain_require_loads=False)


def test_the_server_s_key_is_sent_and_requests_in_flight_are_waited_out(tmp_path, managed):
    gw, ports, knobs = managed
    a = ports["a"]
    write_manifest(gw.manifest, ["http://127.0.0.1:%d" % a])
    wait_for(lambda: gw.healthy() == ["http://127.0.0.1:%d" % a], "a registered")
    # The server wants the gateway's key (smg sends its --api-key to its workers) and answers each
    # generation after 4 s: one is in flight when the drain starts.
    knobs.write_text(json.dumps({"api_key": KEY, "delay": 4}))
    _calls, out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", ok=False)
    assert "cannot tell what eagle3 has in flight: http://127.0.0.1:%d/v1/loads answered HTTP 401" % a in out
    drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_gateway")
    request = subprocess.Popen([sys.executable, "-c", "import json, urllib.request; urllib.request.urlopen(urllib.request.Request("
                                "'http://127.0.0.1:%d/generate', data=b'{}', headers={'Authorization': 'Bearer %s'}), timeout=20)"
                                % (a, KEY)])
    time.sleep(1)
    started = time.monotonic()
    drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", __rollout_server_api_key=KEY)
    assert request.wait(timeout=20) == 0
    assert time.monotonic() - started >= 2  # the drain returned after the request, not before
