#!/usr/bin/env bash
# GPU smoke test for the JIT pre-warm, run on a GPU machine (the `device` tool's H200, sm_90a; no
# network there, so FlashInfer's wheels are carried in .whl/). As a non-root user it:
#   1. pre-warms FlashInfer's `sampling` module with the flashinfer_jit_cache module (run as a
#      plain script, with the same environment file a unit would use), twice: built, then skipped;
#   2. calls FlashInfer sampling functions that need only that module on the GPU and checks the
#      samples are valid, that no "Building JIT module" line was logged and that the .so's mtime
#      did not change: nothing compiled on the serving path.
# Prints one JSON line per step; writes them to $OUT/ when OUT is set. Exit status 0 = all held.
#   .whl/: flashinfer_python-0.7.2 (sampling sources only, see README), apache_tvm_ffi-0.1.11, ansible_core
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
printf '{"ANSIBLE_MODULE_ARGS": {"modules": ["sampling"], "env_file": "%s", "expected_archs": ["%s"], "jobs": %s}}\n' \
  "$ENV_FILE" "$ARCH" "$(nproc)" > /tmp/smoke-args.json
chmod a+r /tmp/smoke-args.json
for run in cold warm; do
  start=$(date +%s.%N)
  as_smoke python3 "$ROOT/plugins/modules/flashinfer_jit_cache.py" /tmp/smoke-args.json | tail -n 1 > "$OUT/prewarm_$run.json"
  echo "prewarm $run ($(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}') s wall): $(cat "$OUT/prewarm_$run.json")"
done

as_smoke python3 - > "$OUT/serve.json" 2> "$OUT/serve.log" <<'PY' || { cat "$OUT/serve.log"; exit 1; }
import json, logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
import torch
import flashinfer
from flashinfer.jit import env as jit_env
so = jit_env.FLASHINFER_JIT_DIR / "sampling" / "sampling.so"
before = os.stat(so).st_mtime_ns
torch.manual_seed(0)
probs = torch.softmax(torch.randn(64, 32000, device="cuda") * 3, dim=-1)
k, p = 50, 0.9
top_k = flashinfer.sampling.top_k_sampling_from_probs(probs, k)
top_p = flashinfer.sampling.top_p_sampling_from_probs(probs, p)
torch.cuda.synchronize()
in_top_k = (probs.topk(k, dim=-1).indices == top_k[:, None]).any(-1)
sorted_p, order = probs.sort(dim=-1, descending=True)
nucleus = (sorted_p.cumsum(-1) - sorted_p) < p            # tokens before the mass reaches p
in_nucleus = torch.zeros_like(probs, dtype=torch.bool).scatter(1, order, nucleus)
in_nucleus = in_nucleus.gather(1, top_p.long()[:, None]).squeeze(1)
print(json.dumps({
    "device": torch.cuda.get_device_name(), "flashinfer": flashinfer.__version__,
    "target_archs": sorted("%s.%s" % a for a in __import__("flashinfer.jit.core", fromlist=["x"]).current_compilation_context.TARGET_CUDA_ARCHS),
    "top_k_valid": bool(in_top_k.all()), "top_p_valid": bool(in_nucleus.all()),
    "so_mtime_unchanged": os.stat(so).st_mtime_ns == before, "so": str(so),
}))
PY
cat "$OUT/serve.json"
if grep -q "Building JIT module" "$OUT/serve.log"; then echo "FAIL: the serving call compiled"; exit 1; fi
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
cold, warm, serve = (json.load(open("%s/%s.json" % (out, n))) for n in ("prewarm_cold", "prewarm_warm", "serve"))
checks = {
    "cold pre-warm built sampling": cold.get("built") == ["sampling"] or cold.get("skipped_modules") == ["sampling"],
    "warm pre-warm skipped sampling, changed nothing": warm.get("skipped_modules") == ["sampling"] and not warm.get("changed"),
    "top-k samples valid": serve["top_k_valid"], "top-p samples valid": serve["top_p_valid"],
    "no rebuild on the serving path (.so mtime)": serve["so_mtime_unchanged"],
}
for name, ok in checks.items():
    print(("PASS " if ok else "FAIL ") + name)
sys.exit(0 if all(checks.values()) else 1)
PY
