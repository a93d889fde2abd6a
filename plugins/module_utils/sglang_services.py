# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang services this collection manages, the one home of their names and labels, and the
sglang_services role's logic: settings -> SGLang argv, input problems, GPU sharing (Conflicts=),
endpoints, ports taken, systemd ExecStart= quoting. Pure functions, unit-tested as tables
(tests/unit/plugins/filter/test_sglang_services_filters.py); the filters of
plugins/filter/sglang_services.py are these functions.

Each service runs as the unit ``sglang-<name>.service``. The sglang_services filters, the
``blackwell.sglang.sglang_services`` lookup (the role's list) and the unit template read this; the
sglang_services and GPU checks parse ``cuda_visible_devices`` with ``gpu_set``.
"""

from __future__ import annotations

import json
import re

from ansible_collections.blackwell.sglang.plugins.module_utils.preflight import as_bool, bool_problem, managed_env_problem

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


EAGLE3_NUMBERS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
# Flags the role renders from named settings; extra_args must not set them a second time.
MANAGED_FLAGS = {
    "model-path": "model_path", "model": "model_path", "host": "host", "port": "port",
    "tp-size": "tp_size", "tensor-parallel-size": "tp_size", "pp-size": "pp_size",
    "pipeline-parallel-size": "pp_size", "mem-fraction-static": "mem_fraction_static",
    "attention-backend": "attention_backend", "enable-dp-attention": "enable_dp_attention",
    "speculative-algorithm": "(the service)", "speculative-draft-model-path": "draft_model_path",
    "speculative-draft-model": "draft_model_path", "speculative-num-steps": "speculative_num_steps",
    "speculative-eagle-topk": "speculative_eagle_topk",
    "speculative-num-draft-tokens": "speculative_num_draft_tokens",
    "speculative-dflash-block-size": "dflash_block_size",
}


# SGLang's --disaggregation-mode values that split a request across two servers (its default: null).
DISAGGREGATED = ("prefill", "decode")


def extra_arg(extra, flag):
    """The value a service's extra_args gives --flag (keys written with or without dashes, with dashes
    or underscores), else None; None for extra_args that are not a dict (the settings checks say so)."""
    for key, value in (extra.items() if isinstance(extra, dict) else ()):
        if str(key).lstrip("-").replace("_", "-") == flag:
            return value
    return None


def extra_flag_on(extra, flag):
    """Whether extra_args turns the bare flag --flag on (true, "yes", ...)."""
    return _on(extra_arg(extra, flag))


def _flag(key):
    return "--" + str(key).lstrip("-").replace("_", "-")


def _set(value):
    return value not in (None, "", [], {})


def _on(value):
    """A boolean setting as operators write it ("true", "no", ...); unset (None) is off. Problems
    report a value that is not a boolean; here it renders as off."""
    try:
        return as_bool(value)
    except ValueError:
        return False


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def sglang_service_argv(settings, name):
    """SGLang launch_server arguments for service `name` from its merged settings."""
    argv = ["--model-path", str(settings.get("model_path") or "")]
    argv += ["--host", str(settings.get("host")), "--port", str(settings.get("port"))]
    argv += ["--tp-size", str(settings.get("tp_size", 1))]
    if int(settings.get("pp_size") or 1) != 1:
        argv += ["--pp-size", str(settings["pp_size"])]
    if _set(settings.get("mem_fraction_static")):
        argv += ["--mem-fraction-static", str(settings["mem_fraction_static"])]
    if _set(settings.get("attention_backend")):
        argv += ["--attention-backend", str(settings["attention_backend"])]
    if _on(settings.get("enable_dp_attention")):
        argv += ["--enable-dp-attention"]
    if name == "eagle3":
        argv += ["--speculative-algorithm", "EAGLE3",
                 "--speculative-draft-model-path", str(settings.get("draft_model_path") or "")]
        for key in EAGLE3_NUMBERS:
            if _set(settings.get(key)):
                argv += [_flag(key), str(settings[key])]
    elif name == "dflash":
        argv += ["--speculative-algorithm", "DFLASH",
                 "--speculative-draft-model-path", str(settings.get("draft_model_path") or "")]
        if _set(settings.get("dflash_block_size")):
            argv += ["--speculative-dflash-block-size", str(settings["dflash_block_size"])]
    return argv + extra_argv(settings.get("extra_args"))


def extra_argv(extra_args):
    """``{flag: value}`` as arguments, sorted by flag: ``true`` a bare flag, ``false``/None left out, a
    list the flag then its values, a dict as JSON (the services' and the gateway's extra_args)."""
    argv = []
    for key, value in sorted((extra_args or {}).items()):
        if value is None or value is False:
            continue
        if value is True:
            argv.append(_flag(key))
        elif isinstance(value, list):
            argv.append(_flag(key))
            argv += [_scalar(item) for item in value]
        else:
            argv += [_flag(key), _scalar(value)]
    return argv


def sglang_services_argvs(settings_by_name):
    """{service: argv} for the three services."""
    return {name: sglang_service_argv(settings_by_name.get(name, {}), name) for name in SERVICES}


def _shares_gpus(left, right):
    return not left or not right or bool(set(left) & set(right))


def sglang_services_conflicts(settings_by_name):
    """{service: [other services' unit names it shares GPUs with]} (default: all share all GPUs)."""
    devices = {}
    for name in SERVICES:
        try:
            devices[name] = gpu_set(settings_by_name.get(name, {}).get("cuda_visible_devices"))
        except ValueError:
            devices[name] = []  # reported by sglang_services_problems
    return {
        name: [unit_name(other) for other in SERVICES
               if other != name and _shares_gpus(devices[name], devices[other])]
        for name in SERVICES
    }


def _int_in(value, low, high=None):
    if isinstance(value, bool):
        return False
    try:
        number = int(str(value))
    except ValueError:
        return False
    return number >= low and (high is None or number <= high)


def sglang_services_active_list(active):
    """'eagle3' / ['eagle3', 'dflash'] / '' / 'none' / None -> list of names."""
    if active in (None, "", "none", []):
        return []
    if isinstance(active, str):
        return [item for item in re.split(r"[\s,]+", active) if item]
    return [str(item) for item in active]


def sglang_services_problems(settings_by_name, active):
    """Every input problem, one clear sentence each (what to change); [] when the input is good."""
    problems = []
    names = sglang_services_active_list(active)
    unknown = [name for name in names if name not in SERVICES]
    if unknown:
        problems.append("sglang_services_active: unknown service %s; choose from %s (or none)"
                        % (", ".join(repr(n) for n in unknown), ", ".join(SERVICES)))
    if len(set(names)) != len(names):
        problems.append("sglang_services_active names a service twice: %s" % names)
    devices = {}
    for name in SERVICES:
        settings = settings_by_name.get(name, {})
        where = "sglang_services_%s" % name
        if not _set(settings.get("model_path")):
            problems.append("%s: model_path is empty (set it here or in sglang_services_common)" % where)
        if not _int_in(settings.get("port"), 1, 65535):
            problems.append("%s: port %r is out of range (1-65535)" % (where, settings.get("port")))
        for key in ("tp_size", "pp_size"):
            if not _int_in(settings.get(key, 1), 1):
                problems.append("%s: %s must be an integer >= 1, got %r" % (where, key, settings.get(key)))
        fraction = settings.get("mem_fraction_static")
        if _set(fraction):
            try:
                ok = 0 < float(fraction) < 1
            except (TypeError, ValueError):
                ok = False
            if not ok:
                problems.append("%s: mem_fraction_static must be between 0 and 1, got %r" % (where, fraction))
        try:
            devices[name] = gpu_set(settings.get("cuda_visible_devices"))
        except ValueError as exc:
            problems.append("%s: cuda_visible_devices: %s (use e.g. [0, 1, 2, 3] or \"0,1,2,3\")" % (where, exc))
            devices[name] = []
        extra = settings.get("extra_args") or {}
        if not isinstance(extra, dict):
            problems.append("%s: extra_args must be a dict of flag: value, got %r" % (where, extra))
            extra = {}
        for key in sorted(extra):
            managed = MANAGED_FLAGS.get(str(key).lstrip("-").replace("_", "-"))
            if managed:
                problems.append("%s: extra_args %s is managed by the role; set %s instead" % (where, key, managed))
        env = settings.get("env") or {}
        if not isinstance(env, dict) or any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)) for k in env):
            problems.append("%s: env must be a dict of VARIABLE: value" % where)
        else:
            problems += [problem for problem in (managed_env_problem(where, str(key), env[key]) for key in sorted(env)) if problem]
        if settings.get("enable_dp_attention") is not None:
            flag = bool_problem("%s: enable_dp_attention" % where, settings["enable_dp_attention"])
            if flag:
                problems.append(flag)
        if name in ("eagle3", "dflash") and not _set(settings.get("draft_model_path")):
            label = "EAGLE-3" if name == "eagle3" else "DFlash"
            problems.append("%s: %s needs draft_model_path (the draft model)" % (where, label))
        if name == "eagle3":
            given = [key for key in EAGLE3_NUMBERS if _set(settings.get(key))]
            if given and len(given) != len(EAGLE3_NUMBERS):
                missing = [key for key in EAGLE3_NUMBERS if key not in given]
                problems.append("%s: EAGLE-3 takes all three of %s or none; %s set, %s missing"
                                % (where, ", ".join(EAGLE3_NUMBERS), ", ".join(given), ", ".join(missing)))
            for key in given:
                if not _int_in(settings[key], 1):
                    problems.append("%s: %s must be an integer >= 1, got %r" % (where, key, settings[key]))
        if name == "dflash":
            # SGLang 0.5.23's own rules (arg_groups/speculative_hook.py, DFLASH): its resolution refuses
            # these too, but only once the venv and the model's config are on the host; here before both.
            if _on(settings.get("enable_dp_attention")) and not extra_flag_on(extra, "enable-dp-lm-head"):
                problems.append("%s: DFlash with DP attention needs extra_args enable-dp-lm-head: true (SGLang: 'DFLASH "
                                "with dp attention requires --enable-dp-lm-head'), or enable_dp_attention: false" % where)
            if _int_in(settings.get("pp_size", 1), 2):
                problems.append("%s: DFlash does not work with pipeline parallelism; pp_size is %s, must be 1 (SGLang: "
                                "'Currently DFLASH speculative decoding only supports pp_size == 1')"
                                % (where, settings["pp_size"]))
            block = settings.get("dflash_block_size")
            if _set(block) and not _int_in(block, 1):
                problems.append("%s: dflash_block_size must be an integer >= 1, got %r" % (where, block))
            mode = extra_arg(extra, "disaggregation-mode")
            if mode in DISAGGREGATED:
                problems.append(
                    "%s: DFlash speculative decoding with prefill/decode disaggregation (extra_args disaggregation-mode "
                    "%s): SGLang accepts the flags, but the DFlash draft's state is not carried from the prefill to the "
                    "decode server (sglang#36140); run DFlash without disaggregation" % (where, mode))
    running = [name for name in names if name in SERVICES]
    for index, left in enumerate(running):
        for right in running[index + 1:]:
            if _shares_gpus(devices[left], devices[right]):
                shared = sorted(set(devices[left]) & set(devices[right]))
                problems.append(
                    "sglang_services_active runs %s and %s together, but they share GPUs (%s); give each "
                    "disjoint cuda_visible_devices or run one" % (
                        left, right, ",".join(str(d) for d in shared) if shared else "one of them uses all GPUs"))
            port_left = settings_by_name.get(left, {}).get("port")
            if str(port_left) == str(settings_by_name.get(right, {}).get("port")):
                problems.append("sglang_services_active runs %s and %s together on the same port %s"
                                % (left, right, port_left))
    return problems


def sglang_services_endpoints(settings_by_name, active):
    """{service: {"url": base URL seen from its host, "port": int}} for the active services: the
    health gate polls <url>/health_generate, the rollout drains (<url>/v1/loads) and smoke-tests
    (<url>/generate) through it. The host is health_host, else host, else 127.0.0.1 for a wildcard
    bind (0.0.0.0, ::, empty); an IPv6 literal is bracketed."""
    endpoints = {}
    for name in sglang_services_active_list(active):
        settings = settings_by_name.get(name, {})
        host = str(settings.get("health_host") or "")
        if not host:
            host = str(settings.get("host") or "")
            host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        port = int(settings.get("port"))
        endpoints[name] = {"url": "http://%s:%d" % ("[%s]" % host if ":" in host else host, port), "port": port}
    return endpoints


def sglang_services_gpu_sets(settings_by_name, active):
    """{service: [GPU indices]} of the active services ([] = all GPUs), for the GPU validation."""
    sets = {}
    for name in sglang_services_active_list(active):
        try:
            sets[name] = gpu_set((settings_by_name.get(name) or {}).get("cuda_visible_devices"))
        except ValueError:
            sets[name] = []  # reported by sglang_services_problems
    return sets


def systemd_exec(argv):
    """A command line for ExecStart=: each word quoted for systemd ($ and % escaped), one flag
    (with its values) per continued line."""
    words = []
    for arg in argv:
        text = str(arg).replace("%", "%%").replace("$", "$$")
        if text == "" or re.search(r"[\s\"'\\;]", text):
            text = '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
        words.append(text)
    lines, current = [], []
    for word, arg in zip(words, argv):
        if str(arg).startswith("--") and current:
            lines.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        lines.append(" ".join(current))
    return " \\\n    ".join(lines)


def sglang_services_port_problems(endpoints, tcp_texts, user, uid):
    """The active services' ports another owner's socket already listens on (module_utils
    sglang_services.py: tcp_listeners, port_taken_problems): `tcp_texts` the contents of the host's
    /proc/net/tcp and /proc/net/tcp6, `uid` the service user's (None or "": not created yet)."""
    return port_taken_problems(endpoints, tcp_listeners(tcp_texts), user, None if uid in (None, "") else int(uid))
