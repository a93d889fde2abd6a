"""Helpers shared by the verify tests: run site.yml against the scenario's node as an operator would."""

import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _run_site(*extra_vars, skip_tags=None):
    """Run site.yml with extra vars (dicts); return (rc, stdout + stderr)."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".cache", "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, "site.yml")]
    for value in extra_vars:
        args += ["-e", json.dumps(value)]
    if skip_tags:
        args += ["--skip-tags", skip_tags]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def run_site():
    return _run_site
