"""Helpers shared by the verify tests: run site.yml against the scenario's node as an operator would."""

import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _run_playbook(path, *extra_vars, skip_tags=None):
    """Run a playbook (relative to the repository root) with extra vars (dicts); return (rc, output)."""
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(ROOT, ".cache", "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    args = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, path)]
    for value in extra_vars:
        args += ["-e", json.dumps(value)]
    if skip_tags:
        args += ["--skip-tags", skip_tags]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _run_site(*extra_vars, skip_tags=None):
    """Run site.yml with extra vars (dicts); return (rc, stdout + stderr)."""
    return _run_playbook("site.yml", *extra_vars, skip_tags=skip_tags)


@pytest.fixture
def run_site():
    return _run_site


@pytest.fixture
def run_playbook():
    """run_playbook(path, *extra_vars): e.g. one role's playbook (molecule/default/role.yml) instead of
    the whole site.yml, for cases that fail in that role's preflight (about 20 s instead of 90)."""
    return _run_playbook
