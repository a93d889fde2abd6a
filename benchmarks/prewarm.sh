#!/usr/bin/env bash
# Cold vs warm FlashInfer JIT pre-warm on a converged node (a benchmark: prints figures, asserts
# nothing). Runs blackwell.sglang.flashinfer_jit_cache as the service user with the units'
# environment file: once after throwing this version's cache away (cold), then again (warm).
#   benchmarks/prewarm.sh [inventory] [host] [modules, comma-separated]
#   benchmarks/prewarm.sh inventories/lab lab-pro6000 sampling
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/env.sh"
cd "$BSG_ROOT"
inventory="${1:-inventories/lab}" host="${2:-lab-pro6000}" modules="${3:-sampling}"
run() {  # state
  local start out
  start=$EPOCHREALTIME
  out="$(ansible "$host" -i "$inventory" -b --become-user sglang -o \
    -e ansible_python_interpreter=/opt/sglang/current/bin/python \
    -m blackwell.sglang.flashinfer_jit_cache \
    -a "state=$1 modules=$modules env_file=/etc/sglang/flashinfer.env,/opt/sglang/current/venv.env")"
  printf '%-8s %7.1f s wall   module seconds: %s\n' "$1" "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" \
    "$(sed -n 's/.*"seconds": \({[^}]*}\).*/\1/p' <<<"$out")"
}
echo "host $host, modules $modules, $(ansible "$host" -i "$inventory" -o -m ansible.builtin.command -a nproc | sed 's/.*>>//') cores"
run rebuilt   # cold: this version/arch cache removed, then built
run present   # warm: FlashInfer's ninja finds nothing to do
