# shellcheck shell=bash
# Sourced by the other scripts: one place for the paths and settings every command shares.
BSG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BSG_ROOT
export BSG_VENV="${BSG_VENV:-$BSG_ROOT/.venv}"
export CONTAINERS_CONF="$BSG_ROOT/tests/containers.conf"
# The nodes' images: Debian 12 (every scenario but b300, and the lab) and Debian 13 (b300), built by
# scripts/build-test-image.sh when bootstrap.sh finds them missing.
export MOLECULE_IMAGE="${MOLECULE_IMAGE:-localhost/blackwell-sglang-test:bookworm}"
export MOLECULE_IMAGE_TRIXIE="${MOLECULE_IMAGE_TRIXIE:-localhost/blackwell-sglang-test:trixie}"
# The collection is resolved from this checkout: .cache/collections/ansible_collections/blackwell/sglang
# is a link back to the repository root (scripts/bootstrap.sh makes it).
export ANSIBLE_COLLECTIONS_PATH="$BSG_ROOT/.cache/collections"
export ANSIBLE_CONFIG="$BSG_ROOT/ansible.cfg"
export PATH="$BSG_VENV/bin:$PATH"
export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
