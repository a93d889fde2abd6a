# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet rollout's pure logic: its settings checked before any host changes, and the fleet
report (one row per host, JSON and a Markdown table), the drain's reading of the gateways' answers.
Used by the filters in plugins/filter/rollout.py (the rollout role, roles/rollout) and the fleet_report action (it writes the report on the
controller); unit-tested as tables."""

from __future__ import annotations

import json
import os
import re
import tempfile

from ansible_collections.blackwell.sglang.plugins.module_utils import gateway

DRAIN_BUILTIN = ("none", "sglang_gateway", "sglang_router")
RESULTS = ("ok", "unchanged", "rolled back", "failed", "not reached")
# The report's columns: (key in a row, Markdown heading).
COLUMNS = (
    ("host", "host"), ("group", "group"), ("gpus", "GPUs"), ("driver", "driver"), ("cuda", "CUDA"),
    ("flashinfer", "FlashInfer targets (fix)"), ("venv", "venv (before -> now)"), ("sglang", "SGLang (staged)"),
    ("cache", "kernel cache"), ("built", "kernels built (s)"), ("service", "active service"), ("backends", "backends (SGLang resolved)"),
    ("validation", "GPU validation"), ("health", "health"),
    ("batch", "batch"),
    ("seconds", "seconds"), ("result", "result"),
)
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")


def serial_problems(serial):
    """Problems of a `serial` value as Ansible takes it: a positive int, a percentage "N%" with
    1 <= N <= 100, or a non-empty list of those (the last entry repeats)."""
    entries = serial if isinstance(serial, (list, tuple)) else [serial]
    if not entries:
        return ["rollout_serial is an empty list; give e.g. [1, '25%', '100%']"]
    problems = []
    for entry in entries:
        if isinstance(entry, bool):
            ok = False
        elif isinstance(entry, int):
            ok = entry > 0
        elif isinstance(entry, str) and _PERCENT.match(entry):
            ok = 0 < int(_PERCENT.match(entry).group(1)) <= 100
        elif isinstance(entry, str) and entry.strip().isdigit():
            ok = int(entry) > 0
        else:
            ok = False
        if not ok:
            problems.append("rollout_serial entry %r is not a positive number of hosts or a percentage from 1%% to 100%%"
                            % (entry,))
    return problems


def rollout_problems(settings):
    """Every problem of the rollout's own settings, as sentences; [] when all is well.

    settings: serial, drain (none | sglang_router | an absolute path to a tasks file),
    drain_file (ansible.builtin.stat's `stat` of that path on the controller, or {}), router_url,
    drain_timeout, smoke_timeout and gateway_timeout (seconds), gateway_hosts, report_dir and
    report_dir_stat (the stat of the directory, or of its nearest existing parent when it does not
    exist yet). Only what the role's argument spec (roles/rollout/meta/argument_specs.yml) cannot
    say: types and booleans are its."""
    problems = serial_problems(settings.get("serial"))
    drain = settings.get("drain")
    if not isinstance(drain, str) or not drain:
        problems.append("rollout_drain must be none, sglang_gateway, sglang_router or the path of a tasks file, not %r" % (drain,))
    elif drain not in DRAIN_BUILTIN:
        if not drain.startswith("/"):
            problems.append("rollout_drain %r is none of none, sglang_gateway, sglang_router; a tasks file must be "
                            "given by its absolute path" % drain)
        else:
            stat = settings.get("drain_file") or {}
            if not stat.get("exists"):
                problems.append("rollout_drain: the tasks file %s does not exist on the controller" % drain)
            elif not stat.get("isreg"):
                problems.append("rollout_drain: %s is not a file" % drain)
    if drain == "sglang_router":
        try:
            gateway.worker_identity(settings.get("router_url") or "")
        except gateway.WorkerURLError:
            problems.append("rollout_drain=sglang_router needs rollout_router_url, the gateway's absolute base URL "
                            "(http://gateway:30000), not %r" % (settings.get("router_url"),))
    if drain == "sglang_gateway" and not settings.get("gateway_hosts"):
        problems.append("rollout_drain=sglang_gateway needs a host in the inventory group sglang_gateway "
                        "(the sglang_gateway role runs the gateway there)")
    for name in ("drain_timeout", "smoke_timeout", "gateway_timeout"):
        value = settings.get(name, 120 if name == "gateway_timeout" else None)
        if isinstance(value, bool) or not str(value).isdigit() or int(value) < 1:
            problems.append("rollout_%s must be a whole number of seconds >= 1, not %r" % (name, value))
    report_dir = settings.get("report_dir")
    stat = settings.get("report_dir_stat") or {}
    if not isinstance(report_dir, str) or not report_dir.startswith("/"):
        problems.append("rollout_report_dir must be an absolute path on the controller, not %r" % (report_dir,))
    elif stat.get("exists") and not stat.get("isdir"):
        problems.append("rollout_report_dir: %s on the controller is not a directory" % stat.get("path", report_dir))
    elif stat.get("exists") and not stat.get("writeable"):
        problems.append("rollout_report_dir: %s on the controller is not writable by the controller user"
                        % stat.get("path", report_dir))
    return problems


def _gpus(gpus):
    """'2 x NVIDIA RTX PRO 6000 ... (cc 12.0, pcie)' from the nvidia_gpu_info fact."""
    if not gpus or not gpus.get("present"):
        return "none"
    names = {}
    for gpu in gpus.get("gpus") or []:
        names[gpu.get("name")] = names.get(gpu.get("name"), 0) + 1
    models = ", ".join("%d x %s" % (count, name) for name, count in names.items())
    return "%s (cc %s, %s)" % (models, " ".join(gpus.get("compute_capabilities") or []) or "?",
                               gpus.get("interconnect") or "?")


def _venv_id(path):
    return str(path).rstrip("/").rsplit("/", 1)[-1] if path else ""


def fleet_report_row(host, facts):
    """One host's row of the fleet report from what the roles published (facts: a dict with the
    keys below, each possibly missing: the host was not reached). Venvs: venv_before served when the
    run began, venv_staged is the one the run staged, venv_now is where current points at the end
    (missing: it did not move)."""
    before, staged = _venv_id(facts.get("venv_before")), _venv_id(facts.get("venv_staged"))
    now = _venv_id(facts.get("venv_now")) if facts.get("venv_now") is not None else before
    venv = now if before == now else "%s -> %s" % (before or "none", now or "none")
    if staged and staged != now:  # not switched yet (not reached, failed) or rolled back
        venv += " (staged %s)" % staged
    batch = facts.get("batch")
    seconds = facts.get("seconds")
    cache = facts.get("kernel_cache") or {}
    endpoints = facts.get("endpoints") or {}
    row = {
        "host": host,
        "group": facts.get("group") or "",
        "gpus": _gpus(facts.get("gpus")),
        "driver": (facts.get("gpus") or {}).get("driver_version") or "",
        "cuda": facts.get("cuda") or "",
        "flashinfer": "%s (%s)" % (" ".join(facts.get("targets") or []) or "?", facts.get("fix") or "?"),
        "venv_before": before,
        "venv_staged": staged,
        "venv_now": now,
        "venv": venv,
        "sglang": facts.get("sglang") or "",
        "cache": cache.get("source") or "",
        "built": _seconds(cache.get("build_seconds")),
        "service": ", ".join(sorted(endpoints)) or "none",
        "backends": facts.get("backends") or "",
        "validation": facts.get("validation") or "not run",
        "health": facts.get("health") or "not checked",
        "batch": int(batch) if str(batch).isdigit() else "",
        "seconds": _seconds(seconds),
        "result": facts.get("result") or "not reached",
        "reason": facts.get("reason") or "",
    }
    return row


def _seconds(value):
    """Seconds as the report shows them (one decimal), "" where the fact is missing."""
    return round(float(value), 1) if value not in (None, "", "None") else ""


def fleet_report_rows(pairs):
    """[(host, row or {})] -> rows, a host without a row (it never ran: unreachable, or failed
    before) getting an empty "not reached" one."""
    return [row if row else fleet_report_row(host, {}) for host, row in pairs]


def fleet_report_markdown(rows, title="Fleet report"):
    """The rows as a Markdown table (reasons of failed or rolled-back hosts listed below it)."""
    def cell(value):
        return str(value).replace("|", "\\|").replace("\n", " ")
    lines = ["# %s" % title, "", "| " + " | ".join(h for _k, h in COLUMNS) + " |",
             "|" + " --- |" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row.get(key, "")) for key, _h in COLUMNS) + " |")
    reasons = [row for row in rows if row.get("reason")]
    if reasons:
        lines += [""] + ["- %s: %s" % (row["host"], cell(row["reason"])) for row in reasons]
    counts = {}
    for row in rows:
        counts[row.get("result")] = counts.get(row.get("result"), 0) + 1
    lines += ["", ", ".join("%s %d" % (result, counts[result]) for result in RESULTS if result in counts)]
    return "\n".join(lines) + "\n"


def fleet_report_files(directory, run_id):
    """The report's files in `directory`: this run's (fleet-<run_id>.json, .md) and the latest
    (fleet-latest.json, .md), in the order they are written."""
    return [os.path.join(directory, "fleet-%s.%s" % (name, ext)) for name in (run_id, "latest") for ext in ("json", "md")]


def write_fleet_report(directory, run_id, title, pairs, write=True):
    """The fleet report of [(host, row or {})] as a JSON document and a Markdown table, written to
    fleet_report_files(directory, run_id) (the directory made, mode 0755; each file replaced
    atomically, mode 0644) unless write is false. Returns (document, markdown, files).
    OSError when the directory or a file cannot be written."""
    rows = fleet_report_rows(pairs)
    document = {"run": run_id, "play": title, "rows": rows}
    markdown = fleet_report_markdown(rows, "%s (%s)" % (title, run_id))
    files = fleet_report_files(directory, run_id)
    if write:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        for path in files:
            text = json.dumps(document, indent=4, sort_keys=True) + "\n" if path.endswith(".json") else markdown
            handle, tmp = tempfile.mkstemp(dir=directory, prefix=".fleet-")
            try:
                with os.fdopen(handle, "w") as out:
                    out.write(text)
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
    return document, markdown, files


# The drain through the model gateway (roles/rollout/tasks/gateway.yml): which gateways
# it talks to, and what the answers it read say. Each takes the `results` of an
# ansible.builtin.uri loop (status, json, msg, item) and returns sentences, [] when all is well.

def rollout_gateways(drain, router_url, gateway_hosts, hostvars):
    """[{host, url, manifest}] the drain talks to: for sglang_router the router from the controller
    (host localhost, no manifest); for sglang_gateway each host of the gateway group, at its local
    address (the sglang_gateway role's facts sglang_gateway_local_url and sglang_gateway_manifest)."""
    if drain == "sglang_router":
        return [{"host": "localhost", "url": str(router_url).rstrip("/"), "manifest": ""}]
    found = []
    for host in gateway_hosts or []:
        facts = hostvars.get(host) or {}
        found.append({"host": host, "url": str(facts.get("sglang_gateway_local_url") or ""),
                      "manifest": str(facts.get("sglang_gateway_manifest") or "")})
    return found


def gateway_keys(drain, gateway_hosts, hostvars, gateway_api_key="", server_api_key=""):
    """{host: {"headers", "server"}} per gateway the drain calls (the host its calls are made from,
    as rollout_gateways names it): ``headers`` the Bearer header of its worker API, ``server`` the key
    a registration there carries (POST /workers {"api_key"}: what the gateway then sends that
    server). For sglang_router, rollout_gateway_api_key and rollout_server_api_key. For
    sglang_gateway each gateway host's own: its admin control-plane key, else its
    sglang_gateway_api_key (``admin_key``), and its sglang_gateway_api_key (smg sends its --api-key
    to the workers it was started with); a key given to the rollout is used for every gateway.
    Nothing for any other drain."""
    gateway_api_key, server_api_key = str(gateway_api_key or ""), str(server_api_key or "")
    if drain == "sglang_router":
        pairs = {"localhost": (gateway_api_key, server_api_key)}
    elif drain == "sglang_gateway":
        pairs = {}
        for host in gateway_hosts or []:
            facts = hostvars.get(host) or {}
            own = str(facts.get("sglang_gateway_api_key") or "")
            pairs[host] = (gateway_api_key or gateway.admin_key(own, facts.get("sglang_gateway_control_plane_api_keys")),
                           server_api_key or own)
    else:
        return {}
    return {host: {"headers": {"Authorization": "Bearer " + admin} if admin else {}, "server": server}
            for host, (admin, server) in pairs.items()}


def gateway_calls(results, urls, action):
    """The worker API calls of one drain step, from the gateways' GET /workers answers (one result
    per gateway, its item {host, url}): for ``remove``, [{host, gateway, id, url}] for each entry that
    is one of ``urls`` (any spelling, every data-parallel rank); for ``register``, [{host, gateway,
    url}] for each of ``urls`` a gateway holds in no spelling. A gateway whose answer cannot be read
    gets no call (the wait after it names the answer)."""
    calls = []
    for result in results or []:
        if result.get("skipped") or _unread(result):
            continue
        item = result.get("item") or {}
        where = {"host": item.get("host"), "gateway": item.get("url")}
        entries = result["json"]["workers"]
        if action == "remove":
            calls += [dict(where, id=entry.get("id"), url=entry.get("url")) for entry in gateway.workers_of(entries, urls)]
        elif action == "register":
            calls += [dict(where, url=url) for url in gateway.missing_workers(urls, entries)]
        else:
            raise ValueError("gateway_calls: action %r is neither remove nor register" % (action,))
    return calls


def registrations(results):
    """[{host, gateway, url, id}] of the registrations a drain made, from its POST /workers results
    (smg answers 202 {"worker_id": ...}; an answer without one is left out)."""
    made = []
    for result in results or []:
        if result.get("skipped"):
            continue
        document = result.get("json") if isinstance(result.get("json"), dict) else {}
        if document.get("worker_id"):
            made.append(dict(result.get("item") or {}, id=str(document["worker_id"])))
    return made


def pending_registrations(results):
    """[{host, gateway, id, url}] of the registrations a drain made (POST /workers answered 202 with a
    worker_id) that the gateway still holds as pending (GET /workers/{id}: "status": "pending"): smg
    1.13.0 keeps probing such a worker until --worker-startup-timeout-secs and adds it, with no
    health gate of ours, once it answers; DELETE /workers/{id} does not cancel it (measured)."""
    pending = []
    for result in results or []:
        if result.get("skipped"):
            continue
        document = result.get("json") if isinstance(result.get("json"), dict) else {}
        if result.get("status") == 200 and document.get("status") == "pending":
            pending.append(result.get("item") or {})
    return pending


def _where(result):
    item = result.get("item") or {}
    return "gateway %s (%s)" % (item.get("host"), item.get("url")) if isinstance(item, dict) and "host" in item else "the gateway"


def _unread(result):
    """Why an answer of GET /workers cannot be read, or ''."""
    if result.get("status") != 200:
        return "%s answered GET /workers with HTTP %s%s" % (
            _where(result), result.get("status", "?"), (": %s" % result["msg"]) if result.get("msg") else "")
    workers = (result.get("json") or {}).get("workers") if isinstance(result.get("json"), dict) else None
    if not isinstance(workers, list):
        return "%s answered GET /workers with no worker list" % _where(result)
    return ""


def drain_gone_problems(results, urls, timeout):
    """After the wait for the host's workers to leave: each gateway whose list still holds one, in
    any spelling or data-parallel rank, or whose answer cannot be read."""
    problems = []
    for result in results or []:
        if result.get("skipped"):
            continue
        unread = _unread(result)
        if unread:
            problems.append(unread)
            continue
        left = gateway.workers_of(result["json"]["workers"], urls)
        if left:
            problems.append("%s still lists %s after %s s; the service was not restarted" % (
                _where(result), ", ".join(sorted({str(entry.get("url")) for entry in left})), timeout))
    return problems


def unhealthy_workers(urls, entries):
    """{url: why} for each of ``urls`` the gateway does not list healthy: no entry in any spelling,
    or an entry (any data-parallel rank) whose ``is_healthy`` is not true or whose ``status`` is not
    ``ready`` (smg 1.13.0's GET /workers fields)."""
    why = {}
    for url in urls or []:
        held = gateway.workers_of(entries or [], [url])
        if not held:
            why[url] = "not listed"
            continue
        bad = [entry for entry in held if entry.get("is_healthy") is not True or entry.get("status", "ready") != "ready"]
        if bad:
            why[url] = "listed but not healthy (%s)" % ", ".join(
                "%s: is_healthy %s, status %s" % (entry.get("url"), entry.get("is_healthy"), entry.get("status")) for entry in bad)
    return why


def undrain_problems(results, urls, timeout):
    """After the wait for the host's workers to come back: each worker a gateway does not list
    healthy, or a gateway whose answer cannot be read."""
    problems = []
    for result in results or []:
        if result.get("skipped"):
            continue
        unread = _unread(result)
        if unread:
            problems.append(unread)
            continue
        for url, why in unhealthy_workers(urls, result["json"]["workers"]).items():
            problems.append("%s: %s %s after %s s" % (_where(result), url, why, timeout))
    return problems


def not_listening(result):
    """Whether an ansible.builtin.uri result is a refused connection (status -1, "Connection refused"
    in its message, as urllib words ECONNREFUSED)."""
    return result.get("status") == -1 and "Connection refused" in str(result.get("msg") or "")


def drain_load_problems(results, timeout, require=True, units=None):
    """After the wait for the server's requests in flight (GET /v1/loads, one result per active
    service): the requests still running or waiting, and each answer that cannot be read, which is
    a problem unless ``require`` is false (rollout_drain_require_loads: restart without knowing).
    A connection refused is no answer but a fact: no server listens there, so nothing is in flight
    (a service that is stopped, or has not started yet) - unless ``units`` (sglang_services_units,
    when the run read them) says that service's unit is running: then it serves somewhere else (a
    port the change moves), and what it has in flight is unknown."""
    problems = []
    for result in results or []:
        if result.get("skipped"):
            continue
        item = result.get("item") or {}
        url = "%s/v1/loads" % ((item.get("value") or {}).get("url") if isinstance(item, dict) else "?")
        if not_listening(result):
            running = ((units or {}).get(item.get("key")) or {}).get("active") == "active/running"
            if running and require:
                problems.append("cannot tell what %s has in flight: nothing listens at %s although its unit is "
                                "running (does this change move its port?); set rollout_drain_require_loads=false "
                                "to restart without that figure" % (item.get("key"), url))
            continue
        document = result.get("json") if isinstance(result.get("json"), dict) else {}
        loads = document.get("loads")
        if result.get("status") != 200 or not isinstance(loads, list) or not all(isinstance(load, dict) for load in loads):
            if require:
                problems.append(
                    "cannot tell what %s has in flight: %s answered %s; set rollout_drain_require_loads=false to "
                    "restart without that figure" % (item.get("key", "the service"), url,
                                                     "HTTP %s" % result.get("status", "?") if result.get("status") != 200
                                                     else "with no load report"))
            continue
        running = sum(int(load.get("num_running_reqs") or 0) for load in loads)
        waiting = sum(int(load.get("num_waiting_reqs") or 0) for load in loads)
        if running or waiting:
            problems.append("%s still has %d running and %d waiting requests after %s s (rollout_drain_timeout)"
                            % (url, running, waiting, timeout))
    return problems
