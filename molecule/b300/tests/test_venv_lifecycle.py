"""Upgrade, failed build, rollback and pruning of the SGLang venv, in this order, on the converged
B300 node (its venv is the PRO 6000 node's: the same spec; the `b300` scenario runs beside
`default`); then the pip installer and a changed index URL on a venv of their own; last, Debian 13's
own Python (3.13), on which SGLang's venv cannot be built.

Each step runs the sglang_venv role with extra vars, as an operator would. pytest runs the tests of
a file in order; each step starts from the state the previous one left.
"""

import json
import os

import pytest
from conftest import B300

testinfra_hosts = ["podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order

UPGRADED = ["sglang==0.5.23", "tomli-w==1.2.0"]
# These tests are about the venv: only the sglang_venv role runs (molecule/default/role.yml). With
# the whole site.yml, a flip would make the pre-warm rebuild FlashInfer's cache for the new venv
# (its build files name the venv's real path; minutes on 2 cores).
VENV_ROLE = {"bsg_role": "blackwell.sglang.sglang_venv"}


def run_venv_role(run_playbook, *extra_vars):
    return run_playbook("molecule/default/role.yml", VENV_ROLE, *extra_vars, limit=B300)


def links(host):
    return host.file("/opt/sglang/current").linked_to, host.file("/opt/sglang/previous").linked_to


def venvs(host):
    return sorted(host.check_output("ls /opt/sglang/venvs").split())


def imports_sglang(host):
    return host.run("runuser -u sglang -- /opt/sglang/current/bin/python -c 'import sglang'").rc == 0


def test_1_changed_pin_builds_a_second_venv_and_flips_current(host, run_playbook):
    first = host.file("/opt/sglang/current").linked_to
    rc, out = run_venv_role(run_playbook, {"sglang_venv_packages": UPGRADED})
    assert rc == 0, out
    current, previous = links(host)
    assert current != first
    assert previous == first
    assert host.file(first + "/.sglang-venv.json").exists  # the old venv is kept
    assert len(venvs(host)) == 2
    assert host.run("%s/bin/python -c 'import tomli_w'" % current).rc == 0
    assert imports_sglang(host)


def test_2_same_spec_again_changes_nothing(host, run_playbook):
    before = links(host)
    rc, out = run_venv_role(run_playbook, {"sglang_venv_packages": UPGRADED})
    assert rc == 0, out
    assert "changed=0" in out, out
    assert links(host) == before


def test_3_failed_build_leaves_current_alone(host, run_playbook):
    before_links, before_venvs = links(host), venvs(host)
    rc, out = run_venv_role(run_playbook, {"sglang_venv_packages": ["sglang==0.0.999"]})
    assert rc != 0
    assert "failed and was removed" in out
    assert "sglang==0.0.999" in out and "uv said" in out
    # uv 0.13.9's own words for a version the index does not have (seen on the lab node):
    flat = " ".join(out.split())
    assert "No solution found when resolving dependencies" in flat, out
    assert ("Because there is no version of sglang==0.0.999 and you require sglang==0.0.999, we can conclude "
            "that your requirements are unsatisfiable.") in flat, out
    assert links(host) == before_links
    assert venvs(host) == before_venvs  # no partial venv left behind
    assert imports_sglang(host)


def test_4_rollback_repoints_current_to_the_previous_venv(host, run_playbook):
    current, previous = links(host)
    # As README says it: -e name=true gives the string "true" (ansible-core 2.19 refuses a string as a conditional).
    rc, out = run_venv_role(run_playbook, {"sglang_venv_packages": UPGRADED}, "sglang_venv_rollback=true")
    assert rc == 0, out
    assert links(host) == (previous, current)
    assert imports_sglang(host)


def test_5_keep_one_never_prunes_current_or_previous(host, run_playbook):
    current, previous = links(host)
    rc, out = run_venv_role(run_playbook, {"sglang_venv_keep": 1})
    assert rc == 0, out
    # current already holds the default spec's venv: nothing is built or flipped...
    assert links(host) == (current, previous)
    # ...and previous is never pruned, so both stay although keep is 1.
    assert venvs(host) == sorted(os.path.basename(p) for p in (current, previous))


def test_6_venvs_beyond_keep_and_leftovers_of_interrupted_builds_are_pruned(host, run_playbook):
    current, previous = links(host)
    # An older complete venv (its marker written an hour before the others) and a directory an
    # interrupted build left (no marker): with keep 2, current and previous stay, both others go.
    # Each has a kernel cache workspace (as the kernel_cache role makes them), and so does a venv long
    # gone: the kernel_cache role's prune entry point after the venv role (as site.yml's switch runs them).
    host.check_output(
        "install -d -o sglang -g sglang /opt/sglang/venvs/00000000000000aa /opt/sglang/venvs/00000000000000bb && "
        "echo '{}' > /opt/sglang/venvs/00000000000000aa/.sglang-venv.json && "
        "touch -d '-1 hour' /opt/sglang/venvs/00000000000000aa/.sglang-venv.json && "
        "install -d -o sglang -g sglang /var/lib/sglang/kernel-caches/00000000000000aa/.cache "
        "/var/lib/sglang/kernel-caches/00000000000000bb /var/lib/sglang/kernel-caches/00000000000000cc "
        "/var/lib/sglang/kernel-caches/%s/triton" % os.path.basename(previous))
    rc, out = run_venv_role(run_playbook, {"sglang_venv_keep": 2}, {"bsg_role": [
        "blackwell.sglang.sglang_venv", "blackwell.sglang.kernel_cache:prune"]})
    assert rc == 0, out
    assert links(host) == (current, previous)
    assert venvs(host) == sorted(os.path.basename(p) for p in (current, previous))
    # A venv's kernel caches go with it; those of current and previous stay.
    workspaces = host.check_output("ls /var/lib/sglang/kernel-caches").split()
    assert not {"00000000000000aa", "00000000000000bb", "00000000000000cc"} & set(workspaces)
    assert os.path.basename(previous) in workspaces and os.path.basename(current) in workspaces


# sglang_venv_installer: pip, and a changed index URL, on a venv of their own (a small package set
# in /opt/pip-venvs: the venv in service is not touched, and pip needs no SGLang-sized download).
PIP_BASE = "/opt/pip-venvs"
PIP_SETTINGS = {"sglang_venv_base_dir": PIP_BASE, "sglang_venv_installer": "pip",
                "sglang_venv_packages": ["six==1.17.0"]}


def pip_venv(host):
    target = host.file(PIP_BASE + "/current").linked_to
    return target, json.loads(host.file(target + "/.sglang-venv.json").content_string)


def test_7_the_pip_installer_builds_a_venv(host, run_playbook):
    rc, out = run_venv_role(run_playbook, PIP_SETTINGS)
    assert rc == 0, out
    target, marker = pip_venv(host)
    assert marker["installer"] == "pip" and marker["packages"] == ["six==1.17.0"]
    assert marker["index_url"] == ""
    # pip built it: the venv has pip of its own (uv's venvs have none), and six is there.
    assert host.run("runuser -u sglang -- %s/bin/python -m pip --version" % target).rc == 0
    assert host.check_output("runuser -u sglang -- %s/bin/python -c 'import six; print(six.__version__)'" % target) == "1.17.0"
    assert host.file(target).user == "sglang"


def test_8_a_changed_index_url_builds_a_new_venv(host, run_playbook):
    before, _marker = pip_venv(host)
    rc, out = run_venv_role(run_playbook, dict(PIP_SETTINGS, sglang_venv_index_url="https://pypi.org/simple"))
    assert rc == 0, out
    after, marker = pip_venv(host)
    assert after != before  # the index is part of the venv's identity
    assert marker["index_url"] == "https://pypi.org/simple"
    assert host.file(PIP_BASE + "/previous").linked_to == before


def test_9_debian_13s_own_python_cannot_build_sglang_and_current_stays(host, run_playbook):
    """README "Install": on Debian 13's python3 (3.13) the build stops at uv's error naming
    outlines-core, and nothing the service runs moves."""
    before_links, before_venvs = links(host), venvs(host)
    rc, out = run_venv_role(run_playbook, {"sglang_venv_python": "/usr/bin/python3"})
    assert rc != 0
    assert "failed and was removed" in out
    flat = " ".join(out.split())
    assert "Failed to build `outlines-core==0.1.26`" in flat, out
    assert links(host) == before_links
    assert venvs(host) == before_venvs
    assert imports_sglang(host)
