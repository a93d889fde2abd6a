"""Every role has a README whose variables are exactly its argument spec's options.

Parse rule: in `roles/<role>/README.md`, every Markdown table whose header row's first cell is
`variable` (any case) is a variables table; in each of its body rows, every backticked name in the
first cell (`` `name` ``, letters, digits and `_` only: write `sglang_services_start_limit_burst`,
not `..._start_limit_burst`) is a documented variable. A row may name several (`` `a`, `b` ``).
The documented set must equal the union of the option names of every entry point in
`roles/<role>/meta/argument_specs.yml`, so the docs and the spec cannot drift apart. Tables with
another first header cell (steps, checks, cases) are not read.
"""

import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLES = os.path.join(ROOT, "roles")
NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def roles():
    return sorted(r for r in os.listdir(ROLES) if not r.startswith(("_", ".")) and os.path.isdir(os.path.join(ROLES, r)))


def spec_options(role):
    with open(os.path.join(ROLES, role, "meta", "argument_specs.yml")) as handle:
        specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
    names = set()
    for entry_point in specs.values():
        names.update(((entry_point or {}).get("options") or {}).keys())
    return names


def cells(line):
    """The cells of a Markdown table row (`| a | b |`); an escaped `\\|` stays in its cell."""
    body = line.strip()[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", body)]


def documented_variables(text):
    """The backticked names in the first column of every table headed `variable` (see above)."""
    names = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if (line.startswith("|") and cells(line)[0].lower() == "variable" and i + 1 < len(lines)
                and re.fullmatch(r"\|?[\s:|-]+\|?", lines[i + 1].strip())):
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                names.update(NAME.findall(cells(lines[i])[0]))
                i += 1
            continue
        i += 1
    return names


def test_the_parse_rule():
    text = "\n".join([
        "| step | what |", "| --- | --- |", "| `not_a_variable` | x |", "",
        "| Variable | default | meaning |", "| --- | ---: | --- |",
        "| `a_one`, `a_two` | `x` | `not_this` |", "| `a_three` (and `a_four`) | | |", "",
        "`a_five` in prose is not read",
    ])
    assert documented_variables(text) == {"a_one", "a_two", "a_three", "a_four"}


@pytest.mark.parametrize("role", roles())
def test_role_has_a_readme(role):
    path = os.path.join(ROLES, role, "README.md")
    assert os.path.isfile(path), "role %s has no README.md (roles/%s/README.md)" % (role, role)


@pytest.mark.parametrize("role", roles())
def test_readme_documents_exactly_the_argument_spec(role):
    path = os.path.join(ROLES, role, "README.md")
    if not os.path.isfile(path):
        pytest.fail("role %s has no README.md" % role)
    with open(path) as handle:
        documented = documented_variables(handle.read())
    options = spec_options(role)
    assert documented, "role %s: roles/%s/README.md has no variables table (a table headed `variable`)" % (role, role)
    missing = sorted(options - documented)
    extra = sorted(documented - options)
    assert not missing, "role %s: README.md's variables table lacks %s (in meta/argument_specs.yml)" % (
        role, ", ".join(missing))
    assert not extra, "role %s: README.md's variables table names %s, which meta/argument_specs.yml has not" % (
        role, ", ".join(extra))
