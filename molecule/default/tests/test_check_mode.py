"""Check mode changes nothing, on fresh nodes and on converged ones (both lab nodes).

prepare.yml recorded each fresh node with tests/fingerprint.sh (/var/tmp/bsg-fingerprints/fresh).
Molecule's first check step ran the converge playbook (site.yml) with --check on it, and
converge.yml recorded what it left (after-check-fresh). Converge and idempotence recorded the
converged node (converged); the second check step, after idempotence, recorded after-check-converged.
"""

import shlex

import pytest
from conftest import FINGERPRINTS, assert_unchanged, recorded_fingerprint

testinfra_hosts = ["podman://molecule-pro6000", "podman://molecule-b300"]
pytestmark = pytest.mark.xdist_group("b300")  # one worker per node: a node's tests run in order


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
