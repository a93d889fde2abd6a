"""Stands in for the SGLang venv's python (torch, FlashInfer, NCCL on GPUs) in the nvidia_gpu_validate
tests: CI has no GPU. Called as `python -c PROBE [args]`, it answers as the real probe would, from
FAKE_* variables the test puts in the probes' environment:
  FAKE_FLASHINFER=ok|fail|crash (crash: dies without an answer), FAKE_P2P=ok|fail|hang (the all-reduce with P2P allowed),
  FAKE_NO_P2P=ok|fail (with NCCL_P2P_DISABLE=1). Each call is logged to FAKE_LOG as one JSON line.
"""

import json
import os
import sys
import time

code = sys.argv[2] if len(sys.argv) > 2 else ""
env = os.environ
with open(env["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"probe": "allreduce" if "init_process_group" in code else "flashinfer",
                          "rank": env.get("RANK"), "devices": env.get("CUDA_VISIBLE_DEVICES"),
                          "p2p_disable": env.get("NCCL_P2P_DISABLE"), "nvls": env.get("NCCL_NVLS_ENABLE"),
                          "bytes": env.get("BSG_ALLREDUCE_BYTES"),
                          "args": sys.argv[3:]}) + "\n")
if "init_process_group" in code:
    world = int(env["WORLD_SIZE"])
    outcome = env.get("FAKE_NO_P2P", "ok") if env.get("NCCL_P2P_DISABLE") == "1" else env.get("FAKE_P2P", "ok")
    if outcome == "hang" and world > 1:
        time.sleep(60)
    if outcome == "fail" and world > 1:
        print(json.dumps({"ok": False, "error": "DistBackendError: NCCL error: unhandled cuda error"}))
        sys.exit(1)
    print(json.dumps({"ok": True, "rank": int(env["RANK"]), "world": world, "nccl": "2.28.9",
                      "busbw_gbps": 21.5 if world > 1 else None}))
else:
    devices = env["CUDA_VISIBLE_DEVICES"].split(",")
    if env.get("FAKE_FLASHINFER") == "crash":
        sys.stderr.write("Segmentation fault\n")
        sys.exit(139)
    if env.get("FAKE_FLASHINFER", "ok") != "ok":
        print(json.dumps({"ok": False, "loaded": [], "gpus": [],
                          "error": "RuntimeError: JIT module sampling is not pre-warmed"}))
        sys.exit(1)
    print(json.dumps({"ok": True, "loaded": json.loads(sys.argv[3]),
                      "gpus": [{"device": i, "name": "NVIDIA H200", "sampled": True} for i in range(len(devices))]}))
