#!/usr/bin/env bash
# Builds the collection tarball, installs it into an empty collections path and runs its role by
# FQCN from there (not from this checkout): docs render, bad input fails in preflight, and a
# check-mode run of blackwell.sglang.cuda_toolkit on this machine completes and changes nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BSG_ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

ansible-galaxy collection build --force --output-path "$tmp/dist" . >/dev/null
tarball="$(ls "$tmp"/dist/blackwell-sglang-*.tar.gz)"
echo "built $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB)"
# What an operator installs is the collection: no build-time, test or development files.
tar -tzf "$tarball" > "$tmp/contents.txt"
if grep -E '(^|/)(\.venv|\.venv-newest|\.cache|\.git|__pycache__)(/|$)|^(tests|molecule|scripts|benchmarks|inventories/lab)(/|$)|^(ansible\.cfg|requirements-dev\.txt|requirements-newest\.txt|\.ansible-lint|\.yamllint)$' "$tmp/contents.txt"; then
  echo "the tarball carries test or build-time files (galaxy.yml build_ignore)" >&2; exit 1
fi
top="$(cut -d/ -f1 "$tmp/contents.txt" | sort -u | paste -sd' ')"
expected="FILES.json MANIFEST.json README.md changelogs docs inventories meta playbooks plugins roles site.yml"
[ "$top" = "$expected" ] || { echo "the tarball's top level is '$top', expected '$expected'" >&2; exit 1; }
echo "tarball holds: $top ($(wc -l < "$tmp/contents.txt") entries)"
export ANSIBLE_COLLECTIONS_PATH="$tmp/collections"
ansible-galaxy collection install --force -p "$tmp/collections" "$tarball" >/dev/null
test -f "$tmp/collections/ansible_collections/blackwell/sglang/roles/cuda_toolkit/meta/argument_specs.yml"
cd "$tmp"
ansible-doc -t role blackwell.sglang.cuda_toolkit | grep -q cuda_toolkit_target_archs
ansible-doc -t role blackwell.sglang.sglang_venv | grep -q sglang_venv_wheelhouse
ansible-doc -t role blackwell.sglang.sglang_services | grep -q sglang_services_active
# An execution environment (ansible-builder) reads the collection's controller-side needs through
# meta/execution-environment.yml: it and every file it names must ship in the tarball. The EE
# definition in docs/execution-environment/ installs the tarball of galaxy.yml's version.
installed="$tmp/collections/ansible_collections/blackwell/sglang"
eedef="$BSG_ROOT/docs/execution-environment/execution-environment.yml"
python - "$installed" "$eedef" "$(basename "$tarball")" <<'PY'
import os, sys, yaml
root, eedef, tarball = sys.argv[1:]
with open(os.path.join(root, "meta", "execution-environment.yml")) as handle:
    deps = yaml.safe_load(handle)["dependencies"]
assert set(deps) == {"python", "system"}, deps
for path in deps.values():
    assert os.path.isfile(os.path.join(root, path)), "meta/execution-environment.yml names %s, not in the tarball" % path
with open(eedef) as handle:
    ee = yaml.safe_load(handle)
names = [item["name"] for item in ee["dependencies"]["galaxy"]["collections"]]
sources = [item["src"] for item in ee["additional_build_files"]]
assert names == ["collections/" + tarball] and sources == [tarball], \
    "%s installs %s from %s, not %s (galaxy.yml's version)" % (eedef, names, sources, tarball)
PY
# With ansible-builder on PATH (not installed by bootstrap.sh): its own reading of the installed
# collection lists every requirement, and the EE definition renders a build context.
if command -v ansible-builder >/dev/null; then
  ansible-builder introspect "$tmp/collections" --write-pip "$tmp/ee-pip.txt" --write-bindep "$tmp/ee-bindep.txt" >/dev/null
  for kind in requirements:pip bindep:bindep; do
    while IFS= read -r req; do
      grep -Fxq "$req  # from collection blackwell.sglang" "$tmp/ee-${kind#*:}.txt" \
        || { echo "ansible-builder introspect misses '$req' (meta/ee-${kind%:*}.txt)" >&2; exit 1; }
    done < <(sed -e 's/\(^\|\s\+\)#.*$//' -e '/^\s*$/d' "$installed/meta/ee-${kind%:*}.txt")
  done
  mkdir "$tmp/ee" && cp "$eedef" "$tarball" "$tmp/ee/"
  ansible-builder create -f "$tmp/ee/execution-environment.yml" --context "$tmp/ee/context" >/dev/null
  test -f "$tmp/ee/context/_build/collections/$(basename "$tarball")"
  echo "ansible-builder: introspect lists the collection's requirements, the EE definition renders"
fi
# flashinfer_prewarm_command installs its own copy of this file on the hosts: it must ship.
test -f "$tmp/collections/ansible_collections/blackwell/sglang/plugins/module_utils/flashinfer_jit.py"
cat > play.yml <<'PLAY'
---
- name: The installed role, by FQCN
  hosts: localhost
  connection: local
  gather_facts: true
  roles:
    - role: blackwell.sglang.cuda_toolkit
PLAY
if out="$(ansible-playbook play.yml -e cuda_toolkit_version=13.0 2>&1)"; then
  echo "bad version was accepted" >&2; exit 1
fi
grep -q "is not a full X.Y.Z version" <<<"$out" || { echo "$out" >&2; exit 1; }
# Check mode changes nothing on this machine: every path the role would write, to full depth, and
# the installed packages (tests/fingerprint.sh, the same "nothing changed" as the Molecule tests).
# The prefix is one that does not exist, outside /tmp (the preflight refuses a CUDA home there).
prefix="/var/lib/bsg-check-build-$$/cuda"
touched=("$(dirname "$prefix")" /etc/default/cuda-toolkit /etc/profile.d/cuda.sh /etc/apt/preferences.d /etc/apt/sources.list.d)
"$BSG_ROOT/tests/fingerprint.sh" "${touched[@]}" > "$tmp/before"
out="$(ansible-playbook --check play.yml -e cuda_toolkit_pip_prefix="$prefix" 2>&1)" || { echo "$out" >&2; exit 1; }
grep -q "failed=0" <<<"$out" || { echo "$out" >&2; exit 1; }
"$BSG_ROOT/tests/fingerprint.sh" "${touched[@]}" > "$tmp/after"
diff "$tmp/before" "$tmp/after" >&2 || { echo "check mode changed this machine (above)" >&2; exit 1; }
echo "installed collection: role runs by FQCN, preflight rejects bad input, check mode changes nothing"
