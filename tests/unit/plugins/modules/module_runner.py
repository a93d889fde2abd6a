"""Run a module's main() as Ansible would call it, in this process: the one helper the module tests share."""

import json

import pytest

from ansible.module_utils.common import warnings
from ansible.module_utils.testing import patch_module_args


def run_module(main, capsys, args, check_mode=False, diff=False):
    """main() with `args` (plus check/diff mode); the module's JSON result with its exit code as `_rc`."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    # A module's process starts with no warnings: those of the modules run before in this process are not its own.
    warnings._global_warnings.clear()
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exit_info:
            main()
    result = json.loads(capsys.readouterr().out)
    result["_rc"] = exit_info.value.code
    return result


def warnings_of(result):
    """The module's warnings as text: ansible-core 2.19 sends structured events, older releases strings."""
    return [w if isinstance(w, str) else w["event"]["msg"] for w in result.get("warnings", [])]
