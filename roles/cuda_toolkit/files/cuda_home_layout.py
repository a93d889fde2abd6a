# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lay NVIDIA's cuda-toolkit wheels out as a standard CUDA home. Idempotent; --check changes nothing.

Run with the toolkit venv's own interpreter: the wheels live in its site-packages under
nvidia/<component>/ (a single `cu13` component for CUDA 13, one per package for CUDA 12), with
libraries in lib/. nvcc.profile sets TOP=<nvcc's dir>/.. and FlashInfer links
`-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda`, so CUDA_HOME needs:

  bin/          hard links to the compiler binaries (so that TOP resolves to CUDA_HOME)
  include/      links to every component's headers
  nvvm/         link to the component's nvvm/ (cicc, libdevice)
  lib64/        links to the libraries plus unversioned names (libcudart.so -> libcudart.so.13)
  lib64/stubs/libcuda.so
                the driver's libcuda.so.1 when the host has one, else a link-time stub with soname
                libcuda.so.1 whose entry points (read from cuda.h) return CUDA_ERROR_STUB_LIBRARY.

Prints one JSON object: {"changed": bool, "actions": [...], "components": [...], "stub": "..."}.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

SKIP = {"__init__.py", "__pycache__", "cmake"}
VERSIONED_SO = re.compile(r"^(?P<stem>.+\.so)\.[0-9][0-9.]*$")
CUDA_ERROR_STUB_LIBRARY = 34
DECL = re.compile(r"\bCUresult\s+(?:CUDAAPI\s+)?(cu[A-Za-z0-9_]+)\s*\(")


class Layout:
    def __init__(self, home, check):
        self.home = home
        self.check = check
        self.actions = []

    def _do(self, action, func, *args):
        self.actions.append(action)
        if not self.check:
            func(*args)

    def ensure_dir(self, path):
        if not os.path.isdir(path):
            self._do("mkdir %s" % path, os.makedirs, path, 0o755)

    def _replace(self, dest, make):
        """Create dest through a temporary name and rename it over whatever was there."""
        tmp = "%s.tmp-layout" % dest
        if os.path.lexists(tmp):
            os.unlink(tmp)
        make(tmp)
        os.replace(tmp, dest)

    def symlink(self, target, dest):
        if os.path.islink(dest) and os.readlink(dest) == target:
            return
        self._do("link %s -> %s" % (dest, target), self._replace, dest, lambda tmp: os.symlink(target, tmp))

    def hardlink(self, src, dest):
        if os.path.exists(dest) and not os.path.islink(dest) and os.path.samefile(src, dest):
            return
        self._do("hardlink %s = %s" % (dest, src), self._replace, dest, lambda tmp: os.link(src, tmp))

    def prune_dangling(self, directory):
        if not os.path.isdir(directory):
            return
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.islink(path) and not os.path.exists(path):
                self._do("remove dangling %s" % path, os.unlink, path)


def entries(directory):
    if not os.path.isdir(directory):
        return []
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n not in SKIP]


def driver_library():
    """Path of the driver's libcuda.so.1 from the linker cache (`ldconfig -p`), or None."""
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            out = subprocess.run([ldconfig, "-p"], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        match = re.search(r"^\s*libcuda\.so\.1 \([^)]*\) => (\S+)$", out, re.M)
        return match.group(1) if match else None
    return None


def stub_entry_points(cuda_h, cc):
    """Driver API names declared by cuda.h, with and without per-thread default stream names."""
    names = set()
    for defines in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1"]):
        pre = subprocess.run(
            [cc, "-E", "-P", "-I", os.path.dirname(cuda_h), *defines, "-x", "c", cuda_h],
            check=True, capture_output=True, text=True,
        ).stdout
        names.update(DECL.findall(pre))
    if len(names) < 100:
        raise RuntimeError("only %d driver entry points in %s: not CUDA's cuda.h?" % (len(names), cuda_h))
    return sorted(names)


def build_stub(cuda_h, out, cc):
    names = stub_entry_points(cuda_h, cc)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        src = os.path.join(tmp, "libcuda_stub.c")
        with open(src, "w") as handle:
            handle.write("/* link-time stub generated from %s */\n" % cuda_h)
            for name in names:
                handle.write("int %s(void) { return %d; }\n" % (name, CUDA_ERROR_STUB_LIBRARY))
        lib = os.path.join(tmp, "libcuda.so")
        subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src], check=True)
        os.chmod(lib, 0o755)
        os.replace(lib, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="CUDA home to lay out (CUDA_HOME)")
    parser.add_argument("--check", action="store_true", help="report what would change, change nothing")
    parser.add_argument("--cc", default=os.environ.get("CC", "gcc"), help="C compiler for the stub")
    args = parser.parse_args()

    root = os.path.join(sysconfig.get_paths()["purelib"], "nvidia")
    components = [c for c in entries(root) if os.path.isdir(c)]
    if not any(os.path.exists(os.path.join(c, "bin", "nvcc")) for c in components):
        sys.exit("no bin/nvcc in the cuda-toolkit wheels under %s: this toolkit's wheels carry no "
                 "compiler; install it with cuda_toolkit_install_method=apt" % root)

    lay = Layout(os.path.abspath(args.home), args.check)
    home = lay.home
    for sub in ("bin", "include", "lib64", os.path.join("lib64", "stubs")):
        lay.ensure_dir(os.path.join(home, sub))

    for comp in components:
        for path in entries(os.path.join(comp, "bin")):
            dest = os.path.join(home, "bin", os.path.basename(path))
            if os.path.isdir(path):
                lay.symlink(path, dest)
            else:
                lay.hardlink(path, dest)
        for path in entries(os.path.join(comp, "include")):
            lay.symlink(path, os.path.join(home, "include", os.path.basename(path)))
        for path in entries(os.path.join(comp, "lib")):
            if not os.path.isfile(path):
                continue
            name = os.path.basename(path)
            lay.symlink(path, os.path.join(home, "lib64", name))
            versioned = VERSIONED_SO.match(name)
            if versioned:
                lay.symlink(name, os.path.join(home, "lib64", versioned.group("stem")))
        if os.path.isdir(os.path.join(comp, "nvvm")):
            lay.symlink(os.path.join(comp, "nvvm"), os.path.join(home, "nvvm"))
    for sub in ("bin", "include", "lib64"):
        lay.prune_dangling(os.path.join(home, sub))

    stub = os.path.join(home, "lib64", "stubs", "libcuda.so")
    driver = driver_library()
    if driver:
        lay.symlink(driver, stub)
        stub_kind = "driver %s" % driver
    else:
        stub_kind = "link-time stub"
        if os.path.islink(stub) or not os.path.isfile(stub):
            if os.path.islink(stub) and not lay.check:
                os.unlink(stub)
            lay._do("build stub %s" % stub, build_stub, os.path.join(home, "include", "cuda.h"), stub, args.cc)

    print(json.dumps({
        "changed": bool(lay.actions),
        "actions": lay.actions,
        "components": [os.path.basename(c) for c in components],
        "stub": stub_kind,
    }))


if __name__ == "__main__":
    main()
