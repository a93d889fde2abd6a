"""Booleans as operators pass them: `-e sglang_venv_rollback=true` gives the string "true", and
ansible-core 2.19 refuses a string where a conditional needs a boolean. Every bool option of every
role (meta/argument_specs.yml) is read through `| bool` wherever a task, template or playbook
uses it in an expression; the preflights' checks (bool_problems, the roles' checks in
plugins/module_utils/role_checks.py) refuse anything else by name.
"""

import glob
import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RAW_EXPRESSION_KEYS = ("when", "that", "failed_when", "changed_when", "until")
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
# A preflight check reads the raw value and names it when it is not a boolean: bool_problems, or a
# role's check over its variables (plugins/module_utils/role_checks.py, tests/unit/plugins/module_utils/test_role_checks.py).
PREFLIGHT_CHECK = re.compile(r"blackwell\.sglang\.(bool_problems|\w+_problems)\b")


def bool_options():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        for entry in specs.values():
            names.update(name for name, spec in entry["options"].items() if spec.get("type") == "bool")
    return sorted(names)


def expressions(node):
    """Every Jinja expression in a loaded playbook/task file: raw conditionals and {{ }} spans."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in RAW_EXPRESSION_KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str):
                        yield item
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)
    elif isinstance(node, str):
        yield from JINJA.findall(node)


def uses():
    """(file, expression) for every expression in the roles' tasks, handlers, vars, templates and the playbooks."""
    found = []
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "roles/*/vars/*.yml", "roles/*/defaults/*.yml",
                    "playbooks/*.yml", "*.yml", "molecule/*/*.yml"):
        for path in glob.glob(os.path.join(ROOT, pattern)):
            with open(path) as handle:
                found += [(os.path.relpath(path, ROOT), text) for text in expressions(yaml.safe_load(handle))]
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "templates", "*.j2")):
        with open(path) as handle:
            found += [(os.path.relpath(path, ROOT), text) for text in JINJA.findall(handle.read())]
    return found


def test_the_roles_have_bool_options_and_use_them():
    names = bool_options()
    assert {"sglang_venv_rollback", "cuda_toolkit_apt_hold", "flashinfer_patch", "sglang_services_start_without_gpus"} <= set(names)
    used = {name for name in names for _path, text in uses() if re.search(r"\b%s\b" % name, text)}
    assert used == set(names)


@pytest.mark.parametrize("name", bool_options())
def test_every_use_of_a_bool_option_goes_through_the_bool_filter(name):
    bare = re.compile(r"(?<!['\"])\b%s\b(?![':\"])(?!\s*\|\s*bool\b)" % name)
    offenders = []
    for path, text in uses():
        if PREFLIGHT_CHECK.search(text):
            continue  # the preflight check itself: {'name': name} | blackwell.sglang.bool_problems (or a role's check)
        if bare.search(text):
            offenders.append("%s: %s" % (path, " ".join(text.split())))
    assert offenders == []
