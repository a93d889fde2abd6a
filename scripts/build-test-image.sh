#!/usr/bin/env bash
# Builds localhost/blackwell-sglang-test:<release> (bookworm, Debian 12, the default; trixie, Debian 13)
# without any registry: debootstrap a Debian root with systemd and python3, trust the controller's extra CAs (a TLS-intercepting
# proxy's CA must be trusted inside the image, as on a real fleet behind one), podman import.
# sshd, sudo and acl are there as on a real host: the fleet scenario logs in over SSH as an
# unprivileged user with sudo (Ansible's become to the service user needs setfacl then).
# The image carries its recipe (label io.blackwell-sglang.recipe: this script's sha256, and for trixie
# the CPython 3.12 it copies, `python3.12 -VV`); scripts/bootstrap.sh asks `--recipe <release>` and
# builds the image again when they differ.
#   build-test-image.sh [bookworm|trixie]     build the image
#   build-test-image.sh --recipe <release>    print the recipe the image would carry
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
usage() { echo "usage: $0 [--recipe] [bookworm|trixie]: the Debian releases the collection is tested on" >&2; exit 2; }
print_recipe=false
if [ "${1:-}" = --recipe ]; then print_recipe=true; shift; fi
release="${1:-bookworm}"
case "$release" in bookworm|trixie) ;; *) usage ;; esac
# The newest pyenv CPython 3.12 (the machines' facts: ~/.pyenv/versions), for trixie's /usr/local.
python312=""
if [ "$release" = trixie ]; then
  python312="$(printf "%s\n" "$HOME"/.pyenv/versions/3.12.* | sort -V | tail -n 1)"
  "$python312/bin/python3.12" -c '' 2>/dev/null \
    || { echo "[image trixie] needs a CPython 3.12 under ~/.pyenv/versions (none runs there)" >&2; exit 1; }
fi
recipe="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)"
[ -z "$python312" ] || recipe="$recipe+$("$python312/bin/python3.12" -VV | sha256sum | cut -c1-12)"
if $print_recipe; then echo "$recipe"; exit 0; fi
log() { printf '[image %s] %s\n' "$release" "$*"; }
image="localhost/blackwell-sglang-test:$release"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d /var/tmp/bsg-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

log "debootstrap into $rootfs (mirror $mirror)"
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,python3,python3-apt,sudo,dbus,ca-certificates,iproute2,procps,openssh-server,acl \
  "$release" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -n 40 "$work/debootstrap.log"; exit 1; }

if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  log "trusting" /usr/local/share/ca-certificates/*.crt
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
cat > "$rootfs/etc/apt/sources.list" <<SRC
deb $mirror $release main
deb $mirror $release-updates main
deb http://deb.debian.org/debian-security $release-security main
SRC
# A trixie node builds SGLang's venv from a CPython 3.12 the site installs (README, "Install": why),
# as `make altinstall` with prefix /usr/local leaves it (/usr/local/bin/python3.12, a shared build's
# libpython3.12.so in /usr/local/lib). Here that CPython is the controller's pyenv 3.12, its standard library without tests, copied in
# place: a shared build's runpath names pyenv's lib, ld.so then finds /usr/local/lib through ld.so.cache.
if [ "$release" = trixie ]; then
  log "$python312 as /usr/local/bin/python3.12"
  install -m 0755 "$python312/bin/python3.12" "$rootfs/usr/local/bin/python3.12"
  if compgen -G "$python312/lib/libpython3.12.so*" >/dev/null; then
    cp -a "$python312"/lib/libpython3.12.so* "$rootfs/usr/local/lib/"
  fi
  cp -a "$python312/include/python3.12" "$rootfs/usr/local/include/"
  tar -C "$python312/lib" --exclude=python3.12/test --exclude='python3.12/site-packages/*' \
    --exclude='python3.12/idlelib' --exclude='python3.12/tkinter' -c python3.12 | tar -C "$rootfs/usr/local/lib" -x
  chroot "$rootfs" ldconfig
  chroot "$rootfs" /usr/local/bin/python3.12 -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, venv, sys; assert sys.prefix == "/usr/local", sys.prefix'
fi
# Units that make no sense (or hang) in a container (systemd-modules-load: no modules to load there,
# Debian 13's fails).
for unit in systemd-remount-fs.service systemd-udevd.service systemd-udev-trigger.service \
            getty@tty1.service console-getty.service systemd-firstboot.service \
            systemd-modules-load.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
: > "$rootfs/etc/machine-id"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin

log "podman import $image"
tar -C "$rootfs" -c . | podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL io.blackwell-sglang.recipe=$recipe" - "$image" >/dev/null
podman image inspect --format '{{.Id}} {{.Size}}' "$image"
