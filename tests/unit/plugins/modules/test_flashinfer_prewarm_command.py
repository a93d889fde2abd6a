"""flashinfer_prewarm_command end to end: main() installs the pre-warm command into a temp dir.

That the installed command runs as the units run it (fresh interpreter, no Ansible) is
test_flashinfer_jit_cli.py's prewarm(), which installs it with this module's wanted_files().
"""

import os
import subprocess
import sys


import module_runner
from ansible_collections.blackwell.sglang.plugins.module_utils import cuda_arch, flashinfer_jit
from ansible_collections.blackwell.sglang.plugins.modules import flashinfer_prewarm_command as cmd

PACKAGE = os.path.join("ansible_collections", "blackwell", "sglang", "plugins", "module_utils")


def run_module(capsys, args, check_mode=False, diff=False):
    return module_runner.run_module(cmd.main, capsys, args, check_mode, diff)


def tree(path):
    found = {}
    for root, _dirs, files in os.walk(str(path)):
        for name in files:
            full = os.path.join(root, name)
            with open(full) as handle:
                found[os.path.relpath(full, str(path))] = (handle.read(), oct(os.stat(full).st_mode & 0o777))
    return found


def test_installs_the_modules_own_code_then_changes_nothing(tmp_path, capsys):
    lib = tmp_path / "lib"
    result = run_module(capsys, {"path": str(lib)})
    assert result["_rc"] == 0 and result["changed"] is True
    assert result["command"] == str(lib / "flashinfer_prewarm.py")
    assert result["written"] == result["files"]
    installed = tree(lib)
    with open(flashinfer_jit.__file__) as handle:
        assert installed[os.path.join(PACKAGE, "flashinfer_jit.py")] == (handle.read(), "0o644")
    with open(cuda_arch.__file__) as handle:
        assert installed[os.path.join(PACKAGE, "cuda_arch.py")] == (handle.read(), "0o644")
    launcher = installed["flashinfer_prewarm.py"][0]
    assert "from ansible_collections.blackwell.sglang.plugins.module_utils.flashinfer_jit import command" in launcher
    assert str(lib / "flashinfer_prewarm.py") in launcher
    assert installed[os.path.join("ansible_collections", "__init__.py")] == ("", "0o644")
    assert sorted(installed) == sorted(os.path.relpath(f, str(lib)) for f in result["files"])

    again = run_module(capsys, {"path": str(lib)})
    assert again["changed"] is False and again["written"] == []
    assert tree(lib) == installed


def test_check_mode_writes_nothing_and_diff_shows_each_file(tmp_path, capsys):
    lib = tmp_path / "lib"
    result = run_module(capsys, {"path": str(lib)}, check_mode=True, diff=True)
    assert result["changed"] is True
    assert not lib.exists()
    assert [d["after_header"] for d in result["diff"]] == result["written"] == result["files"]
    assert all(d["before"] == "" for d in result["diff"])

    run_module(capsys, {"path": str(lib)})
    changed = lib / PACKAGE / "cuda_arch.py"
    changed.write_text("old\n")
    result = run_module(capsys, {"path": str(lib)}, check_mode=True, diff=True)
    assert result["written"] == [str(changed)]
    assert result["diff"][0]["before"] == "old\n"
    assert changed.read_text() == "old\n"
    result = run_module(capsys, {"path": str(lib)})
    assert result["written"] == [str(changed)]
    with open(cuda_arch.__file__) as handle:
        assert changed.read_text() == handle.read()


def test_a_directory_in_the_way_fails_clearly(tmp_path, capsys):
    lib = tmp_path / "lib"
    (lib / "flashinfer_prewarm.py").mkdir(parents=True)
    result = run_module(capsys, {"path": str(lib)})
    assert result["_rc"] == 1 and result["failed"] is True
    assert result["msg"] == "flashinfer_prewarm_command: %s exists but is not a regular file" % (lib / "flashinfer_prewarm.py")


def test_the_installed_command_imports_its_own_copy(tmp_path, capsys):
    """The copy wins over the collection on the test's own path: --help in a fresh interpreter whose
    only way to flashinfer_jit is the installed package."""
    lib = tmp_path / "lib"
    run_module(capsys, {"path": str(lib)})
    probe = ("import sys; sys.path.insert(0, %r); "
             "import ansible_collections.blackwell.sglang.plugins.module_utils.flashinfer_jit as m; print(m.__file__)"
             % str(lib))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(lib / PACKAGE / "flashinfer_jit.py")
    proc = subprocess.run([sys.executable, str(lib / "flashinfer_prewarm.py"), "--help"], capture_output=True, text=True,
                          check=False, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "--modules" in proc.stdout


def test_modes_do_not_depend_on_the_umask_and_a_wrong_mode_is_put_back(tmp_path, capsys):
    lib = tmp_path / "lib"
    saved = os.umask(0o077)
    try:
        result = run_module(capsys, {"path": str(lib)})
    finally:
        os.umask(saved)
    assert result["changed"] is True
    for path in result["files"]:
        assert oct(os.stat(path).st_mode & 0o777) == "0o644", path
    for directory in [lib, lib / PACKAGE]:
        assert oct(os.stat(str(directory)).st_mode & 0o777) == "0o755", directory
    launcher = lib / "flashinfer_prewarm.py"
    os.chmod(str(launcher), 0o600)
    result = run_module(capsys, {"path": str(lib)}, diff=True)
    assert result["written"] == [str(launcher)]
    assert result["diff"][0]["before_header"] == "%s (mode 0600 -> 0644)" % launcher
    assert oct(os.stat(str(launcher)).st_mode & 0o777) == "0o644"
    assert run_module(capsys, {"path": str(lib)})["changed"] is False


def test_an_os_error_is_one_line_with_what_to_change():
    import errno

    def error(number):
        return OSError(number, os.strerror(number))

    start = "flashinfer_prewarm_command: cannot write /usr/local/lib/x (%s): "
    assert cmd.os_error_message("write", "/usr/local/lib/x", error(errno.EACCES)) == (
        start % "Permission denied") + "run it as root (become: true) or set path to a directory this user can write"
    assert cmd.os_error_message("write", "/usr/local/lib/x", error(errno.ENOSPC)) == (
        start % "No space left on device") + "free space on that file system"
    assert cmd.os_error_message("write", "/usr/local/lib/x", error(errno.EROFS)) == (
        start % "Read-only file system") + "set path to a directory on a writable file system"
    assert cmd.os_error_message("write", "/usr/local/lib/x", error(errno.ENOTDIR)) == (
        start % "Not a directory") + "fix that path and run again"


# ---- what the mutation run found untested ----

def test_the_diff_has_what_each_file_will_hold_and_files_are_replaced_from_beside_them(tmp_path, capsys, monkeypatch):
    lib = tmp_path / "lib"
    moved = []
    real = cmd.AnsibleModule.atomic_move
    monkeypatch.setattr(cmd.AnsibleModule, "atomic_move",
                        lambda self, src, dest, *a, **k: (moved.append((src, dest)), real(self, src, dest, *a, **k)))
    result = run_module(capsys, {"path": str(lib)}, diff=True)
    with open(cuda_arch.__file__) as handle:
        assert [d["after"] for d in result["diff"] if d["after_header"].endswith("cuda_arch.py")] == [handle.read()]
    assert [dest for _src, dest in moved] == result["files"]
    for src, dest in moved:
        assert os.path.dirname(src) == os.path.dirname(dest) and os.path.basename(src).startswith(".flashinfer_prewarm.")


def test_a_file_that_cannot_be_read_is_named_with_what_to_change(tmp_path, capsys, monkeypatch):
    lib = tmp_path / "lib"

    def refused(path):
        raise OSError(13, "Permission denied", path)
    monkeypatch.setattr(cmd, "read_text", refused)
    assert run_module(capsys, {"path": str(lib)})["msg"] == (
        "flashinfer_prewarm_command: cannot read %s (Permission denied): run it as root (become: true) or set path to "
        "a directory this user can write" % (lib / "flashinfer_prewarm.py"))
