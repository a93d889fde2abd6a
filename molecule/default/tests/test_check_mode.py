"""Check mode changes nothing, on fresh nodes and on converged ones: the scenario's node (`default`'s
PRO 6000 node, and `b300`'s B300 node, whose tests/ links this file).

prepare.yml recorded each fresh node with tests/fingerprint.sh (/var/tmp/bsg-fingerprints/fresh).
Molecule's first check step ran the converge playbook (site.yml) with --check on it, and
converge.yml recorded what it left (after-check-fresh). Converge and idempotence recorded the
converged node (converged); the second check step, after idempotence, recorded after-check-converged.
"""

import os
import shlex

import pytest
import yaml
from conftest import FINGERPRINTS, assert_unchanged, recorded_fingerprint

with open(os.environ["MOLECULE_INVENTORY_FILE"], encoding="utf-8") as _handle:
    testinfra_hosts = ["podman://" + name for name in yaml.safe_load(_handle)["all"]["hosts"]]
# Read only (fingerprints recorded earlier): these run on the second worker, beside the node's own tests.
pytestmark = pytest.mark.xdist_group("check_mode")


@pytest.mark.parametrize("before,after", [("fresh", "after-check-fresh"), ("converged", "after-check-converged")])
def test_check_mode_changes_nothing(host, before, after):
    assert_unchanged(recorded_fingerprint(host, before), recorded_fingerprint(host, after),
                     "site.yml --check on the %s node" % before)


def test_the_records_are_of_a_fresh_and_a_converged_node(host):
    # So the comparisons above compare what they say: nothing of the roles' on the fresh node, all of
    # it on the converged one.
    def has(name, line):
        return host.run("grep -qxF %s %s/%s" % (shlex.quote(line), FINGERPRINTS, name)).rc == 0

    assert has("fresh", "absent /opt/sglang") and has("fresh", "absent /opt/cuda")
    assert host.run("grep -q '^l /opt/sglang/current ' %s/converged" % FINGERPRINTS).rc == 0
    assert has("converged", "unit sglang-eagle3.service loaded inactive dead enabled ")
