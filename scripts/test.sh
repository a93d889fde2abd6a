#!/usr/bin/env bash
# All tests: lint (yamllint, ansible-lint production), unit tests, collection build/install check,
# Molecule scenarios. CI (.ci/run) calls exactly this.
#   ./scripts/test.sh                 everything
#   SCENARIOS="default" ./scripts/test.sh   a subset of Molecule scenarios
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$BSG_ROOT/scripts/bootstrap.sh"
cd "$BSG_ROOT"
step() { printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

# Molecule (through ansible-compat) installs this collection into ~/.ansible/collections, and
# ansible-lint prefers a copy there to this checkout: drop a copy left by an earlier run.
rm -rf "$HOME/.ansible/collections/ansible_collections/blackwell/sglang"

step "yamllint"
yamllint -s .
step "ansible-lint (profile production)"
ansible-lint --offline
step "antsibull-changelog lint"
antsibull-changelog lint
step "unit tests"
python -m pytest -q tests/unit
step "collection build + install + FQCN"
scripts/check-build.sh
for scenario in ${SCENARIOS:-$(ls molecule)}; do
  step "molecule test -s $scenario"
  molecule test -s "$scenario"
done
step "all tests passed"
