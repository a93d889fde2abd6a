"""Every filter is documented as ansible-core documents its own: plugins/filter/<name>.yml beside the
plugin file, with DOCUMENTATION, EXAMPLES and RETURN (ansible-doc -t filter blackwell.sglang.<name>).
A new filter without its file fails here, and so does a file whose filter is gone or whose options
are not the function's arguments."""

import glob
import importlib
import inspect
import os

import pytest
import yaml

FILTER_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter"))


def filters():
    """{name: function} of every FilterModule in plugins/filter/*.py."""
    found = {}
    for path in sorted(glob.glob(os.path.join(FILTER_DIR, "*.py"))):
        module = importlib.import_module("ansible_collections.blackwell.sglang.plugins.filter." + os.path.basename(path)[:-3])
        for name, function in module.FilterModule().filters().items():
            assert name not in found, "filter %s is defined twice" % name
            found[name] = function
    return found


FILTERS = filters()
DOC_FILES = sorted(os.path.basename(path)[:-4] for path in glob.glob(os.path.join(FILTER_DIR, "*.yml")))


def load(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as handle:
        return yaml.safe_load(handle)


def test_there_are_filters_and_doc_files():
    assert len(FILTERS) >= 40 and len(DOC_FILES) >= 40


def test_no_doc_file_names_a_filter_that_does_not_exist():
    assert sorted(set(DOC_FILES) - set(FILTERS)) == []


def test_the_filters_are_the_doc_files_when_the_plugins_are_read_now():
    """FILTERS is read when the tests are collected; the filter plugins' entries read as a test runs
    (as `ansible-playbook` reads them) name the same filters."""
    assert sorted(filters()) == DOC_FILES


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_every_filter_has_its_doc_file(name):
    assert name in DOC_FILES, "plugins/filter/%s.yml is missing (DOCUMENTATION, EXAMPLES, RETURN)" % name
    doc = load(name)
    assert sorted(doc) == ["DOCUMENTATION", "EXAMPLES", "RETURN"]
    documentation = doc["DOCUMENTATION"]
    assert documentation["name"] == name
    assert str(documentation["version_added"]) and documentation["short_description"] and documentation["description"]
    assert "_input" in documentation["options"] and all("type" in option for option in documentation["options"].values())
    assert doc["EXAMPLES"].strip() and "blackwell.sglang.%s" % name in doc["EXAMPLES"]
    assert doc["RETURN"]["_value"]["type"] and doc["RETURN"]["_value"]["description"]


@pytest.mark.parametrize("name", sorted(set(FILTERS) & set(DOC_FILES)))
def test_the_options_are_the_functions_arguments(name):
    """The input is the first argument; every other argument is an option of that name, required when
    it has no default; `positional` names them in order."""
    documentation = load(name)["DOCUMENTATION"]
    parameters = list(inspect.signature(FILTERS[name]).parameters.values())[1:]
    options = {key: value for key, value in documentation["options"].items() if key != "_input"}
    assert sorted(options) == sorted(p.name for p in parameters)
    for parameter in parameters:
        required = parameter.default is inspect.Parameter.empty
        assert bool(options[parameter.name].get("required")) is required, parameter.name
    positional = [item.strip() for item in documentation.get("positional", "").split(",") if item.strip()]
    assert positional == [p.name for p in parameters][:len(positional)]
    assert all(p.name in positional for p in parameters if p.default is inspect.Parameter.empty)
