"""Each module takes exactly the options its documentation gives (with the options of its doc
fragments, as `ansible-doc` shows them), with the documented type,
elements, choices, default and required: what an operator reads is what main() accepts.
(ansible-test sanity's validate-modules checks the same, outside the unit tests and so outside the
mutation run.) The argument spec is read by calling main() with AnsibleModule replaced by a recorder."""

import glob
import importlib
import os

import pytest

import yaml

# Every module of plugins/modules/ but fleet_report, documentation only: its action plugin runs on the
# controller (plugins/action/).
MODULES = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules", "*.py")) if not path.endswith("/fleet_report.py"))
# What AnsibleModule(add_file_common_args=True) adds itself (ansible.builtin.files doc fragment).
FILE_COMMON = {"mode", "owner", "group", "seuser", "serole", "selevel", "setype", "unsafe_writes", "attributes"}


class Recorded(Exception):
    pass


def argument_spec(module, monkeypatch):
    taken = {}

    def recorder(**kwargs):
        taken.update(kwargs)
        raise Recorded()
    monkeypatch.setattr(module, "AnsibleModule", recorder)
    with pytest.raises(Recorded):
        module.main()
    return taken


def documentation(module):
    """The module's DOCUMENTATION with the options of its fragments merged in (ansible.builtin.* from
    ansible-core, blackwell.sglang.* from this collection; the options of the module win)."""
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = {}
    for fragment in doc.get("extends_documentation_fragment") or []:
        collection, name = fragment.rsplit(".", 1)
        if collection == "ansible.builtin.action_common_attributes" or name in ("action_common_attributes", "facts"):
            continue  # attributes only
        package = ("ansible.plugins.doc_fragments." if collection == "ansible.builtin"
                   else "ansible_collections.blackwell.sglang.plugins.doc_fragments.")
        text = importlib.import_module(package + name).ModuleDocFragment.DOCUMENTATION
        options.update(yaml.safe_load(text).get("options") or {})
    options.update(doc.get("options") or {})
    doc["options"] = options
    return doc


def normal(spec):
    """The fields that decide what a value may be, with ansible-core's defaults filled in (and those
    of the suboptions, whose key is `options` in main() and `suboptions` in the documentation)."""
    sub = spec.get("options", spec.get("suboptions"))
    return {"type": spec.get("type", "str"), "required": bool(spec.get("required", False)),
            "default": spec.get("default"), "choices": spec.get("choices"), "elements": spec.get("elements"),
            "options": None if sub is None else {key: normal(value) for key, value in sub.items()}}


@pytest.mark.parametrize("name", MODULES)
def test_the_argument_spec_is_the_documented_one(name, monkeypatch):
    module = importlib.import_module("ansible_collections.blackwell.sglang.plugins.modules." + name)
    doc = documentation(module)
    documented = dict(doc.get("options") or {})
    taken = argument_spec(module, monkeypatch)
    spec = taken["argument_spec"]
    if taken.get("add_file_common_args"):
        documented = {key: value for key, value in documented.items() if key not in FILE_COMMON}
    assert sorted(spec) == sorted(documented)
    for option, entry in spec.items():
        got, want = normal(entry), normal(documented[option])
        assert got == want, "%s option %s: %r in main(), %r in the documentation" % (name, option, got, want)
    # Check mode as the documentation's attributes say.
    assert taken.get("supports_check_mode", False) is (doc["attributes"]["check_mode"]["support"] != "none")


def test_every_module_is_compared():
    assert len(MODULES) >= 9 and "owned_directories" in MODULES and "fleet_report" not in MODULES


def test_the_fragments_are_read():
    """The merge above is not vacuous: the env fragment's options and ansible.builtin.files' reach it."""
    from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_jit_cache, gateway_manifest
    assert {"env_file", "workspace_base"} <= set(documentation(flashinfer_jit_cache)["options"])
    assert FILE_COMMON <= set(documentation(gateway_manifest)["options"])
