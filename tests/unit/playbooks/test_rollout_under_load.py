"""Zero failed requests, counted: the rollout's drain under load through the real model gateway.

On the controller, no containers: the real gateway (smg 1.13.0 from PyPI, requirements-dev.txt)
started as the sglang_gateway role's unit starts it (roles/sglang_gateway/files/launch.py: the
manifest and the key from the environment), three stand-in SGLang servers behind it on loopback
(molecule/fleet/files/standin.py: a real server needs a GPU and weights; each answer takes 1 s, so
requests are in flight at every drain), and a bounded load of real requests through the gateway
(policy round_robin, which spreads them over the three workers;
scripts/loadgen.py: 8 clients, native POST /generate without "model", half of the requests streamed, a
request served only when its answer is whole).

While the load runs, a play takes each worker in turn (serial: 1) as playbooks/rollout.yml does:
the gateway's facts from the sglang_gateway role's facts entry point, the service's endpoints from
the sglang_services preflight, the rollout's settings from the rollout role's defaults - no fact set
by hand - then the rollout role's own drain (its drain entry point), a restart of
that worker's stand-in (standing in for the service's restart: there is no systemd here), and the
undrain (its undrain entry point). The test asserts 0 failed requests and prints the count, p50/p99 and each phase's seconds.
The control run has the same load and the same restarts without the drain: it must lose requests,
so the first assertion can fail.
"""

import getpass
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from real_gateway import KEY, LAUNCHER, ROOT, STANDIN, ansible_env, call, free_port, wait_for

SPEC = importlib.util.spec_from_file_location("loadgen", os.path.join(ROOT, "scripts", "loadgen.py"))
loadgen = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(loadgen)
DELAY = 1.0  # seconds each stand-in takes per answer
NODES = ("node1", "node2", "node3")

# Test double of the service's restart (systemctl restart; no systemd on the controller): stop the
# stand-in on PORT (SIGTERM: requests still in flight are cut, as a stopped server cuts them) and
# start it again, detached, until it answers /health.
RESTART = textwrap.dedent("""\
    import os, signal, subprocess, sys, time, urllib.request
    port, work, standin, config = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    pidfile = os.path.join(work, "standin-%s.pid" % port)
    try:
        os.kill(int(open(pidfile).read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass
    time.sleep(0.3)
    process = subprocess.Popen([sys.executable, standin, "server", "--port", port, "--state-dir", work, "--config", config],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    open(pidfile, "w").write(str(process.pid))
    for _ in range(100):
        try:
            urllib.request.urlopen("http://127.0.0.1:%s/health" % port, timeout=1)
            sys.exit(0)
        except OSError:
            time.sleep(0.1)
    sys.exit("the stand-in on %s did not come back" % port)
    """)

PLAY = textwrap.dedent("""\
    - name: The gateway's facts, as rollout.yml reads them
      hosts: sglang_gateway
      gather_facts: false
      tasks:
        - name: Facts of the sglang_gateway role
          ansible.builtin.include_role:
            name: blackwell.sglang.sglang_gateway
            tasks_from: facts

    - name: Each worker in turn - drain, restart, undrain
      hosts: workers
      serial: 1
      gather_facts: false
      tasks:
        - name: The service's settings and endpoints, as the rollout's preflight computes them
          ansible.builtin.include_role:
            name: blackwell.sglang.sglang_services
            tasks_from: preflight

        - name: Phase | drain
          ansible.builtin.set_fact:
            phase_drain: "{{ now().timestamp() }}"

        # The test's own look (not the drain's): requests are in flight on this worker as its drain
        # starts (round_robin spreads the clients over the three workers; cache_aware may leave one idle).
        - name: Phase | in flight as the drain starts
          ansible.builtin.uri:
            url: "{{ sglang_services_endpoints.eagle3.url }}/v1/loads"
          register: phase_loads
          until: phase_loads.json.loads | map(attribute='num_running_reqs') | sum > 0
          retries: 10
          delay: 0.3
          failed_when: false

        - name: The rollout's drain
          ansible.builtin.include_role:
            name: blackwell.sglang.rollout
            tasks_from: drain

        - name: Phase | restart
          ansible.builtin.set_fact:
            phase_restart: "{{ now().timestamp() }}"

        - name: Restart the stand-in (test double of the service's restart)
          ansible.builtin.command:
            argv: [%(python)s, %(restart)s, "{{ sglang_services_endpoints.eagle3.port }}", %(work)s, %(standin)s, %(config)s]
          changed_when: true

        - name: Phase | undrain
          ansible.builtin.set_fact:
            phase_undrain: "{{ now().timestamp() }}"

        - name: The rollout's undrain
          ansible.builtin.include_role:
            name: blackwell.sglang.rollout
            tasks_from: undrain

        - name: Phase | done
          ansible.builtin.debug:
            msg: "phases {{ {'in_flight': phase_loads.json.loads | map(attribute='num_running_reqs') | sum,
                             'drain': phase_restart | float - phase_drain | float,
                             'restart': phase_undrain | float - phase_restart | float,
                             'undrain': now().timestamp() - phase_undrain | float} | to_json }}"
    """)


@pytest.fixture
def fleet(tmp_path):
    """Three stand-ins (each answer takes DELAY s) behind the gateway as its role runs it."""
    work = tmp_path
    config = work / "standin.json"
    config.write_text(json.dumps({"delay": DELAY}))
    restart = work / "restart.py"
    restart.write_text(RESTART)
    ports = {node: free_port() for node in NODES}
    gateway_port, metrics_port = free_port(), free_port()
    for port in ports.values():
        subprocess.run([sys.executable, str(restart), str(port), str(work), STANDIN, str(config)], check=True)
    (work / "workers.json").write_text(json.dumps({"version": 1, "workers": [
        {"url": "http://127.0.0.1:%d" % ports[node]} for node in NODES]}))
    log = open(work / "gateway.log", "w")
    gateway = subprocess.Popen(
        [sys.executable, LAUNCHER, "launch", "--host", "127.0.0.1", "--port", str(gateway_port), "--prometheus-host",
         "127.0.0.1", "--prometheus-port", str(metrics_port), "--policy", "round_robin", "--disable-tokenizer-autoload",
         "--health-check-interval-secs", "1", "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT,
        env=dict(os.environ, SGLANG_GATEWAY_MANIFEST=str(work / "workers.json"), SGLANG_GATEWAY_API_KEY=KEY))
    url = "http://127.0.0.1:%d" % gateway_port
    try:
        wait_for(lambda: len([w for w in call(url + "/workers")[1].get("workers", []) if w.get("is_healthy")]) == 3,
                 "three healthy workers")
        yield {"url": url, "ports": ports, "work": work, "config": config, "restart": restart, "gateway_port": gateway_port}
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=30)
        log.close()
        for pidfile in work.glob("standin-*.pid"):
            try:
                os.kill(int(pidfile.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass


def roll(fleet, drain):
    """The play above through each worker while the load runs; (load report, phases per node, output)."""
    work = fleet["work"]
    play = work / "play.yml"
    play.write_text(PLAY % {key: json.dumps(str(value)) for key, value in {
        "python": sys.executable, "restart": fleet["restart"], "work": work,
        "standin": STANDIN, "config": fleet["config"]}.items()})
    local = {"ansible_connection": "local", "ansible_host": "127.0.0.1", "ansible_python_interpreter": sys.executable}
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {
        "sglang_gateway": {"hosts": {"gw": dict(local, sglang_gateway_host="127.0.0.1", sglang_gateway_port=fleet["gateway_port"],
                                                sglang_gateway_state_dir=str(work), sglang_gateway_api_key=KEY)}},
        # The stand-ins run as this test's user: the service user, whose sockets the preflight's port
        # check takes for the service's own.
        "workers": {"hosts": {node: dict(local, sglang_services_active="eagle3", sglang_node_gpu_archs=["12.0f"],
                                         sglang_services_user=getpass.getuser(),
                                         sglang_services_common={"model_path": "/models/standin", "port": port},
                                         sglang_services_eagle3={"draft_model_path": "/models/standin-eagle3"},
                                         sglang_services_dflash={"draft_model_path": "/models/standin-dflash"})
                              for node, port in fleet["ports"].items()}}}}}))
    extra = {"rollout_drain": drain, "rollout_gateway_timeout": 30, "rollout_drain_timeout": 30}
    env = ansible_env()
    load = loadgen.Load(fleet["url"], concurrency=8, duration=300, stream_share=0.5, key=KEY, timeout=30).start()
    time.sleep(2 * DELAY)  # requests in flight everywhere before the first drain
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), str(play), "-e", json.dumps(extra)],
                          capture_output=True, text=True, env=env, cwd=str(work), check=False)
    time.sleep(2 * DELAY)
    report = load.stop()
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    document = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n"):])[0]
    phases = {}
    for play in document["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if task["task"]["name"] == "Phase | done":
                    phases[host] = json.loads(result["msg"][len("phases "):])
    return report, phases, proc.stdout


def figures(title, report, phases, drained=True):
    lines = ["%s: %s" % (title, loadgen.describe(report))]
    for kind, why in report["examples"].items():
        lines.append("  first %s failure: %s" % (kind, why))
    for node in NODES:
        if node in phases:
            lines.append("  %s: %d requests in flight as its drain started; drain %.1f s, restart %.1f s, undrain %.1f s" % (
                node, phases[node]["in_flight"], phases[node]["drain"], phases[node]["restart"], phases[node]["undrain"])
                if drained else "  %s: %d requests in flight at its restart" % (node, phases[node]["in_flight"]))
    return "\n".join(lines)


def test_a_rollout_through_the_gateway_loses_no_request_and_without_the_drain_it_does(fleet, capsys):
    report, phases, _out = roll(fleet, "sglang_gateway")
    with capsys.disabled():
        print("\n" + figures("drain", report, phases))
    assert sorted(phases) == sorted(NODES)
    assert all(phases[node]["in_flight"] >= 1 for node in NODES), phases  # requests in flight at every drain
    assert report["total"] >= 100 and report["streamed"] >= report["total"] // 3, report
    assert report["failed"] == 0, figures("drain", report, phases)
    # The gateway holds each worker once, healthy, after the run; the manifest lists each once.
    urls = sorted("http://127.0.0.1:%d" % port for port in fleet["ports"].values())
    workers = call(fleet["url"] + "/workers")[1]["workers"]
    assert sorted(w["url"] for w in workers) == urls and all(w["is_healthy"] for w in workers), workers
    assert sorted(w["url"] for w in json.loads((fleet["work"] / "workers.json").read_text())["workers"]) == urls

    control, phases, _out = roll(fleet, "none")
    with capsys.disabled():
        print(figures("control (no drain)", control, phases, drained=False))
    assert control["failed"] > 0, "the same restarts without the drain lost nothing: the test cannot tell"
