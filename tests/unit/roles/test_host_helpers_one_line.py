"""The roles' host-side helpers fail in one line that names the cause and the fix: never a traceback.

Each runs as the role runs it (a fresh interpreter or /bin/sh, its argument as the task passes it);
every case asserts the exact stderr, that it holds no "Traceback", and the exit status. The helpers:
roles/common/files/host_python.py and roles/sglang_venv/files/venv_facts.py (ansible.builtin.script) and
roles/common/files/verify-unit.sh (the unit templates' validate:). SGLang's argument parse is a module now
(sglang_server_args; tests/unit/plugins/modules/test_sglang_server_args.py).
roles/flashinfer/files/flashinfer_arch_shim.py has its own file (test_flashinfer_arch_shim.py).
"""

import json
import os
import subprocess
import sys

import pytest

ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles")
HOST_PYTHON = os.path.abspath(os.path.join(ROLES, "common", "files", "host_python.py"))
VENV_FACTS = os.path.abspath(os.path.join(ROLES, "sglang_venv", "files", "venv_facts.py"))
VERIFY_UNIT = os.path.abspath(os.path.join(ROLES, "common", "files", "verify-unit.sh"))


def run(argv, env=None, cwd=None):
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **(env or {})), cwd=cwd, check=False)
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def run_script_patched(script, patch, *args, env=None):
    """`script` as __main__ in a fresh interpreter, after `patch` (Python source) stands in for the host."""
    code = "import runpy, sys\n%s\nsys.argv = [%r] + %r\nrunpy.run_path(%r, run_name='__main__')\n" % (
        patch, script, list(args), script)
    return run([sys.executable, "-c", code], env=env)


# ---- host_python.py (common python: what is this interpreter? sglang_venv, sglang_gateway) ---------

GLIBC_FIX = "SGLang's wheels are manylinux; set sglang_venv_python (sglang_gateway_python for the gateway) to an interpreter of a glibc system"


@pytest.mark.parametrize("patch, rc, err", [
    ("import os\ndef confstr(name):\n    raise ValueError('unrecognized configuration name')\nos.confstr = confstr", 1,
     "host_python: error: this host's C library is not glibc (os.confstr('CS_GNU_LIBC_VERSION'): unrecognized "
     "configuration name): " + GLIBC_FIX + "\n"),
    ("import os\nos.confstr = lambda name: 'glibc 2'", 1,
     "host_python: error: cannot read the glibc version 'glibc 2' of this host: set sglang_venv_python "
     "(sglang_gateway_python for the gateway) to an interpreter of a glibc system (SGLang's wheels are manylinux)\n"),
    ("import platform\ndef machine():\n    raise RuntimeError('uname\\nfailed')\nplatform.machine = machine", 1,
     "host_python: error: unexpected RuntimeError: uname failed\n"),
])
def test_host_python_fails_in_one_line(patch, rc, err):
    assert run_script_patched(HOST_PYTHON, patch) == (rc, "", err)


def test_host_python_still_describes_a_glibc_interpreter():
    rc, out, err = run_script_patched(HOST_PYTHON, "import os, platform\nos.confstr = lambda name: 'glibc 2.17'\n"
                                                   "platform.machine = lambda: 'x86_64'")
    assert (rc, err) == (0, "")
    info = json.loads(out)
    assert info["libc"] == "glibc 2.17"
    assert info["platforms"][:4] == ["linux_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_16_x86_64"]
    assert info["platforms"][-2:] == ["manylinux_2_5_x86_64", "manylinux1_x86_64"]


# ---- venv_facts.py (sglang_venv facts: versions read from the venv) ---------------------------------

def venv_fix():
    return ("remove the venv %s and re-run site.yml (it builds it again), or roll back to the previous one "
            "(sglang_venv_rollback: true)" % os.path.realpath(sys.prefix))


@pytest.mark.parametrize("case, rc, err", [
    ("version.py is a directory", 1, "venv_facts: error: cannot read torch's CUDA version from {version} (Is a directory): {fix}\n"),
    ("version.py is not text", 1, "venv_facts: error: cannot read torch's CUDA version from {version} ('utf-8' codec can't "
                                  "decode byte 0xff in position 0: invalid start byte): {fix}\n"),
    ("no version.py", 0, ""),
    ("a CUDA build", 0, ""),
])
def test_venv_facts_fails_in_one_line(tmp_path, case, rc, err):
    torch = tmp_path / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text("raise ImportError('venv_facts must not import torch')\n")
    version = torch / "version.py"
    if case == "version.py is a directory":
        version.mkdir()
    elif case == "version.py is not text":
        version.write_bytes(b"\xffcuda = '13.0'\n")
    elif case == "a CUDA build":
        version.write_text("__version__ = '2.9.1'\ncuda: Optional[str] = '13.0'\n")
    got = run([sys.executable, VENV_FACTS], env={"PYTHONPATH": str(tmp_path)})
    assert got[0::2] == (rc, err.format(version=version, fix=venv_fix()))
    if rc == 0:
        assert json.loads(got[1])["torch_cuda"] == ("13.0" if case == "a CUDA build" else None)
    else:
        assert got[1] == ""


@pytest.mark.parametrize("patch, err", [
    ("import importlib.util\ndef find_spec(name):\n    raise ValueError('torch.__spec__ is None')\n"
     "importlib.util.find_spec = find_spec",
     "venv_facts: error: cannot locate torch in {prefix} (ValueError: torch.__spec__ is None): {fix}\n"),
    ("from importlib import metadata\ndef version(dist):\n    raise TypeError('expected str,\\n got NoneType')\n"
     "metadata.version = version",
     "venv_facts: error: cannot read the installed version of sglang (TypeError: expected str, got NoneType): {fix}\n"),
    ("from importlib import metadata\ndef version(dist):\n    raise KeyError(dist)\nmetadata.version = version",
     "venv_facts: error: unexpected KeyError: 'sglang'\n"),
])
def test_venv_facts_what_it_did_not_expect_is_one_line_too(patch, err):
    assert run_script_patched(VENV_FACTS, patch) == (1, "", err.format(prefix=sys.prefix, fix=venv_fix()))


# ---- verify-unit.sh (common verifier: the unit templates' validate:) ---------------------------------

SYSTEMD_ANALYZE = "#!/bin/sh\n%s\n"


@pytest.fixture
def tools(tmp_path):
    """A PATH with the tools verify-unit.sh uses, and no systemd-analyze until a test writes one."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in ("mktemp", "cp", "rm"):
        for prefix in ("/usr/bin", "/bin"):
            if os.path.exists(os.path.join(prefix, tool)):
                os.symlink(os.path.join(prefix, tool), str(directory / tool))
                break
    return directory


def unit(tmp_path):
    path = tmp_path / "rendered.service"
    path.write_text("[Service]\nExecStart=/bin/true\n")
    return str(path)


@pytest.mark.parametrize("case, rc, err", [
    ("no arguments", 2, "verify-unit.sh: usage: verify-unit.sh FILE UNIT-NAME (got 0 arguments): the unit template's "
                        "validate: passes both\n"),
    ("missing file", 2, "verify-unit.sh: cannot read the rendered unit {tmp}/gone.service (missing or unreadable): run it "
                        "as root, as the template task does\n"),
    ("no systemd-analyze", 2, "verify-unit.sh: systemd-analyze not found on PATH={bin}: install systemd (its package "
                              "provides systemd-analyze)\n"),
    ("no scratch directory", 2, "verify-unit.sh: cannot create a scratch directory with mktemp -d: check "
                                "TMPDIR={tmp}/gone (writable, not full)\n"),
    ("systemd complains", 1, "systemd-analyze verify sglang-eagle3.service failed (rc=0):\n"
                             "sglang-eagle3.service:2: Unknown key name 'Bogus'\n"),
    ("systemd accepts", 0, ""),
])
def test_verify_unit_fails_in_one_line(tmp_path, tools, case, rc, err):
    args = [unit(tmp_path), "sglang-eagle3.service"]
    env = {"PATH": str(tools)}
    if case == "no arguments":
        args = []
    elif case == "missing file":
        args[0] = str(tmp_path / "gone.service")
    elif case == "no scratch directory":
        env["TMPDIR"] = str(tmp_path / "gone")
    if case != "no systemd-analyze":
        said = "echo \"sglang-eagle3.service:2: Unknown key name 'Bogus'\" >&2" if case == "systemd complains" else "exit 0"
        (tools / "systemd-analyze").write_text(SYSTEMD_ANALYZE % said)
        (tools / "systemd-analyze").chmod(0o755)
    got = run(["/bin/sh", VERIFY_UNIT] + args, env=env)
    assert got == (rc, "", err.format(tmp=tmp_path, bin=tools))


# ---- flashinfer_arch_shim.py (FlashInfer 0.2.0-0.3.0: torch's arch flags from FLASHINFER_CUDA_ARCH_LIST) --


def test_venv_facts_names_each_distribution_missing_a_file_it_installed(tmp_path):
    # A stand-in distribution on PYTHONPATH whose RECORD lists a console script (a deleted bin/ninja),
    # a module present, and bytecode (made on use, never required).
    (tmp_path / "standin_ninja").mkdir()
    (tmp_path / "standin_ninja" / "__init__.py").write_text("")
    info = tmp_path / "standin_ninja-1.13.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-ninja\nVersion: 1.13.0\n")
    (info / "RECORD").write_text("standin_ninja/__init__.py,,\nstandin_ninja/__pycache__/__init__.cpython-311.pyc,,\n"
                                 "../../bin/standin-ninja,,\nstandin_ninja-1.13.0.dist-info/METADATA,,\n"
                                 "standin_ninja-1.13.0.dist-info/RECORD,,\n")
    rc, out, err = run([sys.executable, VENV_FACTS], env={"PYTHONPATH": str(tmp_path)})
    assert (rc, err) == (0, "")
    assert json.loads(out)["damaged"] == {"standin-ninja": {"version": "1.13.0", "missing": 1, "examples": ["../../bin/standin-ninja"]}}
    (info / "RECORD").write_text("standin_ninja/__init__.py,,\n")
    assert json.loads(run([sys.executable, VENV_FACTS], env={"PYTHONPATH": str(tmp_path)})[1])["damaged"] == {}
