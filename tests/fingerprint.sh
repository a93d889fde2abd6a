#!/bin/sh
# tests/fingerprint.sh [PATH...]: what "nothing changed" means in this collection's tests. Prints
# one line per fact; two runs print the same lines exactly when nothing below changed:
#   - every path to full depth: type, size, mtime and ctime (ns), mode, owner, group, link target.
#     The ctime stands for the content: every write (and every chmod, chown or utime) sets it to the
#     kernel's clock and no user-space call can set it back, so an edit whose size and mtime were
#     restored still shows, as a sha256 of every file would show it, without reading the ~175,000
#     files of a converged node (a sha256 of each took ~20 s a run there);
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
    /var/lib/blackwell-sglang /etc/systemd/system
fi
for path in "$@"; do
  if [ ! -e "$path" ] && [ ! -L "$path" ]; then
    echo "absent $path"
    continue
  fi
  find "$path" -xdev -path '*/.ansible/tmp' -prune -o -printf '%y %p %s %T@ %C@ %m %u %g %l\n'
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
