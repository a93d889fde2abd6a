#!/usr/bin/env bash
# GPU check of "nothing compiles and nothing is written outside the venv's workspace on the serving
# path" (issue 30), run on the `device` tool's GPU machine with the wheels of README.md carried in
# .whl/ (no SGLang there: the pre-warmed component is FlashInfer's `sampling`, the one the units'
# ExecStartPre= proves). As a non-root user, as the unit runs the server: the flashinfer role's
# environment, the venv's environment with every cache of the collection's table
# (module_utils/cache_census.py, filter kernel_cache_environment) in one workspace, a fresh home and an
# empty private TMPDIR (the unit's PrivateTmp=):
#   1. pre-warm `sampling` (the flashinfer_jit_cache module as a plain script), then its warm check;
#   2. the serving calls (top-k and top-p sampling on the GPU): every file the user created or
#      changed anywhere on the machine since step 1 is listed; none may lie outside the workspace,
#      no JIT build may be logged, the .so must be unchanged;
#   3. a fresh host: the workspace packed (flashinfer_jit_artifact dest), removed, seeded again from
#      the artifact (src), its warm check, and step 2 again.
# Prints the figures and one JSON line per step; exit status 0 = every check held.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

BASE=/srv/bsg-zero-writes
WS="$BASE/kernel-caches/0123456789abcdef"   # not under /tmp: the unit's PrivateTmp= hides /tmp
UNIT_HOME="$BASE/home"; UNIT_TMP="$BASE/private-tmp"; VENV_ENV="$BASE/venv.env"
rm -rf "$BASE"; mkdir -p "$WS" "$UNIT_HOME" "$UNIT_TMP"; chown -R smoke "$BASE"
# The venv's environment file as the kernel_cache role writes it: every cache in the workspace.
PYTHONPATH="$COLL" python3 - "$WS" > "$VENV_ENV" <<'PY'
import sys
from ansible_collections.blackwell.sglang.plugins.module_utils import cache_census
for name, value in cache_census.environment(sys.argv[1]).items():
    print("%s=%s" % (name, value))
PY
chmod a+r "$VENV_ENV"
as_unit() {
  local envs; mapfile -t envs < <(grep -hv '^#' "$ENV_FILE" "$VENV_ENV")
  runuser -u smoke -- env -i "${envs[@]}" HOME="$UNIT_HOME" TMPDIR="$UNIT_TMP" PYTHONPATH="$SITE:$COLL" \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "$@"
}
seconds() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}'; }
module_args() { printf '{"ANSIBLE_MODULE_ARGS": %s}\n' "$1" > "$2"; chmod a+r "$2"; }

nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/zw-gpu.txt"
module_args "{\"modules\": [\"sampling\"], \"env_file\": [\"$ENV_FILE\", \"$VENV_ENV\"], \"expected_archs\": [\"$ARCH\"], \"jobs\": $(nproc)}" /tmp/zw-warm.json
prewarm() {  # $1: name of the step
  local start; start=$(date +%s.%N)
  as_unit python3 "$ROOT/plugins/modules/flashinfer_jit_cache.py" /tmp/zw-warm.json | tail -n 1 > "$OUT/zw-$1.json"
  echo "$1 ($(seconds "$start") s): $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in ("built", "skipped_modules", "changed", "seconds", "failed", "msg")})' "$OUT/zw-$1.json")"
}

serve() {  # $1: name of the step. The serving calls, then every file the user wrote since the marker.
  local marker="$BASE/marker-$1" start
  touch "$marker"; sleep 1
  start=$(date +%s.%N)
  as_unit python3 - > "$OUT/zw-$1.json" 2> "$OUT/zw-$1.log" <<'PY' || { cat "$OUT/zw-$1.log"; return 1; }
import json, logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
import torch
import flashinfer
from flashinfer.jit import env as jit_env
so = jit_env.FLASHINFER_JIT_DIR / "sampling" / "sampling.so"
before = os.stat(so).st_mtime_ns
torch.manual_seed(0)
probs = torch.softmax(torch.randn(64, 32000, device="cuda") * 3, dim=-1)
top_k = flashinfer.sampling.top_k_sampling_from_probs(probs, 50)
top_p = flashinfer.sampling.top_p_sampling_from_probs(probs, 0.9)
torch.cuda.synchronize()
print(json.dumps({"so": str(so), "so_unchanged": os.stat(so).st_mtime_ns == before,
                  "top_k_valid": bool((probs.topk(50, dim=-1).indices == top_k[:, None]).any(-1).all()),
                  "samples": int(top_p.numel())}))
PY
  echo "$1: serving calls $(seconds "$start") s: $(cat "$OUT/zw-$1.json")"
  # Every file the service user created or changed since the marker, anywhere (the pseudo file
  # systems aside), in the workspace and outside it.
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run \) -prune -o -user smoke -newer "$marker" -type f -print 2>/dev/null \
    | sort > "$OUT/zw-$1-written.txt" || true
  find /tmp /dev/shm "$UNIT_TMP" "$UNIT_HOME" -newer "$marker" -type f -print 2>/dev/null | sort >> "$OUT/zw-$1-written.txt" || true
  sort -u -o "$OUT/zw-$1-written.txt" "$OUT/zw-$1-written.txt"
  grep -v "^$WS/" "$OUT/zw-$1-written.txt" | grep -v "^/tmp/zw-\|^$OUT/\|^$BASE/marker-" > "$OUT/zw-$1-outside.txt" || true
  echo "$1: files written: $(wc -l < "$OUT/zw-$1-written.txt") in the workspace or beside; outside the workspace: $(wc -l < "$OUT/zw-$1-outside.txt")"
  sed 's/^/  outside: /' "$OUT/zw-$1-outside.txt" | head -20
}

prewarm prewarm-cold
prewarm prewarm-warm
serve serve
# A fresh host: the workspace packed, gone, seeded from the artifact, checked warm, served.
module_args "{\"env_file\": [\"$ENV_FILE\", \"$VENV_ENV\"], \"workspace_base\": \"$WS\", \"dest\": \"$BASE/artifact.tar.gz\"}" /tmp/zw-pack.json
start=$(date +%s.%N); as_unit python3 "$ROOT/plugins/modules/flashinfer_jit_artifact.py" /tmp/zw-pack.json | tail -n 1 > "$OUT/zw-pack.json"
echo "pack ($(seconds "$start") s): $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("packed") or r.get("msg"))' "$OUT/zw-pack.json")"
sha=$(sha256sum "$BASE/artifact.tar.gz" | cut -d' ' -f1)
rm -rf "$WS" "$UNIT_HOME" "$UNIT_TMP"; mkdir -p "$WS" "$UNIT_HOME" "$UNIT_TMP"; chown smoke "$WS" "$UNIT_HOME" "$UNIT_TMP"
module_args "{\"env_file\": [\"$ENV_FILE\", \"$VENV_ENV\"], \"workspace_base\": \"$WS\", \"src\": \"$BASE/artifact.tar.gz\", \"checksum\": \"$sha\"}" /tmp/zw-seed.json
start=$(date +%s.%N); as_unit python3 "$ROOT/plugins/modules/flashinfer_jit_artifact.py" /tmp/zw-seed.json | tail -n 1 > "$OUT/zw-seed.json"
echo "seed ($(seconds "$start") s): $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in ("seeded", "rejected", "rejected_modules", "msg")})' "$OUT/zw-seed.json")"
prewarm prewarm-seeded
serve serve-seeded

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    return json.load(open("%s/zw-%s.json" % (out, name)))
def lines(name):
    return [line for line in open("%s/zw-%s.txt" % (out, name)).read().splitlines() if line]
def no_build(name):
    return "Building JIT module" not in open("%s/zw-%s.log" % (out, name)).read()
checks = {
    "cold pre-warm built sampling": load("prewarm-cold").get("built") == ["sampling"],
    "warm check built nothing": load("prewarm-warm").get("built") == [] and not load("prewarm-warm").get("changed"),
    "serving: valid samples, .so unchanged, no build logged": load("serve")["top_k_valid"] and load("serve")["so_unchanged"] and no_build("serve"),
    "serving: zero files written outside the workspace": lines("serve-outside") == [],
    "seeded onto a fresh host": load("seed").get("seeded") == ["sampling"] and load("seed").get("rejected") is None,
    "fresh host: warm check built nothing": load("prewarm-seeded").get("built") == [],
    "fresh host serving: valid, .so unchanged, no build logged": load("serve-seeded")["top_k_valid"] and load("serve-seeded")["so_unchanged"] and no_build("serve-seeded"),
    "fresh host serving: zero files written outside the workspace": lines("serve-seeded-outside") == [],
}
for name, held in checks.items():
    print("%s: %s" % ("PASS" if held else "FAIL", name))
sys.exit(0 if all(checks.values()) else 1)
PY
