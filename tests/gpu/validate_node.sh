#!/usr/bin/env bash
# GPU test of the nvidia_gpu_validate module, run on a GPU machine (the `device` tool's H200s, cc 9.0,
# target 9.0a; no network: wheels carried in .whl/, see README). As the non-root user `smoke`, with the
# env file a unit would read, the module run as a plain script with an args file:
#   1. pre-warms `sampling`, `quantization` and `norm` (flashinfer_jit_cache), as the flashinfer role does;
#   2. a good node: the kernel for 9.0a on every GPU, each pre-warmed FlashInfer module loaded and run
#      once with a tiny call on every GPU, an NCCL all-reduce across all GPUs with the service's NCCL
#      variables as sglang_server_args resolves them (bus bandwidth and transports with 2+): passed;
#   3. planted: target 10.0a, which an H200 cannot run: failed, naming the GPU and
#      cudaErrorNoKernelImageForDevice;
#   4. planted: NCCL bootstrap pointed at a network interface that does not exist
#      (NCCL_SOCKET_IFNAME=bsg-none0): the all-reduce fails (retried without P2P on 2+ GPUs), the
#      module fails naming NCCL's error;
#   5. check mode: skipped, nothing run;
#   6. a FlashInfer module that was not pre-warmed (topk): failed, the validation compiles nothing;
#   7. the backends SGLang resolved (recorded with the real SGLang 0.5.23) for the GPU's own compute
#      capability reported (case 2); a service resolved for 12.0 only: failed, naming both.
# Writes each result to $OUT/validate_<case>.json and prints a PASS/FAIL line per expectation.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
gpus="$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)"
printf '{"ANSIBLE_MODULE_ARGS": {"modules": ["sampling", "quantization", "norm"], "env_file": "%s", "expected_archs": ["%s"], "jobs": %s}}\n' \
  "$ENV_FILE" "$ARCH" "$(nproc)" > /tmp/validate-prewarm.json
chmod a+r /tmp/validate-prewarm.json
start=$(date +%s.%N)
as_smoke python3 "$ROOT/plugins/modules/flashinfer_jit_cache.py" /tmp/validate-prewarm.json | tail -n 1 > "$OUT/prewarm.json"
echo "prewarm ($(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}') s): $(cut -c1-300 "$OUT/prewarm.json")"

run_case() {  # name, targets (JSON list), extra env assignments..., then -- and extra args JSON (object body or empty)
  local name="$1" targets="$2"; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  local extra="${1:-}"
  printf '{"ANSIBLE_MODULE_ARGS": {"gpus": [%s], "services": {"eagle3": []}, "targets": %s, "flashinfer_modules": ["sampling"], "env_file": ["%s"], "timeout": 120%s}}\n' \
    "$gpus" "$targets" "$ENV_FILE" "$extra" > "/tmp/validate-$name.json"
  chmod a+r "/tmp/validate-$name.json"
  local begin; begin=$(date +%s.%N)
  as_smoke env "${envs[@]}" python3 "$ROOT/plugins/modules/nvidia_gpu_validate.py" "/tmp/validate-$name.json" \
    > "$OUT/validate_$name.out" 2> "$OUT/validate_$name.err" || true
  tail -n 1 "$OUT/validate_$name.out" > "$OUT/validate_$name.json"
  echo "case $name ($(awk -v s="$begin" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}') s wall): $(cut -c1-1500 "$OUT/validate_$name.json")"
}

# What sglang_server_args resolved with the real SGLang 0.5.23 (recorded on a CPU host: SGLang's import
# needs ~5 GB of packages, more than this machine can be given): Qwen3-8B for 9.0 (the backends and the
# NCCL variables its launcher sets), and the example inventory's PRO 6000 service, for 12.0 only.
resolved() {  # JSON: {"resolved": {"eagle3": {cc: the recorded entry of $1 for cc}}}
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["resolved"][sys.argv[2]][sys.argv[3]]
print(", \"resolved\": " + json.dumps({"eagle3": {sys.argv[3]: r}}))' "$ROOT/tests/unit/plugins/fixtures/sglang-0.5.23-resolved.json" "$1" "$2"
}
run_case good '["9.0a"]' -- ', "flashinfer_modules": ["sampling", "quantization", "norm"]'"$(resolved qwen3-8b 9.0)"
run_case elsewhere '["9.0a"]' -- "$(resolved example-pro6000-eagle3 12.0)"
run_case target '["10.0a"]'
run_case nccl '["9.0a"]' NCCL_SOCKET_IFNAME=bsg-none0
run_case check '["9.0a"]' -- ', "_ansible_check_mode": true'
run_case notwarm '["9.0a"]' -- ', "flashinfer_modules": ["sampling", "topk"]'

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
good, target, nccl, check, notwarm, elsewhere = (json.load(open("%s/validate_%s.json" % (out, n)))
                                                 for n in ("good", "target", "nccl", "check", "notwarm", "elsewhere"))
kernel_ok = [g["ok"] for g in good["kernel"]["gpus"]]
checks = {
    "good node passed": good.get("status") == "passed" and not good.get("failed"),
    "kernel ran on every GPU (driver/runtime API %s/%s)" % (good["kernel"]["gpus"][0].get("driver_api"), good["kernel"]["gpus"][0].get("runtime_api")):
        kernel_ok and all(kernel_ok),
    "FlashInfer sampling, quantization and norm each ran on every GPU": good["flashinfer"]["ok"]
        and good["flashinfer"]["ran"] == ["sampling", "quantization", "norm"] and not good["flashinfer"]["loaded_only"]
        and all(g["ran"] == ["sampling", "quantization", "norm"] for g in good["flashinfer"]["gpus"]),
    # One GPU: no channel between ranks, no transport; two or more: the ones NCCL's log names.
    "the all-reduce ran with the service's NCCL variables and named its transports": good["nccl"][0].get("environment") == {
        "NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"} and (
        good["nccl"][0].get("transports") == [] if len(good["nccl"][0]["devices"]) == 1 else bool(good["nccl"][0].get("transports"))),
    "the backends SGLang resolved for this GPU's compute capability are reported": good.get("backends", {}).get("eagle3", {}).get(
        "compute_capability") == "9.0" and good["backends"]["eagle3"]["backends"].get("attention_backend") == "fa3"
        and "SGLang backends eagle3 on 9.0: attention fa3" in good.get("summary", ""),
    "a service resolved for 12.0 only failed on this GPU, naming both": elsewhere.get("failed")
        and "sglang-eagle3 was resolved for 12.0, but GPU" in elsewhere.get("msg", "")
        and "compute capability 9.0: the backends SGLang picks there were never checked" in elsewhere.get("msg", ""),
    "NCCL all-reduce passed (%s GB/s, NCCL %s)" % (good["nccl"][0].get("busbw_gbps"), good["nccl"][0].get("nccl")): good["nccl"][0]["ok"],
    "target 10.0a failed naming the GPU and cudaErrorNoKernelImageForDevice":
        target.get("failed") and "kernel on GPU 0 (targets 10.0a): cudaErrorNoKernelImageForDevice" in target.get("msg", ""),
    "forced NCCL failure failed naming NCCL's error": nccl.get("failed") and "NCCL all-reduce on GPUs" in nccl.get("msg", ""),
    "the kernel and FlashInfer still passed in the NCCL case": all(g["ok"] for g in nccl["kernel"]["gpus"]) and nccl["flashinfer"]["ok"],
    "check mode skipped": check.get("status") == "skipped" and check.get("reason", "").startswith("check mode"),
    "a module not pre-warmed (topk) failed, nothing compiled": notwarm.get("failed") and "JIT module topk is not pre-warmed" in notwarm.get("msg", ""),
}
for name, ok in checks.items():
    print(("PASS " if ok else "FAIL ") + name)
print("summary (good): " + good.get("summary", ""))
print("nccl (good): " + json.dumps({k: good["nccl"][0].get(k) for k in ("devices", "environment", "transports", "ok")}))
print("msg (target): " + target.get("msg", ""))
print("msg (nccl): " + nccl.get("msg", ""))
print("msg (notwarm): " + notwarm.get("msg", ""))
print("backends (good): " + json.dumps(good.get("backends")))
print("msg (elsewhere): " + elsewhere.get("msg", ""))
sys.exit(0 if all(checks.values()) else 1)
PY
