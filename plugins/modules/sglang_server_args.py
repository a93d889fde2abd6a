#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_args
short_description: Parse SGLang services' launch arguments with the installed SGLang's own parser
version_added: 0.2.0
author: blackwell.sglang developers (!UNKNOWN)
description:
  - Builds the installed SGLang's own command-line parser (C(sglang.srt.server_args.ServerArgs.add_cli_args)
    on an C(argparse) parser, as C(python -m sglang.launch_server) does) and parses each service's
    argument list with it, without touching a GPU. Also resolves C(--speculative-algorithm) with
    SGLang's own C(SpeculativeAlgorithm.from_string) (C(sglang/srt/speculative/spec_info.py)).
  - Must run with the SGLang venv's interpreter (C(ansible_python_interpreter)); reads only.
  - "With O(compute_capabilities), each service named in O(resolve) is then resolved as the server
    resolves it before it starts (C(ServerArgs.resolve_once), C(sglang/srt/arg_groups/pipeline.py)),
    for each compute capability, under SGLang's own C(override_platform) (C(sglang/srt/runtime_context.py))
    with the platform facts SGLang's own probes (C(sglang/srt/utils/common.py)) give for that GPU, and
    C(torch.cuda.get_device_capability) answering it (SGLang 0.5.23's DeepSeek hooks read it directly).
    No GPU is touched, so a group's GPUs can be resolved on any host of it. The backends SGLang picks
    (every resolved C(*_backend) field, RV(resolved)) are checked against the backend table of
    C(plugins/module_utils/gpu_compat.py); a backend that cannot run there fails the task, naming the
    backend, the SGLang step that chose it and the flag that fixes it."
  - The model's C(config.json) (and the draft model's) is read from the host, a local directory or the
    service user's Hugging Face cache, never downloaded (C(HF_HUB_OFFLINE=1) while resolving). A
    service whose config is not there is not resolved (RV(unresolved), with the reason).
  - Importing SGLang (and torch with it) takes about 20 seconds on 2 CPU cores; a resolution about 1
    second more per service and compute capability. With O(stamp), a parse whose inputs are unchanged
    since it last passed is not redone (RV(verified)).
options:
  services:
    description: Service name -> its argument list, as the unit's C(ExecStart=) passes it.
    type: dict
    required: true
  compute_capabilities:
    description:
      - The compute capabilities (C(M.m), e.g. C(12.0)) of the GPUs the services run on; each service
        of O(resolve) is resolved for each. Empty (the default) parses only.
    type: list
    elements: str
    default: []
  resolve:
    description: The services (names of O(services)) to resolve; the role passes the active ones.
    type: list
    elements: str
    default: []
  environments:
    description:
      - Service name -> environment variables the service runs with (the role passes those of its C(env)
        settings named C(SGLANG_*), C(NCCL_*), C(HF_HOME) and C(HF_HUB_CACHE); never secrets). Set while that service is
        resolved (SGLang reads some of its choices from C(SGLANG_*) variables), then removed. Never returned.
    type: dict
    default: {}
  backend_support:
    description:
      - Service name -> that service's C(attention_backend_support) (backend -> compute capabilities),
        which replaces the table's row of that backend for the service's attention fields.
    type: dict
    default: {}
  stamp:
    description:
      - A verification stamp file (JSON). When its fingerprint equals the one computed now, the
        result recorded there is returned without importing SGLang (RV(verified) is C(unchanged));
        otherwise the arguments are parsed and, when SGLang accepts them all, the stamp is replaced
        (never in check mode).
      - "The fingerprint, by content (C(module_utils/verified.py)): the venv's C(*.dist-info/RECORD)
        files and the stat (size, mtime, ctime, inode, mode, owner) of every file they list, the
        argument lists, the compute capabilities, environments and backend support, the stat of the
        C(config.json) in every absolute path a resolved service's arguments name (its model and draft
        model), the environment (without sudo's and
        ssh's per-connection variables) and this module's code. An edited SGLang file is always
        parsed again."
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Parses as in a normal run (it changes nothing); never writes O(stamp).
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - "Failure modes, one line each - SGLang rejects a service's arguments
    (C(SGLang <version> rejects the arguments: sglang-<service>: <SGLang's own message>), every bad
    service named); an argument list that is not a list of strings; SGLang not importable by this
    interpreter (run it with the venv's python); torch or a CUDA library that fails to load while
    SGLang is imported (reinstall the venv: re-run C(site.yml)); SGLang refuses a service's settings
    for a GPU while resolving (C(SGLang <version> refuses sglang-<service> on compute capability
    <cc>: <SGLang's own message>)); a resolved backend the table says cannot run on a compute
    capability (C(sglang_services_<service>: SGLang <version> resolves <field> <backend> on compute
    capability <cc> (chosen by <SGLang step>) ... Set <flag> to one of: ...)); an C(NCCL_*) variable of
    the service's environment that SGLang's launcher sets to another value for its arguments
    (C(sglang_services_<service>: env NCCL_NVLS_ENABLE=0, but SGLang <version> sets NCCL_NVLS_ENABLE=1
    when it starts with the service's arguments (--enable-nccl-nvls; ...))); a compute capability
    that is not C(M.m); anything else SGLang raises (C(unexpected <type>: <message>))."
  - "Exact on a host with GPUs of the compute capability resolved. On a host without GPUs (a lab node, a
    group checked from elsewhere) the few SGLang 0.5.23 steps that call a platform probe directly rather
    than through C(get_platform()) (MegaMoE, DeepSeek-V4, Qwen3-VL specifics, the GPU memory heuristics)
    see no GPU; the backends of attention, DSA, MoE runner and sampling come through C(get_platform())
    and C(torch.cuda.get_device_capability) and are exact."
  - "Not a failure: a service whose model config is not on the host is returned in RV(unresolved)
    (the role warns); C(auto) values (e.g. C(moe_runner_backend: auto)) are decided when the model
    loads, after this resolution, and are not checked."
seealso:
  - name: SGLang server arguments
    description: The flags C(python -m sglang.launch_server) takes.
    link: https://docs.sglang.ai/advanced_features/server_arguments.html
"""

EXAMPLES = r"""
- name: SGLang accepts every service's arguments
  blackwell.sglang.sglang_server_args:
    services:
      eagle3: [--model-path, /models/Qwen3-8B, --speculative-algorithm, EAGLE3]
    stamp: /opt/sglang/current/.verified/sglang-server-args.json
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python

- name: The backends SGLang picks for a DeepSeek-V3.2 service on RTX PRO 6000 GPUs
  blackwell.sglang.sglang_server_args:
    services:
      dsa: [--model-path, /models/DeepSeek-V3.2, --tp-size, "8"]
    resolve: [dsa]
    compute_capabilities: ["12.0"]
  become: true
  become_user: sglang
  vars:
    ansible_python_interpreter: /opt/sglang/current/bin/python
  # Fails: sglang_services_dsa: SGLang 0.5.23 resolves dsa_decode_backend trtllm on compute capability
  # 12.0 (chosen by SGLang's _dsa_split_backend_resolution), which runs only on compute capability
  # 10.x (...). Set extra_args dsa-decode-backend to one of: tilelang
"""

RETURN = r"""
sglang:
  description: The installed SGLang's version (C(sglang.__version__)).
  returned: success
  type: str
  sample: 0.5.23
services:
  description: Service name -> the number of arguments SGLang parsed.
  returned: success
  type: dict
  sample: {eagle3: 14}
resolved:
  description:
    - Service name -> compute capability -> C(backends) (every C(*_backend) field SGLang resolved to
      a value, as C(ServerArgs.resolved_dict()) gives it), C(nccl_environment) (the C(NCCL_*) variables the
      server runs with - its environment, then what SGLang's launcher sets from the resolved arguments,
      C(sglang/srt/entrypoints/engine.py) C(_set_envs_and_config); V(null) where SGLang has no such step)
      and C(chosen_by) (field -> the SGLang
      resolution step that set it, from the record's declarations, e.g. C(SGLang's _attention_backend_default);
      C(the service's arguments) when the service set it; C(SGLang's default) otherwise).
  returned: when compute_capabilities and resolve are given (also when a resolved backend fails the task)
  type: dict
  sample:
    eagle3:
      "12.0":
        backends: {attention_backend: flashinfer, sampling_backend: flashinfer, moe_runner_backend: auto}
        nccl_environment: {NCCL_CUMEM_ENABLE: "0", NCCL_NVLS_ENABLE: "0"}
        chosen_by: {attention_backend: "the service's arguments", sampling_backend: "SGLang's _sampling_backend_default",
                    moe_runner_backend: "SGLang's default"}
unresolved:
  description:
    - Service name -> why it was not resolved - its model's config.json is not on the host (resolved again
      once it is), or SGLang could not read a file it needs (a tokenizer, a chat template; then no stamp
      is kept and the next run resolves again).
  returned: when compute_capabilities and resolve are given
  type: dict
  sample: {eagle3: "the model config /models/Qwen3-8B/config.json is not on this host"}
verified:
  description: C(checked) when SGLang parsed the arguments in this run, C(unchanged) when O(stamp) proved the inputs unchanged.
  returned: when stamp is given
  type: str
  sample: unchanged
verified_at:
  description: When the parse that the stamp records ran (UTC, ISO 8601).
  returned: when verified is unchanged
  type: str
  sample: "2026-12-02T17:40:12Z"
"""

import argparse
import contextlib
import os
import re
import signal
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_compat, verified

# While resolving: the model's config comes from the host, never the network.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# Flags whose value is a model directory whose config.json SGLang reads while resolving.
MODEL_FLAGS = ("model_path", "speculative_draft_model_path")
_CC = re.compile(r"^([0-9]{1,2})\.([0-9])$")
# A Hugging Face repository id (owner/name) among a service's arguments.
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ArgsError(Exception):
    """What the operator must fix (the message says what); `result`: what was resolved before."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result or {}


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ArgsError(message)


def one_line(exc):
    return " ".join(str(exc).split())


@contextlib.contextmanager
def builtin_intern():
    """The builtin sys.intern while SGLang is imported and parses. ansible-core (2.19) replaces
    sys.intern in a module's process on Pythons that refuse str subclasses there (its SysInternPatch,
    which keeps the builtin as ``unpatched_implementation``); torch._dynamo, which SGLang imports,
    registers a polyfill for sys.intern and refuses anything but a function ("substitute_in_graph
    expects a function"), so SGLang cannot be imported under the patch."""
    patched = sys.intern
    builtin = getattr(patched, "unpatched_implementation", None)
    if builtin is None:
        yield
        return
    sys.intern = builtin
    try:
        yield
    finally:
        sys.intern = patched


def compute_capability(text):
    """'12.0' -> (12, 0); ArgsError for anything else."""
    match = _CC.match(str(text))
    if not match:
        raise ArgsError("compute_capabilities: %r is not a compute capability like 12.0" % (text,))
    return int(match.group(1)), int(match.group(2))


def parse(services, resolve=(), ccs=(), environments=None, support=None):
    """SGLang's parser on each service's arguments, then SGLang's resolution of those in `resolve`
    for each compute capability: {'sglang': version, 'services': {name: count}, 'resolved': ...}."""
    ccs = [compute_capability(cc) for cc in ccs]
    if resolve and ccs:
        # huggingface_hub (imported with SGLang) reads these once, at import: set before it.
        os.environ.update(OFFLINE)
    with builtin_intern():
        return _parse(services, list(resolve), ccs, environments or {}, support or {})


def _parse(services, resolve, ccs, environments, support):
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except ImportError as exc:
        raise ArgsError("cannot import SGLang's server arguments (%s); run with the SGLang venv's python" % exc)
    except (OSError, RuntimeError) as exc:  # torch or a CUDA library it loads while SGLang imports
        raise ArgsError("cannot import SGLang's server arguments (%s: %s): reinstall the venv (re-run site.yml)"
                        % (type(exc).__name__, one_line(exc)))
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except ImportError:  # older layout: argparse alone decides
        SpeculativeAlgorithm = None
    errors = []
    counts = {}
    namespaces = {}
    for name, args in sorted(services.items()):
        parser = Parser(prog="sglang-%s (python -m sglang.launch_server)" % name)
        ServerArgs.add_cli_args(parser)
        try:
            namespace = parser.parse_args(args)
            algorithm = getattr(namespace, "speculative_algorithm", None)
            if SpeculativeAlgorithm is not None and algorithm:
                try:
                    SpeculativeAlgorithm.from_string(algorithm)
                except (KeyError, ValueError) as exc:
                    raise ArgsError("--speculative-algorithm %s: %s" % (algorithm, exc))
        except ArgsError as exc:
            errors.append("sglang-%s: %s" % (name, exc))
            continue
        counts[name] = len(args)
        # The fields the service's arguments set (to a value other than SGLang's default).
        namespace.bsg_explicit = frozenset(dest for dest, value in vars(namespace).items()
                                           if value != parser.get_default(dest))
        namespaces[name] = namespace
    if errors:
        raise ArgsError("SGLang %s rejects the arguments: %s" % (sglang.__version__, "; ".join(errors)))
    result = {"changed": False, "sglang": sglang.__version__, "services": counts}
    if resolve and ccs:
        result.update(resolve_all(sglang.__version__, ServerArgs, namespaces, resolve, ccs, environments, support))
    return result


def hf_cache_dir(env):
    """The Hugging Face hub cache of a service's environment, by huggingface_hub's own rule
    (HF_HUB_CACHE, else HF_HOME/hub); None: huggingface_hub's default."""
    if env.get("HF_HUB_CACHE"):
        return str(env["HF_HUB_CACHE"])
    return os.path.join(str(env["HF_HOME"]), "hub") if env.get("HF_HOME") else None


def cached_config(model, env):
    """The config.json of a repository id in the service's Hugging Face cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(model, "config.json", cache_dir=hf_cache_dir(env))
    except Exception:  # not a repository id huggingface_hub accepts, or no huggingface_hub
        return None
    return found if isinstance(found, str) else None


def model_configs(namespace, env):
    """The models SGLang reads while resolving this service: [(flag, config.json path, local model
    directory or None, why not when None)]. A repository id is read from the service's Hugging Face
    cache (its snapshot directory stands for it while resolving: nothing is downloaded)."""
    found = []
    for flag in MODEL_FLAGS:
        model = getattr(namespace, flag, None)
        if not model:
            continue
        if os.path.isabs(model) or os.path.isdir(model):
            path = os.path.join(model, "config.json")
            found.append((flag, path, model, None) if os.path.isfile(path) else
                         (flag, path, None, "the model config %s is not on this host" % path))
            continue
        cached = cached_config(model, env)
        found.append((flag, cached, os.path.dirname(cached), None) if cached else
                     (flag, model, None, "the config.json of %s is not in the service user's Hugging Face cache "
                                         "(%s)" % (model, hf_cache_dir(env) or "huggingface_hub's default")))
    return found


@contextlib.contextmanager
def sglang_on(cc):
    """SGLang's view of a GPU of compute capability `cc` ((major, minor)) while resolving: its platform
    facts from its own probes (sglang/srt/utils/common.py, e.g. is_sm120_supported: the CUDA version and
    the device's SM major) asked with SGLang's CUDA check and SM answering for that GPU, installed with
    SGLang's override_platform for every reader; its SM probe answering that GPU and the probes' caches
    cleared, so the steps that call a probe directly ask again (on a host without GPUs their CUDA check
    still says no: see the notes); and torch.cuda.get_device_capability, which SGLang 0.5.23's DeepSeek
    hooks read directly (arg_groups/overrides.py _dsa_split_backend_resolution)."""
    import torch
    from sglang.srt import runtime_context
    from sglang.srt.utils import common
    major, minor = cc
    sm = major * 10 + minor
    probes = [getattr(common, probe) for probe in runtime_context._PLATFORM_PROBES.values()]  # pylint: disable=protected-access

    def clear():
        for probe in probes:
            getattr(probe, "cache_clear", lambda: None)()

    real_cuda, real_sm = common.is_cuda, common.get_device_sm
    capability = torch.cuda.get_device_capability
    try:
        facts = {}
        common.is_cuda, common.get_device_sm = (lambda: True), (lambda: sm)
        try:
            for fact, probe in runtime_context._PLATFORM_PROBES.items():  # pylint: disable=protected-access
                function = getattr(common, probe)
                facts[fact] = getattr(function, "__wrapped__", function)()  # the rule, not its cached answer
        finally:
            common.is_cuda = real_cuda
        facts.update(device_sm=sm, device_capability=(major, minor))
        torch.cuda.get_device_capability = lambda device=None: (major, minor)
        clear()
        with runtime_context.override_platform(**facts):
            yield
    finally:
        common.get_device_sm = real_sm
        torch.cuda.get_device_capability = capability
        clear()


@contextlib.contextmanager
def environment(variables):
    """os.environ with `variables` set, then exactly as it was (SGLang's resolution also sets some)."""
    with verified.given_environment():
        os.environ.update({str(k): str(v) for k, v in variables.items()})
        yield


def launcher():
    """SGLang's launcher module (sglang/srt/entrypoints/engine.py), imported once before any GPU kind
    is resolved; None where this SGLang has no such module."""
    try:
        from sglang.srt.entrypoints import engine
    except ModuleNotFoundError as exc:
        if exc.name in ("sglang.srt.entrypoints", "sglang.srt.entrypoints.engine"):
            return None
        raise ArgsError("cannot import SGLang's launcher (sglang.srt.entrypoints.engine: %s): reinstall the venv "
                        "(re-run site.yml)" % one_line(exc))
    except (ImportError, OSError, RuntimeError) as exc:
        raise ArgsError("cannot import SGLang's launcher (sglang.srt.entrypoints.engine: %s: %s): reinstall the venv "
                        "(re-run site.yml)" % (type(exc).__name__, one_line(exc)))
    return engine


def launch_environment(engine, record):
    """The NCCL variables the server runs with: SGLang's launcher sets some from the resolved
    arguments before it starts its workers (sglang/srt/entrypoints/engine.py _set_envs_and_config:
    NCCL_NVLS_ENABLE from --enable-nccl-nvls / --enable-symm-mem, NCCL_CUMEM_ENABLE, ...), over what the
    environment says. Its own function, called here with its process-wide side effects (the SIGQUIT
    handler, the open-files limit, a Prometheus directory) held back; None where it has none."""
    setter = getattr(engine, "_set_envs_and_config", None) if engine is not None else None
    if setter is None:
        return None
    held = {name: getattr(engine, name) for name in ("set_ulimit", "set_prometheus_multiproc_dir") if hasattr(engine, name)}
    handler = signal.getsignal(signal.SIGQUIT)
    for name in held:
        setattr(engine, name, lambda *args, **kwargs: None)
    try:
        setter(record)
    finally:
        for name, function in held.items():
            setattr(engine, name, function)
        signal.signal(signal.SIGQUIT, handler)
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith("NCCL_")}


_UNSET = object()


class Refused(Exception):
    """SGLang's resolution refused the service on that GPU (its own message)."""


def resolve_one(ServerArgs, engine, namespace, cc, env, local):
    """One service on one GPU kind: ({field: value} of every resolved *_backend, {field: why},
    {NCCL variable: value} the server runs with, or None; the speculative algorithm). `local`:
    {model flag: local directory} standing for a repository id. Refused: SGLang's own refusal."""
    explicit = namespace.bsg_explicit
    namespace = argparse.Namespace(**{dest: value for dest, value in vars(namespace).items() if dest != "bsg_explicit"})
    namespace.__dict__.update(local)
    if getattr(namespace, "device", None) is None:
        namespace.device = "cuda"  # what SGLang's get_device() answers on an NVIDIA host
    record = ServerArgs.from_cli_args(namespace)
    with environment(dict(env, **OFFLINE)), sglang_on(cc):
        try:
            record.resolve_once()
        except (ValueError, AssertionError, NotImplementedError) as exc:
            raise Refused(one_line(exc) or type(exc).__name__)
        nccl = launch_environment(engine, record)
    resolved = record.resolved_dict()
    steps = {}
    for step, values in getattr(record, "_resolved_overrides", None) or ():
        for field in values:
            steps[field] = step
    backends, chosen_by = {}, {}
    for field, value in sorted(resolved.items()):
        if not field.endswith("_backend") or value in (None, "") or not isinstance(value, (str, int, float, bool)):
            continue
        backends[field] = value
        chosen_by[field] = ("SGLang's %s" % steps[field] if field in steps
                            else "the service's arguments" if field in explicit else "SGLang's default")
    return backends, chosen_by, nccl, resolved.get("speculative_algorithm")


def nccl_problems(where, version, env, nccl, explicit):
    """An NCCL variable the service's env sets that SGLang's launcher sets otherwise: the service
    would not run with what its env file says (and the GPU validation would probe the other)."""
    if nccl is None:
        return []
    flags = ", ".join("--" + dest.replace("_", "-") for dest in sorted(explicit)
                      if "nccl" in dest or "symm_mem" in dest or "all_reduce" in dest) or "its defaults"
    return ["%s: env %s=%s, but SGLang %s sets %s=%s when it starts with the service's arguments (%s; "
            "sglang/srt/entrypoints/engine.py _set_envs_and_config): the server would not run with what its env "
            "says. Remove the env setting or the flag" % (where, name, value, version, name, nccl.get(name, "(unset)"),
                                                          flags)
            for name, value in sorted(env.items())
            if name.startswith("NCCL_") and nccl.get(name) != str(value)]


def resolve_all(version, ServerArgs, namespaces, names, ccs, environments, support):
    resolved, unresolved, refusals = {}, {}, []
    retry = False  # an unresolved service whose cause the stamp's fingerprint does not see
    engine = _UNSET  # SGLang's launcher, imported (about 10 s) before the first service that resolves
    for name in sorted(set(names)):
        if name not in namespaces:
            raise ArgsError("resolve: %s is not one of the services (%s)" % (name, ", ".join(sorted(namespaces))))
        env = environments.get(name) or {}
        models = model_configs(namespaces[name], env)
        missing = [why for _flag, _path, _local, why in models if why]
        if missing:
            unresolved[name] = "; ".join(missing)
            continue
        local = {flag: directory for flag, _path, directory, _why in models if directory != getattr(namespaces[name], flag)}
        if engine is _UNSET:
            engine = launcher()
        mine = []  # this service's refusals: dropped with it when it turns out unreadable
        for cc in ccs:
            label = "%d.%d" % cc
            try:
                backends, chosen_by, nccl, speculative = resolve_one(ServerArgs, engine, namespaces[name], cc, env, local)
            except Refused as exc:
                mine.append("SGLang %s refuses sglang-%s on compute capability %s: %s" % (version, name, label, exc))
                continue
            except OSError as exc:  # a file SGLang could not read (a tokenizer, a chat template)
                unresolved[name] = "SGLang could not read what it needs (%s: %s)" % (type(exc).__name__, one_line(exc))
                resolved.pop(name, None)
                mine = []
                retry = True
                break
            resolved.setdefault(name, {})[label] = {"backends": backends, "chosen_by": chosen_by, "nccl_environment": nccl,
                                                    "speculative_algorithm": speculative}
            mine += nccl_problems("sglang_services_%s" % name, version, env, nccl, namespaces[name].bsg_explicit)
        refusals += mine
    problems = list(dict.fromkeys(refusals))  # an NCCL contradiction is the same on every GPU kind
    for name, by_cc in sorted(resolved.items()):
        for label, entry in sorted(by_cc.items()):
            problems += gpu_compat.resolved_backend_problems(
                "sglang_services_%s" % name, version, label, entry["backends"], entry["chosen_by"],
                (support or {}).get(name) or {}, speculative=bool(entry["speculative_algorithm"]))
    if problems:
        raise ArgsError("; ".join(problems), {"resolved": resolved, "unresolved": unresolved})
    result = {"resolved": resolved, "unresolved": unresolved}
    if retry:
        result["retry"] = True
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            services=dict(type="dict", required=True),
            compute_capabilities=dict(type="list", elements="str", default=[]),
            resolve=dict(type="list", elements="str", default=[]),
            environments=dict(type="dict", default={}, no_log=False),
            backend_support=dict(type="dict", default={}),
            stamp=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    services = params["services"]
    if params["resolve"] and params["compute_capabilities"]:
        # huggingface_hub reads these once, at import (the fingerprint below may import it first).
        os.environ.update(OFFLINE)
    bad = sorted(name for name, args in services.items()
                 if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args))
    if bad:
        module.fail_json(msg="services: the arguments of %s are not a list of strings (the sglang_services role "
                             "renders them from the service settings)" % ", ".join(bad))

    def inputs():
        # The config.json of every directory a resolved service's arguments name (model, draft model),
        # and of every repository id in its Hugging Face cache: a model that arrives, or is replaced,
        # is resolved again.
        configs = {}
        for name in params["resolve"] if params["compute_capabilities"] else ():
            env = params["environments"].get(name) or {}
            configs[name] = [(arg, verified.stat_line(os.path.join(arg, "config.json") if arg.startswith("/")
                                                      else cached_config(arg, env) or "/nonexistent"))
                             for arg in services.get(name) or [] if arg.startswith("/") or _REPO_ID.match(arg)]
        return {"check": services, "resolve": params["resolve"], "compute_capabilities": params["compute_capabilities"],
                "environments": params["environments"], "backend_support": params["backend_support"],
                "model_configs": configs, "environment": verified.environment(), "venv": verified.venv_signature(),
                "code": verified.code_signature(verified, gpu_compat, sys.modules[__name__])}

    try:
        result = verified.run(
            params["stamp"], inputs,
            lambda: parse(services, params["resolve"], params["compute_capabilities"], params["environments"],
                          params["backend_support"]),
            check_mode=module.check_mode, warn=module.warn)
        if result.pop("retry", False) and params["stamp"] and not module.check_mode:
            verified.Stamp(params["stamp"]).remove()  # what was unreadable is tried again next run
    except ArgsError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    except Exception as exc:  # one line for the operator, not a traceback
        module.fail_json(msg="sglang_server_args: unexpected %s: %s" % (type(exc).__name__, one_line(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
