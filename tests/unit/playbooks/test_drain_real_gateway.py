"""The rollout's drain (the rollout role's entry points drain, undrain and keep_out: roles/rollout/tasks/gateway.yml) against the real SGLang model
gateway: smg 1.13.0 from PyPI (requirements-dev.txt), run on this machine, in front of stand-in
SGLang servers (molecule/fleet/files/standin.py: a real server needs a GPU and weights; it answers
the gateway's probes and reports its own requests in flight).

Two gateways, as the two drains meet them:
  - rollout_drain=sglang_router: a gateway this collection does not run (--dp-aware, --api-key),
    edited through its worker API. Workers are registered the way another tool or an operator may
    have spelled them.
  - rollout_drain=sglang_gateway: the gateway as the sglang_gateway role runs it: through the role's
    launcher (roles/sglang_gateway/files/launch.py), which reads the manifest and the key from its
    environment, in smg's single-model mode; edited through its manifest by the gateway_manifest
    module and through its worker API.
The drain is the role's own entry point, included by a play on a local host whose inventory names
its worker as the rollout would (http://<ansible_host>:<port>). Each failure class of the drain is
shown: a worker that never comes back healthy, an unreadable load answer, a missing key; and a host
that failed after its drain stays out (keep_out): nothing listed, nothing pending.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from real_gateway import KEY, LAUNCHER, STANDIN, ansible_env, call, free_port, wait_for

SMG = shutil.which("smg") or os.path.join(os.path.dirname(sys.executable), "smg")

PLAY = textwrap.dedent("""\
    - name: Drain or undrain this host's workers at the gateway
      hosts: all
      gather_facts: false
      tasks:
        - name: The rollout's entry point
          ansible.builtin.include_role:
            name: blackwell.sglang.rollout
            tasks_from: "{{ test_step }}"
    """)

# As the rollout does for a host that fails after its drain: the undrain fails, keep_out follows in
# the same run (the registrations it made are facts of that run).
PLAY_KEEP_OUT = textwrap.dedent("""\
    - name: Undrain this host's workers; keep them out when that fails
      hosts: all
      gather_facts: false
      tasks:
        - name: Undrain, else keep out
          block:
            - name: The rollout's undrain
              ansible.builtin.include_role:
                name: blackwell.sglang.rollout
                tasks_from: undrain
          rescue:
            - name: The rollout's keep_out
              ansible.builtin.include_role:
                name: blackwell.sglang.rollout
                tasks_from: keep_out
            - name: What keep_out found
              ansible.builtin.debug:
                msg: "pending: {{ rollout_pending_registrations | map(attribute='url') | join(' ') }}"
    """)


class Gateway:
    def __init__(self, url, argv, log, manifest=None, env=None):
        self.url, self.argv, self.log, self.manifest = url, argv, log, manifest
        self.env = dict(os.environ, **(env or {}))
        self.process = None

    def start(self):
        with open(self.log, "a") as handle:
            self.process = subprocess.Popen(self.argv, stdout=handle, stderr=subprocess.STDOUT, env=self.env)
        wait_for(self.answers, "the gateway to answer (log: %s)" % self.log)

    def stop(self):
        if self.process:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=20)
            self.process = None

    def answers(self):
        try:
            return call(self.url + "/workers")[0] == 200
        except OSError:  # a connection reset while it starts
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
              "--worker-startup-check-interval", "1", "--log-level", "warn", "--prometheus-host", "127.0.0.1"]
    manifest = str(work / "workers.json")
    write_manifest(manifest, [])
    gateways = {
        "sglang_router": Gateway("http://127.0.0.1:%d" % ports["router"],
                                 [SMG, "launch", "--port", str(ports["router"]), "--prometheus-port",
                                  str(ports["router_metrics"]), "--dp-aware", "--api-key", KEY] + common, work / "router.log"),
        # As the sglang_gateway role runs it (its unit: the launcher, the manifest and the key from
        # the environment; roles/sglang_gateway/vars/main.yml's arguments).
        "sglang_gateway": Gateway("http://127.0.0.1:%d" % ports["managed"],
                                  [sys.executable, LAUNCHER, "launch", "--port", str(ports["managed"]), "--prometheus-port",
                                   str(ports["managed_metrics"])] + common, work / "managed.log", manifest,
                                  env={"SGLANG_GATEWAY_MANIFEST": manifest, "SGLANG_GATEWAY_API_KEY": KEY}),
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


def drain(tmp_path, gateway, step, ports, mode, ok=True, verbosity=0, play=PLAY, gateway_vars=None, **settings):
    """The rollout role's entry point `step` (drain, undrain, keep_out) for a host at 127.0.0.1
    serving `ports` (service name -> port), the gateway host "gw" in the group sglang_gateway (its
    own variables: gateway_vars); returns (task name -> the loop results it ran, the output). Tasks
    whose calls carry a key are no_log: their results say only that they ran."""
    text, play = play, tmp_path / "play.yml"
    play.write_text(text)
    endpoints = {name: {"port": port, "url": "http://127.0.0.1:%d" % port} for name, port in ports.items()}
    local = {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"node": local}, "children": {"sglang_gateway": {"hosts": {
        "gw": dict(local, sglang_gateway_local_url=gateway.url, sglang_gateway_manifest=gateway.manifest or "",
                   **(gateway_vars or {}))}}}}}))
    extra = dict({"rollout_drain": mode, "rollout_router_url": gateway.url,
                  "rollout_gateway_api_key": KEY, "rollout_server_api_key": "",
                  "rollout_gateway_timeout": 10, "rollout_drain_timeout": 10, "rollout_drain_require_loads": True,
                  "sglang_services_endpoints": endpoints}, **settings)
    if step:
        extra["test_step"] = step
    env = ansible_env()
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), "--limit", "node", str(play), "-e", json.dumps(extra)]
                          + (["-" + "v" * verbosity] if verbosity else []),
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert (proc.returncode == 0) == ok, proc.stdout[-5000:] + proc.stderr[-2000:]
    report = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n"):])[0]
    calls = {}
    for task in report["plays"][0]["tasks"]:
        result = task["hosts"].get("node", {})
        # The JSON callback names a role's task "<role> : <name>".
        calls[task["task"]["name"].split(" : ", 1)[-1]] = [item for item in result.get("results", []) if not item.get("skipped")]
    return calls, proc.stdout + proc.stderr


def restart_with(gw, urls):
    """The managed gateway started again from a manifest of `urls` (as its unit would be)."""
    write_manifest(gw.manifest, urls)
    gw.stop()
    gw.start()
    wait_for(lambda: gw.healthy() == sorted(urls), "%s registered from the manifest" % urls)


def u(port):
    return "http://127.0.0.1:%d" % port


def test_router_every_spelling_and_every_rank_of_the_host_s_workers_is_gone_before_the_drain_returns(tmp_path, router):
    gw, ports, _knobs = router
    a, b, dp = ports["a"], ports["b"], ports["dp"]
    # This host serves a and dp; the gateway holds a in two spellings the inventory does not use,
    # dp as its two ranks, and b (another host's worker, which must stay).
    for url in (u(a) + "/", "http://localhost:%d" % a, u(dp), u(b)):
        gw.register(url)
    assert gw.urls() == sorted([u(a) + "/", "http://localhost:%d" % a, u(b), u(dp) + "@0", u(dp) + "@1"])
    calls, _out = drain(tmp_path, gw, "drain", {"eagle3": a, "dflash": dp}, "sglang_router")
    assert len(calls["Gateway | Remove them through the API"]) == 4  # a twice, dp's two ranks
    # The gateway answers a removal with 202 and removes in the background; the drain waited for it.
    assert gw.urls() == [u(b)]


def test_router_the_undrain_adds_no_second_copy_and_returns_once_each_worker_is_healthy(tmp_path, router):
    gw, ports, _knobs = router
    a, b = ports["a"], ports["b"]
    gw.register(u(a) + "/")  # a is there, spelled with a slash; b is not
    calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b}, "sglang_router")
    assert len(calls["Gateway | Register them through the API (those it holds in no spelling), with the server's key"]) == 1
    assert gw.healthy() == sorted([u(a) + "/", u(b)])  # no wait: the drain did
    calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": a, "autoregressive": b}, "sglang_router")
    assert calls["Gateway | Register them through the API (those it holds in no spelling), with the server's key"] == []
    assert gw.urls() == sorted([u(a) + "/", u(b)])


def test_router_a_worker_that_does_not_answer_is_not_registered_and_stays_out(tmp_path, router):
    gw, ports, knobs = router
    down = free_port()  # nothing listens yet
    _calls, out = drain(tmp_path, gw, "undrain", {"eagle3": down}, "sglang_router", ok=False, rollout_gateway_timeout=4)
    assert "Each worker answers GET /health where the gateway calls from" in out and "%s/health" % u(down) in out
    # Nothing was registered, so nothing is pending: the server answering later does not bring it back.
    late = subprocess.Popen([sys.executable, STANDIN, "server", "--port", str(down), "--state-dir", str(tmp_path),
                             "--config", str(knobs)])
    try:
        wait_for(lambda: call(u(down) + "/health", key="")[0] == 200, "the late server")
        time.sleep(4)  # the test gateway probes every second
        assert gw.urls() == []
    finally:
        late.terminate()
        late.wait(timeout=10)


def test_router_each_registration_carries_the_server_s_key_and_no_key_is_printed_at_vvv(tmp_path, router):
    gw, ports, knobs = router
    a = ports["a"]
    # The server wants its own key, not the gateway's: smg probes it with the key given at registration.
    knobs.write_text(json.dumps({"api_key": "server-key"}))
    _calls, out = drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_router", verbosity=3,
                        rollout_server_api_key="server-key")
    # Listed healthy: smg's probes carried the server's key (without it, the next test: pending).
    # (A client's request is another matter: smg forwards the client's Authorization header, which
    # wins over the worker's key, so the gateway's and the servers' keys must be one for clients.)
    assert gw.healthy() == [u(a)]
    _calls, more = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_router", verbosity=3,
                         rollout_server_api_key="server-key")
    assert gw.urls() == []
    assert "Gateway | Register them through the API" in out  # the tasks did run, at -vvv
    assert "Gateway | Remove them through the API" in more
    for text in (out, more):
        assert KEY not in text and "server-key" not in text


def test_router_a_registration_the_gateway_holds_pending_is_reported_by_keep_out(tmp_path, router):
    gw, ports, knobs = router
    a = ports["a"]
    # Registered without the server's key: the server answers /health (no key there) but 401 on what
    # smg asks before it lists a worker, so the registration stays pending and the undrain times out.
    knobs.write_text(json.dumps({"api_key": "server-key"}))
    _calls, out = drain(tmp_path, gw, None, {"eagle3": a}, "sglang_router", play=PLAY_KEEP_OUT,
                        rollout_gateway_timeout=4)
    assert "undrain of node" in out and "the host is out of rotation" in out
    assert '"msg": "pending: %s"' % u(a) in out
    assert gw.urls() == []


def test_managed_the_drain_is_confirmed_and_survives_a_gateway_restart(tmp_path, managed):
    gw, ports, _knobs = managed
    a, b = ports["a"], ports["b"]
    restart_with(gw, [u(a), u(b)])
    calls, _out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway")
    assert calls["Gateway | Out of rotation in the manifest (each gateway host)"]
    assert len(calls["Gateway | Remove them through the API"]) == 1
    assert gw.urls() == [u(b)]  # gone when the drain returned
    with open(gw.manifest) as handle:
        assert [w["url"] for w in json.load(handle)["workers"]] == [u(b)]
    # A restart of the gateway while the host is drained starts from the manifest: a stays out.
    gw.stop()
    gw.start()
    wait_for(lambda: gw.healthy() == [u(b)], "b back after the restart")
    time.sleep(3)
    assert gw.urls() == [u(b)]
    drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_gateway")
    assert gw.healthy() == sorted([u(a), u(b)])
    with open(os.path.join(os.path.dirname(gw.manifest), "drained.json")) as handle:
        assert json.load(handle) == []


def test_managed_a_native_generate_without_model_is_served_as_sglang_router_serves_it(managed):
    gw, ports, _knobs = managed
    restart_with(gw, [u(ports["a"])])
    # SGLang's native client (sglang-router's clients) sends no "model"; smg's multi-model mode
    # (any --discovery-provider) would answer 400 missing_model.
    status, answer = call(gw.url + "/generate", "POST", {"text": "The capital of France is",
                                                         "sampling_params": {"max_new_tokens": 8}})
    assert status == 200 and "Paris" in answer["text"], answer
    status, answer = call(gw.url + "/v1/completions", "POST", {"model": "standin", "prompt": "The capital of France is"})
    assert status == 200, answer


def test_managed_keep_out_after_a_failed_undrain_leaves_nothing_that_brings_it_back(tmp_path, managed):
    gw, ports, knobs = managed
    b = ports["b"]
    down = free_port()
    restart_with(gw, [u(b)])
    write_manifest(gw.manifest, [u(b)])
    _calls, _out = drain(tmp_path, gw, "undrain", {"eagle3": down}, "sglang_gateway", ok=False, rollout_gateway_timeout=4)
    with open(gw.manifest) as handle:  # the undrain put it back in the manifest before it failed
        assert u(down) in [w["url"] for w in json.load(handle)["workers"]]
    drain(tmp_path, gw, "keep_out", {"eagle3": down}, "sglang_gateway")
    with open(gw.manifest) as handle:
        assert [w["url"] for w in json.load(handle)["workers"]] == [u(b)]
    # The server answers now, and the gateway restarts: it stays out.
    late = subprocess.Popen([sys.executable, STANDIN, "server", "--port", str(down), "--state-dir", str(tmp_path),
                             "--config", str(knobs)])
    try:
        wait_for(lambda: call(u(down) + "/health", key="")[0] == 200, "the late server")
        gw.stop()
        gw.start()
        wait_for(lambda: gw.healthy() == [u(b)], "b back after the restart")
        time.sleep(3)
        assert gw.urls() == [u(b)]
    finally:
        late.terminate()
        late.wait(timeout=10)


def test_router_without_the_gateway_s_key_the_drain_fails_and_says_why(tmp_path, router):
    gw, ports, _knobs = router
    gw.register(u(ports["a"]))
    _calls, out = drain(tmp_path, gw, "drain", {"eagle3": ports["a"]}, "sglang_router", ok=False, rollout_gateway_api_key="")
    assert "401" in out
    assert gw.urls() == [u(ports["a"])]  # nothing was removed


def test_an_unreadable_load_answer_fails_the_drain_unless_told_otherwise(tmp_path, managed):
    gw, ports, knobs = managed
    a = ports["a"]
    restart_with(gw, [u(a)])
    for answer, said in (("error", "answered HTTP 500"), ("garbage", "answered with no load report")):
        knobs.write_text(json.dumps({"loads": answer}))
        _calls, out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", ok=False)
        assert "cannot tell what eagle3 has in flight: %s/v1/loads %s" % (u(a), said) in out
    drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", rollout_drain_require_loads=False)


def test_the_server_s_key_is_sent_and_requests_in_flight_are_waited_out(tmp_path, managed):
    gw, ports, knobs = managed
    a = ports["a"]
    restart_with(gw, [u(a)])
    # The server wants the gateway's key (smg sends its --api-key to the workers it starts with) and
    # answers each generation after 4 s: one is in flight when the drain starts.
    knobs.write_text(json.dumps({"api_key": KEY, "delay": 4}))
    _calls, out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", ok=False)
    assert "cannot tell what eagle3 has in flight: %s/v1/loads answered HTTP 401" % u(a) in out
    drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_gateway", rollout_server_api_key=KEY)
    request = subprocess.Popen([sys.executable, "-c", "import json, urllib.request; urllib.request.urlopen(urllib.request.Request("
                                "'%s/generate', data=b'{}', headers={'Authorization': 'Bearer %s'}), timeout=20)"
                                % (u(a), KEY)])
    time.sleep(1)
    started = time.monotonic()
    drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", rollout_server_api_key=KEY)
    assert request.wait(timeout=20) == 0
    assert time.monotonic() - started >= 2  # the drain returned after the request, not before


def test_managed_each_gateway_s_own_keys_are_used_when_the_rollout_names_none(tmp_path, managed):
    gw, ports, knobs = managed
    a = ports["a"]
    restart_with(gw, [u(a)])
    # The server wants the gateway's key, as a server behind the role's gateway does. The rollout is
    # given no key: the gateway host's own sglang_gateway_api_key is its worker API key, the key of
    # its registrations and the one the drain sends the server.
    knobs.write_text(json.dumps({"api_key": KEY}))
    own = {"sglang_gateway_api_key": KEY}
    drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", gateway_vars=own, rollout_gateway_api_key="")
    assert gw.urls() == []
    _calls, out = drain(tmp_path, gw, "undrain", {"eagle3": a}, "sglang_gateway", gateway_vars=own, rollout_gateway_api_key="",
                        verbosity=3)
    assert gw.healthy() == [u(a)]  # smg's probes carried the gateway's key, given at registration
    assert KEY not in out
    # Without its key (none on the host, none given), the gateway refuses the drain's call.
    _calls, out = drain(tmp_path, gw, "drain", {"eagle3": a}, "sglang_gateway", ok=False, rollout_gateway_api_key="")
    assert "401" in out
