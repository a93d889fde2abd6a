#!/bin/sh
# verify-unit.sh FILE UNIT-NAME: `systemd-analyze verify` a rendered unit under its own name, in a
# scratch directory, before it replaces the installed one. Any complaint fails (systemd-analyze
# prints some problems as warnings and still exits 0).
set -u
file="$1"
name="$2"
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$file" "$dir/$name" || exit 1
out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$dir/$name" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
    printf '%s\n' "systemd-analyze verify $name failed (rc=$rc):" "$out" >&2
    exit 1
fi
