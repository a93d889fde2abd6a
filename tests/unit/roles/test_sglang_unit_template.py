"""The sglang_services unit template as the role renders it (ansible.builtin.template on localhost,
the role's defaults and the facts its preflight and GPU validation set): a service whose custom
all-reduce the role disables (fact sglang_services_all_reduce, add_flag) gets
--disable-custom-all-reduce at the end of ExecStart= and the reason above it; the others do not.
The rule itself: tests/unit/plugins/module_utils/test_role_checks.py and test_gpu_compat.py."""

import json
import os
import subprocess

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TEMPLATE = os.path.join(ROOT, "roles", "sglang_services", "templates", "sglang.service.j2")


def render(tmp_path, name, all_reduce):
    variables = {}
    for role in ("sglang_node", "sglang_services"):  # the services' defaults name the node's
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
            variables.update(yaml.safe_load(handle))
    with open(os.path.join(ROOT, "roles", "sglang_services", "vars", "main.yml"), encoding="utf-8") as handle:
        builtin = yaml.safe_load(handle)["__sglang_services_builtin"]  # the settings every service starts from
    variables.update({
        "sglang_services_venv": "/opt/sglang/current", "sglang_services_flashinfer_env_file": "/etc/sglang/flashinfer.env",
        "sglang_services_venv_env_name": "venv.env", "sglang_services_prewarm_modules": ["sampling"],
        "sglang_services_nvidia_modprobe": "", "sglang_services_all_reduce": all_reduce,
        "__sglang_services_service": name,
        "__sglang_services_settings": {name: dict(builtin, model_path="/models/Qwen3-8B")},
        "__sglang_services_catalog": [{"name": name, "label": "EAGLE-3"}],
        "__sglang_services_conflicts": {name: []},
        "__sglang_services_argv": {name: ["--model-path", "/models/Qwen3-8B", "--tp-size", "2"]},
        "__sglang_services_prewarm": {"command": "/opt/sglang/lib/prewarm.py"},
        "__sglang_services_modprobe": {"stat": {"exists": False}},
    })
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    dest = tmp_path / ("%s.service" % name)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run(["ansible", "localhost", "-c", "local", "-m", "ansible.builtin.template",
                           "-a", "src=%s dest=%s" % (TEMPLATE, dest), "-e", "@%s" % extra],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest.read_text()


def exec_start(unit):
    """ExecStart= with its continuation lines (systemd_exec breaks it with a trailing backslash), joined."""
    lines = unit.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith("ExecStart=")][0]
    words = []
    for line in lines[start:]:
        words.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(words)


def test_a_service_whose_custom_all_reduce_is_off_gets_the_flag_and_why(tmp_path):
    why = "GPUs 0,1 reach each other through the host bridge (PHB): ..."
    unit = render(tmp_path, "eagle3", {"eagle3": {"disable": True, "why": why, "add_flag": True}})
    assert exec_start(unit).endswith("--model-path /models/Qwen3-8B --tp-size 2 --disable-custom-all-reduce")
    assert "# SGLang's custom all-reduce off: %s\n" % why in unit


def test_the_others_do_not(tmp_path):
    for decision in ({}, {"eagle3": {"disable": True, "why": "extra_args disable-custom-all-reduce", "add_flag": False}},
                     {"eagle3": {"disable": False, "why": "NVLink joins its GPUs", "add_flag": False}}):
        unit = render(tmp_path, "eagle3", decision)
        assert exec_start(unit).endswith("--tp-size 2") and "custom all-reduce" not in unit
