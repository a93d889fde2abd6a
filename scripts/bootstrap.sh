#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian machine (as root) for this collection's tests and lab:
#   1. apt: podman, runc, debootstrap, shellcheck (ansible-test sanity runs it), the OpenSSH client
#      (the fleet scenario's nodes are reached over SSH) (only when missing)
#   2. .venv with the pinned tools from requirements-dev.txt (re-installed when that file changes): the
#      oldest ansible-core meta/runtime.yml admits (2.19, Python 3.11), which also runs Molecule; and
#      .venv-newest from requirements-newest.txt, the newest (2.21) on Python 3.12 (python3.12 on PATH,
#      else under ~/.pyenv/versions), for the checks that need no node
#   3. the collection link that lets playbooks resolve blackwell.sglang.* from this checkout
#   4. the test images localhost/blackwell-sglang-test:bookworm and :trixie (Debian 12 and 13; each
#      built when missing or made by another recipe: scripts/build-test-image.sh's sha256, and the
#      CPython 3.12 trixie's carries, a label of the image; skipped when MOLECULE_IMAGE /
#      MOLECULE_IMAGE_TRIXIE name another image)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BSG_ROOT"

log() { printf '[bootstrap] %s\n' "$*"; }

need_apt=()
for pair in podman:podman runc:runc debootstrap:debootstrap shellcheck:shellcheck ssh:openssh-client; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%:*}" ] || need_apt+=("${pair##*:}")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" uidmap slirp4netns fuse-overlayfs >/dev/null
fi
python3 -c 'import venv, ensurepip' 2>/dev/null || {
  log "apt-get install python3-venv"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
}

stamp="$BSG_VENV/.requirements-dev.sha256"
want="$(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ ! -x "$BSG_VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "creating $BSG_VENV from requirements-dev.txt"
  python3 -m venv "$BSG_VENV"
  "$BSG_VENV/bin/python" -m pip install -q --upgrade pip
  "$BSG_VENV/bin/python" -m pip install -q -r requirements-dev.txt
  echo "$want" > "$stamp"
fi

newest="$BSG_ROOT/.venv-newest"
want="$(sha256sum requirements-newest.txt | cut -d' ' -f1)"
if [ ! -x "$newest/bin/python" ] || [ "$(cat "$newest/.requirements-newest.sha256" 2>/dev/null)" != "$want" ]; then
  # The first that runs (a pyenv shim on PATH may not, when no pyenv version is selected).
  py312=""
  for candidate in $(command -v python3.12 || true) "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if "$candidate" -c 'import sys, venv' >/dev/null 2>&1; then py312="$candidate"; break; fi
  done
  if [ -z "$py312" ]; then
    echo "bootstrap: no Python 3.12 (python3.12 on PATH or under ~/.pyenv/versions): ansible-core 2.21 needs it" >&2
    exit 1
  fi
  log "creating $newest ($("$py312" -V)) from requirements-newest.txt"
  rm -rf "$newest"
  uv venv -q -p "$py312" "$newest"
  uv pip install -q -p "$newest/bin/python" -r requirements-newest.txt
  echo "$want" > "$newest/.requirements-newest.sha256"
fi

mkdir -p .cache/collections/ansible_collections/blackwell
ln -sfn ../../../.. .cache/collections/ansible_collections/blackwell/sglang

for pair in "MOLECULE_IMAGE:bookworm" "MOLECULE_IMAGE_TRIXIE:trixie"; do
  variable="${pair%%:*}" release="${pair#*:}"
  image="${!variable}"
  if [ "$image" != "localhost/blackwell-sglang-test:$release" ]; then
    log "$variable=$image: not building the local $release image"
    continue
  fi
  recipe="$("$BSG_ROOT/scripts/build-test-image.sh" --recipe "$release")"
  built="$(podman image inspect --format '{{ index .Labels "io.blackwell-sglang.recipe" }}' "$image" 2>/dev/null || true)"
  if [ "$built" = "$recipe" ]; then
    log "image $image present"
  else
    log "image $image ${built:+made by another recipe}${built:+, }building it"
    "$BSG_ROOT/scripts/build-test-image.sh" "$release"
  fi
done
log "ready"
