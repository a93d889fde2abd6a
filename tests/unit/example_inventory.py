"""The example inventory's services as the sglang_services role renders them, per GPU group.

inventories/example has two GPU groups under `sglang` (pro6000, b300). For each, the group's
variables (group_vars/sglang.yml, then the group's own file over it, as Ansible's group precedence
has it), merged as roles/sglang_services/tasks/preflight.yml merges them (the built-ins of
vars/main.yml, then sglang_services_common, then the service's own settings; extra_args and env
combined key by key), rendered by the role's own filter (module_utils/sglang_services.py
sglang_service_argv). The environment is what validate.yml passes to the resolution (SGLANG_*,
NCCL_*, HF_HOME, HF_HUB_CACHE), and the compute capabilities the group's sglang_node_gpu_archs.
"""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "inventories", "example")
RESOLVED_ENV = re.compile(r"^(SGLANG_.*|NCCL_.*|HF_HOME|HF_HUB_CACHE)$")


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def group_vars(group):
    """The variables a host of `group` (a child of `sglang`) gets from the example's group_vars."""
    merged = dict(_load(os.path.join(EXAMPLE, "group_vars", "sglang.yml")))
    merged.update(_load(os.path.join(EXAMPLE, "group_vars", "%s.yml" % group)))
    return merged


def example_services():
    """{group: (active service, argv, environment passed to the resolution, compute capabilities)}."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_services import sglang_service_argv

    builtin = _load(os.path.join(ROOT, "roles", "sglang_services", "vars", "main.yml"))["__sglang_services_builtin"]
    groups = sorted(_load(os.path.join(EXAMPLE, "hosts.yml"))["sglang"]["children"])
    services = {}
    for group in groups:
        variables = group_vars(group)
        name = variables["sglang_services_active"]
        common, own = variables.get("sglang_services_common") or {}, variables.get("sglang_services_" + name) or {}
        settings = dict(builtin, **common)
        settings.update(own)
        settings["extra_args"] = dict(common.get("extra_args") or {}, **(own.get("extra_args") or {}))
        settings["env"] = dict(common.get("env") or {}, **(own.get("env") or {}))
        env = {key: str(value) for key, value in settings["env"].items() if RESOLVED_ENV.match(key)}
        services[group] = (name, sglang_service_argv(settings, name), env, [str(cc) for cc in variables["sglang_node_gpu_archs"]])
    return services
