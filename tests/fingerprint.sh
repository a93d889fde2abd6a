#!/bin/sh
# tests/fingerprint.sh [PATH...]: what "nothing changed" means in this collection's tests. Prints
# one line per fact; two runs print the same lines exactly when nothing below changed:
#   - every path to full depth: type, size, mtime (ns), mode, owner, group, link target;
#   - the sha256 of every regular file, except inside package trees and download caches
#     (site-packages, the CUDA wheels' venv, uv's and pip's caches): only installers write those,
#     and every write shows in the file's size or mtime above;
#   - systemd's view of every sglang-* unit (load, active, sub and unit-file state);
#   - the installed packages with their versions and dpkg selections (holds);
#   - the sglang user's and group's entries.
# Ansible's own remote temp directories (.ansible/tmp) are left out: Ansible creates and removes
# them around every task. With no PATH, the paths the collection's roles own on a host.
# The Molecule tests run it on the nodes; scripts/check-build.sh runs it on the controller.
set -u
if [ "$#" -eq 0 ]; then
  set -- /opt/cuda /opt/sglang /var/lib/sglang /etc/sglang /etc/default/cuda-toolkit /etc/profile.d/cuda.sh \
    /etc/apt/preferences.d /etc/apt/sources.list.d /usr/share/keyrings /usr/local/lib/blackwell-sglang \
    /etc/systemd/system
fi
for path in "$@"; do
  if [ ! -e "$path" ] && [ ! -L "$path" ]; then
    echo "absent $path"
    continue
  fi
  find "$path" -xdev -path '*/.ansible/tmp' -prune -o -printf '%y %p %s %T@ %m %u %g %l\n'
  find "$path" -xdev -path '*/.ansible/tmp' -prune -o -type f \
    ! -path '*/site-packages/*' ! -path '*/.cache/uv/*' ! -path '*/.cache/pip/*' ! -path '/opt/cuda/*/venv/*' \
    -exec sha256sum {} +
done | LC_ALL=C sort
if command -v systemctl >/dev/null 2>&1; then
  for unit in $(systemctl list-unit-files --no-legend 'sglang-*' 2>/dev/null | awk '{print $1}'); do
    printf 'unit %s %s\n' "$unit" \
      "$(systemctl show -p LoadState -p ActiveState -p SubState -p UnitFileState --value "$unit" | tr '\n' ' ')"
  done
fi
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f='package ${Package} ${Version} ${Status}\n' | LC_ALL=C sort
fi
getent passwd sglang | sed 's/^/passwd /'
getent group sglang | sed 's/^/group /'
exit 0
