#!/usr/bin/env bash
# Wall times for building an SGLang venv (a benchmark, not a test: it prints figures, asserts
# nothing). Runs on this machine, in scratch directories, with the same commands sglang_venv runs:
#   uv cold     uv venv + uv pip install with an empty uv cache
#   uv warm     the same again with the cache from the cold run (a second venv on one host)
#   pip         python -m venv + pip install, no cache
#   wheelhouse cold   pip download of every wheel (the controller's one-time cost)
#   wheelhouse warm   uv pip install --no-index --find-links <wheelhouse> (each host's cost)
#
#   benchmarks/venv_install.sh                    # sglang==0.5.23 (~9.5 GB a venv; pip takes minutes)
#   benchmarks/venv_install.sh six==1.17.0 tomli-w==1.2.0   # a quick run of the mechanism
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/env.sh"
specs=("$@")
[ "${#specs[@]}" -gt 0 ] || specs=("sglang==0.5.23")
python="${PYTHON:-python3}"
work="$(mktemp -d /var/tmp/bsg-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
export UV_CACHE_DIR="$work/uv-cache" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 UV_PYTHON_DOWNLOADS=never

declare -A secs
timed() {  # name command...
  local name="$1"; shift
  local start end
  start=$EPOCHREALTIME
  "$@" >"$work/$name.log" 2>&1 || { echo "$name failed:"; tail -n 20 "$work/$name.log"; exit 1; }
  end=$EPOCHREALTIME
  secs[$name]=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  printf '%-18s %8s s\n' "$name" "${secs[$name]}"
}
uv_build() { uv venv -q --python "$python" "$1" && uv pip install -q --python "$1/bin/python" "${@:2}"; }
pip_build() { "$python" -m venv "$1" && "$1/bin/python" -m pip install -q "${@:2}"; }

echo "specs: ${specs[*]}   python: $($python --version)   uv: $(uv --version)   cores: $(nproc)"
timed "uv cold" uv_build "$work/v1" "${specs[@]}"
timed "uv warm" uv_build "$work/v2" "${specs[@]}"
rm -rf "$work/v1" "$work/v2"
timed "pip" pip_build "$work/v3" "${specs[@]}"
rm -rf "$work/v3" "$UV_CACHE_DIR"
timed "wheelhouse cold" "$python" -m pip download -q --only-binary=:all: -d "$work/wheels" "${specs[@]}"
timed "wheelhouse warm" uv_build "$work/v4" --no-index --find-links "$work/wheels" "${specs[@]}"
printf 'wheelhouse: %s in %s files\n' "$(du -sh "$work/wheels" | cut -f1)" "$(find "$work/wheels" -maxdepth 1 -name '*.whl' | wc -l)"
