# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Worker identity at the SGLang model gateway (PyPI ``smg``, Shepherd Model Gateway): which of the
gateway's worker entries are the workers of one host.

The gateway keeps each worker's URL exactly as it was registered and compares raw strings. Seen
with smg 1.13.0 (``POST /workers`` then ``GET /workers``): ``http://127.0.0.1:39101``,
``http://127.0.0.1:39101/`` and ``http://localhost:39101`` were accepted as three workers (the first
one again was refused with 409 ``WORKER_ALREADY_EXISTS``), and with ``--dp-aware`` a worker whose
``/get_server_info`` reports ``dp_size`` 2 is held as two entries, ``url`` ``http://127.0.0.1:39103@0``
and ``...@1``, each with ``dp_base_url`` ``http://127.0.0.1:39103`` and its ``dp_rank``. So a drain
that looks its workers up by the string it built from the inventory misses every other spelling
(and the restart then runs under traffic), and an undrain that registers what it did not find adds
a second copy of a worker that is there.

Here a URL is reduced to its identity: the scheme and host in lower case, an address literal in its
canonical form (``ipaddress``), the port made explicit (80, 443), no trailing slash, no ``@rank``
suffix. Two URLs name the same worker when scheme and port are the same and the hosts are the same,
or, with ``resolve``, when the addresses the controller resolves the two names to overlap (a name
in the inventory, an address at the gateway, or the reverse).

Pure standard library: used by the rollout's filters on the controller.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from urllib.parse import urlsplit

_DP_ENTRY = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/@?#]+:\d+)@(\d+)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class WorkerURLError(ValueError):
    """A worker or gateway URL that is not an absolute http(s) URL."""


def split_dp_rank(url):
    """``('http://h:8000', 1)`` for the gateway's data-parallel entry ``http://h:8000@1``;
    ``(url, None)`` for any other URL. The suffix follows the port, where a URL parser would read
    ``h:8000`` as a user name, so it is taken off before parsing (only after an explicit port, as
    the gateway writes it: ``http://user@h`` stays a URL with user info, which is refused)."""
    text = str(url).strip()
    match = _DP_ENTRY.match(text)
    if match:
        return match.group(1), int(match.group(2))
    return text, None


def worker_identity(url):
    """``(scheme, host, port)`` of a worker URL, normalised as the module docstring says.

    Raises WorkerURLError for anything but an absolute http(s) URL with a host (a path other than
    ``/``, a query, a fragment or user info is refused too: a worker is a server's base URL)."""
    base, _rank = split_dp_rank(url)
    try:
        parts = urlsplit(base)
        port = parts.port
    except ValueError as exc:
        raise WorkerURLError("%r is not a valid URL (%s)" % (url, exc)) from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise WorkerURLError("%r is not an absolute http(s) URL (http://host:port)" % (url,))
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise WorkerURLError("%r is not a server's base URL (http://host:port, no path, query or user)" % (url,))
    host = parts.hostname.lower()
    try:
        host = _address(host)
    except ValueError:
        host = host.rstrip(".")
    if not host:
        raise WorkerURLError("%r is not an absolute http(s) URL (http://host:port)" % (url,))
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _address(text):
    """An address literal's canonical form (an IPv4-mapped IPv6 address as its IPv4 address);
    ValueError for a name."""
    address = ipaddress.ip_address(text)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).compressed


def _addresses(host, port, resolve):
    try:
        return {_address(host)}
    except ValueError:
        pass
    if not resolve:
        return set()
    try:
        return {_address(info[4][0].split("%", 1)[0]) for info in resolve(host, port, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError, ValueError):
        return set()


class _Matcher:
    """Whether URLs name the same worker as one of ``urls``: each URL parsed once, each (host, port)
    resolved at most once."""

    def __init__(self, urls, resolve):
        self.resolve = resolve
        self.known = {}
        self.wanted = [worker_identity(url) for url in urls]  # a bad URL here is an error

    def addresses(self, host, port):
        if (host, port) not in self.known:
            self.known[(host, port)] = _addresses(host, port, self.resolve)
        return self.known[(host, port)]

    def matches(self, url):
        """True when ``url`` names one of the wanted workers; False for it and for a URL that is
        not an http(s) base URL (a gRPC worker at the gateway)."""
        try:
            scheme, host, port = worker_identity(url)
        except WorkerURLError:
            return False
        for want_scheme, want_host, want_port in self.wanted:
            if (scheme, port) != (want_scheme, want_port):
                continue
            if host == want_host or self.addresses(host, port) & self.addresses(want_host, want_port):
                return True
        return False


def same_worker(first, second, resolve=socket.getaddrinfo):
    """Whether two URLs name the same worker (see the module docstring). ``resolve`` is
    ``socket.getaddrinfo`` or None (compare the names only). WorkerURLError for a bad URL."""
    worker_identity(first)
    return _Matcher([second], resolve).matches(first)


def entry_url(entry):
    """The URL of a gateway worker entry (``GET /workers``): its ``dp_base_url`` where the
    gateway split a data-parallel worker into ranks, else its ``url``."""
    return entry.get("dp_base_url") or entry.get("url") or ""


def workers_of(entries, urls, resolve=socket.getaddrinfo):
    """The entries of the gateway's ``GET /workers`` list that are one of ``urls`` (the host's
    workers as the inventory names them), every spelling and every data-parallel rank of each.
    Raises WorkerURLError for a bad URL in ``urls``; an entry whose URL is not an http(s) URL
    (a gRPC worker) is never one of them."""
    matcher = _Matcher(urls or [], resolve)
    return [entry for entry in entries or [] if matcher.matches(entry_url(entry))]


def missing_workers(urls, entries, resolve=socket.getaddrinfo):
    """The URLs of ``urls`` that no entry of the gateway's list is, in any spelling: what an
    undrain may register without adding a second copy of a worker."""
    urls = list(urls or [])
    held = [entry_url(entry) for entry in entries or []]
    found = []
    shared = {}
    for url in urls:
        matcher = _Matcher([url], resolve)
        matcher.known = shared  # one resolution of each name for the whole list
        if not any(matcher.matches(entry) for entry in held):
            found.append(url)
    return found


# The gateway's manifest (the sglang_gateway role: its launcher gives the workers to smg as
# ``--worker-urls`` at each start, so a restart starts from it; the manifest is the rotation, and a
# drain takes the host's workers out of it). Its format is smg 1.13.0's file-discovery format, kept
# strict as smg keeps it (smg logs "invalid discovery manifest ... keeping the last good manifest"):
# top-level ``version`` (1) and ``workers`` only, each worker one of these fields, and no two
# entries naming the same endpoint.
MANIFEST_VERSION = 1
MANIFEST_WORKER_FIELDS = ("id", "url", "worker_type", "bootstrap_port", "model_id", "kv_connector", "kv_role", "kv_engine_id")
MANIFEST_STATES = ("present", "drained", "undrained")


class ManifestError(ValueError):
    """A manifest or drained list the gateway would refuse, or a worker URL that is not one."""


def manifest_workers(document):
    """The worker entries of a manifest document (``{"version": 1, "workers": [...]}``), checked as
    smg checks them; ManifestError names what it would refuse."""
    if document in (None, ""):
        return []
    if not isinstance(document, dict) or set(document) - {"version", "workers"}:
        raise ManifestError("the manifest must be {\"version\": 1, \"workers\": [...]}, got %r" % (document,))
    entries = document.get("workers") or []
    if not isinstance(entries, list):
        raise ManifestError("the manifest's workers must be a list, got %r" % (entries,))
    for entry in entries:
        if not isinstance(entry, dict) or "url" not in entry or set(entry) - set(MANIFEST_WORKER_FIELDS):
            raise ManifestError("a manifest worker is a dict with url and only %s, got %r" % (", ".join(MANIFEST_WORKER_FIELDS), entry))
        try:
            worker_identity(entry["url"])
        except WorkerURLError as exc:
            raise ManifestError("manifest worker: %s" % exc) from exc
    return entries


def edit_manifest(entries, drained, workers, state, resolve=socket.getaddrinfo):
    """``(entries, drained, added, removed)`` after one change to the manifest's worker entries and
    the list of drained worker URLs (kept beside the manifest; the gateway never reads it):

    - ``present`` (the gateway role): the manifest lists exactly ``workers``, except those drained;
      a drained record of a worker that is no longer one is dropped.
    - ``drained`` (the rollout, before a restart): ``workers`` leave the manifest in every spelling
      it holds them and are recorded as drained, so that neither a restart of the gateway nor a run
      of its role puts them back while the host is out of rotation.
    - ``undrained`` (after the host passed its gates): they leave the drained list and return to
      the manifest unless it holds them already in some spelling (no second copy).

    Entries the change keeps are kept as they are (with their ids); ``added`` and ``removed`` are
    URLs. ManifestError for a bad URL in ``workers`` or an unknown state."""
    if state not in MANIFEST_STATES:
        raise ManifestError("state must be one of %s, got %r" % (", ".join(MANIFEST_STATES), state))
    try:
        wanted = []
        for url in workers or []:
            worker_identity(url)
            if not _Matcher(wanted, resolve).matches(url):
                wanted.append(str(url).strip())
    except WorkerURLError as exc:
        raise ManifestError(str(exc)) from exc
    entries = list(entries or [])
    drained = [str(url) for url in drained or []]
    wanted_matcher = _Matcher(wanted, resolve)
    if state == "present":
        drained = [url for url in drained if wanted_matcher.matches(url)]
        out = _Matcher(drained, resolve)
        keep = []
        for entry in entries:  # one entry per worker (smg refuses two naming the same endpoint)
            if wanted_matcher.matches(entry["url"]) and not out.matches(entry["url"]) \
                    and not _Matcher([held["url"] for held in keep], resolve).matches(entry["url"]):
                keep.append(entry)
        kept = _Matcher([entry["url"] for entry in keep], resolve)
        added = [url for url in wanted if not out.matches(url) and not kept.matches(url)]
        new = keep + [{"url": url} for url in added]
    elif state == "drained":
        new = [entry for entry in entries if not wanted_matcher.matches(entry["url"])]
        recorded = _Matcher(drained, resolve)
        drained = drained + [url for url in wanted if not recorded.matches(url)]
        added = []
    else:
        drained = [url for url in drained if not wanted_matcher.matches(url)]
        held = _Matcher([entry["url"] for entry in entries], resolve)
        added = [url for url in wanted if not held.matches(url)]
        new = entries + [{"url": url} for url in added]
    kept_ids = {id(entry) for entry in new}
    removed = [entry["url"] for entry in entries if id(entry) not in kept_ids]
    return new, drained, added, removed


# The gateway role (roles/sglang_gateway): its workers from the inventory and its settings' problems.
# Used by the role's preflight and, for one host, by the rollout's drain, so that both name a worker
# the same way.

class MissingEndpointsError(ValueError):
    """Worker hosts without the fact ``sglang_services_endpoints`` in this run."""

    def __init__(self, hosts):
        self.hosts = list(hosts)
        super().__init__(
            "no sglang_services_endpoints fact for %s: the sglang_services preflight sets it on each serving "
            "host earlier in the same run (site.yml runs the serving hosts' play first), so include the "
            "serving hosts in this run (no --limit to the gateway alone) or give the workers explicitly "
            "with sglang_gateway_workers" % ", ".join(self.hosts))


def worker_url(address, port):
    """``http://<address>:<port>``, an IPv6 literal bracketed (``http://[fd00::5]:30000``)."""
    text = str(address).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        if ipaddress.ip_address(text).version == 6:
            text = "[%s]" % text
    except ValueError:
        pass
    return "http://%s:%d" % (text, int(port))


def inventory_worker_urls(hostvars_by_host):
    """The worker URLs of ``{host: hostvars}`` (in the given order, then by service name): one
    ``http://<address>:<port>`` per service in the host's ``sglang_services_endpoints`` fact
    (``{service: {url, port}}``, set by the sglang_services preflight), where the address is the
    host's ``sglang_gateway_worker_address``, else its ``ansible_host``, else its inventory name.
    A host whose fact is ``{}`` (no active service) has no workers; a host without the fact raises
    MissingEndpointsError naming every such host. Duplicates (two names of one endpoint) are kept
    once, by identity (``worker_identity``)."""
    urls, seen, missing = [], set(), []
    for host, hostvars in (hostvars_by_host or {}).items():
        hostvars = hostvars or {}
        endpoints = hostvars.get("sglang_services_endpoints")
        if endpoints is None:
            missing.append(str(host))
            continue
        address = hostvars.get("sglang_gateway_worker_address") or hostvars.get("ansible_host") or host
        for _name, endpoint in sorted(endpoints.items()):
            url = worker_url(address, endpoint["port"])
            identity = worker_identity(url)
            if identity not in seen:
                seen.add(identity)
                urls.append(url)
    if missing:
        raise MissingEndpointsError(missing)
    return urls


# Flags the role renders from its own variables (smg 1.13.0, `smg launch --help`; the keys are
# appended by the role's launcher from its env file), so sglang_gateway_extra_args must not set them.
GATEWAY_MANAGED_FLAGS = {
    "host": "sglang_gateway_host", "port": "sglang_gateway_port", "policy": "sglang_gateway_policy",
    "prometheus-host": "sglang_gateway_metrics_host", "prometheus-port": "sglang_gateway_metrics_port",
    "request-timeout-secs": "sglang_gateway_request_timeout",
    "worker-startup-timeout-secs": "sglang_gateway_worker_startup_timeout",
    "dp-aware": "sglang_gateway_dp_aware", "disable-tokenizer-autoload": "sglang_gateway_tokenizer_autoload",
    "discovery-provider": "(the role: its manifest; a provider would end native /generate)",
    "service-discovery": "(the role: its manifest; a provider would end native /generate)",
    "discovery-file": "(the role: its manifest)", "worker-urls": "sglang_gateway_workers",
    "api-key": "sglang_gateway_api_key", "control-plane-api-keys": "sglang_gateway_control_plane_api_keys",
}
# smg 1.13.0's --policy choices (router_args.py, `smg launch --help`).
GATEWAY_POLICIES = ("random", "round_robin", "passthrough", "cache_aware", "power_of_two", "least_load",
                    "manual", "consistent_hashing", "prefix_hash")
# --control-plane-api-keys 'id:name:role:key', role admin or user (router_args.py,
# _parse_control_plane_api_keys).
CONTROL_PLANE_ROLES = ("admin", "user")


def _port(value):
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if 1 <= number <= 65535 else None


def _positive(value):
    if isinstance(value, bool):
        return False
    try:
        return int(str(value)) >= 1
    except ValueError:
        return False


def _secret_problem(name, value):
    """A secret the env file can hold: a non-empty string without control characters (the value is
    never shown)."""
    text = "" if value is None else str(value)
    if not text:
        return "%s is empty" % name
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        return "%s holds a control character (a newline?): an env file line cannot carry it" % name
    return None


def gateway_problems(settings):
    """Every problem of the gateway role's settings, one sentence each naming the variable and what
    to change; [] when good. ``settings``: the role's variables without the prefix (host, port,
    metrics_host, metrics_port, policy, request_timeout, worker_startup_timeout, workers (None: from
    the inventory), extra_args, api_key, control_plane_api_keys, service_ports (the SGLang services
    on the same host: its ``sglang_services_endpoints``, {service: {url, port}} or {service: port}),
    serves (the host's ``sglang_services_active``, None when unset) and groups (its ``group_names``)).
    Secrets are checked, never shown."""
    problems = []
    serves = settings.get("serves")
    if serves not in (None, "", "none", []) and serves != ["none"]:
        others = [group for group in settings.get("groups") or [] if group != "sglang_gateway"]
        problems.append("this host is in sglang_gateway and also serves (sglang_services_active %s%s): site.yml and "
                        "rollout.yml never run an SGLang server on a gateway host (all:!sglang_gateway), so it would "
                        "serve nothing; take it out of sglang_gateway, or out of the serving group"
                        % (json.dumps(serves), ", from its groups %s" % ", ".join(others) if others else ""))
    port, metrics = _port(settings.get("port")), _port(settings.get("metrics_port"))
    for name, value in (("sglang_gateway_port", settings.get("port")),
                        ("sglang_gateway_metrics_port", settings.get("metrics_port"))):
        if _port(value) is None:
            problems.append("%s must be a port number in 1-65535, got %r" % (name, value))
    if port is not None and port == metrics:
        problems.append("sglang_gateway_port and sglang_gateway_metrics_port are both %s: give the metrics "
                        "their own port" % port)
    for service, used in sorted((settings.get("service_ports") or {}).items()):
        used = used.get("port") if isinstance(used, dict) else used
        if port is not None and _port(used) == port:
            problems.append("sglang_gateway_port %s is the port of the SGLang service %s on this host: pick "
                            "another (e.g. 30080)" % (port, service))
        if metrics is not None and _port(used) == metrics:
            problems.append("sglang_gateway_metrics_port %s is the port of the SGLang service %s on this host: "
                            "pick another" % (metrics, service))
    for name in ("host", "metrics_host"):
        value = settings.get(name)
        if not isinstance(value, str) or not value.strip() or any(char.isspace() for char in value):
            problems.append("sglang_gateway_%s must be an address to bind (e.g. 0.0.0.0, 127.0.0.1, ::), got %r"
                            % (name, value))
    if settings.get("policy") not in GATEWAY_POLICIES:
        problems.append("sglang_gateway_policy must be one of %s (smg 1.13.0's --policy), got %r"
                        % (", ".join(GATEWAY_POLICIES), settings.get("policy")))
    for name in ("request_timeout", "worker_startup_timeout"):
        if not _positive(settings.get(name)):
            problems.append("sglang_gateway_%s must be a whole number of seconds >= 1, got %r"
                            % (name, settings.get(name)))
    workers = settings.get("workers")
    if workers is not None:
        if not isinstance(workers, (list, tuple)):
            problems.append("sglang_gateway_workers must be a list of worker URLs (http://host:port), got %r"
                            % (workers,))
        else:
            for url in workers:
                try:
                    worker_identity(url)
                except WorkerURLError as exc:
                    problems.append("sglang_gateway_workers: %s" % exc)
    extra = settings.get("extra_args")
    if extra is not None and not isinstance(extra, dict):
        problems.append("sglang_gateway_extra_args must be a dict {flag: value}, got %r" % (extra,))
    for key in sorted(extra or {}) if isinstance(extra, dict) else []:
        flag = str(key).lstrip("-").replace("_", "-")
        if flag in GATEWAY_MANAGED_FLAGS:
            problems.append("sglang_gateway_extra_args sets --%s, which the role manages: use %s"
                            % (flag, GATEWAY_MANAGED_FLAGS[flag]))
    problem = _secret_problem("sglang_gateway_api_key", settings.get("api_key"))
    if problem:
        problems.append(problem + ": the gateway needs an API key (vault-encrypted, see the role's README)")
    keys = settings.get("control_plane_api_keys")
    if keys is not None and not isinstance(keys, (list, tuple)):
        problems.append("sglang_gateway_control_plane_api_keys must be a list of 'id:name:role:key'")
        keys = []
    for index, entry in enumerate(keys or []):
        name = "sglang_gateway_control_plane_api_keys[%d]" % index
        problem = _secret_problem(name, entry)
        parts = str(entry).split(":", 3) if entry is not None else []
        if problem:
            problems.append(problem)
        elif len(parts) != 4 or not all(parts):
            problems.append("%s is not 'id:name:role:key' (four fields, none empty)" % name)
        elif parts[2].lower() not in CONTROL_PLANE_ROLES:
            problems.append("%s: the role (third field) must be admin or user" % name)
    return problems


def admin_key(api_key, control_plane_api_keys):
    """The key the rollout's drain sends the gateway as Bearer on its worker API: the first admin
    key of ``control_plane_api_keys`` ('id:name:role:key'), since smg 1.13.0 accepts only those on
    /workers once any is set (measured: the --api-key then gets 401), else ``api_key``, else ''."""
    for entry in control_plane_api_keys or []:
        parts = str(entry).split(":", 3)
        if len(parts) == 4 and parts[2].lower() == "admin" and parts[3]:
            return parts[3]
    return str(api_key or "")


def admin_key_of(gateway_hostvars):
    """``admin_key`` of a gateway host's variables (its sglang_gateway_api_key and
    sglang_gateway_control_plane_api_keys; none set: '')."""
    gateway_hostvars = gateway_hostvars or {}
    return admin_key(gateway_hostvars.get("sglang_gateway_api_key"),
                     gateway_hostvars.get("sglang_gateway_control_plane_api_keys"))
