#!/usr/bin/env bash
# ansible-test sanity on this collection, offline-friendly, with the ansible-test and Python of the
# `python` first on PATH (.venv: ansible-core 2.19 on Python 3.11; scripts/test.sh also runs it with
# .venv-newest's bin first: 2.21 on Python 3.12).
#   ./scripts/sanity.sh [ansible-test sanity options, e.g. --test pylint]
# ansible-test wants to run inside ansible_collections/<namespace>/<name>: the repository's files
# (tracked and untracked-not-ignored) are copied to $BSG_SANITY_DIR/ansible_collections/blackwell/sglang
# (default /tmp/blackwell-sglang-sanity: outside this git work tree, which would make them all ignored).
# It bootstraps pip into each sanity venv with a script it downloads from ci-files.testing.ansible.com,
# which a host behind a package-registry-only proxy cannot reach: tests/sanity/get_pip.py stands in
# for it (ansible-test uses ~/.ansible/test/cache/get_pip_<version>.py when that file exists), with
# the wheel of the pip version ansible-test asks for beside it. pip in those venvs gets the CA bundle
# through PIP_CERT / SSL_CERT_FILE (BSG_CA_BUNDLE, default the system bundle).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BSG_ROOT"

ca="${BSG_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$ca" ]; then
  export PIP_CERT="$ca" SSL_CERT_FILE="$ca"
fi

pyver="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pip_version="$(python - "$pyver" <<'PY'
import sys
from types import SimpleNamespace
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(SimpleNamespace(version=sys.argv[1]))["pip"])
PY
)"
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
if ! compgen -G "$cache/pip-$pip_version-*.whl" >/dev/null; then
  "$BSG_ROOT/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$cache" "pip==$pip_version"  # .venv-newest (uv) has no pip
fi
install -m 0644 tests/sanity/get_pip.py "$cache/get_pip_${pip_version//./_}.py"

tree="${BSG_SANITY_DIR:-/tmp/blackwell-sglang-sanity-$pyver}/ansible_collections/blackwell/sglang"
rm -rf "$tree"
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard | tar -C "$BSG_ROOT" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$tree" -xf -
cd "$tree"
exec ansible-test sanity --venv --python "$pyver" --color no "$@"
