"""tests/fingerprint.sh, the "nothing changed" of every check-mode and bad-input test: the same
lines for an untouched tree, a different line for an edit whose size and mtime were put back (what
a lost hand patch with a restored mtime looks like) and for a change of mode."""

import os
import subprocess

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "fingerprint.sh")


def fingerprint(path):
    """The lines of the tree under path (the script also prints packages, units and the sglang user)."""
    out = subprocess.run(["sh", SCRIPT, str(path)], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if (line.split(" ") + [""])[1].startswith(str(path))]


def test_an_untouched_tree_prints_the_same_lines(tmp_path):
    (tmp_path / "patched.py").write_text("arch = '12.0f'\n")
    first = fingerprint(tmp_path)
    assert first == fingerprint(tmp_path)
    assert any(line.startswith("f %s/patched.py 15 " % tmp_path) for line in first)


def test_an_edit_with_its_size_and_mtime_restored_shows(tmp_path):
    target = tmp_path / "patched.py"
    target.write_text("arch = '12.0f'\n")
    before = fingerprint(tmp_path)
    stat = target.stat()
    target.write_text("arch = '10.0a'\n")  # same size
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = fingerprint(tmp_path)
    assert target.stat().st_mtime_ns == stat.st_mtime_ns and target.stat().st_size == stat.st_size
    assert [line for line in after if "patched.py" in line] != [line for line in before if "patched.py" in line]


def test_a_change_of_mode_shows(tmp_path):
    target = tmp_path / "unit.env"
    target.write_text("X=1\n")
    before = fingerprint(tmp_path)
    target.chmod(0o600)
    assert fingerprint(tmp_path) != before
