#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_home_layout
short_description: Lay NVIDIA's cuda-toolkit wheels out as a standard CUDA home
version_added: "0.1.0"
description:
  - NVIDIA's C(cuda-toolkit) wheels install the toolkit into a venv's C(site-packages) under
    C(nvidia/<component>/) (a single C(cu13) component for CUDA 13, one per package for CUDA 12), with
    the libraries in C(lib/). C(nvcc.profile) sets C(TOP=<nvcc's dir>/..) and FlashInfer's JIT links
    C(-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda), so both need a standard CUDA home.
    This module makes one in O(home) from the wheels in O(venv).
  - C(bin/) gets hard links to the compiler binaries, so that C(TOP) resolves to O(home), and symbolic
    links to the directories there (C(crt/)).
  - C(include/) gets symbolic links to every component's headers, and C(<home>/nvvm) a symbolic link
    to the component's C(nvvm/) (C(cicc), C(libdevice)).
  - C(lib64/) gets symbolic links to the components' library files, plus the unversioned name of each
    versioned shared library (C(libcudart.so -> libcudart.so.13)).
  - Symbolic links in C(bin/), C(include/) and C(lib64/) whose target is gone (left by a previous
    toolkit version) are removed.
  - C(lib64/stubs/libcuda.so) is a symbolic link to the driver's C(libcuda.so.1) when the host has one
    (from the linker cache, C(ldconfig -p)). Without a driver it is a link-time stub built with the host
    C compiler (O(cc)), with soname C(libcuda.so.1) and one function for every driver API entry point
    that C(<home>/include/cuda.h) declares (read with C(cc -E), with and without
    C(CUDA_API_PER_THREAD_DEFAULT_STREAM)), each returning C(CUDA_ERROR_STUB_LIBRARY) (34). A stub that
    is already a regular file is kept.
  - Idempotent; only what differs is changed. Links and hard links are made under a temporary name and
    renamed over the old entry, so a reader never finds the name missing.
  - Needs only the Python standard library on the target; it runs with the host's normal interpreter,
    not with the venv's.
author:
  - blackwell.sglang developers (!UNKNOWN)
options:
  home:
    description:
      - The CUDA home to lay out (what C(CUDA_HOME) will be). Missing directories are created.
    type: path
    required: true
  venv:
    description:
      - The venv the C(cuda-toolkit) wheels are installed in.
      - Its C(site-packages) is the one directory that matches C(lib/python3*/site-packages) below it.
      - Default C(<home>/venv), where the C(cuda_toolkit) role installs the wheels.
    type: path
  cc:
    description:
      - The C compiler that reads C(cuda.h) and builds the link-time stub when the host has no driver.
      - Default C($CC) in the module's environment on the target when that is set, else V(gcc).
      - Not used when the host has the driver's C(libcuda.so.1), nor in check mode.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports the actions it would take (RV(actions), and C(changed) when there are any) and changes nothing; no stub is compiled.
  diff_mode:
    support: full
    details: The state of every path an action touches, before and after, for example V(absent) and V(symlink -> <target>).
  platform:
    platforms: posix
notes:
  - "Failure modes, each with a message that says what to fix:
    O(venv) is not a directory (the wheels are not installed);
    no C(lib/python3*/site-packages), or more than one, below O(venv) (not a venv, or one upgraded in
    place to another Python; recreate it);
    no C(bin/nvcc) in any C(nvidia/<component>/) (this toolkit's wheels carry no compiler; install it with
    C(cuda_toolkit_install_method=apt));
    no C(include/cuda.h) in O(home) when a stub must be built (add the C(cudart) extra);
    O(cc) not found, or failing to read C(cuda.h) or to build the stub (its output is returned);
    fewer than 100 entry points in C(cuda.h) (not CUDA's C(cuda.h));
    a file system error while linking (for example a hard link across file systems when O(venv) is
    not on the file system of O(home), or a permission error without C(become));
    a directory of the wheels or of O(home) that cannot be listed or read (C(cannot read the CUDA home
    or the wheels), with the path; a permission error without C(become)).
    RV(actions) in a failure lists what was done before it."
seealso:
  - module: blackwell.sglang.flashinfer_jit_cache
  - name: NVIDIA CUDA toolkit wheels
    description: The C(cuda-toolkit) meta-package on PyPI and its extras (C(nvcc), C(cudart), C(nvvm), ...).
    link: https://pypi.org/project/cuda-toolkit/
"""

EXAMPLES = r"""
- name: Lay the wheels in /opt/cuda/13.0.2/venv out as the CUDA home /opt/cuda/13.0.2
  blackwell.sglang.cuda_home_layout:
    home: /opt/cuda/13.0.2
  register: layout

- name: Show what changed
  ansible.builtin.debug:
    var: layout.actions
  when: layout.actions | length > 0

- name: Wheels in a venv elsewhere (on the same file system as home, for the hard links), stub built by clang
  blackwell.sglang.cuda_home_layout:
    home: /opt/cuda/13.0.2
    venv: /opt/venvs/cuda-13.0.2
    cc: clang
"""

RETURN = r"""
actions:
  description:
    - What was done (in check mode, what would be done), one line per change, in order.
    - C(mkdir <dir>), C(link <path> -> <target>), C(hardlink <path> = <source>), C(remove dangling <path>),
      C(build stub <home>/lib64/stubs/libcuda.so).
    - Empty when the CUDA home was already laid out.
  returned: always
  type: list
  elements: str
  sample:
    - link /opt/cuda/13.0.2/lib64/libcudart.so -> libcudart.so.13
    - remove dangling /opt/cuda/13.0.2/lib64/libnvrtc.so.12
components:
  description:
    - The wheels' components, the directories in O(venv)'s C(site-packages/nvidia/), sorted.
  returned: always
  type: list
  elements: str
  sample: [cu13]
stub:
  description:
    - What C(lib64/stubs/libcuda.so) is. C(driver <path>) is the driver's C(libcuda.so.1) from C(ldconfig -p),
      linked to; V(link-time stub) is the stub built from C(cuda.h).
  returned: always
  type: str
  sample: link-time stub
site_packages:
  description: The C(site-packages) directory of O(venv) that the wheels were read from.
  returned: always
  type: str
  sample: /opt/cuda/13.0.2/venv/lib/python3.11/site-packages
diff:
  description:
    - With C(--diff) and when something changed (or would), the state of each path an action touched,
      before and after, keyed by path.
    - A state is V(absent), V(directory), V(file), V(symlink -> <target>), V(symlink -> <target> [dangling])
      when the target is gone, V(hard link to <source>) or V(link-time stub, soname libcuda.so.1).
  returned: in diff mode, when RV(actions) is not empty
  type: dict
  sample:
    before: {"/opt/cuda/13.0.2/lib64/libcudart.so": "absent"}
    after: {"/opt/cuda/13.0.2/lib64/libcudart.so": "symlink -> libcudart.so.13"}
"""

import glob
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

SKIP = {"__init__.py", "__pycache__", "cmake"}
VERSIONED_SO = re.compile(r"^(?P<stem>.+\.so)\.[0-9][0-9.]*$")
CUDA_ERROR_STUB_LIBRARY = 34
DECL = re.compile(r"\bCUresult\s+(?:CUDAAPI\s+)?(cu[A-Za-z0-9_]+)\s*\(")
LDCONFIG = ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig")
STUB_STATE = "link-time stub, soname libcuda.so.1"


class LayoutError(Exception):
    """A failure with a message that says what to fix."""

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.details = details


def file_system_error(exc):
    """The one line for an OSError outside a recorded action (reading the wheels or the CUDA home)."""
    return ("cannot read the CUDA home or the wheels: %s; fix the file system problem (permissions: become) "
            "and run again" % exc)


def describe(path):
    """The state of a path, as the diff shows it."""
    if os.path.islink(path):
        return "symlink -> %s%s" % (os.readlink(path), "" if os.path.exists(path) else " [dangling]")
    if os.path.isdir(path):
        return "directory"
    if os.path.isfile(path):
        return "file"
    return "other" if os.path.lexists(path) else "absent"


class Layout:
    def __init__(self, home, check):
        self.home = home
        self.check = check
        self.actions = []
        self.before = {}
        self.after = {}

    def _do(self, action, path, after, func, *args):
        """Record an action on path (and, for the diff, path's state before and after); run it unless checking."""
        if path not in self.before:
            self.before[path] = describe(path)
        if not self.check:
            try:
                func(*args)
            except OSError as exc:
                raise LayoutError("%s failed: %s; fix the file system problem (permissions: become; hard links: "
                                  "the venv on the file system of the CUDA home) and run again" % (action, exc))
        self.after[path] = after
        self.actions.append(action)

    def ensure_dir(self, path):
        if not os.path.isdir(path):
            self._do("mkdir %s" % path, path, "directory", os.makedirs, path, 0o755)

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
        self._do("link %s -> %s" % (dest, target), dest, "symlink -> %s" % target,
                 self._replace, dest, lambda tmp: os.symlink(target, tmp))

    def hardlink(self, src, dest):
        if os.path.exists(dest) and not os.path.islink(dest) and os.path.samefile(src, dest):
            return
        self._do("hardlink %s = %s" % (dest, src), dest, "hard link to %s" % src,
                 self._replace, dest, lambda tmp: os.link(src, tmp))

    def prune_dangling(self, directory):
        if not os.path.isdir(directory):
            return
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if self.check and path in self.after:
                continue  # dangling now, but the link this run would make replaces it
            if os.path.islink(path) and not os.path.exists(path):
                self._do("remove dangling %s" % path, path, "absent", os.unlink, path)


def entries(directory):
    if not os.path.isdir(directory):
        return []
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n not in SKIP]


def site_packages(venv):
    """The one lib/python3*/site-packages directory of the venv."""
    if not os.path.isdir(venv):
        raise LayoutError("venv %s is not a directory: install the cuda-toolkit wheels into it first "
                          "(the cuda_toolkit role's pip method does) or set venv to the venv that has them" % venv)
    found = sorted(p for p in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")) if os.path.isdir(p))
    if not found:
        raise LayoutError("no lib/python3*/site-packages in venv %s: not a Python virtual environment; "
                          "set venv to the one the cuda-toolkit wheels are installed in" % venv)
    if len(found) > 1:
        raise LayoutError("several site-packages in venv %s (%s): the venv has served more than one Python; "
                          "remove it and install the cuda-toolkit wheels again" % (venv, ", ".join(found)))
    return found[0]


def driver_library(module):
    """Path of the driver's libcuda.so.1 from the linker cache (`ldconfig -p`), or None."""
    for ldconfig in LDCONFIG:
        try:
            rc, out, dummy = module.run_command([ldconfig, "-p"], expand_user_and_vars=False, handle_exceptions=False)
        except OSError:
            continue
        if rc != 0:
            continue
        match = re.search(r"^\s*libcuda\.so\.1 \([^)]*\) => (\S+)$", out, re.M)
        return match.group(1) if match else None
    return None


def _compile(module, cc, args, what):
    cmd = [cc] + args
    try:
        rc, out, err = module.run_command(cmd, expand_user_and_vars=False, handle_exceptions=False)
    except OSError as exc:
        raise LayoutError("cannot run the C compiler %s (%s) to %s: install it (gcc; the cuda_toolkit role's "
                          "host packages include it) or set cc" % (cc, exc.strerror or exc, what), cmd=cmd)
    if rc != 0:
        raise LayoutError("%s failed to %s (rc %d): %s" % (cc, what, rc, err.strip() or out.strip()),
                          cmd=cmd, rc=rc, stdout=out, stderr=err)
    return out


def stub_entry_points(module, cuda_h, cc):
    """Driver API names declared by cuda.h, with and without per-thread default stream names."""
    names = set()
    for defines in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1"]):
        pre = _compile(module, cc, ["-E", "-P", "-I", os.path.dirname(cuda_h)] + defines + ["-x", "c", cuda_h],
                       "read the driver API from %s" % cuda_h)
        names.update(DECL.findall(pre))
    if len(names) < 100:
        raise LayoutError("only %d driver entry points in %s: not CUDA's cuda.h? Reinstall the cuda-toolkit "
                          "wheels (the cudart extra carries cuda.h)" % (len(names), cuda_h))
    return sorted(names)


def build_stub(module, cuda_h, out, cc):
    if os.path.islink(out):
        os.unlink(out)
    names = stub_entry_points(module, cuda_h, cc)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        src = os.path.join(tmp, "libcuda_stub.c")
        with open(src, "w") as handle:
            handle.write("/* link-time stub generated from %s */\n" % cuda_h)
            for name in names:
                handle.write("int %s(void) { return %d; }\n" % (name, CUDA_ERROR_STUB_LIBRARY))
        lib = os.path.join(tmp, "libcuda.so")
        _compile(module, cc, ["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src],
                 "build the link-time stub %s" % out)
        os.chmod(lib, 0o755)
        os.replace(lib, out)


def lay_out(module, lay, components, cc):
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
    driver = driver_library(module)
    if driver:
        lay.symlink(driver, stub)
        return "driver %s" % driver
    if os.path.islink(stub) or not os.path.isfile(stub):
        cuda_h = os.path.join(home, "include", "cuda.h")
        if not lay.check and not os.path.isfile(cuda_h):
            raise LayoutError("no %s to read the driver API from for the link-time stub (the host has no "
                              "libcuda.so.1): install the cuda-toolkit wheels with the cudart extra" % cuda_h)
        lay._do("build stub %s" % stub, stub, STUB_STATE, build_stub, module, cuda_h, stub, cc)
    return "link-time stub"


def run(module):
    params = module.params
    home = os.path.abspath(params["home"])
    venv = os.path.abspath(params["venv"] or os.path.join(home, "venv"))
    cc = params["cc"] or os.environ.get("CC") or "gcc"

    site = site_packages(venv)
    root = os.path.join(site, "nvidia")
    components = [c for c in entries(root) if os.path.isdir(c)]
    if not any(os.path.exists(os.path.join(c, "bin", "nvcc")) for c in components):
        raise LayoutError("no bin/nvcc in the cuda-toolkit wheels under %s: this toolkit's wheels carry no "
                          "compiler; install it with cuda_toolkit_install_method=apt" % root)

    lay = Layout(home, module.check_mode)
    result = {
        "components": [os.path.basename(c) for c in components],
        "site_packages": site,
    }
    try:
        try:
            result["stub"] = lay_out(module, lay, components, cc)
        except OSError as exc:  # a directory it cannot list, a link it cannot read: keep what was done so far
            raise LayoutError(file_system_error(exc)) from exc
    except LayoutError as exc:
        exc.details.update(result, changed=bool(lay.actions) and not lay.check, actions=lay.actions)
        raise
    result.update(changed=bool(lay.actions), actions=lay.actions)
    if module._diff and lay.actions:
        result["diff"] = {"before": lay.before, "after": lay.after}
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            home=dict(type="path", required=True),
            venv=dict(type="path"),
            cc=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except LayoutError as exc:
        module.fail_json(msg=str(exc), **exc.details)
    except OSError as exc:
        module.fail_json(msg=file_system_error(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
