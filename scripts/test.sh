#!/usr/bin/env bash
# All tests. CI (.ci/run) calls exactly `./scripts/test.sh`.
#   ./scripts/test.sh                        everything: lint, sanity, unit tests, build check, every Molecule scenario
#   ./scripts/test.sh --quick                the development tier: the same checks, Molecule only SCENARIOS (default: wheelhouse)
#   SCENARIOS="default apt" ./scripts/test.sh    a subset of the Molecule scenarios
#   BSG_BESIDE="" ./scripts/test.sh             the checks, then every scenario in turn (default: the
#                                               checks, apt and fleet run in a second process
#                                               beside default, then wheelhouse)
# Each run leaves a timestamped log and JUnit files in .cache/test-times/; at the end
# scripts/ci-times.py prints the breakdown (minutes per step, Molecule action and test file)
# against the budget in tests/ci-budget.yml.
set -euo pipefail
quick=false
for arg in "$@"; do
  case "$arg" in
    --quick) quick=true ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
times="$BSG_ROOT/.cache/test-times"
rm -rf "$times"
mkdir -p "$times"
# Every line timestamped (HH:MM:SS), on the console and in the log the breakdown reads.
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
exec > >(stamp | tee "$times/test.log") 2>&1
stamp_pid=$!
trap 'exec 1>&- 2>&-; wait "$stamp_pid"' EXIT
step() { printf '=== %s\n' "$*"; }

step "bootstrap"
"$BSG_ROOT/scripts/bootstrap.sh"
cd "$BSG_ROOT"

# ansible-lint prefers a copy of this collection in ~/.ansible/collections to this checkout: drop
# one that an older Molecule prerun left there (the scenarios now set prerun: false).
rm -rf "$HOME/.ansible/collections/ansible_collections/blackwell/sglang"

# The checks that need no node. With a second lane (below) they run first in it, so that the
# longest scenario (default) starts right after the bootstrap; otherwise first, here.
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
  python -m pytest -q -p no:cacheprovider --junitxml="$times/unit.xml" tests/unit
  step "collection build + install + FQCN"
  scripts/check-build.sh
}

if $quick; then
  scenarios="${SCENARIOS:-wheelhouse}"
else
  # Every folder of molecule/ with a molecule.yml (molecule/shared holds tasks they include).
  scenarios="${SCENARIOS:-$(for f in molecule/*/molecule.yml; do basename "$(dirname "$f")"; done)}"
fi
run_scenario() {
  step "molecule test -s $1"
  PYTEST_ADDOPTS="--junitxml=$times/molecule-$1.xml" molecule test -s "$1"
}
# The scenarios in BSG_BESIDE (default apt and fleet) run one after the other in a second process
# beside the rest (default, then wheelhouse), after the checks: most of a scenario's wall time is
# Ansible's round trips to the nodes, which leave a core idle (one core busy on average with one
# lane, measured). wheelhouse (2 min) goes after default because that evens the two lanes (clean
# clone of e4158e5: default 48.9 min, the checks, apt and fleet 48.0 beside it, wheelhouse 1.9).
# Their output goes to .cache/test-times/beside.log and is printed at the end.
beside="" main=""
for scenario in $scenarios; do
  case " ${BSG_BESIDE-apt fleet} " in
    *" $scenario "*) beside="$beside $scenario" ;;
    *) main="$main $scenario" ;;
  esac
done
if [ -z "$main" ]; then main="$beside" beside=""; fi
if [ -n "$beside" ]; then
  (
    set -o pipefail
    (set -e; checks; for scenario in $beside; do run_scenario "$scenario"; done) 2>&1 | stamp > "$times/beside.log"
  ) &
  beside_pid=$!
else
  checks
fi
failed=""
for scenario in $main; do
  run_scenario "$scenario" || { failed="$scenario"; break; }
done
if [ -n "$beside" ]; then
  beside_rc=0
  wait "$beside_pid" || beside_rc=$?
  step "output of the scenarios run beside the others:$beside"
  cat "$times/beside.log"
  [ "$beside_rc" -eq 0 ] || failed="$failed (the checks or one of$beside)"
fi
if [ -n "$failed" ]; then
  echo "test.sh: Molecule scenario $failed failed"
  exit 1
fi
step "all tests passed"
python scripts/ci-times.py "$times"
