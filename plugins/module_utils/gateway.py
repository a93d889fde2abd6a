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
import re
import socket
from urllib.parse import urlsplit

_DP_ENTRY = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/@?#]+)@(\d+)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class WorkerURLError(ValueError):
    """A worker or gateway URL that is not an absolute http(s) URL."""


def split_dp_rank(url):
    """``('http://h:8000', 1)`` for the gateway's data-parallel entry ``http://h:8000@1``;
    ``(url, None)`` for any other URL. The suffix follows the port, where a URL parser would read
    ``h:8000`` as a user name, so it is taken off before parsing."""
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
        host = ipaddress.ip_address(host).compressed
    except ValueError:
        host = host.rstrip(".")
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _addresses(host, port, resolve):
    try:
        return {ipaddress.ip_address(host).compressed}
    except ValueError:
        pass
    if not resolve:
        return set()
    try:
        return {ipaddress.ip_address(info[4][0].split("%", 1)[0]).compressed
                for info in resolve(host, port, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError, ValueError):
        return set()


def same_worker(first, second, resolve=socket.getaddrinfo):
    """Whether two URLs name the same worker (see the module docstring). ``resolve`` is
    ``socket.getaddrinfo`` or None (compare the names only)."""
    scheme_a, host_a, port_a = worker_identity(first)
    scheme_b, host_b, port_b = worker_identity(second)
    if (scheme_a, port_a) != (scheme_b, port_b):
        return False
    if host_a == host_b:
        return True
    return bool(_addresses(host_a, port_a, resolve) & _addresses(host_b, port_b, resolve))


def _once(resolve):
    """``resolve`` asking about each (host, port) once (a list of many entries resolves the same
    few names again and again); None stays None."""
    if resolve is None:
        return None
    answers = {}

    def cached(host, port, proto=0):
        key = (host, port, proto)
        if key not in answers:
            try:
                answers[key] = resolve(host, port, proto=proto)
            except OSError as exc:
                answers[key] = exc
        if isinstance(answers[key], OSError):
            raise answers[key]
        return answers[key]
    return cached


def entry_url(entry):
    """The URL of a gateway worker entry (``GET /workers``): its ``dp_base_url`` where the
    gateway split a data-parallel worker into ranks, else its ``url``."""
    return entry.get("dp_base_url") or entry.get("url") or ""


def workers_of(entries, urls, resolve=socket.getaddrinfo):
    """The entries of the gateway's ``GET /workers`` list that are one of ``urls`` (the host's
    workers as the inventory names them), every spelling and every data-parallel rank of each.
    Raises WorkerURLError for a bad URL in ``urls``; an entry whose URL is not an http(s) URL
    (a gRPC worker) is never one of them."""
    wanted = list(urls or [])
    for url in wanted:
        worker_identity(url)
    resolve = _once(resolve)
    found = []
    for entry in entries or []:
        url = entry_url(entry)
        try:
            worker_identity(url)
        except WorkerURLError:
            continue
        if any(same_worker(url, want, resolve) for want in wanted):
            found.append(entry)
    return found


def missing_workers(urls, entries, resolve=socket.getaddrinfo):
    """The URLs of ``urls`` that no entry of the gateway's list is, in any spelling: what an
    undrain may register without adding a second copy of a worker."""
    return [url for url in urls if not workers_of(entries, [url], resolve)]
