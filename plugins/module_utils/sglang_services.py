# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang services this collection manages: the one home of their names and labels.

Each runs as the unit ``sglang-<name>.service``. The sglang_services filters, the
``blackwell.sglang.sglang_services`` lookup (the role's list) and the unit template read this; the
sglang_services and GPU checks parse ``cuda_visible_devices`` with ``gpu_set``.
"""

from __future__ import annotations

import re

# name -> what the unit's Description= calls it; in the order the role handles them.
SERVICES = {
    "eagle3": "EAGLE-3 speculative decoding",
    "autoregressive": "autoregressive",
    "dflash": "DFlash speculative decoding",
}


def unit_name(name):
    """'eagle3' -> 'sglang-eagle3.service'."""
    return "sglang-%s.service" % name


def gpu_set(value):
    """CUDA_VISIBLE_DEVICES setting -> list of ints in the order given (CUDA numbers the devices in
    that order); [] means all GPUs. ValueError if bad."""
    if value in (None, "", []):
        return []
    items = value if isinstance(value, list) else re.split(r"\s*,\s*", str(value).strip())
    devices = []
    for item in items:
        if isinstance(item, bool) or not re.match(r"^\d+$", str(item).strip()):
            raise ValueError("%r is not a GPU index" % (item,))
        devices.append(int(str(item).strip()))
    if len(set(devices)) != len(devices):
        raise ValueError("%r names a GPU twice" % (value,))
    return devices


# /proc/net/tcp and /proc/net/tcp6 (the kernel's proc_net_tcp.txt): "sl local_address rem_address st
# tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...", the local address as hex
# "ADDR:PORT", state 0A = TCP_LISTEN, uid the socket owner's.
LISTEN = "0A"


def tcp_listeners(texts):
    """[{"port": int, "uid": int}] of the listening TCP sockets in the given /proc/net/tcp and
    /proc/net/tcp6 contents (each once per port and owner). A line that is not a socket (the header,
    a truncated line) is skipped."""
    found = []
    for text in texts or []:
        for line in str(text or "").splitlines():
            fields = line.split()
            if len(fields) < 8 or not fields[0].endswith(":") or fields[3] != LISTEN:
                continue
            try:
                entry = {"port": int(fields[1].rsplit(":", 1)[1], 16), "uid": int(fields[7])}
            except (IndexError, ValueError):
                continue
            if entry not in found:
                found.append(entry)
    return found


def port_taken_problems(endpoints, listeners, user, uid):
    """One sentence per active service whose port a socket of another owner than the service user
    (`user`, uid `uid`; None: the user does not exist yet) already listens on: another service of
    the host holds it, and the server would not start after the switch. `endpoints` is the
    sglang_services_endpoints fact ({service: {"url", "port"}}), `listeners` tcp_listeners()."""
    problems = []
    for name, endpoint in sorted((endpoints or {}).items()):
        port = int(endpoint["port"])
        owners = sorted({entry["uid"] for entry in listeners or [] if entry["port"] == port and entry["uid"] != uid})
        if owners:
            problems.append(
                "port %d of the %s service is already in use on this host: a socket of uid %s listens on it, not "
                "%s's%s (another service; `ss -ltnp 'sport = :%d'` names it); stop that service or give %s "
                "another port (sglang_services_common.port or sglang_services_%s.port)"
                % (port, name, ", ".join(str(owner) for owner in owners), user,
                   "" if uid is not None else " (that user does not exist yet)", port, name, name))
    return problems
