"""FlashInfer on the PRO 6000 lab node: the sm120 fix is in force, proven, and the cache is warm.

Then, in order, the faults of the seed outage and its relatives, each followed by a run of the
flashinfer role (the part of site.yml that proves the fix and pre-warms): a truncated .so; then a
reinstalled FlashInfer with a wiped cache and a pre-warm SIGKILLed mid-build.

The faults run on FlashInfer's `quantization` JIT module, not `sampling`: two small sources
(packbits), about 20 s to build on 2 cores where sampling takes about 3 minutes, through exactly the
same path (FlashInfer's JitSpec.build, its ninja build and its lock file), so a truncated .so, a
lock left by a SIGKILLed build, a wiped cache and a reinstalled package look the same on disk. They
run against a scratch copy of the SGLang venv's FlashInfer 0.7.2 (copied with its mtimes, in a venv
that borrows torch and the rest from the SGLang venv, as the FlashInfer cases do), with their own
env file and workspace: reinstalling FlashInfer in the SGLang venv itself would give its sources new
mtimes, and ninja would rebuild the services' sampling cache that the later tests need warm.
"""

import time

import pytest
from conftest import FLASHINFER_ENV, VENV_ENV, ROLE_PLAYBOOK, UNIT_ENV, _run_playbook, env_lines, jit_dir, run_cases

testinfra_hosts = ["podman://molecule-pro6000"]
pytestmark = pytest.mark.xdist_group("pro6000")  # one worker per node: a node's tests run in order

ENV = FLASHINFER_ENV
PY = "/opt/sglang/current/bin/python"
# FlashInfer's own view, as the service user, with exactly the units' environment.
AS_UNIT = "runuser -u sglang -- env -i %s %s" % (UNIT_ENV, PY)
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


def sampling_so(host):
    return jit_dir(host, "120f") + "/sampling/sampling.so"


def so_ok(host, path=None):
    path = path or sampling_so(host)
    return host.run("python3 -c \"%s\" %s" % (ELF_OK, path)).rc == 0


def test_env_file(host):
    env = host.file(ENV)
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o644)
    lines = env_lines(env.content_string)
    assert lines["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert lines["CUDA_HOME"] == "/opt/cuda/13.0.2"
    assert "PATH" not in lines and "FLASHINFER_WORKSPACE_BASE" not in lines  # per venv: venv.env


def test_every_kernel_cache_is_the_venv_s_own_outside_tmp(host):
    # The file sits in the venv (read through current), owned like the venv: PATH with CUDA's bin and then
    # this venv's (its ninja), and each cache variable SGLang's stack reads, in <kernel cache
    # dir>/<venv id>, not /tmp (PrivateTmp=yes loses that).
    venv = host.file("/opt/sglang/current").linked_to
    venv_id = venv.rsplit("/", 1)[1]
    env = host.file(VENV_ENV)
    assert (env.user, env.group, env.mode) == ("sglang", "sglang", 0o644)
    workspace = "/var/lib/sglang/kernel-caches/" + venv_id
    lines = env_lines(env.content_string)
    assert lines.pop("PATH").split(":")[:2] == ["/opt/cuda/13.0.2/bin", venv + "/bin"]
    # The caches that were there keep their place (a warm workspace stays warm); SGLang's base and its
    # JIT kernels (a hard-coded ~/.cache/sglang/jit otherwise), CuTe DSL's (/tmp/<user>) and the CUDA
    # driver's PTX cache (~/.nv) are the venv's too. The census proves the rest.
    assert {name: lines[name] for name in ("FLASHINFER_WORKSPACE_BASE", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
                                           "SGLANG_DG_CACHE_DIR", "TRTLLM_DG_CACHE_DIR", "SGLANG_CACHE_DIR",
                                           "SGLANG_JIT_CACHE_DIR", "CUTE_DSL_CACHE_DIR", "CUDA_CACHE_PATH")} == {
        "FLASHINFER_WORKSPACE_BASE": workspace,
        "TRITON_CACHE_DIR": workspace + "/triton",
        "TORCHINDUCTOR_CACHE_DIR": workspace + "/torchinductor",
        "SGLANG_DG_CACHE_DIR": workspace + "/deep_gemm",
        "TRTLLM_DG_CACHE_DIR": workspace + "/trtllm_deep_gemm",
        "SGLANG_CACHE_DIR": workspace + "/sglang",
        "SGLANG_JIT_CACHE_DIR": workspace + "/sglang/jit",
        "CUTE_DSL_CACHE_DIR": workspace + "/cute_dsl",
        "CUDA_CACHE_PATH": workspace + "/nv",
    }
    assert all(value == workspace or value.startswith(workspace + "/") for value in lines.values()), lines
    assert host.file(workspace).user == "sglang"


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
    so = host.file(sampling_so(host))
    assert so.user == "sglang" and so.size > 100000
    assert so_ok(host)
    # FlashInfer's own build file compiled it for exactly the family target.
    assert "-gencode=arch=compute_120f,code=sm_120f" in host.file(jit_dir(host, "120f") + "/sampling/build.ninja").content_string


def test_warm_cache_does_not_rebuild(host):
    mtime = host.file(sampling_so(host)).mtime
    out = host.run("%s %s" % (AS_UNIT, WARM_CHECK))
    assert out.rc == 0, out.stderr
    assert "Building JIT module" not in out.stdout + out.stderr
    assert host.file(sampling_so(host)).mtime == mtime
    print("warm check of sampling: %s s" % out.stdout.strip())


# ---- faults, on the quantization module of a scratch FlashInfer (see the docstring) ------------

FAULTS = "/opt/fi-faults"
FAULT_VENV = FAULTS + "/venv"
FAULT_SITE = FAULT_VENV + "/lib/python3.11/site-packages"
FAULT_ENV = FAULTS + "/flashinfer.env"
FAULT_CACHE = FAULTS + "/ws/venv/.cache/flashinfer/0.7.2/120f/cached_ops"
FAULT_SO = FAULT_CACHE + "/quantization/quantization.so"
FAULT_PY = FAULT_VENV + "/bin/python"
SGLANG_SITE = "/opt/sglang/current/lib/python3.11/site-packages"
# The flashinfer role proves the targets, then the kernel_cache role pre-warms (as site.yml runs them).
FAULT_VARS = {
    "bsg_role": ["blackwell.sglang.flashinfer", "blackwell.sglang.kernel_cache"],
    "flashinfer_venv": FAULT_VENV,
    "flashinfer_cuda_home": "/opt/cuda/13.0.2",
    "flashinfer_env_file": FAULT_ENV,
    "kernel_cache_venv": FAULT_VENV,
    "kernel_cache_venv_id": "venv",
    "kernel_cache_cuda_home": "/opt/cuda/13.0.2",
    "kernel_cache_flashinfer_env_file": FAULT_ENV,
    "kernel_cache_dir": FAULTS + "/ws",
    "kernel_cache_prewarm_modules": ["quantization"],
    # These faults are about the pre-warm's repairs; seeding from the store is the fleet scenario's.
    "kernel_cache_store_dir": "",
}
FAULT_BUILD = BUILD.replace("sampling import gen_sampling_module", "quantization import gen_quantization_module")
FAULT_AS_UNIT = "runuser -u sglang -- env -i $(grep -hv '^#' %s %s/venv.env | xargs) %s" % (FAULT_ENV, FAULT_VENV, FAULT_PY)


def run_fault_role():
    rc, out = _run_playbook(ROLE_PLAYBOOK, FAULT_VARS)
    return rc, out, " ".join(out.split())


@pytest.fixture(scope="module")
def fault_venv(host):
    """The scratch FlashInfer, its quantization module built once by the role."""
    host.check_output(
        "set -e; rm -rf {f}; mkdir -p {f}; /usr/bin/python3 -m venv --without-pip {v}; "
        "cp -a {s}/flashinfer {s}/flashinfer_python-0.7.2.dist-info {fs}/; echo {s} > {fs}/sglang-venv.pth; "
        "ln -s /opt/sglang/current/bin/ninja {v}/bin/ninja; chown -R sglang: {f}".format(
            f=FAULTS, v=FAULT_VENV, s=SGLANG_SITE, fs=FAULT_SITE))
    rc, out, _flat = run_fault_role()
    assert rc == 0, out
    assert so_ok(host, FAULT_SO), out


def test_fault_truncated_so_is_repaired(host, fault_venv):
    host.check_output("truncate -s 4096 " + FAULT_SO)
    assert not so_ok(host, FAULT_SO)
    rc, out, flat = run_fault_role()
    assert rc == 0, out
    assert "quantization.so: truncated" in flat
    assert host.file(FAULT_SO).size > 100000 and so_ok(host, FAULT_SO)


def test_fault_reinstalled_flashinfer_wiped_cache_killed_prewarm_then_converge_completes(host, fault_venv):
    # Three faults, one rebuild: flashinfer-python reinstalled over itself, the cache deleted, and
    # the pre-warm SIGKILLed mid-build.
    host.check_output(
        "runuser -u sglang -- env HOME=/var/lib/sglang SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "
        "/opt/sglang/tools/uv-0.13.9/uv-0.13.9.data/scripts/uv "
        "pip install --python %s --reinstall-package flashinfer-python --no-deps flashinfer-python==0.7.2" % FAULT_PY
    )
    host.check_output("rm -rf %s/ws/venv/.cache/flashinfer" % FAULTS)
    # Start the same build the pre-warm runs, then SIGKILL it (and its ninja/nvcc) mid-build.
    host.check_output("systemd-run --collect --unit=killed-prewarm --uid=sglang -p EnvironmentFile=%s "
                      "-p EnvironmentFile=%s/venv.env %s -c \"%s\"" % (FAULT_ENV, FAULT_VENV, FAULT_PY, FAULT_BUILD))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and host.run("pgrep -u sglang -f nvcc").rc != 0:
        time.sleep(0.5)
    assert host.run("pgrep -u sglang -f nvcc").rc == 0, "the pre-warm never reached nvcc"
    host.run("systemctl kill -s KILL killed-prewarm; pkill -KILL -u sglang")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and host.run("pgrep -u sglang").rc == 0:
        time.sleep(1)
    assert host.run("pgrep -u sglang").rc != 0, "the killed pre-warm left processes"
    assert not host.file(FAULT_SO).exists
    assert host.file(FAULT_CACHE + "/tmp/quantization.lock").exists
    rc, out, flat = run_fault_role()
    assert rc == 0, out
    assert "quantization.lock: lock file left by a killed build" in flat
    assert "FlashInfer 0.7.2 targets 12.0f (fix: env)" in flat
    assert host.check_output("%s %s" % (FAULT_AS_UNIT, CHECK)).strip() == "[(12, '0f')]"
    assert so_ok(host, FAULT_SO)
    rc, out, _flat = run_fault_role()
    assert rc == 0 and "changed=0" in out, out


# ---- verification stamps (module_utils/verified.py), on the scratch FlashInfer ------------------

STAMPED = ("Probe | Run FlashInfer with that environment", "Warm | Build the JIT modules (repairs what a killed build left)",
           "Every cache the installed venv declares is in its workspace (fact kernel_cache_census)")


def stamped_run():
    """The flashinfer role on the scratch FlashInfer (JSON callback): each stamped check's verdict
    (checked: run in full; unchanged: proven by its stamp) and the names of the tasks that changed."""
    [case] = run_cases({"stamps": FAULT_VARS}).values()
    assert not case.failed, case
    verdicts = {name: result.get("verified") for name, result in zip(case.tasks, case.results)
                if name.endswith(STAMPED)}
    changed = [name for name, result in zip(case.tasks, case.results) if result.get("changed")]
    return {name.split(" : ")[-1]: verdict for name, verdict in verdicts.items()}, changed


def test_stamps_prove_an_unchanged_flashinfer_and_never_hide_an_edit(host, fault_venv):
    # After the fixture's run nothing changed: the checks are proven by their stamps, nothing changes.
    verdicts, changed = stamped_run()
    assert verdicts == dict.fromkeys(STAMPED, "unchanged")
    assert changed == []
    # The seed outage was a fix that went missing without a trace. An edit of one of FlashInfer's
    # files (its mtime put back as a careless restore would) and a hand edit of the env file: the env
    # file is written back, and the checks run in full again against the edited FlashInfer.
    target = FAULT_SITE + "/flashinfer/jit/env.py"
    host.check_output("touch -r {t} /tmp/bsg-mtime && echo '# edited by hand' >> {t} && touch -r /tmp/bsg-mtime {t} "
                      "&& echo 'FLASHINFER_CUDA_ARCH_LIST=7.5' >> {e}".format(t=target, e=FAULT_ENV))
    verdicts, changed = stamped_run()
    assert verdicts == dict.fromkeys(STAMPED, "checked")
    assert [name for name in changed if "FlashInfer environment" in name], changed
    assert "FLASHINFER_CUDA_ARCH_LIST=7.5" not in host.file(FAULT_ENV).content_string
    # Proven again, then recorded: the next run is the stamps' again.
    verdicts, changed = stamped_run()
    assert verdicts == dict.fromkeys(STAMPED, "unchanged") and changed == []


def test_the_census_names_a_cache_a_package_adds_and_passes_once_it_is_placed(host, fault_venv):
    # The next release of a package reads a new cache location (here one line added to one of
    # FlashInfer's files): the run fails before anything is built or moved, naming the variable and
    # the file; the advice (kernel_cache_locations) places it in the workspace and the run passes.
    target = FAULT_SITE + "/flashinfer/autotune_cache.py"
    original = host.check_output("base64 -w0 " + target)
    host.check_output("echo '_PLANTED = os.environ.get(\"PLANTED_CACHE_DIR\")' >> " + target)
    try:
        # One after the other: both render the same venv's environment file.
        cases = run_cases({"planted": FAULT_VARS})
        cases.update(run_cases({"placed": dict(FAULT_VARS, kernel_cache_locations={"PLANTED_CACHE_DIR": "planted"})}))
        assert cases["planted"].failed
        assert ("the installed packages declare cache locations the kernel_cache role does not place in the venv's workspace "
                "%s/ws/venv: PLANTED_CACHE_DIR (read in flashinfer/autotune_cache.py)" % FAULTS) in cases["planted"].text
        assert cases["planted"].tasks[-1].endswith(STAMPED[2])  # it stopped there: nothing built, nothing moved
        assert not cases["placed"].failed, cases["placed"]
        census = dict(zip(cases["placed"].tasks, cases["placed"].results))["blackwell.sglang.kernel_cache : " + STAMPED[2]]
        assert census["placed"]["PLANTED_CACHE_DIR"] == FAULTS + "/ws/venv/planted"
        assert env_lines(host.file(FAULT_VENV + "/venv.env").content_string)["PLANTED_CACHE_DIR"] == FAULTS + "/ws/venv/planted"
        # SGLang's own, as its code resolves them with the units' environment: in the workspace
        assert census["sglang"]["SGLANG_CACHE_DIR"] == FAULTS + "/ws/venv/sglang"
        assert census["sglang"]["SGLANG_JIT_CACHE_DIR"] == FAULTS + "/ws/venv/sglang/jit"
        assert census["sglang"]["CUDA_CACHE_PATH"] == FAULTS + "/ws/venv/nv"
    finally:
        host.check_output("echo %s | base64 -d > %s" % (original, target))
