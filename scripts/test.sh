#!/usr/bin/env bash
# All tests. CI (.ci/run) calls exactly `./scripts/test.sh`.
#   ./scripts/test.sh                        everything: lint, sanity, unit tests, syntax and build check (ansible-core
#                                            2.19), the same but the build with 2.21 (.venv-newest), every Molecule
#                                            scenario, the gateway tests (the drain through the real smg, under load)
#   ./scripts/test.sh --quick                the development tier: the same checks, Molecule only SCENARIOS (default: wheelhouse)
#   SCENARIOS="default apt" ./scripts/test.sh    a subset of the Molecule scenarios
#   BSG_BESIDE="" ./scripts/test.sh             the checks, then every scenario in turn (default: b300
#                                               and fleet run in a second process beside the checks,
#                                               default, apt, wheelhouse and the gateway tests)
#   ./scripts/test.sh --clean                only remove what an interrupted run left (below)
# Each run leaves a timestamped log, JUnit files and the disk samples in .cache/test-times/; at the
# end scripts/ci-times.py prints the breakdown (minutes per step, Molecule action and test file;
# the disk's peak) against the budget in tests/ci-budget.yml.
# Nothing outlives a run: it starts by removing the nodes an interrupted run of this project's
# scenarios left (scripts/disk.py clean: by their label, nothing else), each scenario destroys its
# nodes whether it passes or fails, and a run that is stopped (Ctrl-C, a time limit) removes its
# nodes on the way out. Before the run and before each scenario, scripts/disk.py check stops it
# at once when less disk is free than tests/ci-budget.yml says the scenarios need.
set -euo pipefail
quick=false clean=false
for arg in "$@"; do
  case "$arg" in
    --quick) quick=true ;;
    --clean) clean=true ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if $clean; then
  "$BSG_ROOT/scripts/bootstrap.sh" >/dev/null
  exec python "$BSG_ROOT/scripts/disk.py" clean
fi
times="$BSG_ROOT/.cache/test-times"
rm -rf "$times"
mkdir -p "$times"
# Every line timestamped (HH:MM:SS), on the console and in the log the breakdown reads.
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
exec > >(stamp | tee "$times/test.log") 2>&1
stamp_pid=$!
step() { printf '=== %s\n' "$*"; }
finished=false sampler_pid="" beside_pid="" main_pid=""
kill_tree() { local child; for child in $(pgrep -P "$1"); do kill_tree "$child"; done; kill -TERM "$1" 2>/dev/null || true; }
# On the way out: stop the disk sampler; a run that did not finish (stopped, or a disk check that
# failed) stops both lanes and removes their scenarios' nodes.
on_exit() {
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  if ! $finished; then
    for pid in $main_pid $beside_pid; do kill_tree "$pid"; done
    [ ! -f "$times/disk-stop.txt" ] || cat "$times/disk-stop.txt"
    python "$BSG_ROOT/scripts/disk.py" clean 2>&1 || true
  fi
  exec 1>&- 2>&-
  wait "$stamp_pid"
}
trap on_exit EXIT
trap 'exit 130' INT
# A TERM from a failed disk check exits 1 (the message is in disk-stop.txt), any other 143.
trap 'if [ -f "$times/disk-stop.txt" ]; then exit 1; else exit 143; fi' TERM
# Stops the whole run at once when the disk is short (the message is printed on the way out).
disk_check() {
  python "$BSG_ROOT/scripts/disk.py" check "$@" 2>"$times/disk-stop.txt" && rm -f "$times/disk-stop.txt" && return 0
  kill -TERM $$
  return 1
}

step "bootstrap"
"$BSG_ROOT/scripts/bootstrap.sh"
cd "$BSG_ROOT"
python scripts/disk.py clean
python scripts/disk.py sample "$times/disk.log" &
sampler_pid=$!

# ansible-lint prefers a copy of this collection in ~/.ansible/collections to this checkout: drop
# one that an older Molecule prerun left there (the scenarios now set prerun: false).
rm -rf "$HOME/.ansible/collections/ansible_collections/blackwell/sglang"

# The checks that need no node: first in the main lane (the second, b300 then fleet, is the
# longer one: it starts right after the bootstrap).
checks() {
  step "yamllint"
  yamllint -s .
  step "ansible-lint (profile production)"
  ansible-lint --offline
  step "antsibull-changelog lint"
  antsibull-changelog lint
  step "ansible-test sanity"
  scripts/sanity.sh
  step "unit tests"
  python -m pytest -q -p no:cacheprovider --junitxml="$times/unit.xml" --ignore=tests/unit/playbooks tests/unit
  step "syntax check"
  syntax_check
  step "collection build + install + FQCN"
  scripts/check-build.sh
  newest
}
# Every playbook parsed by this ansible-core, against the example inventory.
syntax_check() {
  python -c 'from ansible.release import __version__; import sys; print("ansible-core", __version__, "on Python", sys.version.split()[0])'
  ansible-playbook --syntax-check -i inventories/example site.yml playbooks/*.yml >/dev/null
}
# The same checks with the newest ansible-core meta/runtime.yml admits (.venv-newest: 2.21 on Python 3.12);
# Molecule and the gateway tests run with .venv's 2.19, the oldest.
newest() {
  (
    # BSG_VENV: the scripts sourcing env.sh (sanity.sh) put its bin first on PATH.
    export BSG_VENV="$BSG_ROOT/.venv-newest" PATH="$BSG_ROOT/.venv-newest/bin:$PATH" VIRTUAL_ENV="$BSG_ROOT/.venv-newest"
    step "newest ansible-core: ansible-lint"
    ansible-lint --offline
    step "newest ansible-core: ansible-test sanity"
    scripts/sanity.sh
    step "newest ansible-core: unit tests"
    python -m pytest -q -p no:cacheprovider --junitxml="$times/unit-newest.xml" --ignore=tests/unit/playbooks tests/unit
    step "newest ansible-core: syntax check"
    syntax_check
  )
}
# The rollout's drain against the real model gateway (smg from PyPI, stand-in servers on loopback,
# a load of real requests): no node, but minutes of playbook runs, so it runs at the end of the
# main lane, which ends well before the one with b300 and fleet.
gateway_tests() {
  step "gateway tests (the drain through the real smg, under load)"
  python -m pytest -q -p no:cacheprovider --junitxml="$times/gateway.xml" tests/unit/playbooks
}

if $quick; then
  scenarios="${SCENARIOS:-wheelhouse}"
else
  # Every folder of molecule/ with a molecule.yml (molecule/shared holds tasks they include).
  scenarios="${SCENARIOS:-$(for f in molecule/*/molecule.yml; do basename "$(dirname "$f")"; done)}"
fi
run_scenario() {
  disk_check "$1" || return 1
  step "molecule test -s $1"
  PYTEST_ADDOPTS="--junitxml=$times/molecule-$1.xml" molecule test -s "$1"
}
# The scenarios in BSG_BESIDE (default b300 and fleet) run one after the other in a second process
# beside the rest (the checks, default, apt, wheelhouse, the gateway tests): most of a scenario's
# wall time is Ansible's round trips to the nodes, which leave a core idle (one core busy on average
# with one lane, measured). The lanes are planned for time and disk together: the second (b300 and
# fleet, the longer) starts right after the bootstrap, the first holds what is left (clean clone of
# d3165df: the checks 3.5 min, default 20, apt 4, wheelhouse 2.5, the gateway tests 6 against b300
# 16 and fleet 25), and no more than three nodes with an SGLang venv exist at once (default's one
# beside b300's, then fleet's two; tests/README.md, "Disk").
# Their output goes to .cache/test-times/beside.log and is printed at the end.
beside="" main=""
for scenario in $scenarios; do
  case " ${BSG_BESIDE-b300 fleet} " in
    *" $scenario "*) beside="$beside $scenario" ;;
    *) if [ "$scenario" = default ]; then main="default $main"; else main="$main $scenario"; fi ;;
  esac
done
if [ -z "$main" ]; then main="$beside" beside=""; fi
# The two lanes' largest scenarios hold their nodes at the same time.
lanes=()
for list in "$main" "$beside"; do
  read -r -a names <<< "$list"
  [ "${#names[@]}" -eq 0 ] || lanes+=("$(IFS=,; echo "${names[*]}")")
done
disk_check "${lanes[@]}"
if [ -n "$beside" ]; then
  (
    set -o pipefail
    (set -e; for scenario in $beside; do run_scenario "$scenario"; done) 2>&1 | stamp > "$times/beside.log"
  ) &
  beside_pid=$!
fi
failed=""
# Each step of the main lane runs in the background, so that a stop (a signal, a failed disk check
# in the other lane) acts at once; not inside `||` (errexit would not stop the checks at a failure).
checks &
main_pid=$!
wait "$main_pid" || failed="(the checks)"
for scenario in $main; do
  [ -z "$failed" ] || break
  run_scenario "$scenario" &
  main_pid=$!
  wait "$main_pid" || { failed="Molecule scenario $scenario"; break; }
done
if [ -z "$failed" ]; then
  gateway_tests &
  main_pid=$!
  wait "$main_pid" || failed="(the gateway tests)"
fi
main_pid=""
if [ -n "$beside" ]; then
  # Ends the last scenario's row of the breakdown here, not when the other lane ends.
  step "waiting for the scenarios beside the others"
  beside_rc=0
  wait "$beside_pid" || beside_rc=$?
  step "output of the scenarios run beside the others:$beside"
  cat "$times/beside.log"
  [ "$beside_rc" -eq 0 ] || failed="$failed (one of$beside)"
fi
if [ -n "$failed" ]; then
  echo "test.sh: $failed failed"
  exit 1
fi
finished=true
step "all tests passed"
python scripts/ci-times.py "$times"
