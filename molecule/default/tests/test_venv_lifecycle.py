"""Upgrade, failed build and rollback of the SGLang venv, in this order, on the converged node.

Each step runs site.yml with extra vars, as an operator would. pytest runs the tests of a file in
order; each step starts from the state the previous one left.
"""

import os

testinfra_hosts = ["podman://molecule-pro6000"]

UPGRADED = ["sglang==0.5.23", "tomli-w==1.2.0"]
# These tests are about the venv: only the sglang_venv role runs (molecule/default/role.yml). With
# the whole site.yml, a flip would make the pre-warm rebuild FlashInfer's cache for the new venv
# (its build files name the venv's real path; minutes on 2 cores).
VENV_ROLE = {"bsg_role": "blackwell.sglang.sglang_venv"}


def run_venv_role(run_playbook, *extra_vars):
    return run_playbook("molecule/default/role.yml", VENV_ROLE, *extra_vars)


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
    assert "No solution found" in out or "not found" in out.lower()  # uv's own words
    assert links(host) == before_links
    assert venvs(host) == before_venvs  # no partial venv left behind
    assert imports_sglang(host)


def test_4_rollback_repoints_current_to_the_previous_venv(host, run_playbook):
    current, previous = links(host)
    rc, out = run_venv_role(run_playbook, {"sglang_venv_packages": UPGRADED}, {"sglang_venv_rollback": True})
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
