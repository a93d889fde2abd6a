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
  - Importing SGLang (and torch with it) takes about 20 seconds on 2 CPU cores. With O(stamp), a
    parse whose inputs are unchanged since it last passed is not redone (RV(verified)).
options:
  services:
    description: Service name -> its argument list, as the unit's C(ExecStart=) passes it.
    type: dict
    required: true
  stamp:
    description:
      - A verification stamp file (JSON). When its fingerprint equals the one computed now, the
        result recorded there is returned without importing SGLang (RV(verified) is C(unchanged));
        otherwise the arguments are parsed and, when SGLang accepts them all, the stamp is replaced
        (never in check mode).
      - "The fingerprint, by content (C(module_utils/verified.py)): the venv's C(*.dist-info/RECORD)
        files and the stat (size, mtime, ctime, inode, mode, owner) of every file they list, the
        argument lists, the environment (without sudo's and ssh's per-connection variables) and this
        module's code. An edited SGLang file is always parsed again."
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
    SGLang is imported (reinstall the venv: re-run C(site.yml)); anything else SGLang raises
    (C(unexpected <type>: <message>))."
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
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import verified


class ArgsError(Exception):
    """What the operator must fix (the message says what)."""


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


def parse(services):
    """SGLang's parser on each service's arguments: {'sglang': version, 'services': {name: count}}."""
    with builtin_intern():
        return _parse(services)


def _parse(services):
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
    if errors:
        raise ArgsError("SGLang %s rejects the arguments: %s" % (sglang.__version__, "; ".join(errors)))
    return {"changed": False, "sglang": sglang.__version__, "services": counts}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            services=dict(type="dict", required=True),
            stamp=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    services = module.params["services"]
    bad = sorted(name for name, args in services.items()
                 if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args))
    if bad:
        module.fail_json(msg="services: the arguments of %s are not a list of strings (the sglang_services role "
                             "renders them from the service settings)" % ", ".join(bad))
    try:
        result = verified.run(
            module.params["stamp"],
            lambda: {"check": services, "environment": verified.environment(), "venv": verified.venv_signature(),
                     "code": verified.code_signature(verified, sys.modules[__name__])},
            lambda: parse(services), check_mode=module.check_mode, warn=module.warn)
    except ArgsError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # one line for the operator, not a traceback
        module.fail_json(msg="sglang_server_args: unexpected %s: %s" % (type(exc).__name__, one_line(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
