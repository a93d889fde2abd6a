#!/usr/bin/env bash
# Builds localhost/blackwell-sglang-test:bookworm without any registry: debootstrap a Debian
# bookworm root with systemd and python3, trust the controller's extra CAs (a TLS-intercepting
# proxy's CA must be trusted inside the image, as on a real fleet behind one), podman import.
# sshd, sudo and acl are there as on a real host: the fleet scenario logs in over SSH as an
# unprivileged user with sudo (Ansible's become to the service user needs setfacl then).
# The image carries this script's sha256 (label io.blackwell-sglang.recipe): scripts/bootstrap.sh
# builds it again when this script changes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
image="localhost/blackwell-sglang-test:bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d /var/tmp/bsg-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

echo "[image] debootstrap bookworm into $rootfs (mirror $mirror)"
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,python3,python3-apt,sudo,dbus,ca-certificates,iproute2,procps,openssh-server,acl \
  bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -n 40 "$work/debootstrap.log"; exit 1; }

if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  echo "[image] trusting" /usr/local/share/ca-certificates/*.crt
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
cat > "$rootfs/etc/apt/sources.list" <<SRC
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
# Units that make no sense (or hang) in a container.
for unit in systemd-remount-fs.service systemd-udevd.service systemd-udev-trigger.service \
            getty@tty1.service console-getty.service systemd-firstboot.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
: > "$rootfs/etc/machine-id"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

echo "[image] podman import $image"
recipe="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)"
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL io.blackwell-sglang.recipe=$recipe" - "$image" >/dev/null
podman image inspect --format '{{.Id}} {{.Size}}' "$image"
