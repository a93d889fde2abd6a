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
