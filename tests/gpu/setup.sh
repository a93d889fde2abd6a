# shellcheck shell=bash
# Shared by the GPU tests (sourced): installs the carried wheels (.whl/, see README) into a site dir,
# links this checkout as the collection, makes the non-root user `smoke` and an env file as the
# flashinfer role writes it, and defines as_smoke (run a command as that user with that env only).
# Sets ROOT, OUT, SITE, COLL, WS, ENV_FILE, ARCH.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-/tmp/smoke-out}"; mkdir -p "$OUT"
SITE=/tmp/smoke-site; COLL=/tmp/smoke-coll; WS=/tmp/smoke-ws; ENV_FILE=/tmp/smoke-flashinfer.env
ARCH="${SMOKE_ARCH:-9.0a}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$ROOT"/.whl/*.whl
mkdir -p "$COLL/ansible_collections/blackwell"
ln -sfn "$ROOT" "$COLL/ansible_collections/blackwell/sglang"
id smoke >/dev/null 2>&1 || useradd -m -s /bin/bash smoke
mkdir -p "$WS" && chown smoke "$WS"
chmod -R a+rX "$SITE" "$ROOT" "$COLL"
cuda_home="$(dirname "$(dirname "$(command -v nvcc)")")"
cat > "$ENV_FILE" <<ENV
FLASHINFER_CUDA_ARCH_LIST=$ARCH
CUDA_HOME=$cuda_home
PATH=$cuda_home/bin:$(dirname "$(command -v python3)"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FLASHINFER_WORKSPACE_BASE=$WS
ENV
chmod a+r "$ENV_FILE"
as_smoke() { local envs; mapfile -t envs < <(grep -v '^#' "$ENV_FILE"); runuser -u smoke -- env -i "${envs[@]}" HOME="$WS" PYTHONPATH="$SITE:$COLL" \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "$@"; }
