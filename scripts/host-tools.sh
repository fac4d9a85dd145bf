#!/usr/bin/env bash
# Install the Debian tools the tests run the rendered files through (their own parsers and checkers):
# grub-script-check (grub-common), shellcheck, dash, cpio and zstd (the bare-metal image archive), and
# chromium (the end-to-end suite renders verify's HTML report in it); and what the bare-metal lab runs
# (lab/): qemu with SeaBIOS, iPXE and OVMF, libvirt (and its headers, for the venv's binding), dnsmasq.
set -euo pipefail

log() { printf 'host-tools: %s\n' "$*" >&2; }

declare -A wanted=(
  [grub-script-check]=grub-common [shellcheck]=shellcheck [dash]=dash [cpio]=cpio [zstd]=zstd [chromium]=chromium
  [qemu-system-x86_64]=qemu-system-x86 [qemu-img]=qemu-utils [virsh]=libvirt-clients [pkg-config]=pkg-config
  [gcc]=gcc [openssl]=openssl
)
# Files rather than commands (daemons in /usr/sbin, firmware, headers).
declare -A files=(
  [/usr/sbin/libvirtd]=libvirt-daemon-system [/usr/sbin/dnsmasq]=dnsmasq-base
  [/usr/share/OVMF/OVMF_CODE_4M.fd]=ovmf [/usr/lib/ipxe/qemu/efi-virtio.rom]=ipxe-qemu
  [/usr/share/seabios/bios-256k.bin]=seabios [/usr/include/libvirt/libvirt.h]=libvirt-dev
)
missing=()
for tool in "${!wanted[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${wanted[$tool]}")
done
for file in "${!files[@]}"; do
  [ -e "$file" ] || missing+=("${files[$file]}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  log "need root to install ${missing[*]}; run: sudo apt-get install -y ${missing[*]}"
  exit 1
fi
log "installing ${missing[*]} from Debian's archive"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
