# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probes of the nvidia_gpu_validate module: what runs on the GPUs, and how its output is read.

Each probe is a separate process (a CUDA context, a hang or a crash stays there, and a timeout can
kill it): a tiny CUDA program built with the installed nvcc, a Python program that loads FlashInfer's
pre-warmed modules and samples on each GPU, and one process per rank of an NCCL all-reduce
(torch.distributed). Each prints one JSON line last: {"ok": true, ...} or {"ok": false, "error": ...}.

Every probe runs under coreutils' ``timeout --signal=KILL`` (its own process group: when the probe does
not answer in time, SIGKILL goes to the whole group, the probe's children included, so a hang is named,
not waited for), through the module's ``run(argv, env=, cwd=)``
(module_utils/run.py: AnsibleModule.run_command, as ansible-test's sanity wants of module_utils). The
ranks of an all-reduce are started together by a small launcher (ALLREDUCE_LAUNCHER), itself one probe.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.cuda_arch import ArchError, parse_arch

# The kernel: each thread writes 3*i+1; the host checks every value. Any CUDA error is printed by
# name (cudaErrorInsufficientDriver, cudaErrorNoKernelImageForDevice, ...) with the step it came from.
KERNEL_SOURCE = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void fill(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}
static int fail(const char *step, cudaError_t err) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  printf("{\"ok\": false, \"step\": \"%s\", \"error\": \"%s: %s\", \"driver_api\": %d, \"runtime_api\": %d}\n",
         step, cudaGetErrorName(err), cudaGetErrorString(err), driver, runtime);
  return 1;
}
int main() {
  const int n = 1024;
  static int host[1024];
  int *dev = 0;
  cudaError_t err = cudaMalloc(&dev, n * sizeof(int));
  if (err != cudaSuccess) return fail("cudaMalloc", err);
  fill<<<(n + 255) / 256, 256>>>(dev, n);
  if ((err = cudaGetLastError()) != cudaSuccess) return fail("kernel launch", err);
  if ((err = cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost)) != cudaSuccess) return fail("cudaMemcpy", err);
  for (int i = 0; i < n; ++i) {
    if (host[i] != 3 * i + 1) {
      printf("{\"ok\": false, \"step\": \"check\", \"error\": \"element %d is %d, expected %d\"}\n", i, host[i], 3 * i + 1);
      return 1;
    }
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  printf("{\"ok\": true, \"compute_capability\": \"%d.%d\", \"driver_api\": %d, \"runtime_api\": %d}\n",
         prop.major, prop.minor, driver, runtime);
  return 0;
}
"""

# FlashInfer: load every pre-warmed module (never build one: a module without its .so is an error),
# then on each visible GPU one tiny call through FlashInfer's public API per module that has one here
# (sampling: top_k_sampling_from_probs; topk: top_k; quantization: packbits; norm: rmsnorm), each
# checked against torch. A module without a call here is loaded only and named so. Every module's
# .so must keep its mtime: nothing compiled.
FLASHINFER_PROBE = r"""
import json, os, sys
modules = json.loads(sys.argv[1])
result = {"ok": False, "loaded": [], "ran": [], "loaded_only": [], "gpus": []}


def sampling(torch, flashinfer):
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(8, 4096, device="cuda") * 3, dim=-1)
    tokens = flashinfer.sampling.top_k_sampling_from_probs(probs, 20)
    torch.cuda.synchronize()
    top = probs.topk(20, dim=-1).indices
    if not bool((top == tokens.long()[:, None]).any(-1).all()):
        raise RuntimeError("top_k_sampling_from_probs returned tokens outside the top 20")


def topk(torch, flashinfer):
    torch.manual_seed(0)
    logits = torch.randn(4, 32768, device="cuda")
    values, _indices = flashinfer.topk.top_k(logits, 16, sorted=True)
    if not torch.allclose(values, logits.topk(16, dim=-1).values):
        raise RuntimeError("top_k returned other values than torch.topk")


def quantization(torch, flashinfer):
    bits = torch.tensor([1, 0, 1, 1, 0, 0, 1, 1], dtype=torch.bool, device="cuda")
    packed = flashinfer.quantization.packbits(bits).tolist()
    if packed != [0b10110011]:
        raise RuntimeError("packbits returned %s, expected [179]" % packed)


def norm(torch, flashinfer):
    torch.manual_seed(0)
    x = torch.randn(4, 128, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(128, device="cuda", dtype=torch.bfloat16)
    out = flashinfer.norm.rmsnorm(x, weight, 1e-6).float()
    ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    if not torch.allclose(out, ref, atol=5e-2, rtol=5e-2):
        raise RuntimeError("rmsnorm differs from torch's")


CALLS = {"sampling": sampling, "topk": topk, "quantization": quantization, "norm": norm}
try:
    import torch
    import flashinfer
    import importlib
    paths = {}
    for name in modules:
        spec = None
        for where in ("flashinfer.jit." + name, "flashinfer.jit"):
            try:
                factory = getattr(importlib.import_module(where), "gen_%s_module" % name, None)
            except ImportError:
                factory = None
            if factory is not None:
                spec = factory()
                break
        if spec is None:
            raise RuntimeError("FlashInfer %s has no JIT module %r" % (flashinfer.__version__, name))
        getter = getattr(spec, "get_library_path", None)
        path = getter() if callable(getter) else spec.jit_library_path
        if not os.path.exists(str(path)):
            raise RuntimeError("JIT module %s is not pre-warmed (%s missing); the validation does not compile: "
                               "re-run site.yml" % (name, path))
        spec.load(path)
        paths[name] = str(path)
        result["loaded"].append(name)
    before = {name: os.stat(path).st_mtime_ns for name, path in paths.items()}
    result["ran"] = [name for name in modules if name in CALLS]
    result["loaded_only"] = [name for name in modules if name not in CALLS]
    for index in range(torch.cuda.device_count()):
        with torch.cuda.device(index):
            gpu = {"device": index, "name": torch.cuda.get_device_name(index), "ran": []}
            for name in result["ran"]:
                try:
                    CALLS[name](torch, flashinfer)
                    torch.cuda.synchronize()
                except Exception as exc:
                    raise RuntimeError("%s on GPU %d: %s" % (name, index, str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__))
                gpu["ran"].append(name)
            gpu["sampled"] = "sampling" in gpu["ran"]
            result["gpus"].append(gpu)
    changed = sorted(name for name, path in paths.items() if os.stat(path).st_mtime_ns != before[name])
    if changed:
        raise RuntimeError("%s changed during the calls: FlashInfer compiled on the serving path" % ", ".join(changed))
    result["ok"] = True
except Exception as exc:
    result["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else "")
print(json.dumps(result))
sys.exit(0 if result["ok"] else 1)
"""

# One rank of the all-reduce. Correctness first (rank r contributes r+1; all see the sum), then the
# timed all-reduces of BSG_ALLREDUCE_BYTES (bf16); rank 0 prints the bus bandwidth (NCCL's own
# definition, nccl-tests: algbw * 2 (n-1) / n).
ALLREDUCE_WORKER = r"""
import datetime, json, os, sys
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
size, iters = int(os.environ["BSG_ALLREDUCE_BYTES"]), int(os.environ["BSG_ALLREDUCE_ITERS"])
result = {"ok": False, "rank": rank, "world": world}
try:
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank),
                            timeout=datetime.timedelta(seconds=int(os.environ["BSG_ALLREDUCE_TIMEOUT"])))
    check = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(check)
    expected = world * (world + 1) / 2
    if not bool((check == expected).all()):
        raise RuntimeError("all-reduce returned %s, expected %s" % (check[0].item(), expected))
    data = torch.zeros(size // 2, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        dist.all_reduce(data)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dist.all_reduce(data)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000.0 / iters
    result.update(ok=True, bytes=size, seconds_per_iteration=seconds,
                  busbw_gbps=round(size / seconds * 2 * (world - 1) / world / 1e9, 1) if world > 1 else None,
                  nccl=".".join(str(part) for part in torch.cuda.nccl.version()))
    dist.destroy_process_group()
except Exception as exc:
    text = str(exc).strip().splitlines()
    result["error"] = "%s: %s" % (type(exc).__name__, text[-1] if text else "")
print(json.dumps(result))
sys.exit(0 if result["ok"] else 1)
"""

# Starts the ranks of an all-reduce at once, each as its own process writing to rank<r>.out / rank<r>.err
# in the log dir, and waits for them: `python -c LAUNCHER <python> <world size> <log dir> <worker code>`.
# The ranks stay in the launcher's process group, so the timeout's SIGKILL around it kills them with it.
ALLREDUCE_LAUNCHER = r"""
# blackwell.sglang all-reduce launcher
import json, os, subprocess, sys
python, world, logdir, worker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
procs = []
for rank in range(world):
    with open(os.path.join(logdir, "rank%d.out" % rank), "w") as out, open(os.path.join(logdir, "rank%d.err" % rank), "w") as err:
        procs.append(subprocess.Popen([python, "-c", worker], stdout=out, stderr=err,
                                      env=dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank))))
print(json.dumps({"returncodes": [proc.wait() for proc in procs]}))
"""

# Defaults of every probe where the service's environment says nothing: NVLink SHARP off, as
# SGLang's launcher sets it without --enable-nccl-nvls / --enable-symm-mem (sglang/srt/entrypoints/
# engine.py _set_envs_and_config); the all-reduce of a service SGLang resolved runs with the NCCL
# variables the resolution returned (sglang_server_args: nccl_environment) instead.
PROBE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
             "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
# NCCL's INFO log names each channel's transport: "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
# "... [receive] via NET/IB/3/GDRDMA", "... via SHM/direct/direct" (public logs, e.g. NVIDIA/nccl#1189);
# an NVLS (NVLink SHARP) all-reduce logs "Connected NVLS".
_VIA = re.compile(r"NCCL INFO Channel .* via ([A-Za-z0-9]+)(?:/([A-Za-z0-9_]+))?")
_NVLS = re.compile(r"NCCL INFO .*Connected NVLS")


def nccl_transports(log):
    """The transports an all-reduce used, from NCCL's INFO log: e.g. ['P2P/CUMEM'], ['SHM/direct'],
    ['NET/Socket'], ['NVLS', 'P2P/CUMEM']; [] for one GPU (no channel between ranks)."""
    found = set()
    for line in (log or "").splitlines():
        match = _VIA.search(line)
        if match:
            found.add(match.group(1) + ("/" + match.group(2) if match.group(2) else ""))
        elif _NVLS.search(line):
            found.add("NVLS")
    return sorted(found)


class ProbeError(Exception):
    """A probe could not be started at all (no nvcc, no interpreter)."""


def gencode_args(targets):
    """FlashInfer's target strings -> nvcc flags for device code only (SASS, no PTX to JIT), as
    FlashInfer builds: '12.0f' -> -gencode=arch=compute_120f,code=sm_120f. ArchError when malformed."""
    args = []
    for target in targets:
        base, suffix = parse_arch(target)
        number = base.replace(".", "") + suffix
        args.append("-gencode=arch=compute_%s,code=sm_%s" % (number, number))
    if not args:
        raise ArchError("no target to build the validation kernel for")
    return args


def last_json(text):
    """The last line of `text` that is a JSON object, or None."""
    for line in reversed((text or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def tail(text, lines=3):
    return " | ".join(line.strip() for line in (text or "").strip().splitlines()[-lines:])


# How a probe under coreutils' timeout ends when it hung: SIGKILL to the group kills timeout too (the
# caller sees -9; a shell would say 137); 124 when timeout outlived it. 126/127: timeout could not start it.
HUNG = (124, 137, -signal.SIGKILL)


def timeout_argv(timeout):
    """coreutils' timeout around a probe: SIGKILL to its process group after `timeout` s (as the probes'
    own process groups were killed before: a rank stuck in the driver ignores TERM)."""
    path = shutil.which("timeout")
    if not path:
        raise ProbeError("coreutils' timeout is not on PATH=%s: the probes need it to stop one that hangs"
                         % os.environ.get("PATH", os.defpath))
    return [path, "--signal=KILL", "%ds" % max(int(timeout), 1)]


def _runnable(program, env):
    """Why `program` cannot be started with `env`'s PATH, or None (checked before timeout runs it: its
    own message is in the host's language)."""
    found = shutil.which(program, path=(env or {}).get("PATH", os.defpath)) if os.sep not in program else program
    if not found or not os.path.exists(found):
        return os.strerror(errno.ENOENT)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def _start(run, argv, env, timeout, cwd=None):
    """(what run returned, seconds, timed out) of `argv` under timeout. ProbeError when it cannot start."""
    why = _runnable(argv[0], env)
    if why:
        raise ProbeError("cannot run %s: %s" % (argv[0], why))
    start = time.monotonic()
    try:
        done = run(timeout_argv(timeout) + list(argv), env=env, cwd=cwd)
    except OSError as exc:
        raise ProbeError("cannot run %s: %s" % (argv[0], exc.strerror or exc)) from exc
    seconds = time.monotonic() - start
    if done.returncode in (126, 127) and "failed to run command" in (done.stderr or ""):
        raise ProbeError("cannot run %s: %s" % (argv[0], done.stderr.strip().splitlines()[-1].rsplit(": ", 1)[-1]))
    return done, seconds, done.returncode in HUNG and seconds >= max(int(timeout), 1)


def run_probe(run, argv, env, timeout, cwd=None):
    """Run one probe: {'ok', 'error', 'seconds', ...its JSON}. A probe that does not answer within
    `timeout` seconds is killed with its children and reported as a hang."""
    done, seconds, hung = _start(run, argv, env, timeout, cwd)
    if hung:
        return {"ok": False, "seconds": round(seconds, 1),
                "error": "no answer within %d s (a hang); killed. Last output: %s"
                         % (timeout, tail(done.stderr or done.stdout) or "none")}
    return _answer(done.returncode, done.stdout, done.stderr, seconds)


def _answer(rc, out, err, seconds):
    answer = last_json(out) or {}
    answer.setdefault("ok", rc == 0)
    if rc != 0:
        answer["ok"] = False
        answer.setdefault("error", "exit status %s: %s" % (rc, tail(err or out) or "no output"))
    answer["seconds"] = round(seconds, 1)
    return answer


def _read(path):
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_allreduce(run, python, devices, env, timeout, size, iters=20):
    """One all-reduce across `devices` (host GPU indices), a process per rank (ALLREDUCE_LAUNCHER), all
    killed when they do not answer within `timeout` s. {'ok', 'error', 'busbw_gbps', 'seconds',
    'transports', ...} of rank 0, or the first failing rank's error."""
    # NCCL_DEBUG=INFO: the log names the transport of each channel (nccl_transports); logging only.
    env = dict(env, NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES=",".join(str(d) for d in devices), WORLD_SIZE=str(len(devices)),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), BSG_ALLREDUCE_BYTES=str(size),
               BSG_ALLREDUCE_ITERS=str(iters), BSG_ALLREDUCE_TIMEOUT=str(max(int(timeout), 1)))
    logdir = tempfile.mkdtemp(prefix="bsg-allreduce-")
    try:
        done, seconds, hung = _start(run, [python, "-c", ALLREDUCE_LAUNCHER, python, str(len(devices)), logdir,
                                           ALLREDUCE_WORKER], env, timeout)
        # NCCL writes its INFO log to stdout (unless NCCL_DEBUG_FILE), beside the worker's JSON line.
        logs = [(_read(os.path.join(logdir, "rank%d.out" % rank)), _read(os.path.join(logdir, "rank%d.err" % rank)))
                for rank in range(len(devices))]
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    if hung:  # the last words of the first rank that had not answered
        out, err = next((log for log in logs if last_json(log[0]) is None), logs[0])
        return {"ok": False, "seconds": round(seconds, 1),
                "error": "no answer within %d s (a hang: NCCL waits for a peer it cannot reach); killed. "
                         "Last output: %s" % (timeout, tail(err or out) or "none")}
    launched = last_json(done.stdout) or {}
    returncodes = launched.get("returncodes")
    if done.returncode != 0 or not isinstance(returncodes, list) or len(returncodes) != len(devices):
        return {"ok": False, "seconds": round(seconds, 1),
                "error": "the all-reduce's launcher failed (exit status %s): %s"
                         % (done.returncode, tail(done.stderr or done.stdout) or "no output")}
    answers = [dict(_answer(rc, out, err, seconds), transports=nccl_transports(out + "\n" + err))
               for rc, (out, err) in zip(returncodes, logs)]
    failed = [answer for answer in answers if not answer["ok"]]
    result = dict(failed[0] if failed else answers[0])
    result["seconds"] = round(seconds, 1)
    return result
