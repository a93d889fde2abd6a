"""Bad input to the roles: a clear error before anything on the host changes.

Each case runs the role it is about (molecule/default/role.yml; the roles read what earlier ones
left on the host, so the whole site.yml is not needed to reach a role's preflight) against the
converged PRO 6000 node with one bad setting, and checks the play failed with a message that names
the problem, reported no change, and left the host exactly as it was (tests/fingerprint.sh: contents,
modes, owners and links of every path the roles own, unit states, packages, the service user).
The cases are independent and stop in preflight: they run together, one inventory host each
(conftest.run_cases), in one ansible-playbook run.
"""

import pytest
from conftest import assert_unchanged, fingerprint, run_cases

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

# An interpreter that reports Python 3.10 (Debian 12 has no 3.10 to point at).
PY310 = "/usr/local/bin/python3.10-double"
PY310_SCRIPT = (
    "#!/bin/sh\necho '{\"executable\": \"%s\", \"version\": \"3.10.12\", \"abi\": \"cp310\", "
    "\"libc\": \"glibc 2.36\", \"platforms\": [\"linux_x86_64\"]}'\n" % PY310
)

CUDA = "blackwell.sglang.cuda_toolkit"
VENV = "blackwell.sglang.sglang_venv"

CASES = [
    ({"cuda_toolkit_install_method": "conda"},
     "value of cuda_toolkit_install_method must be one of: pip, apt"),
    ({"cuda_toolkit_version": "13.0"}, "is not a full X.Y.Z version"),
    ({"cuda_toolkit_target_archs": ["sm120"]}, "is not of the form M.m"),
    ({"cuda_toolkit_version": "12.8.1", "cuda_toolkit_target_archs": ["10.3"]},
     "target 10.3 needs CUDA toolkit >= 12.9, but 12.8.1 was requested"),
    ({"cuda_toolkit_install_method": "apt", "cuda_toolkit_apt_distros": {"Ubuntu-24.04": "ubuntu2404"}},
     "this host is Debian-12"),
    ({"sglang_venv_python": PY310},
     "sglang_venv: %s is Python 3.10.12; SGLang needs Python >= 3.11. Set sglang_venv_python" % PY310),
    ({"sglang_venv_packages": ["sglang"]}, 'unpinned package specs ["sglang"]'),
    ({"sglang_venv_index_url": "htps:/pypi.example"}, 'malformed index URLs ["htps:/pypi.example"]'),
    ({"sglang_venv_keep": 0}, "sglang_venv_keep must be >= 1 (got 0)"),
    ({"sglang_venv_rollback": True}, "there is no previous venv to roll back to"),
]
IDS = [m[:40] for _v, m in CASES]


@pytest.fixture(scope="module")
def bad_runs(host):
    """All cases at once; the host's fingerprint before and after."""
    host.check_output("cat > %s <<'EOF'\n%sEOF\nchmod 0755 %s" % (PY310, PY310_SCRIPT, PY310))
    before = fingerprint(host)
    cases = {}
    for index, (extra_vars, _message) in enumerate(CASES):
        role = VENV if any(name.startswith("sglang_venv_") for name in extra_vars) else CUDA
        cases[str(index)] = dict(extra_vars, bsg_role=role)
    results = run_cases(cases)
    return results, before, fingerprint(host)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_bad_input_fails_clearly_and_changes_nothing(bad_runs, index):
    results, before, after = bad_runs
    result = results[str(index)]
    message = CASES[index][1]
    assert result.failed, result
    assert message in result.text, result
    assert result.changed == 0, result
    assert_unchanged(before, after)
