"""module_utils/run.py: the run() a module hands the shared code, through a real AnsibleModule's run_command."""

import os
import sys

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.blackwell.sglang.plugins.module_utils.run import module_runner


@pytest.fixture
def run(monkeypatch):
    monkeypatch.setenv("BSG_OUTSIDE", "module")
    with patch_module_args({}):
        return module_runner(AnsibleModule(argument_spec={}))


def test_a_program_runs_with_its_output_and_status(run, tmp_path):
    done = run([sys.executable, "-c", "import sys; print('out'); sys.stderr.write('err\\n'); sys.exit(3)"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert run(["pwd"], cwd=str(tmp_path)).stdout.strip() == str(tmp_path)


def test_the_environment_is_the_one_given_and_the_module_keeps_its_own(run):
    # A probe's environment is the one built for it: a variable the module has but the probe's env
    # leaves out (another service's NCCL setting, say) is not there; and the module's comes back.
    code = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('BSG_OUTSIDE', 'BSG_GIVEN')}))"
    assert run([sys.executable, "-c", code], env={"BSG_GIVEN": "1", "PATH": os.environ["PATH"]}).stdout.strip() == \
        '{"BSG_OUTSIDE": null, "BSG_GIVEN": "1"}'
    assert os.environ["BSG_OUTSIDE"] == "module" and "BSG_GIVEN" not in os.environ
    assert run([sys.executable, "-c", code]).stdout.strip() == '{"BSG_OUTSIDE": "module", "BSG_GIVEN": null}'


def test_arguments_are_passed_as_written(run):
    # A probe's Python code is an argument: no $VAR or ~ expansion (run_command's default does both).
    assert run(["echo", "$HOME", "~"]).stdout == "$HOME ~\n"


def test_a_program_that_cannot_start_raises_with_its_path(run, tmp_path):
    with pytest.raises(OSError) as failed:
        run([str(tmp_path / "missing"), "--version"])
    assert failed.value.filename == str(tmp_path / "missing")  # text, for the caller's message


def test_a_directory_that_is_not_there_and_an_environment_that_cannot_be_set_are_errors_not_exits(run, tmp_path):
    with pytest.raises(FileNotFoundError):
        run(["pwd"], cwd=str(tmp_path / "gone"))
    with pytest.raises(ValueError, match="environment variables that cannot be set: 'A=B'"):
        run(["true"], env={"A=B": "1", "PATH": os.environ["PATH"]})
    assert os.environ["BSG_OUTSIDE"] == "module"  # left as it was


def test_a_probe_that_hangs_through_run_command_is_killed_and_named(run):
    # The GPU probes' path: AnsibleModule.run_command, coreutils' timeout, its SIGKILL to the group.
    from ansible_collections.blackwell.sglang.plugins.module_utils import gpu_validate
    answer = gpu_validate.run_probe(run, ["sh", "-c", "trap '' TERM; echo waiting >&2; sleep 30"], dict(os.environ), 1)
    assert answer["error"] == "no answer within 1 s (a hang); killed. Last output: waiting"
    assert answer["seconds"] < 5
