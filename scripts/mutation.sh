#!/usr/bin/env bash
# Mutation testing of all of plugins/ (module_utils, filter, modules, action, lookup) with mutmut,
# against tests/unit (without tests/unit/playbooks). Not part of CI: 11553 mutants; with two jobs on
# 2 cores the first 9384 (mutmut runs the fast ones first) took 70 min, and the 1665 of verified,
# flashinfer_jit and cuda_arch, whose tests are every module test, 56 min on their own (`run` with
# their globs): hours in all (docs/figures.md). A run
# stopped early (Ctrl-C, or SIGTERM when started in the background) keeps its results: `report`
# scores the checked mutants and counts the rest.
# BSG_MUTATION_JOBS sets mutmut's --max-children (default: the number of cores).
#   ./scripts/mutation.sh [run [GLOB...]]  run mutmut afresh, then report; with GLOBs only the mutants
#                                      whose short name matches one (e.g. 'plugins.module_utils.verified.*':
#                                      the slow tail, whose tests are every module test), the rest left
#                                      not checked
#   ./scripts/mutation.sh resume       go on with a stopped run (over several sittings): the checkout
#                                      is copied again over its tree, and mutmut keeps the result of
#                                      every mutant whose function is unchanged (its hash), checking
#                                      only the rest (a survivor meets tests added since only in a
#                                      fresh `run`)
#   ./scripts/mutation.sh rerun [GLOB...]  check again every mutant the last run left alive (not killed
#                                      and not in tests/mutation-equivalent.txt), or those whose name
#                                      matches a GLOB (e.g. 'plugins.module_utils.kernel_cache.*'),
#                                      against the checkout's tests as they are now: the loop for
#                                      killing survivors (mutmut runs the mutants it is given even
#                                      when their result is known)
#   ./scripts/mutation.sh report       report the last run again
#   ./scripts/mutation.sh show NAME    the diff of one mutant (a name from the report)
# mutmut names a mutant by its module's import path, and the tests import the collection as
# ansible_collections.blackwell.sglang: the repository's files (tracked and untracked-not-ignored)
# are copied to .cache/mutation/ansible_collections/blackwell/sglang and mutmut runs in
# .cache/mutation with the configuration below. Mutants that cannot change behaviour are listed,
# each with its reason, in tests/mutation-equivalent.txt; the score leaves them out.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BSG_ROOT"
work="$BSG_ROOT/.cache/mutation"
collection="ansible_collections/blackwell/sglang"

# The checkout into the work tree (and mutmut's configuration); `fresh` starts from an empty one.
sync() {
  [ "${1:-}" = fresh ] && rm -rf "$work"
  mkdir -p "$work/$collection"
  # tar keeps the files' mtimes: mutmut regenerates only the mutants of a source newer than them.
  git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$work/$collection" -xf -
  # mutmut runs the tests in .cache/mutation/mutants, where it copies only source_paths and also_copy:
  # copy the whole collection (ansible.cfg, plugins/action/, molecule/, ...), so that the tests see
  # the checkout they see outside. tests/unit/playbooks is left out: those tests drive
  # ansible-playbook and the real gateway in processes of their own, where mutmut records no test
  # for a mutant, so it would never run them against one (CI runs them).
  cat > "$work/setup.cfg" <<EOF
[mutmut]
source_paths=
    $collection/plugins/
pytest_add_cli_args_test_selection=
    $collection/tests/unit/
pytest_add_cli_args=
    -p
    no:cacheprovider
    --ignore=$collection/tests/unit/playbooks
also_copy=
    $collection/
EOF
}

mutmut_run() {
  (cd "$work" && mutmut run --max-children "${BSG_MUTATION_JOBS:-$(nproc)}" "$@" > "$work/run.log" 2>&1) || {
    tr '\r' '\n' < "$work/run.log" | tail -n 30 >&2
    exit 1
  }
}

run() {
  if [ "$1" = resume ]; then sync; else sync fresh; fi
  shift
  mutmut_run "${@/#/ansible_collections.blackwell.sglang.}"
}

# The names of the mutants the last run left alive (exit code 0 in mutmut's .meta files), less the
# listed equivalents.
alive() {
  python - "$work/mutants" "$BSG_ROOT/tests/mutation-equivalent.txt" "$@" <<'PY'
import fnmatch, glob, json, sys

listed = {line.split(" ", 1)[0] for line in open(sys.argv[2]) if line.strip() and not line.startswith("#")}
patterns = sys.argv[3:] or ["*"]
for meta in sorted(glob.glob(sys.argv[1] + "/**/*.py.meta", recursive=True)):
    for name, code in sorted(json.load(open(meta))["exit_code_by_key"].items()):
        short = name.replace("ansible_collections.blackwell.sglang.", "", 1)
        if code == 0 and short not in listed and any(fnmatch.fnmatchcase(short, p) for p in patterns):
            print(name)
PY
}

rerun() {
  [ -d "$work/mutants" ] || { echo "no run to go on with: ./scripts/mutation.sh first" >&2; exit 1; }
  mapfile -t names < <(alive "$@")
  sync
  [ "${#names[@]}" -eq 0 ] || mutmut_run "${names[@]}"
}

report() {
  (cd "$work" && mutmut export-cicd-stats >/dev/null && mutmut results) > "$work/results.txt"
  python - "$work/mutants/mutmut-cicd-stats.json" "$work/results.txt" "$BSG_ROOT/tests/mutation-equivalent.txt" <<'PY'
import json, sys

stats = json.load(open(sys.argv[1]))
results = [line.strip().rsplit(": ", 1) for line in open(sys.argv[2]) if ": " in line]
equivalent = {}
for line in open(sys.argv[3]):
    if line.strip() and not line.startswith("#"):
        name, _, reason = line.partition(" ")
        equivalent[name.strip()] = reason.strip()
prefix = "ansible_collections.blackwell.sglang."
not_killed = [(name[len(prefix):] if name.startswith(prefix) else name, status) for name, status in results]
# A run stopped before its end leaves mutants "not checked": counted, not listed, not scored.
unchecked = [name for name, status in not_killed if status == "not checked"]
not_killed = [(name, status) for name, status in not_killed if status != "not checked"]
listed = [(name, status) for name, status in not_killed if name in equivalent]
open_ = [(name, status) for name, status in not_killed if name not in equivalent]
total = stats["total"] - len(unchecked) - len(listed)
killed = stats["killed"] + stats["timeout"] + stats["segfault"]
print("mutants: %d, killed: %d, equivalent (tests/mutation-equivalent.txt): %d, not killed: %d"
      % (stats["total"], killed, len(listed), len(open_)))
if unchecked:
    print("not checked (the run stopped before them): %d; the score is over the %d checked"
          % (len(unchecked), stats["total"] - len(unchecked)))
print("mutation score: %.1f %% (killed / (mutants - equivalent))" % (100.0 * killed / total if total else 0))
for name, status in open_:
    print("  %-12s %s" % (status, name))
stale = sorted(set(equivalent) - set(name for name, _ in not_killed) - set(unchecked))
for name in stale:
    print("  listed as equivalent but killed or gone: %s" % name)
PY
}

case "${1:-run}" in
  run) shift $(($# > 0)); run fresh "$@"; report ;;
  resume) run resume; report ;;
  rerun) shift; rerun "$@"; report ;;
  report) report ;;
  show) (cd "$work" && mutmut show "ansible_collections.blackwell.sglang.${2#ansible_collections.blackwell.sglang.}") ;;
  *) sed -n '/^set -euo/q;2,$p' "$0"; exit 2 ;;
esac
