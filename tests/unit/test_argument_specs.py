"""Every role variable is documented in meta/argument_specs.yml, with the same default."""

import os

import pytest
import yaml

ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "roles")


def roles():
    return sorted(r for r in os.listdir(ROLES) if not r.startswith("_"))


def load(role, *path):
    with open(os.path.join(ROLES, role, *path)) as handle:
        return yaml.safe_load(handle) or {}


@pytest.mark.parametrize("role", roles())
def test_defaults_and_argument_specs_name_the_same_variables(role):
    defaults = load(role, "defaults", "main.yml")
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name, value in defaults.items():
        assert name.startswith(role + "_"), name
        if isinstance(value, str) and "{{" in value:
            continue  # templated defaults are documented in words
        assert options[name].get("default") == value, name


@pytest.mark.parametrize("role", roles())
def test_every_option_has_a_type_and_a_description(role):
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, spec in options.items():
        assert spec.get("type"), name
        assert spec.get("description"), name
