#!/bin/sh
# verify-unit.sh FILE UNIT-NAME: `systemd-analyze verify` a rendered unit under its own name, in a
# scratch directory, before it replaces the installed one. Any complaint fails (systemd-analyze
# prints some problems as warnings and still exits 0). What the script itself cannot do (no
# arguments, no readable file, no systemd-analyze, no scratch directory) is one line on stderr, exit 2.
set -u
fail() {
    printf 'verify-unit.sh: %s\n' "$1" >&2
    exit 2
}
[ "$#" -eq 2 ] || fail "usage: verify-unit.sh FILE UNIT-NAME (got $# arguments): the unit template's validate: passes both"
file="$1"
name="$2"
if [ ! -f "$file" ] || [ ! -r "$file" ]; then
    fail "cannot read the rendered unit $file (missing or unreadable): run it as root, as the template task does"
fi
command -v systemd-analyze >/dev/null 2>&1 ||
    fail "systemd-analyze not found on PATH=$PATH: install systemd (its package provides systemd-analyze)"
dir=$(mktemp -d 2>/dev/null) || fail "cannot create a scratch directory with mktemp -d: check TMPDIR=${TMPDIR:-/tmp} (writable, not full)"
trap 'rm -rf "$dir"' EXIT
cp "$file" "$dir/$name" 2>/dev/null || fail "cannot copy $file to $dir/$name: check the unit name and free space in ${TMPDIR:-/tmp}"
out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$dir/$name" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
    printf '%s\n' "systemd-analyze verify $name failed (rc=$rc):" "$out" >&2
    exit 1
fi
