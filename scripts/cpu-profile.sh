#!/usr/bin/env bash
# CPU minutes by command name of everything a command runs, the Molecule nodes' processes included:
# where a CPU-bound run such as ./scripts/test.sh spends its cores (ci-times.py says where it spends
# its minutes of wall time).
#   ./scripts/cpu-profile.sh ./scripts/test.sh        run it, then print the commands that used most CPU
#   ./scripts/cpu-profile.sh --report FILE            print the table again from a kept record
# It uses the kernel's process accounting through Debian's acct package (accton, sa; apt-get install
# acct) and needs root. The kernel records a process when it exits, in the record of every pid
# namespace above it, so the containers' processes are in it; one still running at the end is not.
# The record is kept in .cache/cpu-profile.pacct. Accounting is switched off at the end (and acct's
# own service restarted if it was running).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
record="$root/.cache/cpu-profile.pacct"
top="${BSG_CPU_TOP:-25}"

report() {
  # sa -a: every command, none folded into "***other"; -c: percentages. Column 5 is the CPU time
  # (user + system) in minutes, "cp"; the first line is the total.
  local table
  table="$(sa -a -c "$1")"
  printf '%-24s %8s %10s %7s\n' command runs "cpu min" share
  awk 'NR > 1 { printf "%-24s %8d %10.2f %6.1f%%\n", $NF, $1, $5 + 0, $6 + 0 }' <<< "$table" \
    | sort -k3,3 -rn | awk -v top="$top" 'NR <= top'
  awk 'NR == 1 { printf "%-24s %8d %10.2f\n", "total", $1, $5 + 0 }' <<< "$table"
}

case "${1:-}" in
  ""|-h|--help) sed -n '2,11p' "$0"; exit 0 ;;
  --report) report "${2:?--report FILE}"; exit 0 ;;
esac
if [ "$(id -u)" -ne 0 ]; then echo "cpu-profile.sh: needs root (process accounting)" >&2; exit 2; fi
for tool in accton sa; do
  command -v "$tool" > /dev/null || { echo "cpu-profile.sh: $tool not found: apt-get install acct" >&2; exit 2; }
done
mkdir -p "$(dirname "$record")"
: > "$record"
service_was_active=false
if systemctl is-active --quiet acct 2> /dev/null; then service_was_active=true; fi
# Off again however the command ends (an interrupt included).
accounting_off() {
  accton off > /dev/null
  if $service_was_active; then systemctl restart acct; fi
}
trap accounting_off EXIT
accton "$record" > /dev/null
rc=0
"$@" || rc=$?
accounting_off
trap - EXIT
echo "=== CPU by command ($*; record $record)"
report "$record"
exit "$rc"
