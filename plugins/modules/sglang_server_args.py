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
        settings named C(SGLANG_*), C(HF_HOME) and C(HF_HUB_CACHE); never secrets). Set while that service is
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
    capability <cc> (chosen by <SGLang step>) ... Set <flag> to one of: ...)); a compute capability
    that is not C(M.m); anything else SGLang raises (C(unexpected <type>: <message>))."
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
      a value, as C(ServerArgs.resolved_dict()) gives it) and C(chosen_by) (field -> the SGLang
      resolution step that set it, from the record's declarations, e.g. C(SGLang's _attention_backend_default);
      C(the service's arguments) when the service set it; C(SGLang's default) otherwise).
  returned: when compute_capabilities and resolve are given (also when a resolved backend fails the task)
  type: dict
  sample:
    eagle3:
      "12.0":
        backends: {attention_backend: flashinfer, sampling_backend: flashinfer, moe_runner_backend: auto}
        chosen_by: {attention_backend: "the service's arguments", sampling_backend: "SGLang's _sampling_backend_default",
                    moe_runner_backend: "SGLang's default"}
unresolved:
  description: Service name -> why it was not resolved (its model's config.json is not on the host).
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
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_compat, verified

# While resolving: the model's config comes from the host, never the network.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# Flags whose value is a model directory whose config.json SGLang reads while resolving.
MODEL_FLAGS = ("model_path", "speculative_draft_model_path")
_CC = re.compile(r"^([0-9]{1,2})\.([0-9])$")


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
    with builtin_intern():
        return _parse(services, list(resolve), [compute_capability(cc) for cc in ccs], environments or {}, support or {})


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


def model_configs(namespace):
    """The config.json files SGLang reads while resolving this service: (path, where) of each model
    flag set; `where` is None when the file is on the host (a local directory, or the Hugging Face
    cache for a repository id), else why not."""
    found = []
    for flag in MODEL_FLAGS:
        model = getattr(namespace, flag, None)
        if not model:
            continue
        if os.path.isdir(model) or os.path.isabs(model):
            path = os.path.join(model, "config.json")
            found.append((path, None if os.path.isfile(path) else
                          "the model config %s is not on this host" % path))
            continue
        try:
            from huggingface_hub import try_to_load_from_cache
            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # not a repository id huggingface_hub accepts, or no huggingface_hub
            cached = None
        found.append((cached if isinstance(cached, str) else model, None if isinstance(cached, str) else
                      "the config.json of %s is not in this host's Hugging Face cache" % model))
    return found


@contextlib.contextmanager
def sglang_on(cc):
    """SGLang's view of a GPU of compute capability `cc` ((major, minor)), without one: its own
    platform probes (sglang/srt/utils/common.py, e.g. is_sm120_supported: the CUDA version and the
    device's SM major) asked with SGLang's CUDA check and SM answering for that GPU, installed with
    SGLang's override_platform for every reader; and torch.cuda.get_device_capability, which SGLang
    0.5.23's DeepSeek hooks read directly (arg_groups/overrides.py _dsa_split_backend_resolution)."""
    import torch
    from sglang.srt import runtime_context
    from sglang.srt.utils import common
    major, minor = cc
    sm = major * 10 + minor
    saved = common.is_cuda, common.get_device_sm
    common.is_cuda, common.get_device_sm = (lambda: True), (lambda: sm)
    try:
        facts = {}
        for fact, probe in runtime_context._PLATFORM_PROBES.items():  # pylint: disable=protected-access
            function = getattr(common, probe)
            facts[fact] = getattr(function, "__wrapped__", function)()  # the rule, not its cached answer
    finally:
        common.is_cuda, common.get_device_sm = saved
    facts.update(device_sm=sm, device_capability=(major, minor))
    capability = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    try:
        with runtime_context.override_platform(**facts):
            yield
    finally:
        torch.cuda.get_device_capability = capability


@contextlib.contextmanager
def environment(variables):
    """os.environ with `variables` set, then exactly as it was (SGLang's resolution also sets some)."""
    before = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in variables.items()})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def resolve_one(ServerArgs, namespace, cc, env):
    """One service on one GPU kind: ({field: value} of every resolved *_backend, {field: why})."""
    explicit = namespace.bsg_explicit
    namespace = argparse.Namespace(**{dest: value for dest, value in vars(namespace).items() if dest != "bsg_explicit"})
    if getattr(namespace, "device", None) is None:
        namespace.device = "cuda"  # what SGLang's get_device() answers on an NVIDIA host
    record = ServerArgs.from_cli_args(namespace)
    with environment(dict(env, **OFFLINE)), sglang_on(cc):
        record.resolve_once()
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
    return backends, chosen_by


def resolve_all(version, ServerArgs, namespaces, names, ccs, environments, support):
    resolved, unresolved, refusals = {}, {}, []
    for name in sorted(set(names)):
        if name not in namespaces:
            raise ArgsError("resolve: %s is not one of the services (%s)" % (name, ", ".join(sorted(namespaces))))
        missing = [why for _path, why in model_configs(namespaces[name]) if why]
        if missing:
            unresolved[name] = "; ".join(missing)
            continue
        for cc in ccs:
            label = "%d.%d" % cc
            try:
                backends, chosen_by = resolve_one(ServerArgs, namespaces[name], cc, environments.get(name) or {})
            except OSError as exc:  # a file SGLang could not read (the model's tokenizer or a remote file)
                unresolved[name] = "SGLang could not read what it needs (%s: %s)" % (type(exc).__name__, one_line(exc))
                break
            except (ValueError, AssertionError, NotImplementedError, TypeError, KeyError) as exc:
                refusals.append("SGLang %s refuses sglang-%s on compute capability %s: %s"
                                % (version, name, label, one_line(exc) or type(exc).__name__))
                continue
            resolved.setdefault(name, {})[label] = {"backends": backends, "chosen_by": chosen_by}
    problems = list(refusals)
    for name, by_cc in sorted(resolved.items()):
        for label, entry in sorted(by_cc.items()):
            problems += gpu_compat.resolved_backend_problems(
                "sglang_services_%s" % name, version, label, entry["backends"], entry["chosen_by"],
                (support or {}).get(name) or {})
    if problems:
        raise ArgsError("; ".join(problems), {"resolved": resolved, "unresolved": unresolved})
    return {"resolved": resolved, "unresolved": unresolved}


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
    bad = sorted(name for name, args in services.items()
                 if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args))
    if bad:
        module.fail_json(msg="services: the arguments of %s are not a list of strings (the sglang_services role "
                             "renders them from the service settings)" % ", ".join(bad))

    def inputs():
        # The config.json of every directory a resolved service's arguments name (model, draft model):
        # a model replaced at its path is resolved again.
        configs = {}
        for name in params["resolve"] if params["compute_capabilities"] else ():
            configs[name] = [(arg, verified.stat_line(os.path.join(arg, "config.json")))
                             for arg in services.get(name) or [] if arg.startswith("/")]
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
    except ArgsError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    except Exception as exc:  # one line for the operator, not a traceback
        module.fail_json(msg="sglang_server_args: unexpected %s: %s" % (type(exc).__name__, one_line(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
