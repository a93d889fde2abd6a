"""FlashInfer on the PRO 6000 lab node: the sm120 fix is in force, proven, and the cache is warm.

Then, in order, the faults of the seed outage and its relatives, each followed by a converge:
a truncated .so; then a reinstalled FlashInfer with a wiped cache and a pre-warm SIGKILLed mid-build.
"""

import time

ENV = "/etc/sglang/flashinfer.env"
CACHE = "/var/lib/sglang/.cache/flashinfer/0.7.2/120f/cached_ops"
SO = CACHE + "/sampling/sampling.so"
PY = "/opt/sglang/current/bin/python"
# FlashInfer's own view, as the service user, with exactly the units' environment.
AS_UNIT = "runuser -u sglang -- env -i $(grep -v '^#' %s | xargs) %s" % (ENV, PY)
CHECK = (
    "-c 'from flashinfer.jit import core; core.check_cuda_arch(); "
    "print(sorted(core.current_compilation_context.TARGET_CUDA_ARCHS))'"
)
BUILD = (
    "import time; from flashinfer.jit.sampling import gen_sampling_module as g; "
    "t = time.monotonic(); g().build(need_lock=True); print(round(time.monotonic() - t, 1))"
)
WARM_CHECK = "-c '%s'" % BUILD
# A whole ELF64: magic, and the section header table the header announces fits in the file.
ELF_OK = (
    "import os, struct, sys; p = sys.argv[1]; h = open(p, 'rb').read(64); "
    "off = struct.unpack_from('<Q', h, 0x28)[0]; ent, num = struct.unpack_from('<HH', h, 0x3A); "
    "sys.exit(0 if h[:4] == bytes([127, 69, 76, 70]) and off + ent * num <= os.path.getsize(p) else 1)"
)


def so_ok(host):
    return host.run("python3 -c \"%s\" %s" % (ELF_OK, SO)).rc == 0


def test_env_file(host):
    env = host.file(ENV)
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o644)
    lines = dict(l.split("=", 1) for l in env.content_string.splitlines() if l and not l.startswith("#"))
    assert lines["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert lines["CUDA_HOME"] == "/opt/cuda/13.0.2"
    assert lines["PATH"].split(":")[:2] == ["/opt/cuda/13.0.2/bin", "/opt/sglang/current/bin"]
    assert lines["FLASHINFER_WORKSPACE_BASE"] == "/var/lib/sglang"


def test_flashinfer_alone_fails_like_the_seed_outage(host):
    # Without the fix (no FLASHINFER_CUDA_ARCH_LIST) on a host where torch sees no GPU, FlashInfer's
    # target set is empty and its own check raises the error of the outage.
    out = host.run("runuser -u sglang -- env -i PATH=/opt/cuda/13.0.2/bin:/usr/bin:/bin "
                   "CUDA_HOME=/opt/cuda/13.0.2 HOME=/var/lib/sglang %s %s" % (PY, CHECK))
    assert out.rc != 0
    assert "FlashInfer requires GPUs with sm75 or higher" in out.stderr


def test_with_the_fix_flashinfer_targets_sm120f(host):
    out = host.check_output("%s %s" % (AS_UNIT, CHECK))
    assert out.strip() == "[(12, '0f')]"


def test_sampling_is_warm_and_owned_by_the_service_user(host):
    so = host.file(SO)
    assert so.user == "sglang" and so.size > 100000
    assert so_ok(host)
    # FlashInfer's own build file compiled it for exactly the family target.
    assert "-gencode=arch=compute_120f,code=sm_120f" in host.file(CACHE + "/sampling/build.ninja").content_string


def test_warm_cache_does_not_rebuild(host):
    mtime = host.file(SO).mtime
    out = host.run("%s %s" % (AS_UNIT, WARM_CHECK))
    assert out.rc == 0, out.stderr
    assert "Building JIT module" not in out.stdout + out.stderr
    assert host.file(SO).mtime == mtime
    print("warm check of sampling: %s s" % out.stdout.strip())


def test_fault_truncated_so_is_repaired(host, run_site):
    host.check_output("truncate -s 4096 " + SO)
    assert not so_ok(host)
    rc, out = run_site()
    assert rc == 0, out
    assert "sampling.so: truncated" in " ".join(out.split())
    assert host.file(SO).size > 100000 and so_ok(host)


def test_fault_reinstalled_flashinfer_wiped_cache_killed_prewarm_then_converge_completes(host, run_site):
    # Three faults, one rebuild (a full sampling build takes minutes on 2 cores): flashinfer-python
    # reinstalled over itself, the cache deleted, and the pre-warm SIGKILLed mid-build.
    host.check_output(
        "runuser -u sglang -- env HOME=/var/lib/sglang SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "
        "/opt/sglang/tools/uv-0.13.9/uv-0.13.9.data/scripts/uv "
        "pip install --python %s --reinstall-package flashinfer-python --no-deps flashinfer-python==0.7.2" % PY
    )
    host.check_output("rm -rf /var/lib/sglang/.cache/flashinfer")
    # Start the same build the pre-warm runs, then SIGKILL it (and its ninja/nvcc) mid-build.
    host.check_output("systemd-run --collect --unit=killed-prewarm --uid=sglang -p EnvironmentFile=%s %s -c \"%s\""
                      % (ENV, PY, BUILD))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and host.run("pgrep -u sglang -f nvcc").rc != 0:
        time.sleep(2)
    assert host.run("pgrep -u sglang -f nvcc").rc == 0, "the pre-warm never reached nvcc"
    host.run("systemctl kill -s KILL killed-prewarm; pkill -KILL -u sglang")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and host.run("pgrep -u sglang").rc == 0:
        time.sleep(1)
    assert host.run("pgrep -u sglang").rc != 0, "the killed pre-warm left processes"
    assert not host.file(SO).exists
    assert host.file(CACHE + "/tmp/sampling.lock").exists
    rc, out = run_site()
    assert rc == 0, out
    flat = " ".join(out.split())
    assert "sampling.lock: lock file left by a killed build" in flat
    assert "FlashInfer 0.7.2 targets 12.0f (fix: env)" in flat
    assert host.check_output("%s %s" % (AS_UNIT, CHECK)).strip() == "[(12, '0f')]"
    assert so_ok(host)
    rc, out = run_site()
    assert rc == 0 and "changed=0" in out, out
