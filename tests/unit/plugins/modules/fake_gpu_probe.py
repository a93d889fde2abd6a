"""Stands in for the SGLang venv's python (torch, FlashInfer, NCCL on GPUs) in the nvidia_gpu_validate
tests: CI has no GPU. Called as `python -c PROBE [args]`, it answers as the real probe would (the
all-reduce's launcher, plain Python, runs as it is and starts each rank with this stand-in), from
FAKE_* variables the test puts in the probes' environment:
  FAKE_FLASHINFER=ok|fail|crash (crash: dies without an answer), FAKE_P2P=ok|fail|hang (the all-reduce with P2P allowed),
  FAKE_NO_P2P=ok|fail (with NCCL_P2P_DISABLE=1), FAKE_LOADED_ONLY=module,... (modules the probe has no
  call for). Each call is logged to FAKE_LOG as one JSON line.
"""

import json
import os
import sys
import time

code = sys.argv[2] if len(sys.argv) > 2 else ""
env = os.environ
if "blackwell.sglang all-reduce launcher" in code:  # the module's own launcher: plain Python, run as it is
    sys.argv = ["-c"] + sys.argv[3:]
    exec(compile(code, "<launcher>", "exec"))  # pylint: disable=exec-used
    sys.exit(0)
with open(env["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"probe": "allreduce" if "init_process_group" in code else "flashinfer",
                          "rank": env.get("RANK"), "devices": env.get("CUDA_VISIBLE_DEVICES"),
                          "p2p_disable": env.get("NCCL_P2P_DISABLE"), "nvls": env.get("NCCL_NVLS_ENABLE"),
                          "p2p_level": env.get("NCCL_P2P_LEVEL"),
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
    if world > 1 and env.get("NCCL_DEBUG") == "INFO":
        # NCCL's INFO lines for the channels of a two-GPU ring (the format of public logs, NVIDIA/nccl#1189):
        # P2P between the GPUs, through host shared memory with NCCL_P2P_DISABLE=1.
        via = "SHM/direct/direct" if env.get("NCCL_P2P_DISABLE") == "1" else "P2P/CUMEM/read"
        # On stdout, as NCCL writes it (without NCCL_DEBUG_FILE), before the worker's JSON answer.
        for channel in range(2):
            print("node:1:2 [%s] NCCL INFO Channel %02d/0 : 0[0] -> 1[1] via %s" % (env["RANK"], channel, via))
        if env.get("NCCL_NVLS_ENABLE") == "1":
            print("node:1:2 [%s] NCCL INFO Connected NVLS tree" % env["RANK"])
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
    modules = json.loads(sys.argv[3])
    only = [name for name in modules if name in env.get("FAKE_LOADED_ONLY", "").split(",")]
    ran = [name for name in modules if name not in only]
    print(json.dumps({"ok": True, "loaded": modules, "ran": ran, "loaded_only": only,
                      "gpus": [{"device": i, "name": "NVIDIA H200", "ran": ran, "sampled": "sampling" in ran}
                               for i in range(len(devices))]}))
